"""One description of the nodes: their parameter tables, typed configs, topics and the
grounding node's launch arguments.

Pure data (no rclpy, no launch): each node declares its parameters from its table
(:mod:`probench.realtime.params`), ``launch/*.launch.py`` and the eval graph build their node
descriptions from :func:`grounding_node_description`, and the tests check
``config/*.yaml`` and the docs' tables against the same rows, so nothing drifts apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probench.data.negatives import MAX_NEGATIVES
from probench.limits import (
    MAX_PERIOD_S,
    MAX_RATE_HZ,
    MAX_SEED,
    MAX_THREADS,
    MAX_TIMEOUT_S,
    MIN_PERIOD_S,
    MIN_RATE_HZ,
    THREADS_DEFAULT,
)
from probench.models.head import parse_warmup_size
from probench.models.spec import RUNTIMES
from probench.msgs.images import DEFAULT_MAX_PIXELS
from probench.prompting.messages import check_prompt_specs, split_prompts
from probench.prompting.messages import prompt_message_limit as prompt_message_limit  # re-exported
from probench.prompting.messages import prompts_from_message as prompts_from_message  # re-exported
from probench.prompting.policy import DEFAULT_POLICY, POLICIES
from probench.realtime import PACKAGE, package_config
from probench.realtime.params import Param, ParamTable, ParamValue
from probench.spatial.depth import DEFAULT_MAX_DEPTH_M, MAX_DEPTH_LIMIT_M
from probench.vocabulary import (
    FORMULATIONS,
    POLICY_FORMULATION,
    PREPROCESS_PATHS,
    is_topic_name,
    parse_formulations,
)

EXECUTABLE = "grounding_node"
NODE_NAME = "grounding_node"

RELIABILITIES = ("best_effort", "reliable")
MAX_TRIAL_S = 60.0  # a peak-rate trial: at most MAX_RATE_HZ * MAX_TRIAL_S frames in memory
MODES = ("camera-rate", "as-fast-as-answered")


def _items(value: ParamValue) -> list[str]:
    """A string array's items (its row's type is checked before the hook runs)."""
    return list(value) if isinstance(value, (list, tuple)) else []


def _prompts(value: ParamValue) -> tuple[str, ...]:
    return check_prompt_specs(_items(value))


def _profile(value: ParamValue) -> str:
    from probench.prompting.profile import load_profile

    load_profile(str(value).strip() or None)  # a ProfileError (one line) when it is not valid
    return str(value).strip()


def _model(value: object) -> str:
    """A model the zoo knows (a zoo, plugin, ``tiny-*`` or ``test-*`` name), refused when set
    rather than at the next configure. A ``package.module:factory`` is imported only at
    configure (its module is foreign code), so here it is taken as given: the configure
    refuses one the node was not started with (:func:`start_time_refusal`)."""
    from probench.models.plugins import is_one_off
    from probench.models.zoo import check_model_name

    name = str(value)
    if name.strip() and not is_one_off(name):
        check_model_name(name)  # an UnknownModelError: one line, naming the zoo
    return name


def start_time_refusal(values: Mapping[str, object], started: Mapping[str, object]) -> str:
    """Why a configure of the grounding node may not load ``values`` (its configure-time
    parameters) when it was started with ``started`` (its start-up values): "" when it may.

    ``model`` and ``weights`` name what the node runs: a ``package.module:factory`` reference
    imports its module and calls the factory (foreign code runs), a weights file or folder
    holds checkpoints and a text encoder (pickles, TorchScript archives). Anyone on the ROS
    domain may set a parameter, so a running node loads only the plugin reference and the
    weights it was started with (docs/SECURITY.md); a zoo model may still be swapped in."""
    from probench.models.plugins import is_one_off

    model, first_model = str(values.get("model", "")).strip(), str(started.get("model", "")).strip()
    if is_one_off(model) and model != first_model:
        return (f"cannot load model {model!r}: a plugin reference (package.module:factory) is loaded only "
                f"by a node started with it (this one started with {first_model!r}); start a node with "
                f"-p model:={model} (docs/SECURITY.md)")
    weights, first_weights = str(values.get("weights", "")).strip(), str(started.get("weights", "")).strip()
    if weights != first_weights:
        return (f"cannot load weights {weights!r}: a running node loads only the weights it was started "
                f"with ({first_weights!r}, empty: each model's default); start a node with -p weights:=... "
                "(docs/SECURITY.md)")
    return ""


def _warmup_size(value: object) -> str:
    text = str(value)
    parse_warmup_size(text)  # a ValueError: the one-line refusal
    return text


def _topic(param: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        text = str(value)
        if text and not is_topic_name(text):
            raise ValueError(f"{param} {text!r} is not a ROS topic name (tokens of letters, digits and _, "
                             "not starting with a digit, separated by /; e.g. /camera/depth/image_raw)")
        return text
    return check


def _formulations(value: ParamValue) -> list[str]:
    return parse_formulations(_items(value))


GROUNDING_PARAMS = ParamTable(NODE_NAME, (
    Param("model", "string", "tiny-owlv2", "zoo model name (`probench models`)", "configure", nonempty=True,
          identity=True, check_value=_model),
    Param("device", "string", "cpu", "torch device: cpu, cuda, cuda:N", "configure", nonempty=True,
          identity=True),
    Param("precision", "string", "fp32", "model precision (fp32, fp16, ... as the model allows)",
          "configure", nonempty=True, identity=True),
    Param("weights", "string", "", "local weights folder/file; empty = the model's default", "configure",
          identity=True),
    Param("preprocess", "string", "device",
          "image preprocessing: torch ops on the model's device, or the library's reference processor",
          "configure", choices=PREPROCESS_PATHS, identity=True),
    Param("runtime", "string", "torch",
          "the model's runtime: torch (eager), compiled (torch.compile on a CPU, CUDA graphs on a GPU), "
          "onnxruntime, tensorrt, as the model allows (docs/ACCELERATION.md)", "configure", choices=RUNTIMES,
          identity=True),
    Param("warmup_size", "string", "",
          "WIDTHxHEIGHT of a blank frame run at configure with 1, 2, 4 and 8 prompts, so that the compiled "
          "runtime captures its graphs (and any runtime allocates) before the first camera frame; "
          "empty: none", "configure", check_value=_warmup_size),
    Param("threads", "integer", THREADS_DEFAULT,
          "CPU threads of the model work (torch intra- and inter-op, OpenCV), set at configure; 0: half the "
          "CPUs the node may use, at least 1 (more oversubscribes a CPU that other work shares)", "configure",
          low=0, high=MAX_THREADS),
    Param("score_threshold", "double", 0.3,
          "minimum score kept (0.3 for display; the evaluator uses 0.0)", "configure", low=0.0, high=1.0,
          identity=True),
    Param("prompts", "string_array", [], "active target descriptions (also set via the `prompt` topic)",
          "live", check_value=_prompts),
    Param("prompt_policy", "string", DEFAULT_POLICY,
          "what the model gets for each prompt: as typed, its categorical form, the template, the model's "
          "best formulation (prompt_profile) or all three fused (docs/PROMPTING.md)", "live",
          choices=POLICIES),
    Param("prompt_profile", "string", "",
          "formulation profile for prompt_policy best (`probench profile`); empty = the paper's Table II",
          "live", check_value=_profile),
    Param("autostart", "bool", True, "configure and activate on start", "startup"),
    Param("image_reliability", "string", "best_effort", "QoS reliability of the image subscriptions",
          "configure", choices=RELIABILITIES, identity=True),
    Param("max_detections", "integer", 100, "at most this many detections per frame (highest scores)",
          "configure", low=1, high=10000, identity=True),
    Param("diagnostics_period", "double", 1.0, "seconds between /diagnostics messages", "configure",
          low=MIN_PERIOD_S, high=MAX_PERIOD_S),
    Param("frame_prompts_wait", "double", 0.5,
          "seconds a frame waits for its stamped prompt set (frame_prompts) while such sets are in use",
          "configure", low=0.0, high=10.0),
    Param("trace_file", "string", "",
          "append one JSON line per frame processed (start, end, prompt wait, frames replaced meanwhile): "
          "the node's own evidence for a replay's misses; a new file in an existing folder, or an earlier "
          "trace (never a link, FIFO or device, nor inside a run folder); empty: none", "configure"),
    Param("camera_timeout", "double", 3.0,
          "seconds without an image, while active, after which /diagnostics reports WARN (camera silent)",
          "configure", low=0.0, low_open=True, high=MAX_TIMEOUT_S),
    Param("depth_topic", "string", "",
          "aligned depth image (16UC1 mm or 32FC1 m, registered to the colour camera); empty = no 3D output",
          "configure", check_value=_topic("depth_topic")),
    Param("camera_info_topic", "string", "",
          "the colour camera's CameraInfo; empty = `camera_info` beside depth_topic", "configure",
          check_value=_topic("camera_info_topic")),
    Param("depth_tolerance", "double", 0.02,
          "seconds a depth stamp may differ from the colour frame's (and a frame waits for its depth)",
          "configure", low=0.0, high=1.0),
    Param("min_depth_pixels", "integer", 50,
          "valid depth pixels a box needs for a 3D estimate (fewer: none, counted)", "configure",
          low=1, high=10_000_000),
    Param("max_depth", "double", DEFAULT_MAX_DEPTH_M,
          "metres: depth pixels farther than this are invalid (no measurement of a RealSense-class camera)",
          "configure", low=0.0, low_open=True, high=MAX_DEPTH_LIMIT_M),
    Param("tracking", "bool", False, "stable track ids per prompt (ByteTrack) in Detection2D/3D.id",
          "configure"),
    Param("target_timeout", "double", 2.0,
          "seconds the operator's target track (target_select) may be lost before the target gives way to "
          "the best detection of the first prompt", "live", low=0.0, high=3600.0),
    Param("masks", "bool", True,
          "ask a mask-capable model (SAM3, YOLOE, ...) for instance masks: the segmentation/* outputs and "
          "mask-based 3D depth; false: boxes only (faster)", "configure"),
    Param("max_image_pixels", "integer", DEFAULT_MAX_PIXELS,
          "a CompressedImage whose header gives more pixels (width x height) is refused before decoding",
          "configure", low=1, high=1 << 30),
))


@dataclass(frozen=True)
class GroundingConfig:
    """The grounding node's configure-time parameters, checked and typed (``prompts`` are
    live and held by the node's worker; ``prompt_policy`` and ``prompt_profile`` are live
    too: here their values at configure, the worker holds the policy in force)."""

    model: str
    device: str
    precision: str
    weights: str
    preprocess: str
    score_threshold: float
    autostart: bool
    image_reliability: str
    max_detections: int
    diagnostics_period: float
    frame_prompts_wait: float
    camera_timeout: float
    depth_topic: str
    camera_info_topic: str
    depth_tolerance: float
    min_depth_pixels: int
    tracking: bool
    max_image_pixels: int
    target_timeout: float = 2.0
    masks: bool = True
    max_depth: float = DEFAULT_MAX_DEPTH_M
    trace_file: str = ""
    prompt_policy: str = DEFAULT_POLICY
    prompt_profile: str = ""
    threads: int = THREADS_DEFAULT  # probench.models.threads.apply_threads at configure
    runtime: str = "torch"
    warmup_size: str = ""  # WIDTHxHEIGHT: BaseDetector.warmup at configure


EVALUATOR_NAME = "evaluator_node"
EVALUATOR_PARAMS = ParamTable(EVALUATOR_NAME, (
    Param("bag", "string", "", "probench bag to replay (required)", nonempty=True),
    Param("out", "string", "", "run folder (resumed when it holds a partial run of the same settings)",
          nonempty=True),
    Param("mode", "string", "camera-rate", "replay mode", choices=MODES),
    Param("rate_hz", "double", 30.0, "camera-rate replay rate (Hz)", low=MIN_RATE_HZ, high=MAX_RATE_HZ),
    Param("formulations", "string_array", list(FORMULATIONS), "formulations to replay, in order",
          check_value=_formulations),
    Param("answer_timeout", "double", 5.0,
          "seconds to wait for a frame's detections before counting it missed", low=0.0, low_open=True,
          high=MAX_TIMEOUT_S),
    Param("startup_timeout", "double", 180.0,
          "seconds to wait for the grounding node (model load, first prompts)", low=0.0, low_open=True,
          high=MAX_TIMEOUT_S),
    Param("budget_ms", "double", 0.0, "real-time budget of one frame (ms); 0: one period, 1000 / rate_hz",
          low=0.0, high=1000.0 * MAX_PERIOD_S),
    Param("warmup_frames", "integer", 3,
          "frames sent one at a time before the first measured stream of each session (a discarded "
          "trial: scored nowhere, counted apart)", low=0, high=1000),
    Param("grounding_node", "string", "/grounding_node",
          "the grounding node whose parameters go into run.json", nonempty=True),
    Param("overwrite", "bool", False,
          "replace a run folder that holds another experiment (its probench files)"),
    Param("find_max_rate", "bool", False,
          "search the highest camera rate with at most max_missed of the frames missed (max_rate.json) "
          "instead of evaluating"),
    Param("max_missed", "double", 0.01, "the missed share a rate may have in the peak-rate search", low=0.0,
          high=1.0),
    Param("trial_s", "double", 3.0, "seconds of frames (the bag's, cycled) in one peak-rate trial", low=0.0,
          low_open=True, high=MAX_TRIAL_S),
    Param("result_file", "string", "",
          "where the node writes its result record (status, error, files) when it exits; empty: none"),
    Param("prompt_policy", "string", "",
          "a prompt policy: adds the formulation `policy` (orig through the policy, set on the grounding "
          "node for its frames); empty = none (docs/PROMPTING.md)", choices=("", *POLICIES)),
    Param("prompt_profile", "string", "", "formulation profile for prompt_policy best; empty = the paper's "
          "Table II", check_value=_profile),
    Param("negatives", "integer", 0, "absent queries added to each frame's label space (docs/EVALUATION.md); "
          "0: none", low=0, high=MAX_NEGATIVES),
    Param("negatives_seed", "integer", 0, "the seed of the negatives draw", low=0, high=MAX_SEED),
))


@dataclass(frozen=True)
class EvaluatorConfig:
    """The evaluator's parameters, checked and typed."""

    bag: str
    out: str
    mode: str
    rate_hz: float
    formulations: list[str]
    answer_timeout: float
    startup_timeout: float
    budget_ms: float
    warmup_frames: int
    grounding_node: str
    overwrite: bool
    find_max_rate: bool = False
    max_missed: float = 0.01
    trial_s: float = 3.0
    result_file: str = ""
    prompt_policy: str = ""
    prompt_profile: str = ""
    negatives: int = 0
    negatives_seed: int = 0

    @property
    def run_formulations(self) -> list[str]:
        """The formulations replayed: the paper's asked for, then ``policy`` with a prompt policy."""
        return [*self.formulations, POLICY_FORMULATION] if self.prompt_policy else list(self.formulations)

    @property
    def budget(self) -> float:
        """The budget in ms: ``budget_ms``, or one period of ``rate_hz`` when it is 0."""
        return budget_ms(self.budget_ms, self.rate_hz)


def budget_ms(given: float, rate_hz: float) -> float:
    """A frame's real-time budget (ms): ``given``, else (0) one replay period, 1000 / rate_hz,
    to 0.1 ms (33.3 at 30 Hz, 66.7 at 15 Hz)."""
    return float(given) if given else round(1000.0 / float(rate_hz), 1)


PARAMETER_DEFAULTS: dict[str, Any] = GROUNDING_PARAMS.defaults()

# The segmentation images of a model that gives instance masks (docs/GROUNDING_NODE.md,
# "Instance masks"): registered to the colour frame, built only while subscribed.
MASK_TOPICS = ("segmentation/instances", "segmentation/semantic", "segmentation/confidence")

# Relative names (remappable) except /diagnostics, which is global by convention.
TOPICS: dict[str, tuple[str, str, str]] = {
    # name -> (direction, type, QoS)
    "image": ("sub", "sensor_msgs/msg/Image", "sensor data (keep last 5), reliability = image_reliability"),
    "image/compressed": ("sub", "sensor_msgs/msg/CompressedImage",
                         "as image; follows a remap of `image` (to `<image>/compressed`) unless "
                         "remapped itself"),
    "prompt": ("sub", "std_msgs/msg/String", "reliable, keep last 10"),
    "frame_prompts": ("sub", "vision_msgs/msg/LabelInfo",
                      "reliable, keep last 100; header.stamp = the stamp of the frame the set is for"),
    "detections": ("pub", "vision_msgs/msg/Detection2DArray", "reliable, keep last 10"),
    "debug_image": ("pub", "sensor_msgs/msg/Image", "reliable, keep last 1 (built only when subscribed)"),
    "label_info": ("pub", "vision_msgs/msg/LabelInfo", "reliable, transient_local, keep last 1"),
    "frame_errors": ("pub", "diagnostic_msgs/msg/DiagnosticArray",
                     "reliable, keep last 10; one per frame whose model call raised (no detections for it): "
                     "header = the frame's header, one ERROR status named `frame failed` whose message is "
                     "the error"),
    "/diagnostics": ("pub", "diagnostic_msgs/msg/DiagnosticArray", "reliable, keep last 10"),
    "<depth_topic>": ("sub", "sensor_msgs/msg/Image",
                      "only when depth_topic is set; as the image subscriptions"),
    "<camera_info_topic>": ("sub", "sensor_msgs/msg/CameraInfo",
                            "only when depth_topic is set; as the image subscriptions"),
    "detections_3d": ("pub", "vision_msgs/msg/Detection3DArray",
                      "only when depth_topic is set; reliable, keep last 10; the colour image's header"),
    "target_pose": ("pub", "geometry_msgs/msg/PoseStamped",
                    "only when depth_topic is set; reliable, keep last 10; the target's 3D position"),
    "markers": ("pub", "visualization_msgs/msg/MarkerArray",
                "only when depth_topic is set; built only when subscribed"),
    "target_select": ("sub", "std_msgs/msg/Int64",
                      "reliable, keep last 10; a track id makes that track the target, -1 clears"),
    "target": ("pub", "vision_msgs/msg/Detection2D",
               "reliable, transient_local, keep last 1; the target detection: the frame's header, "
               "id = the track id, class_id = its prompt"),
    "segmentation/instances": ("pub", "sensor_msgs/msg/Image",
                               "only for a model that gives masks (`masks`); mono16, 0 = background, k = the "
                               "k-th Detection2D of the same stamp; reliable, keep last 1, built only when "
                               "subscribed"),
    "segmentation/semantic": ("pub", "sensor_msgs/msg/Image",
                              "as segmentation/instances; mono8, 0 = background, c = class c of "
                              "segmentation/label_info (prompt c-1)"),
    "segmentation/confidence": ("pub", "sensor_msgs/msg/Image",
                                "as segmentation/instances; mono8, round(255 x score) of the pixel's "
                                "detection"),
    "segmentation/label_info": ("pub", "vision_msgs/msg/LabelInfo",
                                "only for a model that gives masks; reliable, transient_local, keep last 1: "
                                "0 = background, c = prompt c-1"),
    "target_points": ("pub", "sensor_msgs/msg/PointCloud2",
                      "only with depth_topic and masks; reliable, keep last 1; the target's mask pixels "
                      "in 3D (x, y, z float32, m); built only when subscribed"),
}

# Launch arguments of launch/grounding.launch.py: name -> (default, description).
# Empty defaults mean "leave the params file's value alone".
LAUNCH_ARGUMENTS: dict[str, tuple[str, str]] = {
    "model": ("", "zoo model name (empty: from params_file)"),
    "image_topic": ("image", "camera image topic the node's `image` input is remapped to"),
    "prompt": ("", "initial prompts, `;`-separated (empty: from params_file)"),
    "device": ("", "torch device (empty: from params_file)"),
    "params_file": ("", "parameter YAML (empty: the package's config/grounding.yaml)"),
}


def default_params_file() -> Path:
    """config/grounding.yaml of the source tree, else of the installed ROS package."""
    return package_config("grounding.yaml")


def compressed_topic(image: str, compressed: str, compressed_unmapped: str) -> str:
    """The topic the node reads JPEG/PNG frames from, image_transport's convention: the
    ``image/compressed`` input where it was remapped itself (``compressed`` differs from its
    plain expansion ``compressed_unmapped``), else ``<image topic>/compressed``, so that one
    ``-r image:=/camera/color/image_raw`` moves both inputs. Names are fully resolved."""
    if compressed != compressed_unmapped:
        return compressed
    return image.rstrip("/") + "/compressed"


def camera_info_beside(depth_topic: str) -> str:
    """``camera_info`` beside a depth image topic (image_transport's convention):
    ``/cam/depth/image_raw`` -> ``/cam/depth/camera_info``."""
    head, sep, _ = depth_topic.rstrip("/").rpartition("/")
    return f"{head}/camera_info" if sep else "camera_info"


def diagnostic_status_name(node_fqn: str) -> str:
    """The name of the node's DiagnosticStatus: its fully qualified name (two nodes of the
    same name in different namespaces stay apart), as the console looks it up."""
    return f"{node_fqn}: grounding"


def grounding_node_description(
    *,
    params_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    image_topic: str = "image",
    name: str = NODE_NAME,
    namespace: str = "",
    remappings: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``launch_ros.actions.Node`` that start the grounding node.

    Parameters come from ``params_file`` (default: the package's grounding.yaml) and then
    ``overrides`` (only names the node declares). Nothing here re-declares a parameter: the
    node owns its declarations and defaults.
    """
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(PARAMETER_DEFAULTS))
    if unknown:
        from probench.realtime.errors import ParameterValueError

        raise ParameterValueError(f"unknown grounding_node parameter(s): {', '.join(unknown)}")
    params: list[Any] = [str(params_file or default_params_file())]
    if overrides:
        params.append(overrides)
    # image_transport convention: the compressed stream lives at <image topic>/compressed
    remap = {"image": image_topic, "image/compressed": f"{image_topic}/compressed", **(remappings or {})}
    return {
        "package": PACKAGE,
        "executable": EXECUTABLE,
        "name": name,
        "namespace": namespace,
        "parameters": params,
        "remappings": [(k, v) for k, v in remap.items() if k != v],
        "output": "screen",
    }


def grounding_from_arguments(values: Mapping[str, str]) -> dict[str, Any]:
    """The node description for ``grounding.launch.py``'s (string) arguments: an empty
    value leaves the params file's parameter alone; ``prompt`` is split on ``;`` (parsed,
    never evaluated)."""
    overrides: dict[str, Any] = {}
    for name in ("model", "device"):
        value = str(values.get(name, "")).strip()
        if value:
            overrides[name] = value
    prompt = str(values.get("prompt", ""))
    if prompt.strip():
        prompts = split_prompts(prompt)
        if not prompts:
            from probench.realtime.errors import ParameterValueError

            raise ParameterValueError(f"prompt argument has no target description: {prompt!r}")
        overrides["prompts"] = prompts
    return grounding_node_description(
        params_file=str(values.get("params_file", "")).strip() or None,
        overrides=overrides,
        image_topic=str(values.get("image_topic", "")).strip() or "image",
    )
