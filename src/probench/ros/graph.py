"""ONE description of the evaluation graph: grounding_node + evaluator_node.

Used by both ``launch/eval.launch.py`` (each description becomes a ``launch_ros`` ``Node``,
plus a shutdown when the evaluator exits) and ``probench eval`` (each becomes a subprocess
of the node's console script with ``--ros-args``). Parameters come from
``config/eval.yaml`` plus the overrides the caller gives; the nodes declare them (and their
defaults) themselves, so nothing is declared twice. Pure data: no rclpy, no launch.

Launch arguments are strings; :func:`eval_graph_from_arguments` parses them with explicit
converters (never ``eval``), an empty string meaning "leave the params file's value".
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probench.errors import UsageError
from probench.files import UserFileError, read_user_bytes
from probench.realtime import PACKAGE, package_config
from probench.realtime.node_spec import MODES, grounding_node_description
from probench.vocabulary import parse_formulations

EVALUATOR_EXECUTABLE = "evaluator_node"
EVALUATOR_NAME = "evaluator_node"
GROUNDING_NAME = "grounding_node"
# Both nodes meet on these topics: the replayed camera and its compressed twin.
IMAGE_TOPIC = "/probench/camera/image_raw"
COMPRESSED_TOPIC = IMAGE_TOPIC + "/compressed"

# Launch arguments of eval.launch.py (== the flags of `probench eval`): name -> (default, help).
EVAL_ARGUMENTS: dict[str, tuple[str, str]] = {
    "bag": ("", "probench bag to replay (required)"),
    "out": ("", "run folder to write (required; resumed if it holds a partial run)"),
    "model": ("", "zoo model name of the grounding node (empty: from params_file)"),
    "device": ("", "torch device of the grounding node (empty: from params_file)"),
    "weights": ("", "local weights folder or file of the model (empty: from params_file; there empty = "
                    "the model's checkpoint in the Hugging Face / ultralytics cache)"),
    "mode": ("", "camera-rate | as-fast-as-answered (empty: from params_file)"),
    "rate": ("", "camera-rate replay rate in Hz (empty: from params_file)"),
    "formulations": ("", "comma-separated subset of orig,cat,tmpl (empty: from params_file)"),
    "answer_timeout": ("", "seconds to wait for a frame's detections (empty: from params_file)"),
    "warmup_frames": ("", "frames sent one at a time before each session's first stream, scored nowhere "
                          "(empty: from params_file)"),
    "overwrite": ("false", "true: replace a run folder that holds another experiment"),
    "params_file": ("", "parameter YAML (empty: the package's config/eval.yaml)"),
}


def default_params_file() -> Path:
    """config/eval.yaml of the source tree, else of the installed ROS package."""
    return package_config("eval.yaml")


def _positive_float(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{name} must be a number, got {text!r}") from None
    if not value > 0:
        raise UsageError(f"{name} must be positive, got {text!r}")
    return value


def _count(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{name} must be a whole number, got {text!r}") from None
    if value < 0:
        raise UsageError(f"{name} must be >= 0, got {text!r}")
    return value


def _flag(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("", "true", "false"):
        raise UsageError(f"{name} must be true or false, got {text!r}")
    return value == "true"


NodeDescription = dict[str, Any]  # a launch_ros Node's keyword arguments


def _given(**values: object) -> dict[str, object]:
    """The parameters given (None: the parameter file's value)."""
    return {k: v for k, v in values.items() if v is not None}


def eval_graph(
    *,
    bag: str | Path,
    out: str | Path,
    model: str | None = None,
    device: str | None = None,
    mode: str | None = None,
    rate: float | None = None,
    formulations: list[str] | None = None,
    answer_timeout: float | None = None,
    warmup_frames: int | None = None,
    overwrite: bool = False,
    params_file: str | Path | None = None,
    evaluator_extra: Mapping[str, Any] | None = None,
    prompt_policy: str | None = None,
    prompt_profile: str | None = None,
    weights: str | Path | None = None,
    tracking: bool | None = None,
    grounding_extra: Mapping[str, object] | None = None,
) -> list[NodeDescription]:
    """``launch_ros.actions.Node`` keyword arguments of the two nodes (grounding first).
    ``evaluator_extra`` / ``grounding_extra``: more parameters of either node, by name (e.g.
    ``find_max_rate``); ``tracking``: the grounding node's ``tracking`` (``probench eval`` turns
    it on for a sequence bag; None: the params file's value)."""
    if not str(bag):
        raise UsageError("a bag is required")
    if not str(out):
        raise UsageError("a run folder (out) is required")
    if mode is not None and mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    params_file = str(params_file or default_params_file())
    grounding = _given(model=model or None, device=device or None,
                       weights=str(Path(weights).resolve()) if weights else None,
                       tracking=None if tracking is None else bool(tracking),
                       # no frame may be lost in transport when accuracy is what is measured
                       image_reliability="reliable" if mode == "as-fast-as-answered" else None)
    grounding.update(grounding_extra or {})
    g = grounding_node_description(
        params_file=params_file,
        overrides=grounding,
        image_topic=IMAGE_TOPIC,
        name=GROUNDING_NAME,
        remappings={"image/compressed": COMPRESSED_TOPIC},
    )
    evaluator: dict[str, Any] = {
        "bag": str(Path(bag).resolve()),
        "out": str(Path(out).resolve()),
        "grounding_node": "/" + GROUNDING_NAME,
        **_given(mode=mode or None, rate_hz=None if rate is None else float(rate),
                 formulations=list(formulations) if formulations else None,
                 answer_timeout=None if answer_timeout is None else float(answer_timeout),
                 warmup_frames=None if warmup_frames is None else int(warmup_frames),
                 overwrite=True if overwrite else None),
    }
    evaluator.update(evaluator_extra or {})
    if prompt_policy:  # the evaluator sets it on the grounding node for the policy's frames
        evaluator["prompt_policy"] = prompt_policy
        evaluator["prompt_profile"] = str(prompt_profile or "")
    e = {
        "package": PACKAGE,
        "executable": EVALUATOR_EXECUTABLE,
        "name": EVALUATOR_NAME,
        "namespace": "",
        "parameters": [params_file, evaluator],
        "remappings": [("image", IMAGE_TOPIC), ("image/compressed", COMPRESSED_TOPIC)],
        "output": "screen",
    }
    return [g, e]


def eval_graph_from_arguments(values: Mapping[str, str]) -> list[dict[str, Any]]:
    """The graph from launch-argument strings (eval.launch.py); '' = params file's value."""
    unknown = sorted(set(values) - set(EVAL_ARGUMENTS))
    if unknown:
        raise UsageError(f"unknown eval argument(s): {', '.join(unknown)}")
    v = {k: str(values.get(k, d)).strip() for k, (d, _) in EVAL_ARGUMENTS.items()}
    return eval_graph(
        bag=v["bag"],
        out=v["out"],
        model=v["model"] or None,
        device=v["device"] or None,
        weights=v["weights"] or None,
        mode=v["mode"] or None,
        rate=_positive_float("rate", v["rate"]) if v["rate"] else None,
        formulations=parse_formulations(v["formulations"]) if v["formulations"] else None,
        answer_timeout=(
            _positive_float("answer_timeout", v["answer_timeout"]) if v["answer_timeout"] else None
        ),
        warmup_frames=_count("warmup_frames", v["warmup_frames"]) if v["warmup_frames"] else None,
        overwrite=_flag("overwrite", v["overwrite"]),
        params_file=v["params_file"] or None,
    )


# -- the same graph as subprocesses (probench eval) -------------------------------------------
def _yaml_value(value: object) -> str:
    """A parameter value as ``-p name:=VALUE`` text. JSON is valid YAML and keeps types
    exact: a string stays a string even when it looks like a number, a float keeps its dot."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value)


def ros_arguments(desc: Mapping[str, Any]) -> list[str]:
    """``--ros-args ...`` that give a process what the launch Node description gives it."""
    args = ["--ros-args", "-r", f"__node:={desc['name']}"]
    if desc.get("namespace"):
        args += ["-r", f"__ns:={desc['namespace']}"]
    for p in desc.get("parameters", []):
        if isinstance(p, Mapping):
            for name, value in p.items():
                args += ["-p", f"{name}:={_yaml_value(value)}"]
        else:
            args += ["--params-file", str(p)]
    for src, dst in desc.get("remappings", []):
        args += ["-r", f"{src}:={dst}"]
    return args


def executable_path(name: str) -> str:
    """The console script of a node: next to this Python (the venv), else on PATH."""
    here = Path(sys.executable).parent / name
    if here.is_file():
        return str(here)
    found = shutil.which(name)
    if found is None:
        raise UsageError(f"console script {name!r} not found next to {sys.executable} nor on PATH "
                         "(is probench installed in this environment?)")
    return found


def command_line(desc: Mapping[str, Any]) -> list[str]:
    return [executable_path(str(desc["executable"])), *ros_arguments(desc)]


# -- the parameters a node of the graph will run with ------------------------------------------
def _node_pattern_matches(pattern: list[str], name: list[str]) -> bool:
    """rcl's node-name wildcards: ``**`` any number of tokens, ``*`` exactly one."""
    if not pattern:
        return not name
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_node_pattern_matches(rest, name[i:]) for i in range(len(name) + 1))
    return bool(name) and head in ("*", name[0]) and _node_pattern_matches(rest, name[1:])


def resolved_parameters(desc: Mapping[str, Any]) -> dict[str, Any]:
    """The parameter values a node description gives its node: each params file's
    ``ros__parameters`` under every key matching the node's full name (in file order,
    rcl's wildcards), then the overrides; later sources win. Used to refuse a mismatched
    run folder before any node starts; the nodes' own values are checked again at run time."""
    import yaml

    full = [t for t in f"{desc.get('namespace') or ''}/{desc['name']}".split("/") if t]
    out: dict[str, Any] = {}
    for source in desc.get("parameters", []):
        if isinstance(source, Mapping):
            out.update(source)
            continue
        path = Path(source)
        try:  # bounded: a regular file under the small-file cap (docs/SECURITY.md)
            doc = yaml.safe_load(read_user_bytes(path, what="params file").decode("utf-8")) or {}
        except UserFileError as exc:
            raise UsageError(str(exc)) from None
        except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
            raise UsageError(f"params file {path}: cannot read it: {' '.join(str(exc).split())}") from None
        if not isinstance(doc, Mapping):
            raise UsageError(f"params file {path}: expected a mapping of node names")
        for key, section in doc.items():
            pattern = [t for t in str(key).split("/") if t]
            if _node_pattern_matches(pattern, full) and isinstance(section, Mapping):
                out.update(section.get("ros__parameters") or {})
    return out
