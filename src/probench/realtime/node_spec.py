"""One description of the nodes: their parameter tables, typed configs, topics and the
grounding node's launch arguments.

Pure data (no rclpy, no launch): each node declares its parameters from its table
(:mod:`probench.realtime.params`), ``launch/*.launch.py`` and the eval graph build their node
descriptions from :func:`grounding_node_description`, and the tests check
``config/*.yaml`` and the docs' tables against the same rows, so nothing drifts apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probench.msgs.images import DEFAULT_MAX_PIXELS
from probench.realtime import PACKAGE, package_config
from probench.realtime.params import Param, ParamTable
from probench.vocabulary import FORMULATIONS, PREPROCESS_PATHS, parse_formulations

EXECUTABLE = "grounding_node"
NODE_NAME = "grounding_node"

RELIABILITIES = ("best_effort", "reliable")
MODES = ("camera-rate", "as-fast-as-answered")


def _prompts(value: Any) -> tuple[str, ...]:
    from probench.models.base import check_prompts

    return check_prompts(list(value or []))


def _formulations(value: Any) -> list[str]:
    return parse_formulations(list(value))


GROUNDING_PARAMS = ParamTable(NODE_NAME, (
    Param("model", "string", "tiny-owlv2", "zoo model name (`probench models`)", "configure", nonempty=True),
    Param("device", "string", "cpu", "torch device: cpu, cuda, cuda:N", "configure", nonempty=True),
    Param("precision", "string", "fp32", "model precision (fp32, fp16, ... as the model allows)",
          "configure", nonempty=True),
    Param("weights", "string", "", "local weights folder/file; empty = the model's default", "configure"),
    Param("preprocess", "string", "device",
          "image preprocessing: torch ops on the model's device, or the library's reference processor",
          "configure", choices=PREPROCESS_PATHS),
    Param("score_threshold", "double", 0.3,
          "minimum score kept (0.3 for display; the evaluator uses 0.0)", "configure", low=0.0, high=1.0),
    Param("prompts", "string_array", [], "active target descriptions (also set via the `prompt` topic)",
          "live", check_value=_prompts),
    Param("autostart", "bool", True, "configure and activate on start", "startup"),
    Param("image_reliability", "string", "best_effort", "QoS reliability of the image subscriptions",
          "configure", choices=RELIABILITIES),
    Param("max_detections", "integer", 100, "at most this many detections per frame (highest scores)",
          "configure", low=1, high=10000),
    Param("diagnostics_period", "double", 1.0, "seconds between /diagnostics messages", "configure",
          low=0.0, low_open=True),
    Param("frame_prompts_wait", "double", 0.5,
          "seconds a frame waits for its stamped prompt set (frame_prompts) while such sets are in use",
          "configure", low=0.0, high=10.0),
    Param("camera_timeout", "double", 3.0,
          "seconds without an image, while active, after which /diagnostics reports WARN (camera silent)",
          "configure", low=0.0, low_open=True),
    Param("depth_topic", "string", "",
          "aligned depth image (16UC1 mm or 32FC1 m, registered to the colour camera); empty = no 3D output",
          "configure"),
    Param("camera_info_topic", "string", "",
          "the colour camera's CameraInfo; empty = `camera_info` beside depth_topic", "configure"),
    Param("depth_tolerance", "double", 0.02,
          "seconds a depth stamp may differ from the colour frame's (and a frame waits for its depth)",
          "configure", low=0.0, high=1.0),
    Param("min_depth_pixels", "integer", 50,
          "valid depth pixels a box needs for a 3D estimate (fewer: none, counted)", "configure",
          low=1, high=10_000_000),
    Param("tracking", "bool", False, "stable track ids per prompt (ByteTrack) in Detection2D/3D.id",
          "configure"),
    Param("max_image_pixels", "integer", DEFAULT_MAX_PIXELS,
          "a CompressedImage whose header gives more pixels (width x height) is refused before decoding",
          "configure", low=1, high=1 << 30),
))


@dataclass(frozen=True)
class GroundingConfig:
    """The grounding node's configure-time parameters, checked and typed (``prompts`` are
    live and held by the node's worker)."""

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


EVALUATOR_NAME = "evaluator_node"
EVALUATOR_PARAMS = ParamTable(EVALUATOR_NAME, (
    Param("bag", "string", "", "probench bag to replay (required)", nonempty=True),
    Param("out", "string", "", "run folder (resumed when it holds a partial run of the same settings)",
          nonempty=True),
    Param("mode", "string", "camera-rate", "replay mode", choices=MODES),
    Param("rate_hz", "double", 30.0, "camera-rate replay rate (Hz)", low=0.0, low_open=True),
    Param("formulations", "string_array", list(FORMULATIONS), "formulations to replay, in order",
          check_value=_formulations),
    Param("answer_timeout", "double", 5.0,
          "seconds to wait for a frame's detections before counting it missed", low=0.0, low_open=True),
    Param("startup_timeout", "double", 180.0,
          "seconds to wait for the grounding node (model load, first prompts)", low=0.0, low_open=True),
    Param("budget_ms", "double", 33.3, "real-time budget of one frame (ms)", low=0.0, low_open=True),
    Param("warmup_frames", "integer", 3,
          "the first N frames of each session: reported apart, left out of the latency figures", low=0,
          high=1000),
    Param("grounding_node", "string", "/grounding_node",
          "the grounding node whose parameters go into run.json", nonempty=True),
    Param("overwrite", "bool", False,
          "replace a run folder that holds another experiment (its probench files)"),
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


PARAMETER_DEFAULTS: dict[str, Any] = GROUNDING_PARAMS.defaults()

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
    "/diagnostics": ("pub", "diagnostic_msgs/msg/DiagnosticArray", "reliable, keep last 10"),
    "<depth_topic>": ("sub", "sensor_msgs/msg/Image",
                      "only when depth_topic is set; as the image subscriptions"),
    "<camera_info_topic>": ("sub", "sensor_msgs/msg/CameraInfo",
                            "only when depth_topic is set; as the image subscriptions"),
    "detections_3d": ("pub", "vision_msgs/msg/Detection3DArray",
                      "only when depth_topic is set; reliable, keep last 10; the colour image's header"),
    "target_pose": ("pub", "geometry_msgs/msg/PoseStamped",
                    "only when depth_topic is set; the best 3D detection of the first prompt"),
    "markers": ("pub", "visualization_msgs/msg/MarkerArray",
                "only when depth_topic is set; built only when subscribed"),
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


def split_prompts(text: str) -> list[str]:
    """``"a red cup; the door"`` -> ``["a red cup", "the door"]`` (empty pieces dropped)."""
    return [p.strip() for p in text.split(";") if p.strip()]


def prompt_message_limit() -> int:
    """The longest ``prompt`` message (characters) the node reads: every prompt at its limit,
    each followed by a separator."""
    from probench.models.base import MAX_PROMPT_CHARS, MAX_PROMPTS

    return MAX_PROMPTS * (MAX_PROMPT_CHARS + 1)


def prompts_from_message(text: str) -> tuple[str, ...]:
    """The prompt set a message on the node's ``prompt`` topic asks for (``;``-separated),
    checked as the node checks it (message length, prompt count and length); a
    :class:`PromptMessageError` (one line) when the node would reject it and keep its
    previous prompts. The text is data: it is only split on ``;`` and stripped. The node,
    ``probench ground`` and ``probench console`` all read prompts through this."""
    from probench.errors import ProbenchError
    from probench.models.base import check_prompts
    from probench.msgs.errors import PromptMessageError

    if not isinstance(text, str):
        raise PromptMessageError(f"a prompt message is text, not {type(text).__name__}")
    limit = prompt_message_limit()
    if len(text) > limit:
        raise PromptMessageError(f"message is {len(text)} characters long (limit {limit})")
    pieces = split_prompts(text)
    if not pieces:
        raise PromptMessageError(f"empty or whitespace-only prompt message ({text[:20]!r})")
    try:
        return check_prompts(pieces)
    except ProbenchError as exc:
        raise PromptMessageError(f"{exc} (message {text[:60]!r})") from exc


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
