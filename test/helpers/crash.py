"""The environment of a probench command that kills itself at a crash point
(:mod:`probench.cache.crash`), for the resume-after-SIGKILL tests of every room."""

from __future__ import annotations

from collections.abc import Mapping

from probench.cache.crash import ENV


def crash_env(base: Mapping[str, str], crash_at: str | None) -> dict[str, str]:
    """``base`` with the crash point set to ``crash_at`` (None: no crash, even if ``base`` has one)."""
    env = dict(base)
    env.pop(ENV, None)
    if crash_at:
        env[ENV] = crash_at
    return env
