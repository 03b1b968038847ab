"""The typed records write the same bytes as the dict writers before them: each result
file, produced by today's writer from committed inputs, equals the file main 778a37e wrote
for the same inputs (records_golden/, made by its make_golden.py at that commit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.records_golden import (
    build_image_run,
    build_sequence_run,
    eval_files,
    latency_file,
    run_file,
    score_image,
    score_sequence,
)

HERE = Path(__file__).resolve().parent / "records_golden"

pytestmark = pytest.mark.timeout(300)


def _same(got: bytes, name: str) -> None:
    want = (HERE / name).read_bytes()
    if got != want:  # the first differing line, not a 1000-line diff
        for i, (a, b) in enumerate(zip(got.splitlines(), want.splitlines(), strict=False)):
            assert a == b, f"{name} line {i + 1}: {a!r} != {b!r}"
        assert len(got) == len(want), f"{name}: {len(got)} bytes, main wrote {len(want)}"


def test_metrics_json_of_probench_score_is_byte_identical(tmp_path: Path) -> None:
    _same(score_image(build_image_run(HERE, tmp_path)), "metrics_image.json")


def test_metrics_json_of_a_sequence_run_is_byte_identical(tmp_path: Path) -> None:
    _same(score_sequence(build_sequence_run(HERE, tmp_path)), "metrics_sequence.json")


def test_the_evaluators_realtime_run_and_metrics_files_are_byte_identical(tmp_path: Path) -> None:
    for name, data in eval_files(HERE, tmp_path).items():
        _same(data, f"eval_{name}")


def test_run_json_of_a_resumed_then_failed_run_is_byte_identical(tmp_path: Path) -> None:
    _same(run_file(HERE, tmp_path), "run.json")


def test_latency_json_is_byte_identical(tmp_path: Path) -> None:
    _same(latency_file(HERE, tmp_path), "latency.json")
