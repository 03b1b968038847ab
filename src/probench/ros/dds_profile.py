"""probench's Fast DDS profile (``config/fastdds.xml``) and when to apply it.

Same-host camera frames are carried over Fast DDS's shared memory, in a segment each
process allocates for what it sends (512 KB by default, less than one 640x480 rgb8 frame,
so most best-effort frames were lost). The profile adds a shared-memory transport with a
16 MB segment and nothing else; the file explains the choice, docs/GROUNDING_NODE.md
("Frame delivery") gives the measurements.

It is applied through the standard variable ``FASTDDS_DEFAULT_PROFILES_FILE`` (the name
Fast DDS 3 reads; ``FASTRTPS_DEFAULT_PROFILES_FILE`` is its deprecated 2.x name) by the
launch files, ``probench eval`` (the nodes' environment), ``probench console`` and the two
nodes for themselves, never over a profile the user chose. Pure Python, no rclpy: the
variable must be set before the first participant of a process exists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from probench.realtime import package_config

PROFILE_VAR = "FASTDDS_DEFAULT_PROFILES_FILE"
# Any of these set (non-empty) means the user chose their own Fast DDS XML.
USER_PROFILE_VARS = (PROFILE_VAR, "FASTRTPS_DEFAULT_PROFILES_FILE")
# Fast DDS also reads this file from the working folder by itself.
CWD_PROFILE = "DEFAULT_FASTDDS_PROFILES.xml"
PROFILE_FILE = "fastdds.xml"
_FAST_DDS_RMWS = ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp")


def profile_path() -> Path:
    """config/fastdds.xml of the source tree, else of the installed ROS package."""
    return package_config(PROFILE_FILE)


def profile_environment(env: Mapping[str, str], cwd: Path | None = None) -> dict[str, str]:
    """The variables to add to ``env`` so that processes started with it use probench's
    profile: ``{FASTDDS_DEFAULT_PROFILES_FILE: path}``, or ``{}`` when the user chose a
    profile (either variable set, or a ``DEFAULT_FASTDDS_PROFILES.xml`` in ``cwd``, default
    the current folder), when ``RMW_IMPLEMENTATION`` names another middleware than Fast DDS,
    or when the file is missing (an incomplete install: the defaults still work)."""
    if any(env.get(name) for name in USER_PROFILE_VARS):
        return {}
    rmw = env.get("RMW_IMPLEMENTATION", "")
    if rmw and rmw not in _FAST_DDS_RMWS:
        return {}
    if ((cwd or Path.cwd()) / CWD_PROFILE).is_file():
        return {}
    path = profile_path()
    return {PROFILE_VAR: str(path)} if path.is_file() else {}


def apply_profile(environ: MutableMapping[str, str] | None = None) -> str | None:
    """Add the profile to ``environ`` (default: this process's environment, which must then
    happen before rclpy.init) when :func:`profile_environment` says so; the path applied,
    else None."""
    target: MutableMapping[str, str] = os.environ if environ is None else environ
    added = profile_environment(target)
    target.update(added)
    return added.get(PROFILE_VAR)


def fast_dds_profile_hint(env: Mapping[str, str] | None = None) -> str | None:
    """The profile path to give a camera driver (whose frames arrive incomplete) in its
    ``FASTDDS_DEFAULT_PROFILES_FILE``: probench's ``config/fastdds.xml``; None when this
    process's middleware is not Fast DDS (the advice would not apply)."""
    rmw = (os.environ if env is None else env).get("RMW_IMPLEMENTATION", "")
    if rmw and rmw not in _FAST_DDS_RMWS:
        return None
    return str(profile_path())
