#!/usr/bin/env python3
"""Write the docs' node tables from the code that declares them (probench.realtime.node_spec).

    python scripts/gen_docs_tables.py            # rewrite every generated region in place
    python scripts/gen_docs_tables.py --check    # exit 1 naming each region that is stale

A generated region in README.md or docs/*.md is

    <!-- BEGIN generated: NAME -->
    ...
    <!-- END generated: NAME -->

where NAME is a key of :func:`tables`. A region may sit in any page (and in several); the
text between the markers is owned by this script. test/infra/test_infra_docs.py fails when a
region differs from what this script would write, so the docs cannot drift from the nodes'
declarations.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # this checkout's sources, whatever is installed

REGION = re.compile(
    r"(?P<begin><!-- BEGIN generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)"
    r"(?P<end><!-- END generated: (?P=name) -->)",
    re.DOTALL,
)
MARKER = re.compile(r"<!-- (BEGIN|END) generated: ([\w-]+) -->")


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _arguments(arguments: dict[str, tuple[str, str]]) -> str:
    rows = ((f"`{name}`", f"`{default}`" if default else "(empty)", text)
            for name, (default, text) in arguments.items())
    return _table(("argument", "default", "meaning"), rows)


def _grounding_topics() -> str:
    from probench.realtime.node_spec import TOPICS

    return _table(
        ("topic", "direction", "type", "QoS"),
        ((f"`{name}`", direction, f"`{msg}`", qos) for name, (direction, msg, qos) in TOPICS.items()),
    )


def _image_encodings() -> str:
    from probench.msgs.images import COMPRESSED_FORMATS, ENCODINGS

    raw = ", ".join(f"`{e}`" for e in ENCODINGS)
    compressed = ", ".join(f"`{f}`" for f in COMPRESSED_FORMATS)
    return f"`sensor_msgs/Image` encodings: {raw}. `sensor_msgs/CompressedImage` formats: {compressed}."


def tables() -> dict[str, Callable[[], str]]:
    """Region name -> the function that renders its text (imports happen on use)."""
    from probench.realtime import node_spec
    from probench.ros import graph

    return {
        "grounding-params": node_spec.GROUNDING_PARAMS.markdown,
        "grounding-topics": _grounding_topics,
        "grounding-launch-arguments": lambda: _arguments(node_spec.LAUNCH_ARGUMENTS),
        "image-encodings": _image_encodings,
        "evaluator-params": node_spec.EVALUATOR_PARAMS.markdown,
        "eval-launch-arguments": lambda: _arguments(graph.EVAL_ARGUMENTS),
    }


class RegionError(ValueError):
    """A page's markers are malformed (unknown name, BEGIN without END, ...)."""


def render_page(text: str, renderers: dict[str, Callable[[], str]] | None = None) -> str:
    """``text`` with every generated region rewritten."""
    renderers = tables() if renderers is None else renderers
    rendered: dict[str, str] = {}

    def body(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in renderers:
            raise RegionError(f"unknown generated region {name!r} (known: {', '.join(renderers)})")
        if name not in rendered:
            rendered[name] = renderers[name]().rstrip("\n") + "\n"
        return match["begin"] + rendered[name] + match["end"]

    out = REGION.sub(body, text)
    # every marker must have been consumed by a well-formed region
    leftover = MARKER.findall(REGION.sub("", text))
    if leftover:
        kind, name = leftover[0]
        raise RegionError(f"unmatched '{kind} generated: {name}' marker")
    return out


def region_names(text: str) -> list[str]:
    return [m["name"] for m in REGION.finditer(text)]


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a region is stale")
    args = parser.parse_args(argv)
    stale = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        try:
            new = render_page(text)
        except RegionError as exc:
            print(f"{page.relative_to(ROOT)}: {exc}", file=sys.stderr)
            return 2
        if new != text:
            stale.append(page)
            if not args.check:
                from probench.cache.atomic import write_text_atomic

                write_text_atomic(page, new)
    for page in stale:
        print(f"{page.relative_to(ROOT)}: {'stale' if args.check else 'rewritten'}")
    if args.check and stale:
        print("run: python scripts/gen_docs_tables.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
