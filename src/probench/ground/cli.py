"""``probench ground --bag IN --model M --prompt "a red backpack; a door handle" --out OUT``.

Runs a detector over the camera topic of any rosbag2 and writes what the grounding node
would have published as a new mcap, optionally an annotated MP4 and a JSONL file. Usage
errors exit 2 and bad data exits 1, each with one line, before the model loads when they
can. The user's page: docs/GROUND.md.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from probench.ground.errors import GroundUsageError
from probench.ground.run import GroundPlan, ground_bag

_PREFIX = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)*$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from probench.limits import IntRange
    from probench.realtime.node_spec import GROUNDING_PARAMS, PARAMETER_DEFAULTS

    io = parser.add_argument_group("input and output")
    io.add_argument("--bag", required=True, help="rosbag2 to ground: a folder, or a .mcap / .db3 file")
    io.add_argument("--out", required=True, help="output bag folder to create (mcap)")
    io.add_argument("--image-topic", default=None, metavar="TOPIC",
                    help="camera topic (sensor_msgs/Image or CompressedImage); default: the bag's only "
                    "camera (a raw topic and its /compressed twin count as one; the raw one is used)")
    io.add_argument("--video", type=Path, default=None, metavar="OUT.mp4",
                    help="also write the annotated frames as an MP4 (mp4v) at the recorded rate")
    io.add_argument("--jsonl", type=Path, default=None, metavar="FILE",
                    help="also write one JSON line of detections per frame")
    io.add_argument("--keep-images", action="store_true",
                    help="copy the input image topic (and the prompt topic) into the output bag")
    io.add_argument("--prefix", default="/ground",
                    help="namespace of the output topics (default /ground; '' = the node's own names)")
    io.add_argument("--jpeg-quality", type=IntRange(1, 100), default=85, metavar="Q",
                    help="JPEG quality of the annotated images (85)")
    io.add_argument("--overwrite", action="store_true",
                    help="replace an existing output bag (only a bag folder), video or JSONL")
    io.add_argument("--no-progress", action="store_true", help="no progress bar (shown on a terminal only)")

    pr = parser.add_argument_group("prompts")
    pr.add_argument("--prompt", default=None, metavar="TEXT",
                    help="prompts active from the start, ';'-separated: \"a red backpack; a door handle\"")
    pr.add_argument("--prompt-schedule", type=Path, default=None, metavar="FILE",
                    help="prompt changes over time: lines 'SECONDS PROMPTS', or 'SECONDS --policy NAME' to "
                    "switch the prompt policy (docs/GROUND.md)")
    pr.add_argument("--prompt-topic", default=None, metavar="TOPIC",
                    help="recorded std_msgs/String prompt topic to honour (default: the bag's '.../prompt' "
                    "topic if it has one; 'none' ignores recorded prompts)")
    pr.add_argument("--frame-prompts-topic", default=None, metavar="TOPIC",
                    help="recorded vision_msgs/LabelInfo prompt sets stamped for one frame each, as the "
                    "node's frame_prompts (default: the bag's '.../frame_prompts' topic if it has one; "
                    "'none' ignores them)")

    sp = parser.add_argument_group("3D and tracking (as grounding_node's depth_topic and tracking)")
    sp.add_argument("--depth-topic", default=None, metavar="TOPIC",
                    help="aligned depth images (16UC1 mm / 32FC1 m, registered to the camera); default: the "
                    "bag's only depth topic when it also has exactly one CameraInfo topic; 'none': no 3D")
    sp.add_argument("--camera-info-topic", default=None, metavar="TOPIC",
                    help="the camera's sensor_msgs/CameraInfo; default: the bag's only one")
    sp.add_argument("--track", action="store_true",
                    help="stable track ids per prompt (ByteTrack): Detection2D/3D.id, the video, the JSONL")
    sp.add_argument("--depth-tolerance", type=float, metavar="S",
                    default=float(PARAMETER_DEFAULTS["depth_tolerance"]),
                    help="seconds a depth stamp may differ from its frame's (default %(default)s)")
    sp.add_argument("--min-depth-pixels", type=GROUNDING_PARAMS["min_depth_pixels"].int_flag(), metavar="N",
                    default=int(PARAMETER_DEFAULTS["min_depth_pixels"]),
                    help="valid depth pixels a box needs for a 3D estimate (default %(default)s)")
    sp.add_argument("--max-depth", type=float, metavar="M", default=float(PARAMETER_DEFAULTS["max_depth"]),
                    help="depths beyond this many metres are invalid, as the node's max_depth (default "
                    "%(default)s)")

    md = parser.add_argument_group("model")
    md.add_argument("--model", required=True, help="zoo name (`probench models`), e.g. tiny-owlv2")
    md.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:1 (default cpu)")
    md.add_argument("--precision", default="fp32", help="fp32 (default), fp16, ... as the model supports")
    md.add_argument("--weights", default=None, metavar="DIR", help="local folder with the model's weights")
    md.add_argument("--score-threshold", type=float, metavar="S",
                    default=float(PARAMETER_DEFAULTS["score_threshold"]),
                    help="minimum score kept (default: the node's, %(default)s)")
    md.add_argument("--max-detections", type=GROUNDING_PARAMS["max_detections"].int_flag(), metavar="N",
                    default=int(PARAMETER_DEFAULTS["max_detections"]),
                    help="at most this many detections per frame, highest scores (default %(default)s)")
    from probench.prompting.options import add_policy_arguments

    add_policy_arguments(md, default="as_typed")  # what the model gets, as the node's prompt_policy

    from probench.models.head import add_runtime_arguments
    from probench.models.threads import add_threads_argument

    add_threads_argument(md)
    add_runtime_arguments(md)
    md.add_argument("--max-pixels", type=GROUNDING_PARAMS["max_image_pixels"].int_flag(), metavar="N",
                    default=int(PARAMETER_DEFAULTS["max_image_pixels"]),
                    help="refuse a compressed frame whose header gives more pixels (width x height), "
                         "before decoding it (default %(default)s; the node's max_image_pixels)")
    mode = parser.add_argument_group("mode")
    mode.add_argument("--realtime", action="store_true",
                    help="the bag's own timing through the node's newest-frame policy: frames arriving "
                    "while the model is busy are dropped, counted and marked (default: every frame)")


def _check_files(args: argparse.Namespace) -> None:
    """The outputs under the writer rule (:mod:`probench.cache.output`), before the model loads."""
    from probench.bags.staged import check_new_bag
    from probench.cache.output import check_output_file

    bag = Path(args.bag).resolve()
    out = Path(args.out)
    files = [(flag, p) for flag, p in (("--video", args.video), ("--jsonl", args.jsonl)) if p is not None]
    for flag, path in [("--out", out), *files]:
        full = path.resolve()
        if full == bag or bag in full.parents or full in bag.parents:
            raise GroundUsageError(f"{flag} {path} would overwrite the input bag {args.bag}")
    if args.video and args.jsonl and args.video.resolve() == args.jsonl.resolve():
        raise GroundUsageError("--video and --jsonl name the same file")
    check_new_bag(out, overwrite=args.overwrite)
    for flag, path in files:
        if out.resolve() in path.resolve().parents:
            raise GroundUsageError(f"{flag} {path} is inside the output bag folder {out}")
        check_output_file(path, flag=flag, overwrite=args.overwrite)
    if args.video and args.video.suffix.lower() != ".mp4":
        raise GroundUsageError(f"--video {args.video}: the file name must end in .mp4")


def plan_from_args(args: argparse.Namespace) -> GroundPlan:
    """The checked :class:`~probench.ground.run.GroundPlan` (usage errors before any bag read)."""
    from probench.ground.prompts import parse_prompt_flag
    from probench.models.zoo import check_model_name
    from probench.realtime.node_spec import GROUNDING_PARAMS

    for flag, name, value in (("--score-threshold", "score_threshold", args.score_threshold),
                              ("--depth-tolerance", "depth_tolerance", args.depth_tolerance),
                              ("--max-depth", "max_depth", args.max_depth)):
        try:  # the node's own parameter table: the same ranges as grounding_node (integers: their type)
            GROUNDING_PARAMS.check(name, value)
        except ValueError as exc:
            raise GroundUsageError(f"{flag}: {exc}") from exc
    prefix = args.prefix.rstrip("/")
    if not _PREFIX.match(prefix):
        raise GroundUsageError(f"--prefix {args.prefix!r} is not a ROS namespace like /ground")
    if args.weights is not None and not Path(args.weights).exists():
        raise GroundUsageError(f"--weights {args.weights}: no such file or folder")
    check_model_name(args.model)
    _check_files(args)
    return GroundPlan(
        bag=Path(args.bag), out=Path(args.out), model=args.model,
        prompts=parse_prompt_flag(args.prompt) if args.prompt is not None else (),
        schedule=args.prompt_schedule, image_topic=args.image_topic, prompt_topic=args.prompt_topic,
        frame_prompts_topic=args.frame_prompts_topic, profile=getattr(args, "profile", None),
        realtime=args.realtime, prefix=prefix, keep_images=args.keep_images, video=args.video,
        jsonl=args.jsonl, overwrite=args.overwrite, jpeg_quality=args.jpeg_quality,
        score_threshold=args.score_threshold, max_detections=args.max_detections,
        progress=not args.no_progress, depth_topic=args.depth_topic, camera_info_topic=args.camera_info_topic,
        track=args.track, depth_tolerance=args.depth_tolerance, min_depth_pixels=args.min_depth_pixels,
        max_depth=args.max_depth,
        max_pixels=args.max_pixels,
    )


def remove_leftovers(plan: GroundPlan) -> list[Path]:
    """Remove what killed ``ground`` runs left next to this run's outputs (staging folder of
    the bag, temporary video and JSONL files, named with a PID that no longer runs); the
    paths removed."""
    import shutil

    from probench.cache.atomic import stale_partials
    from probench.cache.output import stale_stages

    found = stale_stages(plan.out)
    for path in (plan.video, plan.jsonl):
        if path is not None:
            found += stale_partials(path)
    for path in found:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return found


def run(args: argparse.Namespace) -> int:
    import sys

    from probench.models.head import WARMUP_PROMPTS, warmup_size_flag
    from probench.models.threads import apply_threads, check_threads

    check_threads(args.threads)  # a bad value fails before anything is read or written
    warmup_size = warmup_size_flag(args.warmup_size)
    plan = plan_from_args(args)
    removed = remove_leftovers(plan)
    if removed:
        print(f"probench ground: removed {len(removed)} leftover(s) of a killed run: "
              f"{', '.join(str(p) for p in removed)}", file=sys.stderr)

    from probench.models.zoo import model_record
    from probench.prompting.options import policy_from_args

    policy = policy_from_args(args, model_record(args.model, weights=args.weights, runtime=args.runtime),
                              "ground")

    def load() -> object:
        from probench.models.zoo import load_detector

        detector = load_detector(args.model, device=args.device, precision=args.precision,
                                 score_threshold=args.score_threshold, weights=args.weights,
                                 runtime=args.runtime)
        apply_threads(args.threads)  # the model is built, it has not run
        if warmup_size is not None:  # part of the model's load time, not of any frame's
            detector.warmup(warmup_size, WARMUP_PROMPTS)
        return detector

    summary = ground_bag(plan, load, policy)
    print("probench ground: " + "\n".join(summary.lines()))
    if summary.failed:  # the outputs are written, but the run is not silently complete
        from probench.ground.errors import GroundError

        raise GroundError(f"{summary.failed} frame(s) failed: the model raised; the first: "
                          f"{summary.first_failure}")
    return 0
