"""The ``probench`` command line (the README's command table; a page per command in docs/).

Each command lives in the room it belongs to, as a module with ``add_arguments(parser)``
and ``run(args) -> int``; this file only dispatches, importing just the chosen command's
module so that ``probench --help`` stays fast (no torch, no rclpy).

Errors: a :class:`probench.errors.ProbenchError` becomes one line on stderr and its exit
code (2 usage, 1 failed check); anything unexpected becomes one line too. The traceback
(of an unexpected error, or of the low-level error under a ProbenchError) only when
``PROBENCH_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn, Protocol

from probench import __version__
from probench.errors import ProbenchError

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("probench.data.cli", "check a dataset; every problem named with its record id"),
    "import": ("probench.data.cli_import", "another benchmark's annotations (coco, refcoco, mot) as a "
               "dataset"),
    "models": ("probench.models.cli_models", "list the model zoo"),
    "fetch": ("probench.models.cli_fetch", "download models' weights into the local caches (needs internet)"),
    "infer": ("probench.models.cli_infer", "offline inference into the prediction cache (resumable)"),
    "latency": ("probench.models.cli_latency", "the paper's latency protocol"),
    "score": ("probench.scoring.cli", "the full metric suite of a run"),
    "report": ("probench.report.cli", "Table II (Markdown + CSV) and the paper's figures as PNG"),
    "compare": ("probench.report.cli_compare", "two runs of one dataset: each metric's change with a "
                "bootstrap interval, the queries that changed most"),
    "bag": ("probench.bags.cli", "write a dataset as a rosbag2 (mcap or sqlite3)"),
    "eval": ("probench.ros.cli_eval", "replay a bag through the ROS 2 graph and score it"),
    "ground": ("probench.ground.cli", "ground a rosbag2's camera: detections, annotated images, video"),
    "console": ("probench.console.cli", "a web page to watch and prompt a running grounding node"),
    "prompt": ("probench.prompting.cli", "the formulations (orig, cat, tmpl) of operator queries"),
    "profile": ("probench.prompting.cli_profile", "a formulation profile (each model's best formulation) "
                "from scored runs"),
    "node": ("probench.ros.cli_node", "a running grounding node from the terminal: status, prompt, "
             "lifecycle, parameters, target, watch its outputs (no ros2cli needed)"),
    "sweep": ("probench.scale.cli_sweep", "infer, latency and score for many models, then one report "
              "(resumable; --ray to scale out)"),
}


class Command(Protocol):
    """What a command's module provides (module doc)."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 with one line (argparse's own convention)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None) -> tuple[argparse.ArgumentParser, Command | None]:
    parser = _Parser(
        prog="probench",
        description="Pro-Bench: prompt-robust open-vocabulary grounding benchmark and ROS 2 tools.",
    )
    parser.add_argument("--version", action="version", version=f"probench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    module: Command | None = None
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            module = importlib.import_module(module_name)
            module.add_arguments(p)
    return parser, module


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    if command not in COMMANDS:
        command = None
    parser, module = build_parser(command)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    # parse_args exits unless a listed command was chosen, and that one's module was imported.
    assert module is not None
    try:
        return int(module.run(args) or 0)
    except ProbenchError as exc:
        if os.environ.get("PROBENCH_DEBUG") == "1" and exc.__cause__ is not None:  # e.g. the OSError under it
            traceback.print_exc()
        print(f"probench {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"probench {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI promises no tracebacks
        if os.environ.get("PROBENCH_DEBUG") == "1":
            traceback.print_exc()
        print(
            f"probench {args.command}: internal error: {type(exc).__name__}: {exc} "
            "(set PROBENCH_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
