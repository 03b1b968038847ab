"""The nodes' ROS arguments checked before rcl reads them (no rclpy here).

rcl parses ``--params-file`` and ``-p`` itself, and its failures were Python tracebacks
(``/dev/zero`` as a params file, a file with YAML anchors, an ESC character inside ``-p``),
or, worse, silence: a ``prompts`` value nested 5000 lists deep started the node with no
prompts and no warning. :func:`check_ros_arguments` finds each of these first and names it
in one line (a :class:`probench.errors.UsageError`); :func:`load_params_file` is the one
reading of a parameter file (``probench eval`` resolves the graph's parameters with it too):

- the bounded reader (:mod:`probench.files`): a regular file under the small-file cap;
- UTF-8 YAML that rcl accepts: no anchors or aliases, nesting of at most
  :data:`MAX_PARAMS_DEPTH` levels (scanned as events, so a deep file costs no recursion);
- under ``ros__parameters``, every value a scalar or a list of scalars (what a ROS
  parameter can hold; rcl drops anything else without a word).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from probench.errors import UsageError
from probench.files import UserFileError, read_user_bytes
from probench.vocabulary import escape_for_log

# node name, namespaces, ros__parameters, a parameter's namespaces, a list: a parameter file
# needs a handful of levels; 64 leaves room and keeps the YAML parser far from recursion limits
MAX_PARAMS_DEPTH = 64
_PARAMS_FILE_FLAGS = ("--params-file",)
_PARAM_FLAGS = ("-p", "--param")


def load_params_file(path: str | Path) -> Mapping[str, Any]:
    """A parameter file as rcl would read it (module doc), or a one-line :class:`UsageError`."""
    import yaml

    p = Path(path)
    try:
        text = read_user_bytes(p, what="params file").decode("utf-8")
    except UserFileError as exc:
        raise UsageError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"params file {p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        _check_events(yaml.parse(text), p)
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise UsageError(f"params file {p}: not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(doc, Mapping):
        raise UsageError(f"params file {p}: expected a mapping of node names")
    for node, section in doc.items():
        params = section.get("ros__parameters") if isinstance(section, Mapping) else None
        if isinstance(params, Mapping):
            for name, value in _leaves(params):
                problem = _value_problem(value)
                if problem:
                    raise UsageError(f"params file {p}: {node}: parameter {name}: {problem}")
    return doc


def check_ros_arguments(argv: Sequence[str]) -> None:
    """Every ``--params-file`` and ``-p NAME:=VALUE`` of the ``--ros-args`` sections of ``argv``
    checked (module doc); the rest is rcl's to parse."""
    for flag, value in _ros_arguments(argv):
        if flag in _PARAMS_FILE_FLAGS:
            load_params_file(value)
        elif flag in _PARAM_FLAGS:
            _check_override(flag, value)


def _ros_arguments(argv: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(flag, value) of the flags taking a value inside ``--ros-args`` ... ``--`` sections."""
    inside, args = False, list(argv)
    for i, arg in enumerate(args):
        if arg == "--ros-args":
            inside = True
        elif arg == "--":
            inside = False
        elif inside and arg in (*_PARAMS_FILE_FLAGS, *_PARAM_FLAGS) and i + 1 < len(args):
            yield arg, args[i + 1]


def _check_override(flag: str, rule: str) -> None:
    import yaml

    _, sep, text = rule.partition(":=")
    shown = escape_for_log(f"{flag} {rule}", limit=200)
    if not sep:
        return  # rcl names a malformed rule itself
    try:
        _check_events(yaml.parse(text), None)
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{shown}: not a YAML value: {escape_for_log(' '.join(str(exc).split()))}") from None
    problem = _value_problem(value)
    if problem:
        raise UsageError(f"{shown}: {problem}")


def _check_events(events: Iterator[Any], path: Path | None) -> None:
    """Anchors, aliases and nesting deeper than :data:`MAX_PARAMS_DEPTH`, from the event stream."""
    import yaml

    where = "" if path is None else f"params file {path}: "
    depth = 0
    for event in events:
        line = _line(event)
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise UsageError(f"{where}YAML anchors and aliases (&, *) are not supported by ROS 2 {line}")
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_PARAMS_DEPTH:
                raise UsageError(f"{where}nested deeper than {MAX_PARAMS_DEPTH} levels {line}: "
                                 "a parameter is a value or a list of values")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def _line(event: object) -> str:
    mark = getattr(event, "start_mark", None)
    return "" if mark is None else f"(line {mark.line + 1})"


def _leaves(params: Mapping[Any, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted name, value) of every parameter (a nested mapping is a namespace, as in rcl)."""
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _leaves(value, name + ".")
        else:
            yield name, value


def _value_problem(value: object) -> str | None:
    """Why ``value`` can be no ROS parameter (None: it can)."""
    if isinstance(value, Mapping):
        return "a mapping, not a value"
    if isinstance(value, list) and any(isinstance(v, (list, Mapping)) for v in value):
        return "a list inside a list: a parameter is a value or a list of values"
    return None
