"""``probench profile RUN... --out PROFILE``: a formulation profile (each run's model and
its best formulation k*) from scored runs, for ``--prompt-policy best --profile PROFILE``
and the node's ``prompt_profile`` parameter (docs/PROMPTING.md)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="scored run folders (run.json + metrics.json)")
    parser.add_argument("--out", required=True, metavar="PROFILE",
                        help="the profile to write (JSON; a new file, outside run folders)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out file")


def run(args: argparse.Namespace) -> int:
    from probench.cache.output import check_output_file, write_output_json
    from probench.prompting.profile import ProfileError, profile_from_runs

    out = check_output_file(args.out, overwrite=args.overwrite)  # the writer rule, before the work
    profile = profile_from_runs(args.runs)
    try:
        write_output_json(out, profile.as_json(), overwrite=args.overwrite)
    except OSError as exc:  # a read-only folder, /proc, a missing parent that cannot be made
        why = exc.strerror or type(exc).__name__
        raise ProfileError(f"--out {out}: cannot write the profile: {why}") from None
    import sys

    for name, k in sorted(profile.best.items()):
        print(f"{name}: best {k}")
    for line in profile.warnings:
        print(f"probench profile: warning: {line}", file=sys.stderr)
    print(f"{out}: profile of {len(profile.best)} model(s)")
    return 0
