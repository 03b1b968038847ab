"""One format for the parameters of both nodes: a table of :class:`Param` rows.

Pure data (no rclpy): each node declares its parameters from its table (types, ranges and
choices become the ``ParameterDescriptor``, :func:`probench.ros.convert.param_declaration`),
checks values given at startup and at run time with :meth:`ParamTable.check`, and reads
them into a typed config object (:meth:`ParamTable.to_config`). The docs' parameter
tables are generated from the same rows (:meth:`ParamTable.markdown`) and a test checks
``config/*.yaml`` against the defaults, so nothing can drift apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal, TypeVar

from probench.errors import ProbenchError
from probench.limits import IntRange

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

ParamType = Literal["string", "double", "integer", "bool", "string_array"]
Applies = Literal["live", "configure", "startup"]

# A parameter's value, as rclpy gives it (a string array: a list, or a tuple once checked)
ParamValue = str | float | int | bool | list[str] | tuple[str, ...]

C = TypeVar("C", bound="DataclassInstance")  # a typed config: a dataclass


@dataclass(frozen=True)
class Param:
    """One parameter: its type, default, meaning, when a change takes effect, and what
    values it accepts (``choices``; ``low``/``high`` bounds, ``low_open`` for ``> low``)."""

    name: str
    type: ParamType
    default: ParamValue
    description: str
    applies: Applies = "startup"  # "live": at once; "configure": next configure; "startup"
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # True: value must be > low (e.g. a period), else >= low
    nonempty: bool = False  # a string that must not be blank
    # an extra check (e.g. prompt texts), given the typed value; returns the value
    check_value: Callable[[ParamValue], ParamValue] | None = None
    identity: bool = False  # part of a run's identity (run.json): the evaluator reads it from the node

    def check(self, value: object) -> ParamValue:
        """The checked value, or ``ValueError`` naming the parameter and the reason; a
        ``check_value`` hook raises a :class:`probench.errors.ProbenchError`, and any other
        exception of it becomes a one-line :class:`probench.realtime.errors.ParameterValueError`
        (so no value can raise anything else out of a node's set-parameters callback)."""
        value = self._typed(value)
        if self.choices and value not in self.choices:
            raise ValueError(f"{self.name} must be one of {', '.join(self.choices)}, got {value!r}")
        if isinstance(value, (int, float)):  # bounds are given for numbers only
            if self.low is not None and (value <= self.low if self.low_open else value < self.low):
                op = ">" if self.low_open else ">="
                raise ValueError(f"{self.name} must be {op} {self.low:g}, got {value}")
            if self.high is not None and value > self.high:
                raise ValueError(f"{self.name} must be <= {self.high:g}, got {value}")
        if self.nonempty and not str(value).strip():
            # no default either: the parameter must be given
            raise ValueError(f"parameter {self.name!r} is required ({self.description})" if not self.default
                             else f"{self.name} must not be empty")
        if self.check_value is not None:
            try:
                value = self.check_value(value)
            except (ProbenchError, ValueError):
                raise  # already the one-line refusal the nodes answer with
            except Exception as exc:  # noqa: BLE001 - any other failure is one line, never a crash
                raise _one_line(self.name, exc) from None
        return value

    def _typed(self, value: object) -> ParamValue:
        """``value`` when it has this parameter's type (a double: as a finite float), else
        ``ValueError`` (a bool is no number, though Python calls it an int)."""
        if isinstance(value, bool) and self.type in ("double", "integer"):
            raise ValueError(f"{self.name} must be a {self.type}, got {value!r}")
        if self.type == "double" and isinstance(value, (int, float)):
            as_float = float(value)
            if not math.isfinite(as_float):
                raise ValueError(f"{self.name} must be a finite number, got {as_float}")
            return as_float
        if self.type == "integer" and isinstance(value, int):
            return value
        if self.type == "string" and isinstance(value, str):
            return value
        if self.type == "bool" and isinstance(value, bool):
            return value
        if self.type == "string_array" and isinstance(value, (list, tuple)):
            return value
        raise ValueError(f"{self.name} must be a {self.type}, got {value!r}")

    def int_flag(self) -> IntRange:
        """The argparse type of a flag that sets this integer parameter: the row's range."""
        if self.type != "integer" or self.low is None or self.high is None or self.low_open:
            raise ValueError(f"{self.name}: not an integer parameter with a closed range")
        return IntRange(int(self.low), int(self.high))

    def range_text(self) -> str:
        if self.choices:
            return " | ".join(self.choices)
        if self.low is None and self.high is None:
            return ""
        lo = "" if self.low is None else f"{'>' if self.low_open else '>='} {self.low:g}"
        hi = "" if self.high is None else f"<= {self.high:g}"
        return ", ".join(p for p in (lo, hi) if p)


class ParamTable:
    """The parameters of one node, in declaration order."""

    def __init__(self, node: str, rows: tuple[Param, ...]) -> None:
        names = [p.name for p in rows]
        if len(set(names)) != len(names):
            raise ValueError(f"{node}: a parameter is listed twice")
        self.node = node
        self.rows = rows
        self._by_name = {p.name: p for p in rows}

    def __iter__(self) -> Iterator[Param]:
        return iter(self.rows)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> Param:
        return self._by_name[name]

    def names(self) -> list[str]:
        return [p.name for p in self.rows]

    def identity_names(self) -> list[str]:
        """The parameters that make a run's identity (``identity=True``), in table order."""
        return [p.name for p in self.rows if p.identity]

    def defaults(self) -> dict[str, ParamValue]:
        return {p.name: p.default for p in self.rows}

    def check(self, name: str, value: object) -> ParamValue:
        if name not in self._by_name:
            raise ValueError(f"{self.node} has no parameter {name!r}")
        return self._by_name[name].check(value)

    def check_all(self, values: Mapping[str, object]) -> dict[str, ParamValue]:
        """Every value checked; unknown names refused (first problem raised)."""
        unknown = sorted(set(values) - set(self._by_name))
        if unknown:
            raise ValueError(f"unknown {self.node} parameter(s): {', '.join(unknown)}")
        return {name: self.check(name, value) for name, value in values.items()}

    def to_config(self, cls: type[C], values: Mapping[str, object]) -> C:
        """A typed config object (a dataclass whose fields are parameter names)."""
        wanted = {f.name for f in fields(cls)}
        checked = {n: self.check(n, v) for n, v in values.items() if n in wanted}
        missing = wanted - set(checked)
        if missing:
            raise ValueError(f"{self.node}: no value for {', '.join(sorted(missing))}")
        return cls(**checked)

    def markdown(self) -> str:
        """The docs' table of these parameters (``scripts/gen_docs_tables.py`` writes it into
        docs/): defaults as a YAML parameter file spells them, ``required`` for a parameter
        that must be given, ``|`` escaped so that choices stay in their cell."""
        lines = [
            "| parameter | type | default | values | applies | description |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for p in self.rows:
            default = "required" if p.nonempty and not p.default else f"`{_yaml_text(p.default)}`"
            cells = [f"`{p.name}`", p.type, default, p.range_text(), p.applies, p.description]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        return "\n".join(lines)


def _one_line(name: str, exc: Exception) -> Exception:
    """A ``check_value`` failure that is not a refusal (a RecursionError, a MemoryError, an
    OSError, a bug) as the one-line :class:`ParameterValueError` the nodes answer with,
    named by its type; newlines folded."""
    from probench.realtime.errors import ParameterValueError

    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return ParameterValueError(text if name in text else f"{name}: {text}")


def _yaml_text(value: ParamValue) -> str:
    """A default as a YAML parameter file writes it: ``true``, ``""``, ``[orig, cat]``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_text(v) for v in value) + "]"
    return repr(value)
