"""Named crash points: where the SIGKILL tests of the resumable producers kill them.

``crash_point(name)`` does nothing unless the environment variable ``PROBENCH_CRASH_AT``
names that point, as ``NAME`` or ``NAME:N`` (the N-th time the point is passed, from 1).
Then the process sends itself SIGKILL, exactly what ``kill -9`` would do at that line: no
handler, no ``finally``, no flush beyond what the code already did. Only tests set it; it
lets them kill a run at a chosen step (before the first record, mid-formulation, between
formulations, while finishing) instead of racing a timer.

Points: ``infer.started``, ``infer.record`` (also passed by ``probench infer --ray``'s
driver after each record), ``infer.formulation_done``,
``infer.finishing``, ``cache.finalize`` (between writing ``<f>.json`` and removing its
progress log), ``eval.started``, ``eval.record``, ``eval.formulation_done``,
``eval.finishing``, ``eval.scoring``.
"""

from __future__ import annotations

import os
import signal

ENV = "PROBENCH_CRASH_AT"
_passes: dict[str, int] = {}


def crash_point(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    wanted, _, nth = spec.partition(":")
    if wanted != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] == (int(nth) if nth.strip().isdigit() else 1):
        os.kill(os.getpid(), signal.SIGKILL)
