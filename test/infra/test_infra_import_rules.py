"""The house rules of docs/DESIGN.md, checked on the source: no import cycles (imports inside
functions count), rclpy only in probench.ros, and the one-way doors of the rooms."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """probench module -> probench modules it imports (anywhere in the file), and
    module -> top-level packages of everything it imports."""
    files = {_module_name(p): p for p in (SRC / "probench").rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in files}
    external: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative import
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                # `from probench.x import y`: an edge to module x.y when y is a module, else to x
                # (the package's __init__ is not counted for its submodules, as import tools do)
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in files]
                targets = subs if len(subs) == len(node.names) else [base, *subs]
            for t in targets:
                external[mod].add(t.split(".")[0])
                if t.split(".")[0] == "probench":
                    while t not in files and "." in t:  # `import probench.x.func`-style names
                        t = t.rpartition(".")[0]
                    if t in files and t != mod:
                        edges[mod].add(t)
    return edges, external


EDGES, EXTERNAL = _graph()


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _imports_of(prefix: str) -> dict[str, set[str]]:
    return {m: e for m, e in EDGES.items() if m == prefix or m.startswith(prefix + ".")}


def test_the_graph_is_read() -> None:
    assert len(EDGES) > 80
    assert "probench.models.spec" in EDGES["probench.models.zoo"]  # a known door, seen


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    assert _cycles(EDGES) == []


def test_rclpy_only_in_probench_ros() -> None:
    ros_only = {"rclpy", "launch", "launch_ros", "rcl_interfaces", "vision_msgs", "sensor_msgs", "std_msgs",
                "diagnostic_msgs", "lifecycle_msgs", "builtin_interfaces"}
    offenders = {m: sorted(EXTERNAL[m] & ros_only) for m in EDGES
                 if not m.startswith("probench.ros") and EXTERNAL[m] & ros_only}
    assert offenders == {}


@pytest.mark.parametrize(("room", "forbidden"), [
    ("probench.vocabulary", ("probench.",)),  # the bottom: only errors and detections
    ("probench.detections", ("probench.",)),
    ("probench.errors", ("probench.",)),
    ("probench.models.spec", ("probench.models",)),
    ("probench.models.accel", ("probench.models.zoo", "probench.models.cli")),
    ("probench.cache", ("probench.data", "probench.models", "probench.scoring", "probench.ros")),
    ("probench.data", ("probench.models", "probench.scoring", "probench.report", "probench.ros")),
    ("probench.scoring", ("probench.models", "probench.report", "probench.ros", "probench.bags")),
    ("probench.bags", ("probench.models", "probench.scoring", "probench.ros")),
    ("probench.report", ("probench.models", "probench.ros", "probench.bags")),
    # prompt policies sit above the models (infer takes a policy object; only the CLI builds one)
    ("probench.models.infer", ("probench.prompting",)),
    ("probench.models.base", ("probench.prompting",)),
    ("probench.prompting", ("probench.ros", "probench.realtime", "probench.scoring", "probench.report",
                            "probench.console", "probench.ground", "probench.scale", "probench.data")),
])
def test_doors_run_one_way(room: str, forbidden: tuple[str, ...]) -> None:
    allowed = {"probench.vocabulary": {"probench.errors", "probench.detections"},
               "probench.detections": set(), "probench.errors": set()}.get(room, set())
    bad = {m: sorted(t for t in targets if t.startswith(forbidden) and t not in allowed)
           for m, targets in _imports_of(room).items()}
    assert {m: t for m, t in bad.items() if t} == {}
