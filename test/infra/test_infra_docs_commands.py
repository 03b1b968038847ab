"""Every command in the README's and the docs' code blocks names a real command with real
flags, so that it runs as written.

Code blocks are the fenced (```) and the indented ones; in a block that shows a terminal
session, only the ``$ `` lines are commands. Each shell line (continuations
joined, comments dropped, split at ``&&``, ``;``, ``|`` and ``&``) is checked by what it
starts with, after ``VAR=value`` assignments:

- ``probench SUB`` and ``python -m probench SUB``: SUB is in ``probench.cli.COMMANDS`` and
  every ``--flag`` exists in that command's real argparse parser (nested actions such as
  ``probench node status`` included), so flags added to a command count at once;
- ``grounding_node`` / ``evaluator_node`` (console scripts of setup.py), also through
  ``ros2 run probench``: every ``-p NAME:=...`` is a parameter of the node's table;
- ``python FILE.py`` and ``python -m MODULE``: the file or module exists and each
  ``--flag`` is one its source declares (``add_argument("--flag"``);
- ``scripts/...`` and ``bench/...`` run directly, ``bash FILE``: the file exists;
- ``make TARGET``: a target of the Makefile;
- ``ros2 launch probench FILE ARG:=...``: ``launch/FILE`` exists and each ARG is one of the
  arguments it declares (the table it declares them from, read from the file);
- ``.venv/bin/X ...``: as ``X``.

Other lines (``export``, ``cd``, ``ros2 topic``, ``pip``, ``docker``, JSON, diagrams, ...)
are not probench's commands and are left alone.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from probench import cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_SHELL = {"json", "yaml", "yml", "python", "py", "xml", "text", "csv", "toml", "jsonl", "ini", "md",
             "markdown", "mermaid"}
_OPERATORS = {"&&", "||", ";", "|", "&", ";;"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    words: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {' '.join(self.words)}"


# -- extraction -------------------------------------------------------------------------------
def code_blocks(text: str) -> Iterator[list[tuple[int, str]]]:
    """The shell code blocks of a Markdown page: lists of (line number, text)."""
    lines = text.splitlines()
    i, prev_blank = 0, True
    while i < len(lines):
        fence = re.match(r"^(\s*)```\s*([\w+-]*)", lines[i])
        if fence:
            indent, lang = len(fence.group(1)), fence.group(2).lower()
            body: list[tuple[int, str]] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                body.append((i + 1, lines[i][indent:]))
                i += 1
            i += 1
            prev_blank = False
            if lang not in NOT_SHELL:
                yield body
            continue
        if prev_blank and lines[i].startswith("    ") and lines[i].strip():
            body = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                body.append((i + 1, lines[i][4:]))
                i += 1
            prev_blank = False
            yield body
            continue
        prev_blank = not lines[i].strip()
        i += 1


def shell_commands(page: Path) -> Iterator[Command]:
    """The simple commands of a page's code blocks (a line that shlex cannot split, such as
    prose or a diagram, is not a command)."""
    name = page.relative_to(ROOT).as_posix()
    for block in code_blocks(page.read_text(encoding="utf-8")):
        if any(text.lstrip().startswith("$ ") for _, text in block):  # a session: prompts and output
            block = [(n, text.lstrip()[2:]) for n, text in block if text.lstrip().startswith("$ ")]
        pending, start = "", 0
        for number, text in block:
            if not pending:
                start = number
            if text.rstrip().endswith("\\"):
                pending += text.rstrip()[:-1] + " "
                continue
            joined, pending = pending + text, ""
            try:
                lexer = shlex.shlex(joined, posix=True, punctuation_chars=True)
                lexer.whitespace_split = True
                tokens = list(lexer)
            except ValueError:
                continue  # unbalanced quotes: prose or data, not a command line
            words: list[str] = []
            for token in [*tokens, ";"]:
                if token in _OPERATORS or set(token) <= set("&|;<>()"):
                    if words:
                        yield Command(name, start, tuple(words))
                    words = []
                else:
                    words.append(token)


ALL = [c for page in PAGES for c in shell_commands(page)]


# -- what exists -----------------------------------------------------------------------------
def _console_scripts() -> dict[str, str]:
    """setup.py's console scripts: name -> module."""
    text = (ROOT / "setup.py").read_text(encoding="utf-8")
    return dict(re.findall(r'"([\w-]+)\s*=\s*([\w.]+):\w+"', text))


CONSOLE_SCRIPTS = _console_scripts()


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, flags=re.MULTILINE))


def _parser_flags(parser: argparse.ArgumentParser, words: list[str]) -> set[str]:
    """The option strings of ``parser`` and of the nested action ``words`` choose."""
    flags = {s for action in parser._actions for s in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = next((w for w in words if w in action.choices), None)
            if chosen is not None:
                sub = action.choices[chosen]
                flags |= _parser_flags(sub, words[words.index(chosen) + 1:])
    return flags


@cache
def probench_flags(command: str, nested: tuple[str, ...]) -> frozenset[str]:
    parser, _module = cli.build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return frozenset(_parser_flags(sub.choices[command], list(nested)))


@cache
def source_flags(path: Path) -> frozenset[str]:
    """The ``--flags`` a script or module declares (``add_argument("--flag", ...)``)."""
    text = path.read_text(encoding="utf-8")
    found = set(re.findall(r"""add_argument\(\s*(?:["'](-[\w-]+)["']\s*,\s*)?["'](--[\w-]+)["']""", text))
    return frozenset({"-h", "--help"} | {f for pair in found for f in pair if f})


def _module_file(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin)
    if origin.name == "__init__.py":
        main = origin.parent / "__main__.py"
        return main if main.exists() else origin
    return origin


def _flags_of(words: tuple[str, ...]) -> list[str]:
    """The ``--flags`` among ``words`` (a usage synopsis's ``[--flag`` and ``--a|--b]`` too)."""
    out = []
    for word in words:
        for w in word.strip("[]()").split("|"):
            w = w.strip("[]()").split("=", 1)[0]
            if w.startswith("-") and w not in ("-", "--") and not w[1:2].isdigit():
                out.append(w)
    return out


@cache
def launch_arguments(launch_file: Path) -> frozenset[str] | None:
    """The arguments ``launch_file`` declares, from the table it declares them from
    (``for name, ... in TABLE.items()`` next to ``DeclareLaunchArgument``); None when the
    file declares them otherwise."""
    text = launch_file.read_text(encoding="utf-8")
    table = re.search(r"DeclareLaunchArgument\(name[^\]]*?\bin (\w+)\.items\(\)", text, flags=re.DOTALL)
    if table is None:
        return None
    source = re.search(rf"from ([\w.]+) import [^\n]*\b{table.group(1)}\b", text)
    assert source, f"{launch_file}: where does {table.group(1)} come from?"
    return frozenset(getattr(importlib.import_module(source.group(1)), table.group(1)))


def _node_params(executable: str) -> frozenset[str]:
    from probench.realtime.node_spec import EVALUATOR_PARAMS, GROUNDING_PARAMS

    table = {"grounding_node": GROUNDING_PARAMS, "evaluator_node": EVALUATOR_PARAMS}[executable]
    return frozenset(table.defaults())


# -- the check -------------------------------------------------------------------------------
def problems(cmd: Command) -> list[str]:
    """What is wrong with one command line ([] when it is fine or not probench's)."""
    words = list(cmd.words)
    while words and _ASSIGNMENT.match(words[0]):
        words.pop(0)
    if not words:
        return []
    if words[0].startswith(".venv/bin/"):
        words[0] = words[0][len(".venv/bin/"):]
    if words[0] in ("timeout", "nice") and len(words) > 2:
        words = words[2:] if words[0] == "timeout" else words[1:]
    head = words[0]
    if head in ("python", "python3") and len(words) > 2 and words[1] == "-m" and words[2] == "probench":
        words, head = ["probench", *words[3:]], "probench"
    if head == "probench":
        return _check_probench(words)
    if head in ("grounding_node", "evaluator_node"):
        return _check_node(head, words)
    if head == "ros2" and len(words) >= 4 and words[1] == "run" and words[2] == "probench":
        if words[3] not in CONSOLE_SCRIPTS:
            return [f"ros2 run: probench has no executable {words[3]!r}"]
        return _check_node(words[3], words[3:]) if words[3] != "probench" else []
    if head == "ros2" and len(words) >= 4 and words[1] == "launch" and words[2] == "probench":
        return _check_launch(words[3], words[4:])
    if head in ("python", "python3") and len(words) > 1:
        return _check_python(words[1:])
    if head == "make":
        targets = _make_targets()
        missing = [w for w in words[1:] if not w.startswith("-") and "=" not in w and w not in targets]
        return [f"make has no target {w!r}" for w in missing]
    if head == "bash" and len(words) > 1:
        head, words = words[1], words[1:]
    if head.startswith(("scripts/", "bench/", "./scripts/", "./bench/")) and not head.endswith("/"):
        return [] if (ROOT / head).is_file() else [f"no file {head}"]
    return []


def _check_probench(words: list[str]) -> list[str]:
    positional = [w for w in words[1:] if not w.startswith("-")]
    if not positional or any(w in ("-h", "--help", "--version") for w in words[1:2]):
        return []
    command = positional[0]
    if command not in cli.COMMANDS:
        return [f"probench has no command {command!r} (probench.cli.COMMANDS)"]
    flags = probench_flags(command, tuple(positional[1:]))
    return [f"probench {command} has no flag {f}" for f in _flags_of(tuple(words[1:])) if f not in flags]


def _check_node(executable: str, words: list[str]) -> list[str]:
    known = _node_params(executable)
    out = []
    for i, w in enumerate(words):
        if w == "-p" and i + 1 < len(words):
            name = words[i + 1].split(":=", 1)[0]
            if name not in known:
                out.append(f"{executable} has no parameter {name!r}")
    return out


def _check_launch(file_name: str, args: list[str]) -> list[str]:
    path = ROOT / "launch" / file_name
    if not path.is_file():
        return [f"no launch file launch/{file_name}"]
    declared = launch_arguments(path)
    if declared is None:
        return []
    names = [a.split(":=", 1)[0] for a in args if ":=" in a]
    return [f"{file_name} declares no argument {n!r}" for n in names if n not in declared]


def _check_python(words: list[str]) -> list[str]:
    if words[0] == "-m":
        if len(words) < 2:
            return []
        if words[1] in ("pytest", "pip", "venv", "mypy", "ruff"):
            return []
        path = _module_file(words[1])
        if path is None:
            return [f"no Python module {words[1]}"]
        rest = words[2:]
    elif words[0].endswith(".py"):
        path = ROOT / words[0]
        if not path.is_file():
            return [f"no file {words[0]}"]
        rest = words[1:]
    else:
        return []
    flags = source_flags(path)
    return [f"{path.name} has no flag {f}" for f in _flags_of(tuple(rest)) if f not in flags]


# -- tests -----------------------------------------------------------------------------------
def test_the_extraction_finds_the_commands() -> None:
    """The check cannot pass by finding nothing: the README's live block and the node
    page's commands are among the extracted lines."""
    text = {str(c) for c in ALL}
    assert any(t.startswith("README.md:") and " grounding_node --ros-args" in t for t in text), text
    assert any(t.startswith("docs/GROUNDING_NODE.md:") and ": probench node status" in t for t in text)
    assert any(": make demo" in t for t in text) and any(": ros2 launch probench" in t for t in text)
    assert len(ALL) > 40


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_docs_commands_name_real_commands_and_flags(page: Path) -> None:
    name = page.relative_to(ROOT).as_posix()
    found = [f"{c}\n    -> {p}" for c in ALL if c.page == name for p in problems(c)]
    assert not found, "\n".join(found)


def _remap_target(words: tuple[str, ...]) -> str | None:
    return next((w.split(":=", 1)[1] for w in words if w.startswith("image:=")), None)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_synthetic_camera_publishes_where_the_node_reads(page: Path) -> None:
    """A page that starts the node with ``-r image:=TOPIC`` and the synthetic camera starts
    the camera on TOPIC (CONSOLE.md once had the node wait on a topic nobody published)."""
    name = page.relative_to(ROOT).as_posix()
    mine = [c for c in ALL if c.page == name]
    node_topics = {t for c in mine if c.words[0] == "grounding_node" and (t := _remap_target(c.words))}
    cameras = [c for c in mine if "probench.ros.synthetic_camera" in c.words]
    for cam in cameras:
        words = list(cam.words)
        topic = words[words.index("--topic") + 1] if "--topic" in words else "image"
        assert not node_topics or topic in node_topics, f"{cam}: the node reads {node_topics}"


@pytest.mark.parametrize(("line", "words"), [
    ("probench no-such-command --x", "no command 'no-such-command'"),
    ("probench ground --bag B --no-such-flag 3", "probench ground has no flag --no-such-flag"),
    ("probench node status --wtch", "probench node has no flag --wtch"),
    ("probench node prompt TEXT --json", "probench node has no flag --json"),  # --json is status's
    ("grounding_node --ros-args -p modle:=x", "no parameter 'modle'"),
    ("ros2 launch probench grounding.launch.py image_topc:=/x", "declares no argument 'image_topc'"),
    ("ros2 launch probench nothing.launch.py", "no launch file"),
    ("python -m probench.ros.synthetic_camera --topik x", "synthetic_camera.py has no flag --topik"),
    ("python scripts/send_prompt.py hi", "no file scripts/send_prompt.py"),
    ("make tset", "make has no target 'tset'"),
    ("probench score --dataset D [--outt F]", "probench score has no flag --outt"),
    ("FOO=1 .venv/bin/probench scroe", "no command 'scroe'"),
])
def test_the_check_catches(line: str, words: str) -> None:
    cmd = Command("x.md", 1, tuple(shlex.split(line)))
    got = problems(cmd)
    assert any(words in p for p in got), got


@pytest.mark.parametrize("line", [
    "probench node status --watch --json",
    "probench ground --bag B --model M --prompt P --out O --max-pixels 100",
    "python -m probench.ros.synthetic_camera --topic image --no-fastdds-profile",
    "grounding_node --ros-args -p model:=tiny-owlv2 -r image:=/cam",
    "ros2 launch probench eval.launch.py bag:=b out:=o model:=m",
    "make demo",
    "export A=1",
    "ros2 topic pub --once /prompt std_msgs/msg/String x",
])
def test_the_check_passes(line: str) -> None:
    cmd = Command("x.md", 1, tuple(shlex.split(line)))
    assert problems(cmd) == []
