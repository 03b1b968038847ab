"""``probench profile RUN... --out PROFILE``: a formulation profile (each run's model and
its best formulation k*) from scored runs, for ``--prompt-policy best --profile PROFILE``
and the node's ``prompt_profile`` parameter (docs/PROMPTING.md)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="scored run folders (run.json + metrics.json)")
    parser.add_argument("--out", required=True, metavar="PROFILE", help="the profile to write (JSON)")


def run(args: argparse.Namespace) -> int:
    from probench.cache.atomic import write_json_atomic
    from probench.prompting.profile import profile_from_runs

    profile = profile_from_runs(args.runs)
    out = Path(args.out)
    write_json_atomic(out, profile.as_json())
    import sys

    for name, k in sorted(profile.best.items()):
        print(f"{name}: best {k}")
    for line in profile.warnings:
        print(f"probench profile: warning: {line}", file=sys.stderr)
    print(f"{out}: profile of {len(profile.best)} model(s)")
    return 0
