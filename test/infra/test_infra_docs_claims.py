"""What the docs and the help texts tell a new user on the venv, held to the truth:

- the README says what ``ros2 launch`` needs (a ROS 2 install and a colcon build), and no
  code block runs it right after activating the venv;
- one story for ``--weights``: ``sweep --weights MODEL=PATH`` (repeatable), ``infer
  --weights DIR``, in the parsers and in every page that shows them;
- ``probench console --help`` says what ``--prompt-policy`` does there (sets it on the
  node), not the run-formulation text of ``eval``/``infer``."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from probench import cli

ROOT = Path(__file__).resolve().parents[2]


def _parser(command: str) -> argparse.ArgumentParser:
    parser, _ = cli.build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _flag(command: str, flag: str) -> argparse.Action:
    return next(a for a in _parser(command)._actions if flag in a.option_strings)


def _blocks(text: str) -> list[list[str]]:
    """Indented and fenced code blocks, as lists of lines."""
    out: list[list[str]] = []
    current: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            if not fenced and current:
                out.append(current)
                current = []
            continue
        if fenced or (line.startswith("    ") and line.strip()):
            current.append(line.strip())
        elif current and not fenced and line.strip():
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def test_readme_says_what_ros2_launch_needs() -> None:
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    shown = [i for i, line in enumerate(lines) if line.strip().startswith("ros2 launch")]
    assert shown, "the README shows ros2 launch"
    for i in shown:
        before = " ".join(lines[max(0, i - 8):i])
        assert "ROS 2 install" in before and "colcon" in before and "not in the venv" in before, lines[i]
    for block in _blocks(text):
        assert not (any("ros2 launch" in b for b in block) and any("bin/activate" in b for b in block)), block


def test_one_story_for_weights() -> None:
    sweep, infer = _flag("sweep", "--weights"), _flag("infer", "--weights")
    assert sweep.metavar == "MODEL=PATH" and isinstance(sweep, argparse._AppendAction)
    assert infer.metavar == "DIR" and not isinstance(infer, argparse._AppendAction)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    seen = 0
    for page in pages:
        for m in re.finditer(r"sweep[^\n`]*?--weights[ =]([^\s`]+)", page.read_text()):
            seen += 1
            assert re.fullmatch(r"[A-Za-z0-9_.-]+=\S+", m.group(1)), \
                f"{page.name}: sweep --weights {m.group(1)} (it takes MODEL=PATH)"
    assert seen, "no page shows sweep --weights"
    scale = (ROOT / "docs" / "SCALE.md").read_text()
    assert "belongs to `probench infer`" not in scale
    assert "`--weights MODEL=PATH`" in scale and "`--weights DIR`" in scale


def test_console_help_says_what_its_prompt_policy_does() -> None:
    console = _flag("console", "--prompt-policy").help or ""
    assert "set on the node" in console and "to the run" not in console, console
    for command in ("infer", "eval", "sweep"):
        assert "adds the formulation `policy`" in (_flag(command, "--prompt-policy").help or ""), command
