"""The house rules of docs/DESIGN.md, checked on the source: no import cycles (imports inside
functions count), rclpy only in probench.ros, the layer order of the rooms (every import goes
down, none up or sideways), CLI modules imported only by CLI modules, and every room named in
DESIGN.md."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"

# The layer order of docs/DESIGN.md ("## The layers"), bottom first. A room is a package under
# src/probench or a top-level module ("probench" = the package's own __init__: its version).
# A module that is not a CLI module imports only its own room and rooms of LOWER layers (not
# a sibling of its own layer). CLI modules (cli*.py, __main__.py) are the composition roots:
# they may import any room, and only they import CLI modules. prompting and spatial are
# rooms being added (prompt policy; depth-to-3D and tracking): their place is fixed here.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("probench", "errors"),
    ("detections", "stats", "jsonio", "limits"),
    ("vocabulary", "viz", "msgs", "files"),
    ("cache",),
    ("data",),
    ("bags", "scoring", "models"),
    ("report",),
    ("prompting", "spatial"),
    ("realtime",),
    ("ground", "console", "scale"),
    ("ros",),
    ("cli", "__main__"),
)
LAYER = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}


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


def room_of(module: str) -> str:
    """``probench.ros.graph`` -> ``ros``; ``probench.stats`` -> ``stats``; ``probench`` -> itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def is_cli(module: str) -> bool:
    last = module.rpartition(".")[2]
    return last.startswith("cli") or last == "__main__"


def wrong_doors(edges: dict[str, set[str]]) -> list[str]:
    """Every import that breaks the layer order or reaches into a CLI module from elsewhere."""
    bad = []
    for mod, targets in sorted(edges.items()):
        for t in sorted(targets):
            if is_cli(t) and not is_cli(mod):
                bad.append(f"{mod} -> {t}: only a CLI module imports a CLI module")
            elif not is_cli(mod) and room_of(t) != room_of(mod):
                here, there = LAYER.get(room_of(mod)), LAYER.get(room_of(t))
                if here is None or there is None or there >= here:
                    bad.append(f"{mod} -> {t}: {room_of(t)} is not below {room_of(mod)}")
    return bad


def rooms_in_src() -> set[str]:
    pkg = SRC / "probench"
    rooms = {p.parent.name for p in pkg.glob("*/__init__.py")}
    return rooms | {p.stem for p in pkg.glob("*.py") if p.stem != "__init__"} | {"probench"}


def layers_text() -> str:
    """The layer order as DESIGN.md writes it, top first."""
    return "\n".join(f"{i:>2}  {', '.join(rooms)}" for i, rooms in reversed(list(enumerate(LAYERS))))


def test_every_room_has_a_layer() -> None:
    assert sorted(rooms_in_src() - set(LAYER)) == []


def test_imports_go_down_the_layers() -> None:
    assert wrong_doors(EDGES) == []


def test_an_upward_or_sideways_import_is_caught() -> None:
    assert wrong_doors({"probench.data.dataset": {"probench.ros.graph"}})  # up
    assert wrong_doors({"probench.scoring.suite": {"probench.models.zoo"}})  # a sibling
    assert wrong_doors({"probench.scale.sweep": {"probench.report.cli"}})  # a CLI module
    assert wrong_doors({"probench.newroom.x": {"probench.errors"}})  # a room without a layer
    assert wrong_doors({"probench.models.cli_infer": {"probench.scale.ray_infer"}}) == []  # a root
    assert wrong_doors({"probench.ros.cli_eval": {"probench.scoring.cli"}}) == []  # CLI to CLI


def test_design_names_every_room_and_the_layer_order() -> None:
    design = (REPO / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    tree = design.split("## The rooms", 1)[1].split("\n## ", 1)[0]
    unnamed = sorted(r for r in rooms_in_src() - {"probench"}
                     if not re.search(rf"^\s+{re.escape(r)}(/|\.py)\s", tree, re.M))
    assert unnamed == [], "rooms missing from DESIGN.md's room tree"
    for room in ("prompting", "spatial"):
        assert re.search(rf"^\s+{room}/\s", tree, re.M), room
    assert layers_text() in design, "DESIGN.md's layer order is not the one tested here"


@pytest.mark.parametrize(("room", "forbidden"), [
    ("probench.vocabulary", ("probench.",)),  # the bottom: only errors and detections
    ("probench.detections", ("probench.",)),
    ("probench.errors", ("probench.",)),
    ("probench.models.spec", ("probench.models",)),
    ("probench.models.accel", ("probench.models.zoo", "probench.models.cli")),
    ("probench.report", ("probench.models", "probench.ros", "probench.bags")),
    # prompt policies sit above the models (infer takes a policy object; only the CLI builds one)
    ("probench.models.infer", ("probench.prompting",)),
    ("probench.models.base", ("probench.prompting",)),
    ("probench.prompting", ("probench.ros", "probench.realtime", "probench.scoring", "probench.report",
                            "probench.console", "probench.ground", "probench.scale", "probench.data")),
])
def test_doors_inside_the_layers(room: str, forbidden: tuple[str, ...]) -> None:
    """The finer rules the layers do not say: within a room, and what report skips."""
    allowed = {"probench.vocabulary": {"probench.errors", "probench.detections"},
               "probench.detections": set(), "probench.errors": set()}.get(room, set())
    bad = {m: sorted(t for t in targets if t.startswith(forbidden) and t not in allowed)
           for m, targets in _imports_of(room).items() if not is_cli(m)}
    assert {m: t for m, t in bad.items() if t} == {}
