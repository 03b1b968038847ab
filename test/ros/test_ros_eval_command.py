"""``probench eval`` as a typed command (issue 36): the flags become EvalOptions without
touching the Namespace, run_eval returns an EvalResult, the node processes are supervised by
one class that waits on their exits, and a replay whose model raised on frames is not
silently complete (exit 1, the first error named)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from helpers.exited_node import ExitedNode
from probench.cache.records import METRICS_FILE, REALTIME_FILE, MetricsRecord, RealtimeRecord, Stats
from probench.errors import CheckFailed, UsageError
from probench.ros import node_processes
from probench.ros.eval_command import EvalOptions, run_eval
from probench.ros.node_processes import NodeSupervisor

PY = sys.executable
ERROR = "ValueError: Expected more than 1 value per channel when training"


def _sleeper() -> list[str]:
    return [PY, "-c", "import time; time.sleep(60)"]


def _exits(code: int) -> list[str]:
    return [PY, "-c", f"raise SystemExit({code})"]


def test_the_evaluators_exit_ends_the_wait_and_the_grounding_node_is_stopped() -> None:
    with NodeSupervisor([_sleeper(), _exits(0)], {}) as nodes:
        exits = nodes.wait(timeout_s=60.0)
        grounding = nodes._procs[0]
    assert (exits.evaluator, exits.grounding_first) == (0, False)
    exits.check()  # nothing to name
    assert grounding.returncode is not None  # stopped on leaving (SIGINT first)


def test_a_grounding_node_that_dies_first_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_processes, "SIGTERM_GRACE_S", 0.5)  # the evaluator's time to record it
    with NodeSupervisor([_exits(3), _sleeper()], {}) as nodes:
        exits = nodes.wait(timeout_s=60.0)
    assert exits.grounding_first and exits.grounding == 3 and exits.evaluator is None
    with pytest.raises(CheckFailed, match=r"grounding_node failed \(exit code 3\) before the evaluation"):
        exits.check()


def test_an_evaluator_that_fails_is_named_and_the_timeout_is_one_line() -> None:
    with NodeSupervisor([_sleeper(), _exits(2)], {}) as nodes:
        exits = nodes.wait(timeout_s=60.0)
    with pytest.raises(CheckFailed, match="evaluator_node exited with code 2"):
        exits.check()
    with NodeSupervisor([_sleeper(), _sleeper()], {}) as nodes, \
            pytest.raises(CheckFailed, match=r"did not finish within --timeout 0\.2 s"):
        nodes.wait(timeout_s=0.2)


def test_the_flags_become_options_and_the_namespace_is_left_alone(tmp_path: Path) -> None:
    from probench.ros.cli_eval import add_arguments, options_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--model", "test-instant", "--bag", "b", "--out", "o", "--formulations",
                              "orig,cat", "--prompt-policy", "categorical",
                              "--profile", str(tmp_path / "p.json")])
    before = dict(vars(args))
    options = options_from_args(args)
    assert vars(args) == before  # parsed into options, never mutated
    assert options.formulations == ("orig", "cat") and options.profile == str((tmp_path / "p.json").resolve())
    assert options.bag == Path("b") and options.rate is None  # a sequence bag's rate is found by run_eval
    assert options.grounding_parameters == {}  # the node's own `threads` default
    base = ["--model", "m", "--bag", "b", "--out", "o", "--threads"]
    threaded = options_from_args(parser.parse_args([*base, "3"]))
    assert threaded.grounding_parameters == {"threads": 3}  # handed to the grounding node
    with pytest.raises(SystemExit):  # its IntRange: argparse's usage line (exit 2)
        parser.parse_args([*base, "-1"])
    compiled = options_from_args(parser.parse_args([*base, "0", "--runtime", "compiled",
                                                    "--warmup-size", "1280x720"]))
    assert compiled.grounding_parameters == {"runtime": "compiled", "warmup_size": "1280x720"}
    with pytest.raises(UsageError, match="--warmup-size must be WIDTHxHEIGHT"):
        options_from_args(parser.parse_args([*base, "0", "--warmup-size", "1280"]))
    with pytest.raises(UsageError, match="--max-missed is for --find-max-rate"):
        EvalOptions(model="m", bag=Path("b"), out=Path("o"), max_missed=0.1).check()
    with pytest.raises(UsageError, match="--profile needs --prompt-policy"):
        EvalOptions(model="m", bag=Path("b"), out=Path("o"), profile="paper").check()


class _FakeNode(ExitedNode):
    """The evaluator writes a run whose model raised on two frames (realtime.json and
    metrics.json count them, run.json says failed) and its result record, as the node does."""

    out: Path

    def evaluate(self, result_file: Path) -> None:
        from probench.cache.run import RunDir

        run = RunDir(self.out).create()
        realtime = RealtimeRecord(frames_sent=10, frames_received=7, frames_missed=1, frames_failed=2,
                                  first_error=ERROR, missed_share=0.1, latency_ms=Stats(p50=3.0, p95=4.0),
                                  mode="camera-rate", rate_hz=30.0, budget_ms=33.3)  # fmt: skip
        run.write_record(REALTIME_FILE, realtime)
        run.write_record(METRICS_FILE, MetricsRecord(map50=0.25, by_formulation={}, realtime=realtime))
        error = f"2 frame(s) failed in the grounding node's model (counted apart from the missed ones), " \
                f"the first with {ERROR}"
        run.write_json("run.json", {"model": {"name": "test-instant"}, "status": "failed", "error": error,
                                    "ros": {"mode": "camera-rate", "rate_hz": 30.0}})
        result_file.write_text(json.dumps({"status": "failed", "error": error,
                                           "metrics": str(run.path / METRICS_FILE)}))


def test_a_replay_whose_model_raised_is_not_complete(
    repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36, 6c: the summary is printed, then exit 1 naming the first error (as infer does)."""
    from probench.cli import main

    out = tmp_path / "run"
    monkeypatch.setattr(_FakeNode, "out", out, raising=False)
    monkeypatch.setattr(node_processes.subprocess, "Popen", _FakeNode)  # no ROS graph: the nodes are fakes
    bag = repo_root / "bags" / "probench-sample"
    result = run_eval(EvalOptions(model="test-instant", bag=bag, out=out, domain_id=7), log=lambda _: None)
    assert result.status == "failed" and result.failure is not None and ERROR in result.failure
    assert result.metrics is not None and result.metrics.realtime is not None
    assert result.metrics.realtime.frames_failed == 2
    out = tmp_path / "again"  # (the fake's run.json has no identity: a new folder for the command line)
    monkeypatch.setattr(_FakeNode, "out", out, raising=False)
    rc = main(["eval", "--model", "test-instant", "--bag", str(bag), "--out", str(out), "--domain-id", "7"])
    captured = capsys.readouterr()
    assert rc == 1
    assert "missed 1 (10.0%); failed 2 (the model raised)" in captured.out
    err = captured.err.strip().splitlines()
    assert err[-1].startswith("probench eval: error: 2 frame(s) failed") and ERROR in err[-1]
    assert "run.json: failed" in err[-1]
