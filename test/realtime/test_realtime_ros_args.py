"""The nodes' ROS arguments are checked before rcl reads them (realtime/ros_args.py): a params
file that is no regular file, holds YAML anchors, nests a value 5000 lists deep or a list in a
list, and a `-p` value with an ESC character, are each one line (exit 2) naming the problem,
never rcl's traceback or a node started silently without its prompts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from probench.errors import UsageError
from probench.realtime.ros_args import MAX_PARAMS_DEPTH, check_ros_arguments, load_params_file


def _file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "params.yaml"
    path.write_text("grounding_node:\n  ros__parameters:\n" + body, encoding="utf-8")
    return str(path)


def test_a_good_params_file_and_overrides_pass(tmp_path: Path) -> None:
    good = _file(tmp_path, "    model: test-instant\n    prompts: ['a cup', 'a door']\n"
                           "    ns:\n      value: 3\n")
    check_ros_arguments(["--ros-args", "--params-file", good, "-p", "prompts:=['a mug']",
                         "-p", "score_threshold:=0.5", "-r", "image:=/camera"])
    assert load_params_file(good)["grounding_node"]["ros__parameters"]["prompts"] == ["a cup", "a door"]
    # outside --ros-args nothing is rcl's (a program's own argument that looks alike)
    check_ros_arguments(["--params-file", "/dev/zero", "--ros-args", "--", "-p", "x:=\x1b"])


@pytest.mark.parametrize(("body", "why"), [
    ("    base: &b 0.5\n    score_threshold: *b\n",
     "YAML anchors and aliases (&, *) are not supported by ROS 2 (line 3)"),
    ("    prompts: " + "[" * 5000 + "a" + "]" * 5000 + "\n", f"nested deeper than {MAX_PARAMS_DEPTH} levels"),
    ("    prompts: [[a], b]\n", "grounding_node: parameter prompts: a list inside a list"),
    ("    ns:\n      prompts: [{a: 1}]\n", "parameter ns.prompts: a list inside a list"),
    ("    model: [unclosed\n", "not valid YAML"),
])  # fmt: skip
def test_params_files_rcl_would_refuse_or_drop_are_named(tmp_path: Path, body: str, why: str) -> None:
    path = _file(tmp_path, body)
    with pytest.raises(UsageError) as exc:
        check_ros_arguments(["--ros-args", "--params-file", path])
    assert why in str(exc.value) and path in str(exc.value) and "\n" not in str(exc.value)


def test_files_that_are_no_parameter_files(tmp_path: Path) -> None:
    for path, why in (("/dev/zero", "not a regular file"), (str(tmp_path), "is a folder"),
                      (str(tmp_path / "nope.yaml"), "no such file")):
        with pytest.raises(UsageError, match=why):
            check_ros_arguments(["--ros-args", "--params-file", path])
    (tmp_path / "latin.yaml").write_bytes(b"a: \xe9\n")
    with pytest.raises(UsageError, match="not UTF-8"):
        load_params_file(tmp_path / "latin.yaml")


def test_an_override_with_a_control_character_is_named_escaped() -> None:
    with pytest.raises(UsageError) as exc:
        check_ros_arguments(["--ros-args", "-p", "model:=te\x1bst"])
    assert str(exc.value).startswith("-p model:=te\\x1bst: not a YAML value") and "\x1b" not in str(exc.value)
    with pytest.raises(UsageError, match="a list inside a list"):
        check_ros_arguments(["--ros-args", "--param", "prompts:=[[a]]"])


@pytest.mark.ros
@pytest.mark.parametrize("args", [["--params-file", "/dev/zero"], ["-p", "model:=te\x1bst"],
                                  ["-p", "model"]])
def test_the_node_says_one_line_and_exits_2(tmp_path: Path, ros_env: dict[str, str], args: list[str]) -> None:
    """Process level: rcl's own refusal (`-p model`, no `:=`) is one line too."""
    done = subprocess.run([sys.executable, "-m", "probench.ros.grounding_node", "--ros-args", *args,
                           "-p", "autostart:=false"], env={**os.environ, **ros_env}, capture_output=True,
                          text=True, timeout=60)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("[ERROR] [")]  # rcl's own log
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("grounding_node: "), done.stderr
    assert "Traceback" not in done.stderr
