"""Frames lost in transport are detected and explained: a camera publishing 640x480 rgb8 at
30 Hz without probench's Fast DDS profile (as a driver started elsewhere) loses most frames
on the way; the node's /diagnostics says so (WARN, the loss figure) and its log says in one
line what to set in the camera's environment. With the profile, no warning.

How soon it warns is counted in camera frames, not seconds (a loaded machine slows the
camera's start and its stream alike): the warning comes while the loss window holds at most
WARN_WITHIN_FRAMES of the new camera's frames (received + lost). The wall-clock limits
below only bound how long the test waits before it gives up."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, fresh_domain
from probench.ros.dds_profile import USER_PROFILE_VARS

pytestmark = [pytest.mark.ros, pytest.mark.timeout(240)]
WARN_WITHIN_FRAMES = 150  # 5 s of a 30 Hz camera: a warning later than that would be a slow one
GIVE_UP_S = 60.0


def _camera(env: dict[str, str], domain: int, cwd, *extra: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in env.items() if k not in USER_PROFILE_VARS}
    env["ROS_DOMAIN_ID"] = str(domain)
    return subprocess.Popen([sys.executable, "-m", "probench.ros.synthetic_camera", "--rate", "30",
                             "--size", "640x480", *extra], env=env, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _status(peer: RosPeer) -> tuple[str, str, dict[str, str]]:
    from probench.ros.convert import diagnostics_to_statuses

    _name, level, message, values = diagnostics_to_statuses(peer.diags[-1])[0]
    return level, message, values


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(10)


def test_camera_without_the_profile_is_named(tmp_path, ros_env, requires_vision_msgs) -> None:
    domain = fresh_domain()
    env = {k: v for k, v in ros_env.items() if k not in USER_PROFILE_VARS}
    node = NodeProcess(env, domain, tmp_path / "node.log",
                       {"model": "test-instant", "prompts": ["x"], "diagnostics_period": 0.5})
    peer = RosPeer(domain)
    try:
        peer.wait_ready(node)
        # with the profile (the synthetic camera applies it, as probench's processes do)
        cam = _camera(env, domain, tmp_path)
        try:
            peer.spin_until(lambda: peer.diags and int(_status(peer)[2]["transport_received"]) >= 90,
                            GIVE_UP_S)
            level, message, values = _status(peer)
            assert int(values["transport_received"]) >= 90, values  # 3 s of frames
            assert level == "OK" and float(values["transport_loss"]) < 0.2, (level, message, values)
        finally:
            _stop(cam)
        peer.spin_for(11.0)  # the 10 s loss window forgets the good run
        peer.spin_until(lambda: int(_status(peer)[2]["transport_received"]) == 0, GIVE_UP_S)
        assert int(_status(peer)[2]["transport_received"]) == 0  # the window holds none of its frames
        # without it: a driver started elsewhere
        cam = _camera(env, domain, tmp_path, "--no-fastdds-profile")
        try:
            t0 = time.monotonic()

            def warned() -> tuple[str, str, dict[str, str]] | None:
                if not peer.diags:
                    return None
                got = _status(peer)
                return got if got[0] == "WARN" and "lost in transport" in got[1] else None

            got = peer.spin_until(warned, GIVE_UP_S)
            assert got, _status(peer)
            seconds = time.monotonic() - t0
            _, message, values = got
            assert float(values["transport_loss"]) >= 0.2
            assert "FASTDDS_DEFAULT_PROFILES_FILE=" in values["transport_hint"]
            frames = int(values["transport_received"]) + int(values["transport_lost"])
            assert frames <= WARN_WITHIN_FRAMES, values  # counted in the camera's frames since it started
            print(f"warned after {frames} camera frames ({seconds:.1f} s after starting the camera): "
                  f"{message}")
        finally:
            _stop(cam)
        peer.spin_for(0.5)
        log = [line for line in node.output().splitlines() if "lost in transport" in line]
        assert log, node.output()[-2000:]
        assert "FASTDDS_DEFAULT_PROFILES_FILE=" in log[0] and "config/fastdds.xml" in log[0]
        assert "docs/SETUP.md" in log[0]
        assert os.path.isfile(log[0].split("FASTDDS_DEFAULT_PROFILES_FILE=")[1].split()[0])
    finally:
        peer.close()
        assert node.stop() == 0
