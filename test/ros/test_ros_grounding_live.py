"""The live path a user meets first (issue 12, req. 3): one remap of `image` moves the
compressed input too (an explicit remap of `image/compressed` still wins), and /diagnostics
says WARN for a silent camera, ERROR when every frame fails, OK once frames are answered
again, under the node's fully qualified name. Each test runs one grounding_node process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, fresh_domain, image

pytestmark = [pytest.mark.ros, pytest.mark.timeout(240), pytest.mark.usefixtures("requires_vision_msgs")]

CAMERA = "/camera/color/image_raw"


def _png(peer: RosPeer, sec: int) -> Any:
    import cv2
    from sensor_msgs.msg import CompressedImage

    msg = CompressedImage(format="png", header=peer.header(sec))
    msg.data = cv2.imencode(".png", image(seed=sec))[1].tobytes()
    return msg


def _garbage(peer: RosPeer, sec: int) -> Any:
    from sensor_msgs.msg import CompressedImage

    msg = CompressedImage(format="jpeg", header=peer.header(sec))
    msg.data = b"\xff\xd8 not a jpeg at all"
    return msg


def _publisher(peer: RosPeer, topic: str) -> Any:
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CompressedImage

    return peer.node.create_publisher(CompressedImage, topic, QoSProfile(depth=10,
                                                                         reliability=ReliabilityPolicy.RELIABLE))


def _until_subscribed(peer: RosPeer, node: NodeProcess, pub: Any) -> bool:
    return bool(peer.spin_until(lambda: node.proc.poll() is not None or pub.get_subscription_count() > 0, 60))


def _start(tmp_path, ros_env, extra: list[str], **params: Any) -> tuple[NodeProcess, RosPeer]:
    domain = fresh_domain()
    node = NodeProcess(ros_env, domain, tmp_path / "node.log", {
        "model": "test-instant", "score_threshold": 0.0, "prompts": ["a red cup"],
        "image_reliability": "reliable", **params}, extra=["-r", f"image:={CAMERA}", *extra])
    return node, RosPeer(domain)


def _stream_until(peer: RosPeer, pub: Any, make: Callable[[RosPeer, int], Any], done: Callable[[], Any],
                  timeout: float, first: int) -> Any:
    """Publish a frame every 50 ms (stamps first, first+1, ...) until ``done()`` or timeout."""
    state = {"sec": first, "next": 0.0}

    def step() -> Any:
        now = time.monotonic()
        if now >= state["next"]:
            pub.publish(make(peer, state["sec"]))
            state["sec"] += 1
            state["next"] = now + 0.05
        return done()

    return peer.spin_until(step, timeout)


def _status(peer: RosPeer, name: str, level: bytes, words: str, since: int, *,
            answered: bool = False) -> Callable[[], Any]:
    """The first status of ``name`` at ``level`` whose message holds ``words``; ``answered``:
    one reporting answered frames too (an OK "0.0 Hz" comes while the first frame is in the
    model, before any frame has its stage times)."""
    def find() -> Any:
        for arr in peer.diags[since:]:
            for st in arr.status:
                if st.name == name and st.level == level and words in st.message:
                    done = {kv.key: kv.value for kv in st.values}.get("frames_processed", "0")
                    if not answered or int(done) > 0:
                        return st
        return None

    return find


def test_one_remap_moves_both_inputs_and_diagnostics_follow_the_camera(tmp_path, ros_env) -> None:
    node, peer = _start(tmp_path, ros_env, ["-r", "__ns:=/robot1"], camera_timeout=1.0,
                        diagnostics_period=0.25)
    try:
        jpeg = _publisher(peer, f"{CAMERA}/compressed")
        assert _until_subscribed(peer, node, jpeg), node.output()[-3000:]
        assert node.proc.poll() is None
        assert peer.node.count_subscribers("/robot1/image/compressed") == 0  # the unmoved name is unused
        name = "/robot1/grounding_node: grounding"  # fully qualified: namespaces tell nodes apart
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from vision_msgs.msg import Detection2DArray

        answers: list[Any] = []
        peer.node.create_subscription(Detection2DArray, "/robot1/detections", answers.append,
                                      QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE))
        # a silent camera: WARN naming the topics
        assert peer.spin_until(_status(peer, name, b"\x01", "no image for", 0), 20), node.output()[-2000:]
        warn = _status(peer, name, b"\x01", "no image", 0)()
        assert CAMERA in warn.message and f"{CAMERA}/compressed" in warn.message
        # JPEG/PNG frames on <camera>/compressed are answered (and OK is reported)
        n = len(peer.diags)
        answered_ok = _status(peer, name, b"\x00", "Hz", n, answered=True)
        assert _stream_until(peer, jpeg, _png, answered_ok, 20, first=100), node.output()[-2000:]
        # the OK report may come before our subscription has its answers delivered: spin for them
        assert peer.spin_until(lambda: any(a.header.stamp.sec >= 100 for a in answers), 10)
        values = {kv.key: kv.value for kv in answered_ok().values}
        for key in ("stage_decode_p50_ms", "stage_decode_p95_ms", "stage_forward_p50_ms"):
            assert float(values[key]) >= 0.0, key  # the node's decode apart from the detector's stages
        assert values["compressed_topic"] == f"{CAMERA}/compressed"
        # frames arrive but every one fails: ERROR with the reason
        n = len(peer.diags)
        assert _stream_until(peer, jpeg, _garbage, _status(peer, name, b"\x02", "every frame fails", n), 20,
                             first=1000), node.output()[-2000:]
        # good frames again: OK again
        n = len(peer.diags)
        assert _stream_until(peer, jpeg, _png, _status(peer, name, b"\x00", "Hz", n), 20, first=2000)
    finally:
        peer.close()
        assert node.stop() == 0


def test_an_explicit_compressed_remap_is_honoured(tmp_path, ros_env) -> None:
    node, peer = _start(tmp_path, ros_env, ["-r", "image/compressed:=/camera/jpeg"])
    try:
        jpeg = _publisher(peer, "/camera/jpeg")
        assert _until_subscribed(peer, node, jpeg), node.output()[-3000:]
        assert peer.node.count_subscribers(f"{CAMERA}/compressed") == 0
        assert peer.node.count_subscribers(CAMERA) == 1  # the raw input moved all the same
        done = lambda: any(m.header.stamp.sec >= 300 for _, m in peer.dets)  # noqa: E731
        assert _stream_until(peer, jpeg, _png, done, 20, first=300), node.output()[-2000:]
    finally:
        peer.close()
        assert node.stop() == 0
