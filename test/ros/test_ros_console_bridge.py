"""The console's ROS bridge against a real grounding_node (test-instant, own ROS domain):
what the page shows comes from the node's LabelInfo, detections, /diagnostics and lifecycle
services; prompts and transitions reach the node; images are subscribed only while watched."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, fresh_domain, image
from probench.console.errors import BridgeError

pytestmark = [pytest.mark.ros, pytest.mark.timeout(240)]


def wait_for(pred: Callable[[], Any], timeout: float = 30.0, peer: RosPeer | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got or time.monotonic() > deadline:
            return got
        if peer is not None:
            peer.spin_for(0.05)
        else:
            time.sleep(0.05)


@pytest.fixture(scope="module")
def graph(tmp_path_factory, ros_env, requires_vision_msgs):
    domain = fresh_domain()
    node = NodeProcess(ros_env, domain, tmp_path_factory.mktemp("cb") / "node.log", {
        "model": "test-instant", "score_threshold": 0.0, "prompts": ["a red cup"],
        "image_reliability": "reliable", "diagnostics_period": 0.3,
    })
    peer = RosPeer(domain)
    try:
        peer.wait_ready(node)
        yield domain, node, peer
    finally:
        peer.close()
        node.stop()


def feed(peer: RosPeer, n: int, start: int, h: int = 48, w: int = 64) -> None:
    for i in range(n):
        peer.send_image(image(h, w, seed=start + i), peer.header(start + i))
        peer.spin_for(0.05)


def test_bridge_shows_and_drives_the_node(graph) -> None:
    from probench.ros.console_bridge import RosConsoleBridge

    domain, node, peer = graph
    bridge = RosConsoleBridge("/grounding_node", domain_id=domain)
    try:
        def seen() -> Any:
            v = bridge.view()
            return v if v.prompts and v.diagnostics and v.lifecycle != "unknown" else None

        v = wait_for(seen)
        assert v, f"no LabelInfo/diagnostics seen: {bridge.view()}\n{node.output()[-2000:]}"
        assert v.present and v.lifecycle == "active" and v.prompts == ("a red cup",)
        assert v.diagnostics.level in ("OK", "WARN") and v.diagnostics.values["model"] == "test-instant"
        assert v.topics["prompt"] == "/prompt"

        # a prompt from the page is acknowledged by the node's LabelInfo
        bridge.send_prompts(("the door", "a chair"))
        assert wait_for(lambda: bridge.view().prompts == ("the door", "a chair")), node.output()[-2000:]
        feed(peer, 3, 10)
        dets = wait_for(lambda: bridge.view().detections_stamp == 12.0 and bridge.view().detections)
        assert dets and sorted(d.label for d in dets) == ["a chair", "the door"]
        assert all(0.0 <= d.score <= 1.0 and d.box[2] <= 64 for d in dets)

        # no viewer, no debug image subscription (the node draws only for a subscriber)
        assert bridge.latest_frame() is None
        assert peer.node.count_subscribers("/debug_image") == 0
        bridge.want_frames(True)
        assert wait_for(lambda: peer.node.count_subscribers("/debug_image") == 1, peer=peer)
        frame = None
        for k in range(20):  # matching takes a moment: feed until the first drawn frame arrives
            feed(peer, 1, 100 + k)
            frame = bridge.latest_frame()
            if frame is not None:
                break
        assert frame is not None and frame.rgb.shape == (48, 64, 3), node.output()[-2000:]
        first = frame.seq
        feed(peer, 2, 200)
        assert wait_for(lambda: bridge.latest_frame().seq > first)
        bridge.want_frames(False)
        assert wait_for(lambda: peer.node.count_subscribers("/debug_image") == 0, peer=peer)

        # lifecycle from the page
        assert bridge.change_state("deactivate", 20.0) == "inactive"
        assert wait_for(lambda: bridge.view().lifecycle == "inactive")
        with pytest.raises(BridgeError, match="refused") as refused:
            bridge.change_state("deactivate", 20.0)
        assert refused.value.status == 409
        assert bridge.change_state("activate", 20.0) == "active"
        assert wait_for(lambda: bridge.view().lifecycle == "active")
    finally:
        bridge.close()


def test_bridge_draws_the_camera_image_the_node_reads(graph, tmp_path, ros_env) -> None:
    """A node in a namespace with its image input remapped: the console finds the camera topic
    on the graph (no option), subscribes it and draws the detections itself."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    from probench.ros.console_bridge import RosConsoleBridge
    from probench.ros.convert import rgb_to_image_msg

    domain, _, peer = graph
    node = NodeProcess(ros_env, domain, tmp_path / "ns_node.log",
                       {"model": "test-instant", "score_threshold": 0.0, "prompts": ["a red cup"],
                        "image_reliability": "reliable"},
                       extra=["-r", "__ns:=/robot1", "-r", "image:=/robot1/cam/image_raw"])
    camera = peer.node.create_publisher(Image, "/robot1/cam/image_raw",
                                        QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE))
    bridge = RosConsoleBridge("/robot1/grounding_node", domain_id=domain, stream_source="image")
    try:
        assert wait_for(lambda: bridge.view().prompts == ("a red cup",), 60.0), node.output()[-2000:]
        bridge.want_frames(True)
        found = wait_for(lambda: peer.node.count_subscribers("/robot1/cam/image_raw") == 2, peer=peer)
        assert found, node.output()[-2000:]  # the node and the console
        assert bridge.view().topics["stream"] == "/robot1/cam/image_raw"
        assert peer.node.count_subscribers("/robot1/debug_image") == 0  # the node draws nothing
        frame = None
        for k in range(20):
            camera.publish(rgb_to_image_msg(np.zeros((48, 64, 3), np.uint8), peer.header(300 + k)))
            peer.spin_for(0.1)
            frame = bridge.latest_frame()
            if frame is not None:
                break
        assert frame is not None, node.output()[-2000:]
        assert frame.rgb.shape == (48, 64, 3) and frame.rgb.any()  # boxes drawn on a black image
        assert 300 <= frame.stamp < 320
    finally:
        bridge.close()
        node.stop()


def test_bridge_without_a_node(graph) -> None:
    from probench.ros.console_bridge import RosConsoleBridge

    domain, _, _ = graph
    bridge = RosConsoleBridge("/robot9/nobody", domain_id=domain)
    try:
        time.sleep(1.0)
        v = bridge.view()
        assert not v.present and v.lifecycle == "unknown" and v.prompts == () and v.diagnostics is None
        with pytest.raises(BridgeError, match="no grounding node subscribes /robot9/prompt") as e:
            bridge.send_prompts(("a cup",))
        assert e.value.status == 503
        with pytest.raises(BridgeError, match="no lifecycle node /robot9/nobody"):
            bridge.change_state("activate", 2.0)
        with pytest.raises(BridgeError, match="unknown transition 'cleanup'") as e:
            bridge.change_state("cleanup", 2.0)  # a real lifecycle transition, not one the page may ask
        assert e.value.status == 400
    finally:
        bridge.close()
