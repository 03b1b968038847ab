"""One description of the grounding node: its parameters, topics and launch arguments.

Pure data (no rclpy, no launch): the node declares its parameters from ``PARAMETERS``,
``launch/grounding.launch.py`` and the eval graph build their node descriptions from
:func:`grounding_node_description`, and the tests check ``config/grounding.yaml`` against
the same table, so the defaults cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE = "probench"
EXECUTABLE = "grounding_node"
NODE_NAME = "grounding_node"

RELIABILITIES = ("best_effort", "reliable")


@dataclass(frozen=True)
class ParamSpec:
    name: str
    default: Any
    type: str  # "string" | "double" | "integer" | "bool" | "string_array"
    description: str
    applies: str  # "live" (takes effect at once) | "configure" (next configure) | "startup"


PARAMETERS: tuple[ParamSpec, ...] = (
    ParamSpec("model", "tiny-owlv2", "string", "zoo model name (`probench models`)", "configure"),
    ParamSpec("device", "cpu", "string", "torch device: cpu, cuda, cuda:N", "configure"),
    ParamSpec("precision", "fp32", "string", "model precision (fp32, fp16, ... as the model allows)",
              "configure"),
    ParamSpec("weights", "", "string", "local weights folder/file; empty = the model's default",
              "configure"),
    ParamSpec("score_threshold", 0.3, "double",
              "minimum score kept, in [0, 1] (0.3 for display; the evaluator uses 0.0)", "configure"),
    ParamSpec("prompts", [], "string_array", "active target descriptions (also set via `prompt` topic)",
              "live"),
    ParamSpec("autostart", True, "bool", "configure and activate on start", "startup"),
    ParamSpec("image_reliability", "best_effort", "string",
              "QoS reliability of the image subscriptions: best_effort | reliable", "configure"),
    ParamSpec("max_detections", 100, "integer", "at most this many detections per frame (highest scores)",
              "configure"),
    ParamSpec("diagnostics_period", 1.0, "double", "seconds between /diagnostics messages", "configure"),
)

PARAMETER_DEFAULTS: dict[str, Any] = {p.name: p.default for p in PARAMETERS}

# Relative names (remappable) except /diagnostics, which is global by convention.
TOPICS: dict[str, tuple[str, str, str]] = {
    # name -> (direction, type, QoS)
    "image": ("sub", "sensor_msgs/msg/Image", "sensor data (keep last 5), reliability = image_reliability"),
    "image/compressed": ("sub", "sensor_msgs/msg/CompressedImage", "as image"),
    "prompt": ("sub", "std_msgs/msg/String", "reliable, keep last 10"),
    "detections": ("pub", "vision_msgs/msg/Detection2DArray", "reliable, keep last 10"),
    "debug_image": ("pub", "sensor_msgs/msg/Image", "reliable, keep last 1 (built only when subscribed)"),
    "label_info": ("pub", "vision_msgs/msg/LabelInfo", "reliable, transient_local, keep last 1"),
    "/diagnostics": ("pub", "diagnostic_msgs/msg/DiagnosticArray", "reliable, keep last 10"),
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
    here = Path(__file__).resolve().parents[3] / "config" / "grounding.yaml"
    if here.is_file():
        return here
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE)) / "config" / "grounding.yaml"
    except (ImportError, LookupError, ValueError):
        return here  # the caller reports the missing file with its path


def check_parameter(name: str, value: Any) -> Any:
    """The checked value of a grounding_node parameter, or ValueError/PromptError with the
    reason (used at startup and by the set-parameters callback alike)."""
    if name == "prompts":
        from probench.models.base import check_prompts

        return check_prompts(list(value or []))
    if name == "image_reliability" and value not in RELIABILITIES:
        raise ValueError(f"image_reliability must be one of {RELIABILITIES}, got {value!r}")
    if name == "diagnostics_period" and not (value > 0):
        raise ValueError(f"diagnostics_period must be > 0 s, got {value}")
    if name == "score_threshold" and not (0.0 <= value <= 1.0):
        raise ValueError(f"score_threshold must be in [0, 1], got {value}")
    if name == "max_detections" and value < 1:
        raise ValueError(f"max_detections must be >= 1, got {value}")
    if name in ("model", "device", "precision") and not str(value).strip():
        raise ValueError(f"{name} must not be empty")
    return value


def split_prompts(text: str) -> list[str]:
    """``"a red cup; the door"`` -> ``["a red cup", "the door"]`` (empty pieces dropped)."""
    return [p.strip() for p in text.split(";") if p.strip()]


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
        from probench.ros.errors import ParameterValueError

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
            from probench.ros.errors import ParameterValueError

            raise ParameterValueError(f"prompt argument has no target description: {prompt!r}")
        overrides["prompts"] = prompts
    return grounding_node_description(
        params_file=str(values.get("params_file", "")).strip() or None,
        overrides=overrides,
        image_topic=str(values.get("image_topic", "")).strip() or "image",
    )
