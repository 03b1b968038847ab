"""Every numeric parameter and flag has a range, checked once (the parameter tables of
realtime.node_spec, limits.check_flag for flags): rates in [MIN_RATE_HZ, MAX_RATE_HZ],
periods >= MIN_PERIOD_S, timeouts finite and bounded, scripted delays bounded; the peak-rate
search stays in its bounds and in memory."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from helpers.hostile import one_line
from probench.cli import main
from probench.errors import UsageError
from probench.limits import MAX_RATE_HZ, MIN_PERIOD_S, MIN_RATE_HZ, check_flag
from probench.realtime.eval_peak import Trial, search_max_rate, trial_frames
from probench.realtime.node_spec import EVALUATOR_PARAMS, GROUNDING_PARAMS, MAX_TRIAL_S

REPO = Path(__file__).resolve().parents[2]
BAG = str(REPO / "bags" / "probench-sample")
DATA = str(REPO / "datasets" / "probench-sample")


@pytest.mark.parametrize(("table", "name", "value"), [
    (GROUNDING_PARAMS, "diagnostics_period", 1e-9),  # 100% CPU and thousands of messages a second
    (GROUNDING_PARAMS, "diagnostics_period", 1e9),
    (GROUNDING_PARAMS, "camera_timeout", 1e12),
    (EVALUATOR_PARAMS, "rate_hz", 1e9),  # the peak-rate search's 24 GB
    (EVALUATOR_PARAMS, "rate_hz", 1e-9),  # struct.error in the stamps
    (EVALUATOR_PARAMS, "answer_timeout", 1e300),
    (EVALUATOR_PARAMS, "startup_timeout", 1e300),
    (EVALUATOR_PARAMS, "trial_s", 1e6),
    (EVALUATOR_PARAMS, "budget_ms", 1e300),
    (EVALUATOR_PARAMS, "rate_hz", math.nan),
])
def test_the_tables_refuse_values_out_of_range(table, name: str, value: float) -> None:
    with pytest.raises(ValueError, match=name):
        table.check(name, value)


def test_the_tables_take_their_documented_bounds() -> None:
    assert GROUNDING_PARAMS.check("diagnostics_period", MIN_PERIOD_S) == MIN_PERIOD_S
    assert EVALUATOR_PARAMS.check("rate_hz", MAX_RATE_HZ) == MAX_RATE_HZ
    assert EVALUATOR_PARAMS.check("rate_hz", MIN_RATE_HZ) == MIN_RATE_HZ
    assert "<= 1000" in EVALUATOR_PARAMS["rate_hz"].range_text()


def test_check_flag_is_one_line_for_every_bad_number() -> None:
    for value in (math.nan, math.inf, -1.0, 2000.0):
        with pytest.raises(UsageError) as exc:
            check_flag("--rate", value, low=MIN_RATE_HZ, high=MAX_RATE_HZ)
        assert "--rate must be" in str(exc.value) and "\n" not in str(exc.value)
    check_flag("--rate", None, low=1.0)  # not given: nothing to check
    check_flag("--rate", 30.0, low=MIN_RATE_HZ, high=MAX_RATE_HZ)


@pytest.mark.parametrize(("rate", "why"), [
    ("1e9", "--rate must be <= 1000"), ("1e-9", "--rate must be >= 0.1"),
    ("nan", "--rate must be a finite number"),
])
def test_eval_rate_out_of_range_is_refused_before_any_node_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rate: str, why: str
) -> None:
    rc = main(["eval", "--model", "test-slow-50ms", "--bag", BAG, "--out", str(tmp_path / "r"),
               "--find-max-rate", "--rate", rate])
    assert rc == 2 and why in one_line(capsys.readouterr().err)
    assert not (tmp_path / "r").exists()


def test_node_status_timeout_nan_is_refused_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["node", "status", "--timeout", "nan"]) == 2
    assert "--timeout must be a finite number" in one_line(capsys.readouterr().err)
    assert main(["node", "prompt", "a cup", "--watch", "inf"]) == 2
    assert "--watch must be a finite number" in one_line(capsys.readouterr().err)


def test_bag_rate_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A new case: `probench bag --rate` (the bag's timestamps) has the same range."""
    assert main(["bag", "--dataset", DATA, "--out", str(tmp_path / "b"), "--rate", "1e9", "--quiet"]) == 2
    assert "--rate must be <= 1000" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "b").exists()


def test_scripted_delays_are_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--models", "test-slow-99999999999ms", "--dataset", DATA, "--out",
                 str(tmp_path / "s"), "--no-latency", "--reference", "none", "--no-progress"]) == 2
    assert "a scripted delay is at most 60000 ms" in one_line(capsys.readouterr().err)
    assert main(["infer", "--model", "test-slow-60001ms", "--dataset", DATA, "--out", str(tmp_path / "r"),
                 "--no-progress"]) == 2
    assert "at most 60000 ms" in one_line(capsys.readouterr().err)


def test_the_peak_rate_search_stays_in_its_bounds() -> None:
    asked: list[float] = []

    def trial(rate: float) -> Trial:
        asked.append(rate)
        return Trial(rate, 1, 0, 0.0, None, None, None, rate <= 100.0)

    best, _ = search_max_rate(trial, start_hz=1e9)
    assert max(asked) <= MAX_RATE_HZ and best is not None and 90.0 <= best <= 100.0
    frames = list(range(3))
    assert len(trial_frames(frames, 1e9, 1e9)) == int(MAX_RATE_HZ * MAX_TRIAL_S)  # bounded in memory


def test_device_and_precision_are_checked_against_this_machine(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`cuda`, `cuda:-1` and `fp8` were recorded in run.json for test-instant on a CPU-only
    machine: now refused, one line, before anything is written."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    cases = [("--device", f"cuda:{count}", "this machine has"), ("--device", "cuda:-1", "expected cpu, cuda"),
             ("--device", "gpu", "expected cpu, cuda"), ("--precision", "fp8", "expected one of fp32, fp16")]
    if count == 0:
        cases.append(("--device", "cuda", "this machine has no CUDA device"))
    for flag, value, why in cases:
        out = tmp_path / f"r{len(value)}"
        assert main(["infer", "--model", "test-instant", "--dataset", DATA, "--out", str(out),
                     "--no-progress", flag, value]) == 2
        assert why in one_line(capsys.readouterr().err)
        assert not (out / "run.json").exists()


def test_the_synthetic_camera_rate_has_the_same_range(capsys: pytest.CaptureFixture[str]) -> None:
    from probench.ros.synthetic_camera import main as camera

    for rate in ("0", "1e9", "nan"):
        with pytest.raises(SystemExit) as exc:
            camera(["--rate", rate])
        assert exc.value.code == 2
        assert "--rate must be in 0.1..1000 Hz" in capsys.readouterr().err
