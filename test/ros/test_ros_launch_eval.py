"""launch/eval.launch.py yields exactly the nodes and parameters of probench.ros.graph.

`launch`/`launch_ros` are not installable here: fake modules that record what the launch
file builds are injected into sys.modules.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.launch_fakes import run_launch
from probench.errors import UsageError
from probench.ros.graph import EVAL_ARGUMENTS, command_line, eval_graph, eval_graph_from_arguments

LAUNCH_FILE = Path(__file__).resolve().parents[2] / "launch" / "eval.launch.py"


def _launch(monkeypatch: pytest.MonkeyPatch, **given: str) -> tuple[list, dict[str, type]]:
    declared, actions, classes = run_launch(monkeypatch, LAUNCH_FILE, **given)
    assert [d.args[0] for d in declared] == list(EVAL_ARGUMENTS)
    return actions, classes


def test_launch_file_yields_the_graph(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    actions, classes = _launch(monkeypatch, bag=str(tmp_path / "bag"), out=str(tmp_path / "run"),
                               model="test-instant", rate="15", formulations="cat,orig",
                               mode="as-fast-as-answered")
    nodes = [a for a in actions if isinstance(a, classes["Node"])]
    expected = eval_graph(bag=tmp_path / "bag", out=tmp_path / "run", model="test-instant", rate=15.0,
                          formulations=["orig", "cat"], mode="as-fast-as-answered")
    assert [n.performed for n in nodes] == expected
    g, e = expected
    assert g["parameters"][1] == {"model": "test-instant", "image_reliability": "reliable"}
    assert e["parameters"][1]["rate_hz"] == 15.0 and e["parameters"][1]["formulations"] == ["orig", "cat"]
    assert e["parameters"][0].endswith("config/eval.yaml")
    # the two nodes meet on the same camera topic
    assert dict(g["remappings"])["image"] == dict(e["remappings"])["image"]
    (handler,) = [a for a in actions if isinstance(a, classes["RegisterEventHandler"])]
    (on_exit,) = handler.args
    assert on_exit.kwargs["target_action"] is nodes[1]
    assert isinstance(on_exit.kwargs["on_exit"][0], classes["Shutdown"])


def test_empty_arguments_leave_the_params_file_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    actions, classes = _launch(monkeypatch, bag="b", out="o")
    g, e = (a.performed for a in actions if isinstance(a, classes["Node"]))
    assert len(g["parameters"]) == 1  # only the params file: nothing overridden
    assert set(e["parameters"][1]) == {"bag", "out", "grounding_node"}


def test_launch_arguments_are_parsed_not_evaluated(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="rate must be a number"):
        _launch(monkeypatch, bag="b", out="o", rate="__import__('os').getcwd()")
    with pytest.raises(UsageError, match="formulations must be"):
        eval_graph_from_arguments({"bag": "b", "out": "o", "formulations": "orig,bogus"})
    with pytest.raises(UsageError, match="mode must be"):
        eval_graph_from_arguments({"bag": "b", "out": "o", "mode": "fast"})
    with pytest.raises(UsageError, match="bag is required"):
        eval_graph_from_arguments({"out": "o"})


def test_command_line_matches_the_launch_description(tmp_path: Path) -> None:
    g, e = eval_graph(bag="b", out="o", model="123", rate=30, answer_timeout=2)
    cmd = command_line(g)
    assert cmd[0].endswith("grounding_node") and cmd[1] == "--ros-args"
    # a model name that looks like a number is still passed as a string
    assert cmd[cmd.index("-p"):cmd.index("-p") + 2] == ["-p", 'model:="123"']
    cmd = command_line(e)
    assert "rate_hz:=30.0" in cmd and "answer_timeout:=2.0" in cmd
    assert cmd[cmd.index("--params-file") + 1] == e["parameters"][0]
    assert "image:=/probench/camera/image_raw" in cmd and "__node:=evaluator_node" in cmd


def test_the_launch_file_is_declarative(monkeypatch: pytest.MonkeyPatch) -> None:
    """Arguments, Nodes with substitutions, the shutdown handler: nothing run at launch time
    but the substitutions (what `ros2 launch --show-args` and `--print` can read)."""
    from helpers.launch_fakes import Substitution

    actions, classes = _launch(monkeypatch, bag="b", out="o")
    kinds = [type(a).__name__ for a in actions]
    assert set(kinds) <= {"SetEnvironmentVariable", "Node", "RegisterEventHandler"}
    assert kinds.count("Node") == 2
    for node in (a for a in actions if isinstance(a, classes["Node"])):
        assert all(isinstance(p, Substitution) for p in node.kwargs["parameters"])
        assert all(isinstance(t, Substitution) for _, t in node.kwargs["remappings"])
