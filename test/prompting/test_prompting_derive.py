"""The categorical derivation, the explicit form, and `probench prompt --json` on the
operator query test set (docs/PROMPTING.md reports the figure)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from probench.errors import UsageError
from probench.prompting.derive import derive, split_explicit
from probench.vocabulary import KNOWN_DOMAINS, PROMPT_TYPES

QUERIES = Path(__file__).parent / "data" / "operator_queries.csv"
ROOT = Path(__file__).resolve().parents[2]
REQUIRED_ACCEPTANCE = 0.85


def _rows() -> list[dict[str, str]]:
    with QUERIES.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_test_set_spans_every_prompt_type_and_domain() -> None:
    rows = _rows()
    assert len(rows) >= 100
    assert len({r["query"] for r in rows}) == len(rows)
    types = Counter(t for r in rows for t in r["prompt_types"].split(";"))
    assert set(types) == set(PROMPT_TYPES) and min(types.values()) >= 5
    assert set(Counter(r["domain"] for r in rows)) == set(KNOWN_DOMAINS)
    assert all(r["acceptable_cat"].strip() for r in rows)


def test_probench_prompt_json_meets_the_acceptance_figure() -> None:
    rows = _rows()
    proc = subprocess.run(
        [sys.executable, "-m", "probench", "prompt", "--json", *[r["query"] for r in rows]],
        capture_output=True, text=True, cwd=ROOT, check=True, timeout=120,
    )
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(out) == len(rows)
    accepted = 0
    for row, got in zip(rows, out, strict=True):
        assert set(got) >= {"orig", "cat", "tmpl"}
        assert got["orig"] == row["query"]
        assert got["tmpl"] == "a photo of " + row["query"]  # exactly the paper's template
        assert got["cat"].strip()  # never an empty prompt
        accepted += got["cat"].lower() in {a.lower() for a in row["acceptable_cat"].split("|")}
    assert accepted / len(rows) >= REQUIRED_ACCEPTANCE, f"{accepted}/{len(rows)} accepted"


@pytest.mark.parametrize(("query", "cat"), [
    ("the red fire extinguisher mounted next to the door", "fire extinguisher"),
    ("a chair without armrests", "chair"),
    ("a tunnel ventilation fan on the ceiling", "tunnel ventilation fan"),
    ("the nose of the cat", "cat nose"),
    ("a pile of bricks", "bricks"),
    ("a chair for sitting", "chair"),
    ("a person who is not wearing a hat", "person"),
    ("find all the orange traffic cones", "traffic cones"),
    ("an empty glass", "glass"),
])
def test_rules(query: str, cat: str) -> None:
    assert derive(query).cat == cat


def test_no_noun_phrase_falls_back_to_the_text_as_typed() -> None:
    f = derive("something to sit on")
    assert f.fallback and f.cat == f.orig == "something to sit on"


def test_explicit_form_wins_and_is_checked() -> None:
    f = derive("  red fire extinguisher by the door => fire   extinguisher ")
    assert (f.orig, f.cat, f.explicit) == ("red fire extinguisher by the door", "fire extinguisher", True)
    assert f.tmpl == "a photo of red fire extinguisher by the door"
    assert split_explicit("a cup") == ("a cup", None)
    for bad in ("a cup =>", "=> cup", "a => b => c", " => "):
        with pytest.raises(UsageError):
            derive(bad)


def test_prompt_cli_errors_are_one_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "probench", "prompt", "a cup", "red cup =>"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "empty categorical form" in proc.stderr
