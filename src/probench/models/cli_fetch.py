"""``probench fetch MODEL...``: download models' published weights into the caches probench
reads (:mod:`probench.models.fetch`), on a machine with internet. Offline, or with the hub
out of reach, it fails at once with one line (exit 1); an unknown name exits 2."""

from __future__ import annotations

import argparse

from probench.errors import UsageError
from probench.models.fetch import CONNECT_TIMEOUT_S


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("models", nargs="+", metavar="MODEL",
                        help="zoo names (`probench models`), e.g. owlv2-b")
    parser.add_argument("--timeout", type=float, default=CONNECT_TIMEOUT_S, metavar="S",
                        help="give up when the hub does not answer within S seconds "
                             f"(default {CONNECT_TIMEOUT_S:g})")


def run(args: argparse.Namespace) -> int:
    from probench.models.fetch import fetch_spec
    from probench.models.testing import scripted_detector
    from probench.models.zoo import resolve

    if not 0 < args.timeout <= 600:
        raise UsageError(f"--timeout must lie in (0, 600] seconds, got {args.timeout:g}")
    wanted = []
    for name in dict.fromkeys(args.models):  # every name checked before any download
        if scripted_detector(name) is not None:
            print(f"{name}: nothing to fetch: a scripted test model")
            continue
        wanted.append((name, *resolve(name)))
    for name, spec, tiny in wanted:
        print(f"{name}: {fetch_spec(spec, tiny=tiny, timeout_s=args.timeout)}")
    return 0
