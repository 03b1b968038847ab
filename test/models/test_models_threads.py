"""The `threads` setting (probench.models.threads): its default never takes more than half
the CPUs this process may use, its range is refused in one line, and the value reaches
torch's and OpenCV's thread pools (the real setters, in a fresh process: once per process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from probench.errors import UsageError
from probench.limits import MAX_THREADS
from probench.models import threads
from probench.realtime.node_spec import GROUNDING_PARAMS, GroundingConfig


@pytest.mark.parametrize(("cpus", "want"), [(1, 1), (2, 1), (3, 1), (4, 2), (16, 8), (64, 32)])
def test_default_is_half_the_usable_cpus_at_least_one(monkeypatch: pytest.MonkeyPatch, cpus: int,
                                                      want: int) -> None:
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(cpus)))
    monkeypatch.setattr(threads, "CGROUP_V2", Path("/nonexistent/cpu.max"))
    monkeypatch.setattr(threads, "CGROUP_V1", (Path("/nonexistent/q"), Path("/nonexistent/p")))
    assert threads.usable_cpus() == cpus
    assert threads.default_threads() == want
    assert threads.check_threads(0) == want  # 0: the default
    assert 1 <= want <= max(1, cpus // 2)


@pytest.mark.parametrize(("cpu_max", "cpus"), [("150000 100000", 2), ("50000 100000", 1), ("max 100000", 8),
                                                ("400000 100000", 4)])
def test_cgroup_quota_caps_the_usable_cpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cpu_max: str,
                                           cpus: int) -> None:
    """A container limited to 1.5 CPUs on an 8-CPU host uses 2, and the default is 1."""
    (tmp_path / "cpu.max").write_text(cpu_max + "\n")
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(threads, "CGROUP_V2", tmp_path / "cpu.max")
    assert threads.usable_cpus() == cpus
    assert threads.default_threads() == max(1, cpus // 2)


def test_cgroup_v1_quota(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "q").write_text("300000\n")
    (tmp_path / "p").write_text("100000\n")
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr(threads, "CGROUP_V2", tmp_path / "absent")
    monkeypatch.setattr(threads, "CGROUP_V1", (tmp_path / "q", tmp_path / "p"))
    assert threads.usable_cpus() == 3
    (tmp_path / "q").write_text("-1\n")  # unlimited
    assert threads.usable_cpus() == 16


@pytest.mark.parametrize(("value", "message"), [
    (-1, "--threads must be >= 0, got -1"),
    (MAX_THREADS + 1, f"--threads must be <= {MAX_THREADS}, got {MAX_THREADS + 1}"),
])
def test_flag_out_of_range_is_one_line(value: int, message: str) -> None:
    with pytest.raises(UsageError) as err:
        threads.check_threads(value)
    assert str(err.value) == message
    assert threads.check_threads(3) == 3


@pytest.mark.parametrize(("value", "message"), [
    (-1, "threads must be >= 0, got -1"),
    (MAX_THREADS + 1, f"threads must be <= {MAX_THREADS}, got {MAX_THREADS + 1}"),
    (2.0, "threads must be a integer, got 2.0"),
])
def test_node_parameter_range(value: object, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        GROUNDING_PARAMS.check("threads", value)
    assert GROUNDING_PARAMS.check("threads", 0) == 0
    assert GROUNDING_PARAMS.check("threads", MAX_THREADS) == MAX_THREADS
    default = GroundingConfig.__dataclass_fields__["threads"].default
    assert default == GROUNDING_PARAMS.defaults()["threads"] == 0


@pytest.mark.parametrize("cli", ["ground", "infer", "latency", "eval"])
def test_every_model_command_refuses_a_bad_threads_flag(cli: str, tmp_path: Path, capsys) -> None:
    """Exit 2 and one line, before any model loads or anything is written."""
    from probench.cli import main

    argv = {"ground": ["ground", "--bag", "bags/probench-sample", "--out", str(tmp_path / "o"),
                       "--model", "tiny-owlv2", "--prompt", "a door"],
            "infer": ["infer", "--model", "tiny-owlv2", "--dataset", str(tmp_path),
                      "--out", str(tmp_path / "o")],
            "latency": ["latency", "--model", "tiny-owlv2", "--dataset", str(tmp_path),
                        "--out", str(tmp_path / "o")],
            "eval": ["eval", "--model", "tiny-owlv2", "--bag", "bags/probench-sample", "--out",
                     str(tmp_path / "o")]}[cli]
    assert main([*argv, "--threads", "-2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--threads must be >= 0, got -2") and "Traceback" not in "\n".join(err)
    assert not (tmp_path / "o").exists()


def _run(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split("\n")


def test_apply_reaches_torch_and_opencv_once_per_process() -> None:
    """The real setters, in fresh processes (torch's inter-op pool can be sized only before
    its first use). torch and OpenCV imported (a model built): intra-op, inter-op and
    OpenCV take the value; a second call changes the intra-op pool and OpenCV's, the
    inter-op pool stays as first set."""
    out = _run(
        "import torch, cv2\n"
        "from probench.models.threads import apply_threads, applied_threads\n"
        "assert applied_threads() is None\n"
        "n = apply_threads(3)\n"
        "print(n, torch.get_num_threads(), torch.get_num_interop_threads(), cv2.getNumThreads())\n"
        "torch.ones(4).sum()\n"
        "n = apply_threads(2)\n"
        "print(n, torch.get_num_threads(), torch.get_num_interop_threads(), cv2.getNumThreads(), "
        "applied_threads())\n"
    )
    assert out[:2] == ["3 3 3 3", "2 2 3 2 2"]


def test_apply_imports_nothing_and_reaches_torch_imported_later() -> None:
    """A model without torch (a scripted one) does not pay torch's import for the setting;
    torch and OpenCV imported afterwards in the same process start with the value."""
    out = _run(
        "import sys\n"
        "from probench.models.threads import apply_threads\n"
        "apply_threads(1)\n"
        "print('torch' in sys.modules, 'cv2' in sys.modules)\n"
        "import torch, cv2\n"
        "print(torch.get_num_threads(), cv2.getNumThreads())\n"
    )
    assert out[:2] == ["False False", "1 1"]  # (torch caps a larger count read this way at the CPUs)
