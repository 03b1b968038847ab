"""``probench.cli.main``'s exit code, also for a usage error argparse itself raises (an
integer flag out of its range: SystemExit 2 from parse_args)."""

from __future__ import annotations

from probench.cli import main


def exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
