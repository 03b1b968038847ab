"""No metric key is a string literal outside the records module and the printers (issue 36):
every other module reads and writes metrics.json, realtime.json and latency.json through the
typed records' attributes (probench.cache.records), so a renamed or misspelt key is a type
error, not a silently missing number."""

from __future__ import annotations

import ast
from pathlib import Path

from probench.cache import records

SRC = Path(__file__).resolve().parents[2] / "src" / "probench"

# where a metric key may be spelt: the records themselves, and the printers, whose column
# names and headers are the keys (scoring/printed.py; the report's tables)
ALLOWED = {"cache/records.py", "scoring/printed.py", "report/table.py", "report/document.py",
           "report/temporal.py"}

# the result files' keys whose word names something else too, so a literal of it is no
# metric read: each with where it means that other thing
SHARED_WORDS = {
    # the evaluator's parameters and replay settings, the node's and the CLI's
    "mode", "rate_hz", "budget_ms", "warmup_frames", "formulations",
    # run.json / latency.json identity words, dataset and bag fields, the model record's
    "model", "device", "precision", "source", "dataset_hash", "n_images", "n_queries", "n_frames", "n_videos",
    "video_id", "frame_index", "query_id", "random_weights", "preprocess",
    # the per-frame trace's record keys (cache/trace.py), read to compute the figures
    "status", "kind", "error", "latency_ms", "warmup", "ack_ms", "misattributed",
    # the grounding node's own counters (realtime/grounding_stats.py, /diagnostics)
    "frames_received", "frames", "received", "errors",
    # stats.summarize's keys: one summary for every timing, not a metric of its own
    "mean", "std", "p50", "p95", "p99", "max",
    # hotcoco's tide_errors result; a text cache's counters (models/base.py), motmetrics' misses
    "delta_ap", "counts", "misses",
    # generic words of other files (report figure names, bootstrap and compare options, CLI)
    "method", "seed", "level", "resamples", "iou", "identity", "f1", "recall", "protocol", "runs", "decode",
    "prompt_change", "timelines", "realtime", "temporal", "curves", "intervals", "n_targets",
    # ground's own summary (bag metadata) names its tracker figure the same
    "id_switches_per_100_frames",
}


def _metric_keys() -> set[str]:
    parts = [records.MetricsRecord, records.FormulationScores, records.GroupScores, records.Consistency,
             records.Intervals, records.TideScores, records.TideErrors, records.Curve, records.Curves,
             records.Temporal, records.TemporalScores, records.TemporalGroup, records.PromptChange,
             records.RealtimeRecord, records.RealtimeFigures, records.Warmup, records.LatencyRecord,
             records.LatencyProtocol, records.TextSplit, records.Stats]  # fmt: skip
    identity = set(records.RunRecord.model_fields) & set(records.LatencyRecord.model_fields)  # run.json's
    return {k for cls in parts for k in cls.model_fields} - identity - SHARED_WORDS


def _literals(path: Path, keys: set[str], root: Path = SRC) -> list[str]:
    nodes = [node for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in keys]
    nodes.sort(key=lambda n: (n.lineno, n.col_offset))
    return [f"{path.relative_to(root)}:{n.lineno}: {n.value!r}" for n in nodes]


def test_no_metric_key_is_a_string_literal_outside_the_records_and_printers() -> None:
    keys = _metric_keys()
    found = [hit for p in sorted(SRC.rglob("*.py")) if str(p.relative_to(SRC)) not in ALLOWED
             for hit in _literals(p, keys)]  # fmt: skip
    assert found == [], "read these through probench.cache.records:\n" + "\n".join(found)


def test_the_scan_finds_a_metric_key_where_there_is_one(tmp_path: Path) -> None:
    """The check can fail: a module reading metrics.json by string is caught."""
    bad = tmp_path / "reader.py"
    bad.write_text('def f(m):\n    return m["by_formulation"]["orig"]["map50"], m.get("delivered_rate_hz")\n')
    keys = _metric_keys()
    assert {"by_formulation", "map50", "delivered_rate_hz", "frames_failed", "pcr50"} <= keys
    hits = [h.split(": ")[-1] for h in _literals(bad, keys, root=tmp_path)]
    assert hits == ["'by_formulation'", "'map50'", "'delivered_rate_hz'"]


def test_the_file_names_are_the_records_constants() -> None:
    names = {"run.json", "metrics.json", "realtime.json", "latency.json"}
    assert set(records.RESULT_FILES) == names
    found = [f"{p.relative_to(SRC)}:{node.lineno}" for p in sorted(SRC.rglob("*.py"))
             if str(p.relative_to(SRC)) != "cache/records.py"
             for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and node.value in names]  # fmt: skip
    names_them = "use probench.cache.records' RUN_FILE, METRICS_FILE, REALTIME_FILE, LATENCY_FILE"
    assert found == [], f"{names_them}:\n" + "\n".join(found)
