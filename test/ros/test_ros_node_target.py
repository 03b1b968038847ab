"""``probench node target TRACK_ID | --clear`` from the terminal against a stub of the node's
target side (helpers.target_stub: the topic contract, target_select in, latched target out):
the selection is published, a confirmed track is printed, one the node's detections do not
show fails fast naming the tracks in view, no node is one line with exit 1, and usage errors
exit 2."""

from __future__ import annotations

import time

import pytest

from helpers.grounding_harness import fresh_domain
from helpers.node_cli import node_cli, one_line_error
from helpers.target_stub import TargetStub

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]


def test_target_select_confirm_and_clear(ros_env, requires_vision_msgs) -> None:
    domain = fresh_domain()
    env = {**ros_env, "ROS_DOMAIN_ID": str(domain)}
    stub = TargetStub(domain, {7: "a red backpack", 9: "a door"})
    try:
        out = node_cli(env, "target", "7")
        assert out.returncode == 0 and out.stdout.strip() == "target: track 7 (a red backpack)", out
        out = node_cli(env, "target", "9")  # the latched target of before (7) is not taken for 9
        assert out.returncode == 0 and out.stdout.strip() == "target: track 9 (a door)", out
        out = node_cli(env, "target", "--clear")
        assert out.returncode == 0 and out.stdout.strip().startswith("target cleared"), out
        # a track the node does not see: published, and refused as soon as a second of the node's
        # detections went by without it (it waited out the whole timeout, the message said
        # nothing of what is in view; the timeout path has another message)
        one_line_error(node_cli(env, "target", "12", "--timeout", "60"), "track 12 is not in view",
                       "have tracks 7, 9")
        deadline = time.monotonic() + 5
        while len(stub.received) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stub.received == [7, 9, -1, 12]
    finally:
        stub.close()
    gone = node_cli(env, "target", "7", "--timeout", "2")
    one_line_error(gone, "no grounding node subscribes /target_select", f"ROS_DOMAIN_ID={domain}")


@pytest.mark.parametrize(("args", "why"), [
    ((), "give a TRACK_ID or --clear"),
    (("7", "--clear"), "give a TRACK_ID or --clear"),
    (("-3",), "argument TRACK_ID: must be 0..9223372036854775807, got -3"),
    (("seven",), "argument TRACK_ID: 'seven' is not a whole number"),
])
def test_target_usage_errors(ros_env, args, why) -> None:
    out = node_cli(ros_env, "target", *args, timeout=60)
    assert out.returncode == 2 and why in out.stderr and "Traceback" not in out.stderr, out
