"""probench.realtime.params: one parameter-table format for both nodes (types, ranges, choices,
required values, typed configs, the docs' Markdown table), and the two real tables."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields

import pytest

from probench.errors import UsageError
from probench.models.errors import PromptError
from probench.realtime.node_spec import (
    EVALUATOR_PARAMS,
    GROUNDING_PARAMS,
    EvaluatorConfig,
    GroundingConfig,
)
from probench.realtime.params import Param, ParamTable


def _table() -> ParamTable:
    return ParamTable("demo_node", (
        Param("name", "string", "", "what to load", nonempty=True),
        Param("label", "string", "x", "a label", nonempty=True),
        Param("ratio", "double", 0.5, "a fraction", low=0.0, high=1.0),
        Param("period", "double", 1.0, "seconds", low=0.0, low_open=True),
        Param("count", "integer", 3, "how many", low=1, high=10),
        Param("flag", "bool", True, "on or off"),
        Param("mode", "string", "a", "the mode", choices=("a", "b-c")),
        Param("words", "string_array", [], "some words", "live",
              check_value=lambda v: [str(w).upper() for w in v]),
    ))


@dataclass(frozen=True)
class _Config:
    ratio: float
    count: int
    mode: str


def test_types_are_checked_and_doubles_become_floats() -> None:
    t = _table()
    assert t.check("ratio", 1) == 1.0 and isinstance(t.check("ratio", 1), float)
    assert t.check("count", 4) == 4
    assert t.check("flag", False) is False
    for name, bad in (("ratio", "0.5"), ("count", 2.0), ("flag", 1), ("mode", 3), ("words", "a b")):
        with pytest.raises(ValueError, match=f"{name} must be a"):
            t.check(name, bad)


def test_a_bool_is_not_a_number() -> None:
    t = _table()
    with pytest.raises(ValueError, match="ratio must be a double, got True"):
        t.check("ratio", True)
    with pytest.raises(ValueError, match="count must be a integer"):
        t.check("count", False)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_doubles_must_be_finite(value: float) -> None:
    with pytest.raises(ValueError, match="ratio must be a finite number"):
        _table().check("ratio", value)


def test_ranges_closed_and_open() -> None:
    t = _table()
    assert t.check("ratio", 0.0) == 0.0 and t.check("ratio", 1.0) == 1.0  # both ends included
    with pytest.raises(ValueError, match=re.escape("ratio must be >= 0, got -0.1")):
        t.check("ratio", -0.1)
    with pytest.raises(ValueError, match=re.escape("ratio must be <= 1, got 1.5")):
        t.check("ratio", 1.5)
    assert t.check("period", 1e-9) == 1e-9
    with pytest.raises(ValueError, match=re.escape("period must be > 0, got 0.0")):
        t.check("period", 0.0)  # low_open: the bound itself is refused
    assert t.check("count", 1) == 1 and t.check("count", 10) == 10
    for bad in (0, 11):
        with pytest.raises(ValueError, match="count must be"):
            t.check("count", bad)


def test_choices() -> None:
    t = _table()
    assert t.check("mode", "b-c") == "b-c"
    with pytest.raises(ValueError, match="mode must be one of a, b-c, got 'B-C'"):
        t.check("mode", "B-C")


def test_required_and_nonempty() -> None:
    t = _table()
    # no default: the parameter must be given, and the message says what it is
    with pytest.raises(ValueError, match=r"parameter 'name' is required \(what to load\)"):
        t.check("name", "  ")
    # a default exists: blank is refused as empty
    with pytest.raises(ValueError, match="label must not be empty"):
        t.check("label", "")
    assert t.check("name", "m") == "m"


def test_check_value_hook_runs_after_the_generic_checks() -> None:
    t = _table()
    assert t.check("words", ("a", "b")) == ["A", "B"]
    with pytest.raises(ValueError, match="words must be a string_array"):
        t.check("words", 7)  # the type check comes first: the hook never sees a non-list


def test_unknown_names_are_refused() -> None:
    t = _table()
    with pytest.raises(ValueError, match="demo_node has no parameter 'nmae'"):
        t.check("nmae", "x")
    with pytest.raises(ValueError, match="unknown demo_node parameter\\(s\\): nmae, zz"):
        t.check_all({"zz": 1, "nmae": "x", "ratio": 0.1})
    assert t.check_all({"ratio": 1, "count": 2}) == {"ratio": 1.0, "count": 2}


def test_a_name_listed_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="listed twice"):
        ParamTable("n", (Param("a", "bool", True, ""), Param("a", "bool", False, "")))


def test_table_access() -> None:
    t = _table()
    assert t.names()[:3] == ["name", "label", "ratio"] and len(list(t)) == 8
    assert "mode" in t and "nope" not in t
    assert t["count"].high == 10
    assert t.defaults()["words"] == [] and t.defaults()["flag"] is True


def test_to_config_checks_and_types() -> None:
    t = _table()
    cfg = t.to_config(_Config, {"ratio": 1, "count": 2, "mode": "a", "flag": False})  # extra names ignored
    assert cfg == _Config(ratio=1.0, count=2, mode="a") and isinstance(cfg.ratio, float)
    with pytest.raises(ValueError, match="demo_node: no value for count, mode"):
        t.to_config(_Config, {"ratio": 0.2})
    with pytest.raises(ValueError, match="ratio must be <= 1"):
        t.to_config(_Config, {"ratio": 2.0, "count": 2, "mode": "a"})


def test_range_text() -> None:
    t = _table()
    assert t["ratio"].range_text() == ">= 0, <= 1"
    assert t["period"].range_text() == "> 0"
    assert t["mode"].range_text() == "a | b-c"
    assert t["flag"].range_text() == ""


def _cells(row: str) -> list[str]:
    """Cells of a Markdown table row, honouring ``\\|`` escapes."""
    inner = row.strip()[1:-1].replace("\\|", "\0")
    return [c.strip().replace("\0", "|") for c in inner.split("|")]


def test_markdown_table() -> None:
    t = _table()
    lines = t.markdown().splitlines()
    assert _cells(lines[0]) == ["parameter", "type", "default", "values", "applies", "description"]
    assert len(lines) == 2 + len(t.rows)
    rows = {_cells(r)[0]: _cells(r) for r in lines[2:]}
    assert all(len(r) == 6 for r in rows.values())  # choices with '|' stay in their cell
    assert rows["`mode`"] == ["`mode`", "string", "`a`", "a | b-c", "startup", "the mode"]
    assert rows["`name`"][2] == "required"  # no default: must be given
    assert rows["`label`"][2] == "`x`"
    assert rows["`flag`"][2] == "`true`" and rows["`words`"][2] == "`[]`"  # as YAML spells them
    assert rows["`words`"][4] == "live"
    assert rows["`period`"][3] == "> 0"


# -- the two real tables -------------------------------------------------------------------
@pytest.mark.parametrize("table", [GROUNDING_PARAMS, EVALUATOR_PARAMS], ids=lambda t: t.node)
def test_every_default_passes_its_own_check(table: ParamTable) -> None:
    for p in table:
        if p.nonempty and not p.default:
            with pytest.raises(ValueError, match="is required"):
                p.check(p.default)  # required: the default is a placeholder that must be replaced
        elif p.type == "string_array" and not p.default:
            continue  # an empty array is "unset" (declared by type only; see param_declaration)
        else:
            assert p.check(p.default) == p.default, p.name


def test_config_objects_cover_the_tables() -> None:
    assert {f.name for f in fields(GroundingConfig)} == set(GROUNDING_PARAMS.names()) - {"prompts"}
    assert {f.name for f in fields(EvaluatorConfig)} == set(EVALUATOR_PARAMS.names())
    given = {**EVALUATOR_PARAMS.defaults(), "bag": "/b", "out": "/o"}
    cfg = EVALUATOR_PARAMS.to_config(EvaluatorConfig, given)
    assert cfg.formulations == ["orig", "cat", "tmpl"] and cfg.rate_hz == 30.0
    g = GROUNDING_PARAMS.to_config(GroundingConfig, GROUNDING_PARAMS.defaults())
    assert g.model == "tiny-owlv2" and g.max_detections == 100


def test_real_rows_refuse_what_the_nodes_refuse() -> None:
    with pytest.raises(ValueError, match="image_reliability must be one of best_effort, reliable"):
        GROUNDING_PARAMS.check("image_reliability", "sometimes")
    with pytest.raises(ValueError, match="score_threshold must be <= 1"):
        GROUNDING_PARAMS.check("score_threshold", 1.5)
    with pytest.raises(UsageError, match="formulations must be a subset"):
        EVALUATOR_PARAMS.check("formulations", ["orig", "typo"])
    assert EVALUATOR_PARAMS.check("formulations", ["tmpl", "orig"]) == ["orig", "tmpl"]
    with pytest.raises(PromptError, match="no prompts given"):
        GROUNDING_PARAMS.check("prompts", [])  # an explicit empty prompt list is refused
