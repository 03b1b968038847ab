"""``probench models [--json]``: the model zoo, honestly (what runs here and what does not),
with the installed plugin models (their source distribution) and, one line each, the
plugins that failed to load.

No torch import: installability is checked with ``importlib.util.find_spec`` and weights by
looking into the local caches only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from probench.models.spec import ModelSpec
from probench.models.zoo import ZOO, plugins, tiny_names, weights_present

BUILTIN_SOURCE = "probench"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _row(spec: ModelSpec, source: str = BUILTIN_SOURCE) -> dict[str, Any]:
    return {
        "name": spec.name,
        "source": source,
        "paper_name": spec.paper_name,
        "family": spec.family,
        "backend": spec.backend,
        "checkpoint": spec.checkpoint,
        "capabilities": spec.capabilities.as_dict(),
        "weights_present": weights_present(spec),
        "installable": spec.installable_here(),
        "tiny": ("tiny-" + spec.name) if spec.tiny_factory else None,
        "notes": spec.notes,
        "install_hint": spec.install_hint,
    }


def _yn(v: object) -> str:
    return "yes" if v else "no"


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except BrokenPipeError:  # `probench models | head`: the reader left, not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the flush at exit
        return 0


def _run(args: argparse.Namespace) -> int:
    found, broken = plugins()
    rows = [_row(s) for s in ZOO.values()] + [_row(m.spec, m.distribution) for m in found]
    problems = [p.line() for p in broken]
    if args.json:
        scripted = ["test-instant", "test-masks", "test-slow-<N>ms"]
        out = {"models": rows, "tiny": tiny_names(), "scripted": scripted, "plugin_problems": problems}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    head = ("name", "paper", "family", "backend", "checkpoint", "masks", "trt", "batch", "weights", "here",
            "source")
    table = [head]
    for r in rows:
        c = r["capabilities"]
        table.append((
            r["name"], r["paper_name"], r["family"], r["backend"], r["checkpoint"],
            _yn(c.get("masks")), _yn(c.get("tensorrt")), _yn(c.get("batched")),
            _yn(r["weights_present"]), _yn(r["installable"]), r["source"],
        ))
    widths = [max(len(str(row[i])) for row in table) for i in range(len(head))]
    for row in table:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    print(f"\n{len(rows)} configurations ({len(found)} from plugins). weights = present in the local "
          "cache; here = its library imports on this machine; source = the distribution it comes from.")
    print("tiny test variants: " + ", ".join(tiny_names()))
    print("scripted test detectors: test-instant, test-masks, test-slow-<N>ms")
    print("one-off models: --model package.module:factory (docs/MODELS.md)")
    for line in problems:
        print(line)
    return 0
