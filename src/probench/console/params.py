"""A running grounding node's parameters as the operator sees them: typed values parsed
from text, each with its row of the node's table (``GROUNDING_PARAMS``), for
``probench node param`` and the console's controls (no rclpy here; the ROS side is
:mod:`probench.ros.console_bridge`).

A value typed on the command line is read as the parameter's declared type (the node's
own ``DescribeParameters`` answer): ``true``/``false``, an integer, a number, a string, or
for a string array a YAML list (``"['a mug', 'a kettle']"``, as ``ros2 param set`` takes
it). Whether it is accepted is the node's decision: its reason comes back word for word.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from probench.console.errors import BridgeError, ConsoleUsageError
from probench.limits import INT64_MAX, IntRange
from probench.realtime.node_spec import GROUNDING_PARAMS
from probench.realtime.params import ParamValue

PARAM_TYPES = ("bool", "integer", "double", "string", "string_array")
# What the console's controls may set (the page offers these two, and nothing else).
CONSOLE_PARAMS = ("prompt_policy", "score_threshold")

_ROS_INTEGER = IntRange(-INT64_MAX - 1, INT64_MAX)  # what an integer parameter carries (int64)
_APPLIES_TEXT = {
    "live": "in force now",
    "configure": "stored, in force from the node's next configure (it keeps the value it was configured "
                 "with until cleanup + configure; `probench node param set ... --reconfigure` does both)",
    "startup": "read once when the node starts",
}


@dataclass(frozen=True)
class ParamInfo:
    """One parameter of a running node: its declared type, current value (None: unset),
    description and when a change takes effect (``applies``: the table's, or ``""`` for a
    parameter the table does not list, such as ``use_sim_time``)."""

    name: str
    type: str  # one of PARAM_TYPES, or "unset" / "other"
    value: object  # as rclpy gives it (any parameter type, None: unset)
    description: str
    read_only: bool
    applies: str = ""

    def value_text(self) -> str:
        return format_value(self.value)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "value": self.value, "description": self.description,
                "read_only": self.read_only, "applies": self.applies}


def table_applies(name: str) -> str:
    """When a change of the grounding node's parameter ``name`` takes effect ("" if not in its table)."""
    return GROUNDING_PARAMS[name].applies if name in GROUNDING_PARAMS else ""


def table_description(name: str) -> str:
    """The table's description of ``name``, with its values and when it applies ("" if unknown)."""
    if name not in GROUNDING_PARAMS:
        return ""
    p = GROUNDING_PARAMS[name]
    extra = f" [{p.range_text()}]" if p.range_text() else ""
    return f"{p.description}{extra} (applies: {p.applies})"


def applies_text(applies: str) -> str:
    """The operator's sentence for ``applies`` (what a successful set means)."""
    return _APPLIES_TEXT.get(applies, "")


def format_value(value: object) -> str:
    """A value as ``ros2 param get`` would let one type it back: ``true``, ``0.3``, ``['a', 'b']``."""
    if value is None:
        return "(unset)"
    if value == "":
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(repr(str(v)) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def parse_value(kind: str, text: str, name: str = "value") -> ParamValue:
    """``text`` as a value of parameter type ``kind``; ConsoleUsageError (exit 2) when it is not one."""
    t = text.strip()
    if kind == "string":
        return text
    if kind == "bool":
        low = t.lower()
        if low in ("true", "false"):
            return low == "true"
        raise ConsoleUsageError(f"{name} is a bool: give true or false, got {text!r}")
    if kind == "integer":
        try:
            return _ROS_INTEGER(t)
        except argparse.ArgumentTypeError as exc:  # (beyond int64: rclpy would raise deep inside)
            raise ConsoleUsageError(f"{name} is an integer: {exc}") from None
    if kind == "double":
        try:
            out = float(t)
        except ValueError:
            raise ConsoleUsageError(f"{name} is a number, got {text!r}") from None
        if not math.isfinite(out):
            raise ConsoleUsageError(f"{name} must be a finite number, got {text!r}")
        return out
    if kind == "string_array":
        import yaml

        try:
            data = yaml.safe_load(t) if t else None
        except yaml.YAMLError:
            data = None
        if not isinstance(data, list) or not all(isinstance(v, str) for v in data):
            raise ConsoleUsageError(f"{name} is a string array: give a YAML list such as "
                                    f"\"['a mug', 'a kettle']\", got {text!r}")
        return list(data)
    raise ConsoleUsageError(f"{name} has type {kind}, which probench node cannot set")


def check_console_value(name: str, value: object) -> ParamValue:
    """A console control's value held to the node's own table (the checks the node makes):
    the checked value, or BridgeError 400 with the table's reason."""
    from probench.errors import ProbenchError

    if name not in CONSOLE_PARAMS:
        raise BridgeError(f"'name' must be one of {', '.join(CONSOLE_PARAMS)}", 400)
    if GROUNDING_PARAMS[name].type == "double" and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise BridgeError(f"{name} must be a number, got {value!r}", 400) from None
    try:
        return GROUNDING_PARAMS.check(name, value)
    except (ProbenchError, ValueError) as exc:
        raise BridgeError(f"{name} refused: {exc}", 400) from exc
