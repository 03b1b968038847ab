"""The result files as typed records (probench.cache.records): read through the bounded
reader and validated, a wrong number named with its file and key in one line; what a writer
leaves out stays out of the file, and keys the records do not know are kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probench.cache.errors import CacheError, RecordError
from probench.cache.records import (
    LATENCY_FILE,
    METRICS_FILE,
    REALTIME_FILE,
    LatencyRecord,
    MetricsRecord,
    RealtimeRecord,
    Stats,
)
from probench.cache.run import RunDir
from probench.cli import main


def _run_with(tmp_path: Path, name: str, text: str) -> RunDir:
    run = RunDir(tmp_path / "run").create()
    (run.path / name).write_text(text)
    return run


@pytest.mark.parametrize(
    ("name", "cls", "text", "message"),
    [
        (METRICS_FILE, MetricsRecord, '{"map50": NaN}', "map50 is nan, not a finite number"),
        (METRICS_FILE, MetricsRecord, '{"by_formulation": {"orig": {"map50": -5}}}',
         r"by_formulation\.orig\.map50 is -5, outside \[0, 1\]"),
        (METRICS_FILE, MetricsRecord, '{"delta_orig_cat": 1.5}',
         r"delta_orig_cat is 1\.5, outside \[-1, 1\]"),
        (METRICS_FILE, MetricsRecord, '{"pcr50": "0.5"}', r"pcr50 is '0\.5', not a number"),
        (METRICS_FILE, MetricsRecord, '{"n_images": true}',
         "n_images is True, input should be a valid integer"),
        (METRICS_FILE, MetricsRecord, '{"intervals": {"pcr50": [0.1]}}', r"intervals\.pcr50 is \[0\.1\]"),
        (METRICS_FILE, MetricsRecord, '{"realtime": {"latency_ms": {"p95": Infinity}}}',
         r"realtime\.latency_ms\.p95 is inf, not a finite number"),
        (REALTIME_FILE, RealtimeRecord, '{"missed_share": 2.0}', r"missed_share is 2\.0, outside \[0, 1\]"),
        (REALTIME_FILE, RealtimeRecord, '{"frames_failed": -1}',
         "frames_failed is -1, input should be greater"),
        (LATENCY_FILE, LatencyRecord, '{"summary_ms": {"mean": -3.0}}',
         r"summary_ms\.mean is -3\.0, outside"),
        (LATENCY_FILE, LatencyRecord, '{"samples_ms": [1.0, NaN]}', r"samples_ms\.1 is nan, not a finite"),
        (METRICS_FILE, MetricsRecord, "[1, 2]", "expected a JSON object, not list"),
    ],
)  # fmt: skip
def test_a_wrong_number_is_refused_on_read_naming_the_file_and_the_key(
    tmp_path: Path, name: str, cls: type, text: str, message: str
) -> None:
    run = _run_with(tmp_path, name, text)
    with pytest.raises(RecordError, match=message) as exc:
        run.read_record(name, cls)
    assert str(exc.value).startswith(str(run.path / name)) and "\n" not in str(exc.value)


def test_an_unreadable_file_is_the_bounded_readers_error(tmp_path: Path) -> None:
    run = _run_with(tmp_path, "elsewhere.json", "{}")
    (run.path / METRICS_FILE).symlink_to(run.path / "elsewhere.json")  # a link in a run folder: refused
    with pytest.raises(CacheError, match="symbolic link"):
        run.read_record(METRICS_FILE, MetricsRecord)
    assert RunDir(tmp_path / "none").read_record(METRICS_FILE, MetricsRecord) is None


def test_what_the_writer_leaves_out_stays_out_and_unknown_keys_stay_in() -> None:
    record = MetricsRecord(map50=None, n_images=3)
    assert record.to_json() == {"map50": None, "n_images": 3}  # m_policy, intervals, ... not set
    read = MetricsRecord.model_validate({"map50": 1, "from_a_newer_probench": [1, 2]})
    assert read.to_json() == {"map50": 1, "from_a_newer_probench": [1, 2]}  # the int stays an int
    assert read.updated(map75=0.5).to_json() == {"map50": 1, "from_a_newer_probench": [1, 2], "map75": 0.5}
    assert read.without("map50").to_json() == {"from_a_newer_probench": [1, 2]}
    with pytest.raises(ValueError, match="outside"):  # a writer is held to the same ranges
        Stats(mean=-1.0)


def test_a_share_a_float_sum_puts_an_ulp_above_one_is_still_a_share() -> None:
    assert MetricsRecord(plc=1.0000000000000002).plc == pytest.approx(1.0)
    with pytest.raises(ValueError, match="outside"):
        MetricsRecord(plc=1.001)


def test_the_report_refuses_a_nan_or_an_ap_of_minus_5_instead_of_printing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38: NaN or -5 inside metrics.json was shown as a number in Table II."""
    run = RunDir(tmp_path / "run").create()
    run.write_json("run.json", {"model": {"name": "test-instant"}, "dataset": {"hash": "sha256:0"}})
    for bad, said in (("-5", "map50 is -5, outside [0, 1]"), ("NaN", "map50 is nan, not a finite number")):
        (run.path / METRICS_FILE).write_text('{"map50": ' + bad + ', "by_formulation": {}}')
        out = tmp_path / f"report{bad}"
        assert main(["report", str(run.path), "--out", str(out), "--bootstrap", "0"]) == 1
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and f"{run.path / METRICS_FILE}: {said}" in err, err
        assert not (out / "table2.md").exists()


def test_the_records_json_is_plain_json(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run").create()
    run.write_record(METRICS_FILE, MetricsRecord(map50=0.25, by_formulation={}, realtime=RealtimeRecord(
        frames_sent=2, latency_ms=Stats(mean=1.5))))
    assert json.loads((run.path / METRICS_FILE).read_text()) == {
        "by_formulation": {}, "map50": 0.25, "realtime": {"frames_sent": 2, "latency_ms": {"mean": 1.5}}}
    assert run.read_record(METRICS_FILE, MetricsRecord) == MetricsRecord.model_validate(
        json.loads((run.path / METRICS_FILE).read_text()))
