"""Two separate processes exchange vision_msgs/Detection2DArray and sensor_msgs/Image over DDS.

This proves the ROS 2 stack of the environment is real (rclpy, Fast DDS, the type support
of the in-repo vision_msgs), not an import-only shim. Each run uses its own domain id and
topic names, so parallel test runs on the machine cannot cross-talk.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

PEER = Path(__file__).parents[1] / "helpers" / "dds_peer.py"
pytestmark = pytest.mark.ros


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(PEER), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, stdin=subprocess.DEVNULL,
    )


def test_two_processes_exchange_detections_and_image(ros_env, requires_vision_msgs):
    from helpers import dds_peer

    env = dict(ros_env)
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    env["ROS_DOMAIN_ID"] = str(random.Random(os.getpid()).randint(1, 100))
    prefix = f"/probench_test_{os.getpid()}_{random.randint(0, 10**6)}"

    sub = _start(["sub", prefix, "30"], env)
    pub = _start(["pub", prefix], env)
    try:
        out, err = sub.communicate(timeout=60)
    finally:
        pub.kill()
        pub_out, pub_err = pub.communicate(timeout=30)
        if sub.poll() is None:
            sub.kill()
    assert sub.returncode == 0, f"subscriber: nothing in time (rc {sub.returncode}):\n{out}\n{err}\n{pub_err}"
    assert pub_out.startswith("ready"), pub_err
    got = json.loads(out.strip().splitlines()[-1])

    assert got["image"] == dds_peer.describe_image(dds_peer.make_image())
    assert got["image"]["data"] == dds_peer.image_bytes().hex()  # every pixel byte intact
    assert got["detections"] == dds_peer.describe_detections(dds_peer.make_detections())
    det0 = got["detections"]["detections"][0]
    assert det0["results"][0]["class_id"] == "the red valve on the left"
    assert det0["center"] == [320.25, 240.5, 0.0625]
    assert got["detections"]["stamp"] == [1_700_000_123, 456_789_012]
