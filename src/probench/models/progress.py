"""Progress bars of the commands that run models (``infer``, ``latency``, ``sweep``): shown
on a terminal only, unless asked. ``--progress`` shows them in a log too, ``--no-progress``
never; by default (None) tqdm decides from stderr: a bar on a terminal, nothing in a file or
a pipe (a log gets no carriage-return lines)."""

from __future__ import annotations

import argparse


def add_progress_arguments(parser: argparse._ActionsContainer, what: str = "progress bar") -> None:
    """``--progress`` / ``--no-progress`` into ``args.progress`` (True / False / None: auto)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--progress", dest="progress", action="store_const", const=True, default=None,
                       help=f"show the {what} even when stderr is not a terminal (a log)")
    group.add_argument("--no-progress", dest="progress", action="store_const", const=False,
                       help=f"no {what} (default: shown on a terminal only)")


def bar_disabled(progress: bool | None) -> bool | None:
    """tqdm's ``disable`` for ``progress``: None (auto: off when its stream is not a terminal)
    for None, else ``not progress``."""
    return None if progress is None else not progress
