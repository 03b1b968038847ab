"""Table II: columns, order, top-five marks, reference rows, malformed reference tables."""

from __future__ import annotations

import csv
import io

import pytest

from probench.cache.records import MetricsRecord
from probench.report.errors import ReportError
from probench.report.load import COLUMNS, Entry, load_reference, load_run
from probench.report.table import HEADERS, MARKDOWN_COLUMNS, cell, mark, ranks, to_csv, to_markdown

M = MetricsRecord.model_validate  # a metrics.json as read


def _entries(two_runs, reference_csv):
    return [load_run(r) for r in two_runs] + load_reference(reference_csv)


def test_csv_has_exactly_the_paper_columns_sorted_by_map50(two_runs, reference_csv):
    rows = list(csv.DictReader(io.StringIO(to_csv(_entries(two_runs, reference_csv)))))
    assert tuple(rows[0].keys()) == COLUMNS
    assert [r["model"] for r in rows] == [
        "OWL-ViT", "SAM3-Lite (paper)", "OmDet-T (paper)", "OWLv2-B (random weights)", "YOLO-W-S (paper)",
    ]  # fmt: skip
    m50 = [float(r["map50"]) for r in rows]
    assert m50 == sorted(m50, reverse=True)
    # the paper's rows come back as published; a run's cells are its metrics, rounded
    sam = next(r for r in rows if r["model"] == "SAM3-Lite (paper)")
    assert sam["latency_ms"] == "683.0" and sam["plc"] == "0.917" and sam["best_formulation"] == "cat"
    owl = next(r for r in rows if r["model"] == "OWL-ViT")
    assert owl["best_formulation"] == "orig" and owl["latency_ms"] == "20.0"
    assert float(owl["map50"]) == pytest.approx(0.9 * (1 - 0.5**3), abs=5e-4)


def test_ranks_lower_is_better_for_latency_and_delta_max(two_runs, reference_csv):
    entries = _entries(two_runs, reference_csv)
    # (the random-weight row is not ranked: four rows are)
    lat = {e.label: r for e, r in zip(entries, ranks(entries, "latency_ms"), strict=True)}
    assert lat["YOLO-W-S (paper)"] == 1 and lat["SAM3-Lite (paper)"] == 4
    m50 = {e.label: r for e, r in zip(entries, ranks(entries, "map50"), strict=True)}
    assert m50["OWL-ViT"] == 1 and m50["YOLO-W-S (paper)"] == 4
    dmax = {e.label: r for e, r in zip(entries, ranks(entries, "delta_max"), strict=True)}
    assert dmax["YOLO-W-S (paper)"] == 1 and dmax["SAM3-Lite (paper)"] == 4
    assert lat["OWLv2-B (random weights)"] is None and m50["OWLv2-B (random weights)"] is None


def test_ties_share_a_rank_and_missing_values_have_none():
    es = [Entry("a", M({"map50": 0.5})), Entry("b", M({"map50": 0.5})), Entry("c", M({"map50": 0.2})),
          Entry("d", M({}))]
    assert ranks(es, "map50") == [1, 1, 3, None]
    assert mark("0.500", 1) == "**0.500**" and mark("0.200", 3) == "0.200³"
    assert mark("0.1", 6) == "0.1" and mark("", 1) == ""


def test_markdown_marks_top_five_per_column(two_runs, reference_csv):
    md = to_markdown(_entries(two_runs, reference_csv))
    lines = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert lines[0] == "| " + " | ".join(HEADERS.get(c, c) for c in MARKDOWN_COLUMNS) + " |"
    body = {ln.split(" | ")[0][2:]: ln.split(" | ") for ln in lines[1:]}
    col = {c: i for i, c in enumerate(MARKDOWN_COLUMNS)}
    assert body["OWL-ViT"][col["map50"]].startswith("**")  # best mAP.5
    assert body["YOLO-W-S (paper)"][col["latency_ms"]] == "**7.3**"  # fastest
    assert body["SAM3-Lite (paper)"][col["latency_ms"]] == "683.0⁴"  # slowest of the four ranked
    assert body["SAM3-Lite (paper)"][col["map50"]] == "0.696²"
    assert "**bold** = best" in md


def test_reference_rows_need_the_paper_columns(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("model,map50\nX,0.1\n", encoding="utf-8")
    with pytest.raises(ReportError, match="missing column"):
        load_reference(bad)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("X,abc,0.1,0.1,1,0.1,0.1,0.1,cat,0.1,0.1", "line 2: map50 'abc' is not a number"),
        ("X,0.1,0.1,0.1,1,0.1,0.1,0.1,best,0.1,0.1", "best_formulation 'best'"),
        (",0.1,0.1,0.1,1,0.1,0.1,0.1,cat,0.1,0.1", "line 2: empty model name"),
        ("X,0.1,0.1,0.1,1,0.1,0.1,0.1,cat,0.1,0.1,9", "more cells than columns"),
    ],
)
def test_malformed_reference_rows_are_named(tmp_path, row, message):
    path = tmp_path / "ref.csv"
    path.write_text(",".join(COLUMNS) + "\n" + row + "\n", encoding="utf-8")
    with pytest.raises(ReportError) as err:
        load_reference(path)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_reference_with_extra_columns_and_empty_cells_is_accepted(tmp_path):
    path = tmp_path / "ref.csv"
    path.write_text("note," + ",".join(COLUMNS) + "\nhi,M,0.5,,,,,,,,,\n", encoding="utf-8")
    (e,) = load_reference(path)
    assert e.label == "M (paper)" and e.number("map50") == 0.5
    assert e.number("latency_ms") is None and e.text("best_formulation") is None


def test_tiny_variants_are_labelled_as_tiny(make_run):
    # tiny-owlv2 shares OWLv2-B's paper name; its row must not read as the real-size model
    run = make_run("tiny-owlv2", paper_name="OWLv2-B", random_weights=True)
    assert load_run(run).label == "OWLv2-B tiny (random weights)"
    real = make_run("owlv2-b", paper_name="OWLv2-B", random_weights=True)
    assert load_run(real).label == "OWLv2-B (random weights)"


def test_markdown_says_which_pcr_it_prints(reference_csv):
    run = Entry("mine", M({"map50": 0.9, "pcr50": 0.95, "plc": 0.5, "pcr50_top1": 0.4, "plc_top1": 0.97}))
    md = to_markdown([run, *load_reference(reference_csv)])
    header = md.splitlines()[0]
    assert header.endswith("| pcr50 any-of-100 | plc any-of-100 | pcr50 top-1 | plc top-1 |")
    assert "any of the up to 100 predictions" in md and "highest-scoring prediction" in md
    col = {c: i for i, c in enumerate(MARKDOWN_COLUMNS)}
    rows = [ln[2:-2].split(" | ") for ln in md.splitlines()[2:] if ln.startswith("| ")]
    body = {row[0]: row for row in rows}
    assert body["mine"][col["pcr50"]] == "**0.950**" and body["mine"][col["plc"]] == "0.500⁴"
    assert body["mine"][col["pcr50_top1"]] == "**0.400**" and body["mine"][col["plc_top1"]] == "**0.970**"
    paper = body["SAM3-Lite (paper)"]  # the paper's columns, as published; no top-1 values
    assert paper[col["pcr50"]] == "0.847²" and paper[col["pcr50_top1"]] == paper[col["plc_top1"]] == ""


def test_an_all_formulation_tie_prints_tie():
    tie = Entry("a", M({"best_formulation": None, "best_formulation_ties": ["orig", "cat", "tmpl"]}))
    partial = Entry("b", M({"best_formulation": "orig", "best_formulation_ties": ["orig", "tmpl"]}))
    single = Entry("c", M({"best_formulation": None, "best_formulation_ties": None}))  # one formulation
    assert [cell(e, "best_formulation") for e in (tie, partial, single)] == ["tie", "orig", ""]
    rows = list(csv.DictReader(io.StringIO(to_csv([tie]))))
    assert rows[0]["best_formulation"] == "tie"


def test_tie_in_a_reference_table_reads_back(tmp_path):
    path = tmp_path / "ref.csv"
    path.write_text(",".join(COLUMNS) + "\nX,0.1,0.1,0.1,1,0.1,0.1,0,tie,0.1,0.1\n", encoding="utf-8")
    (e,) = load_reference(path)
    assert e.text("best_formulation") is None and cell(e, "best_formulation") == "tie"


def test_notes_say_why_pcr_is_empty_and_give_the_threshold_variant():
    reason = "the run lacks formulation(s) tmpl that the coref sets of 3 of 4 targets need"
    null = Entry("a", M({"map50": 0.5, "pcr50": None, "pcr_null_reason": reason}))
    at = Entry("b", M({"map50": 0.4, "pcr50": 0.6, "pcr_score_threshold": 0.3, "pcr50_at": 0.25,
                       "plc_at": 0.8}))
    md = to_markdown([null, at])
    assert "- a: PCR/PLC not computed: the run lacks formulation(s) tmpl" in md
    assert "- b: at score >= 0.3, pcr50 0.250, plc 0.800." in md


def test_random_weight_rows_are_neither_bold_nor_ranked(make_run, reference_csv):
    """The issue's case: a tiny random-weight row's pcr50 top-1 of 0.000 was bold as "best"
    (no published row has the column) and its delta_max of 0.013 ranked it 2nd."""
    tiny = load_run(make_run("tiny-owlv2", paper_name="OWLv2-B", random_weights=True,
                             peaks={"orig": 0.002, "cat": 0.015, "tmpl": 0.01}, latency=(5.0, 0.5)))
    tiny.metrics = tiny.metrics.updated(pcr50_top1=0.0)
    real = load_run(make_run("owlvit", paper_name="OWL-ViT"))
    entries = [tiny, real, *load_reference(reference_csv)]
    for column in ("map50", "latency_ms", "delta_max", "pcr50", "pcr50_top1", "m_cat"):
        assert ranks(entries, column)[0] is None, column
    md = to_markdown(entries)
    row = next(ln for ln in md.splitlines() if ln.startswith("| OWLv2-B tiny (random weights) |"))
    cells = row.split(" | ")[1:]
    assert cells and not any("**" in c or any(s in c for s in "²³⁴⁵") for c in cells), row
    assert cells[MARKDOWN_COLUMNS.index("pcr50_top1") - 1] == "0.000"  # shown, not marked
    # the next rows are ranked as if it were not there: YOLO-W-S is still the fastest
    yolo = next(ln for ln in md.splitlines() if ln.startswith("| YOLO-W-S (paper) |")).split(" | ")
    assert yolo[MARKDOWN_COLUMNS.index("latency_ms")] == "**7.3**"
    assert yolo[MARKDOWN_COLUMNS.index("delta_max")] == "**0.033**"
    assert "- OWLv2-B tiny (random weights): random weights: not marked or ranked in any column." in md


def test_every_empty_cell_has_its_note(make_run, reference_csv):
    no_latency = load_run(make_run("nolat", paper_name="G-DINO-T", latency=None))
    md = to_markdown([no_latency, *load_reference(reference_csv)])
    assert "- G-DINO-T: empty: latency_ms (`probench latency` measures it)" in md
    assert "- Published rows (paper): the paper gives no pcr50_top1, plc_top1." in md
