"""The docs stay true to the code: generated tables are current, links and repository paths
resolve, the README's command table lists every command, and the README stays a front page.
(config/*.yaml against the parameter tables: test/ros/test_ros_grounding_spec.py.)"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from probench.cli import COMMANDS
from probench.realtime.node_spec import GROUNDING_PARAMS
from probench.report import paper

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Pages that other branches of the current round add (linked already, so that the merged
# tree needs no second pass). When one of them exists, remove it here: the check below
# fails until then, so this list cannot go stale.
PENDING_PAGES: set[str] = set()
# Commands those branches add to probench.cli.COMMANDS; same rule.
PENDING_COMMANDS: set[str] = set()
# Regions every tree must have somewhere in its docs (a table must not be dropped silently).
REQUIRED_REGIONS = {"grounding-params", "grounding-topics", "grounding-launch-arguments", "image-encodings",
                    "evaluator-params", "eval-launch-arguments"}


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs_tables", ROOT / "scripts" / "gen_docs_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# -- generated tables ---------------------------------------------------------------------
@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_generated_regions_are_current(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert GEN.render_page(text) == text, f"{_rel(page)} is stale: run python scripts/gen_docs_tables.py"


def test_every_table_is_in_the_docs() -> None:
    found = {name for page in PAGES for name in GEN.region_names(page.read_text(encoding="utf-8"))}
    assert set(GEN.tables()) >= REQUIRED_REGIONS, "a required region has no renderer"
    assert REQUIRED_REGIONS - found == set()


def test_the_checker_fails_on_stale_or_broken_regions() -> None:
    renderers = {"t": lambda: "| new |"}
    region = "x\n<!-- BEGIN generated: t -->\n{}\n<!-- END generated: t -->\ny\n"
    assert GEN.render_page(region.format("| old |"), renderers) == region.format("| new |")
    with pytest.raises(GEN.RegionError, match="unknown generated region 'u'"):
        GEN.render_page("<!-- BEGIN generated: u -->\n<!-- END generated: u -->", renderers)
    with pytest.raises(GEN.RegionError, match="unmatched 'BEGIN generated: t'"):
        GEN.render_page("<!-- BEGIN generated: t -->\nno end\n", renderers)
    with pytest.raises(GEN.RegionError, match="unmatched"):
        GEN.render_page("<!-- BEGIN generated: t -->\n<!-- END generated: s -->\n", renderers)


def test_generated_tables_show_the_rows() -> None:
    tables = GEN.tables()
    grounding = tables["grounding-params"]()
    for p in GROUNDING_PARAMS:
        assert f"| `{p.name}` |" in grounding
    assert "best_effort \\| reliable" in grounding  # choices escaped: the row keeps its columns
    assert "`/diagnostics`" in tables["grounding-topics"]()
    assert "| `params_file` |" in tables["eval-launch-arguments"]()


def test_the_script_runs_in_check_mode() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs_tables.py"), "--check"],
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


# -- links and paths ------------------------------------------------------------------------
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\s]+)`")
TOP_DIRS = ("src/", "bench/", "config/", "scripts/", "docs/", "test/", "launch/", "bags/", "datasets/",
            "docker/", "interfaces/", ".ci/")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_fence = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        m = re.match(r"#{1,6} (.+)", line)
        if m and not in_fence:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _prose(page: Path) -> str:
    """The page without fenced or indented code blocks (examples there are not links)."""
    lines, in_fence = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if not in_fence and not line.startswith("    "):
            lines.append(line)
    return "\n".join(lines)


def test_pending_pages_are_still_pending() -> None:
    landed = sorted(p for p in PENDING_PAGES if (ROOT / p).exists())
    assert landed == [], f"{landed} exist now: remove them from PENDING_PAGES in {_rel(Path(__file__))}"


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_links_resolve(page: Path) -> None:
    problems = []
    for target in LINK.findall(_prose(page)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = page if not path_part else (page.parent / path_part).resolve()
        rel = _rel(dest) if dest.is_relative_to(ROOT) else str(dest)
        if not dest.exists():
            if rel in PENDING_PAGES and not anchor:
                continue
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            problems.append(f"{target}: no heading with anchor #{anchor} in {rel}")
    assert problems == []


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_repository_paths_named_in_the_docs_exist(page: Path) -> None:
    missing = []
    for span in CODE_SPAN.findall(_prose(page)):
        if not span.startswith(TOP_DIRS) or re.search(r"[<>*{}]|\.\.\.|…", span):
            continue
        path = span.rstrip("/:,.")
        if not (ROOT / path).exists() and path not in PENDING_PAGES:
            missing.append(span)
    assert missing == []


def test_no_page_refers_outside_the_repository() -> None:
    offenders = [_rel(p) for p in PAGES if "../shared" in p.read_text(encoding="utf-8")]
    assert offenders == []


# -- the README ---------------------------------------------------------------------------
def _readme_commands() -> set[str]:
    return set(re.findall(r"^\| `probench (\w+)", (ROOT / "README.md").read_text(encoding="utf-8"), re.M))


def test_readme_lists_every_command() -> None:
    listed = _readme_commands()
    assert set(COMMANDS) - listed == set(), "a command has no row in the README's command table"
    assert listed - set(COMMANDS) <= PENDING_COMMANDS, "the README lists a command probench does not have"
    landed = sorted(PENDING_COMMANDS & set(COMMANDS))
    assert landed == [], f"{landed} exist now: remove them from PENDING_COMMANDS in {_rel(Path(__file__))}"


def test_readme_is_a_front_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    flowing = re.sub(r"\s*\n>?\s*", " ", text)  # lines (and quote marks) joined
    for fact in (paper.TITLE, paper.AUTHORS, paper.URL):  # cited by title, authors and URL
        assert fact in flowing
    assert "make demo" in text and "make test" in text
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in LINK.findall(text) if t.startswith("docs/")}
    unlinked = sorted(_rel(p) for p in PAGES[1:] if p.resolve() not in linked)
    assert unlinked == [], "every docs page is linked from the README"
