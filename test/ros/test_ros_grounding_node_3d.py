"""grounding_node with depth_topic and tracking: 3D detections, target pose, markers and track
ids over DDS, and every way the depth input can go wrong (no CameraInfo, K = 0, depth never
arriving, sizes that differ, a bad encoding): each said in one clear log line while the
node keeps serving 2D detections."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, class_ids, fresh_domain, image

pytestmark = [pytest.mark.ros, pytest.mark.timeout(240)]

H, W = 48, 64
FX, CX, CY = 50.0, 31.5, 23.5
PROMPTS = ["a red cup", "the door"]


class DepthPeer(RosPeer):
    """The test peer plus a depth camera (aligned depth + CameraInfo) and the 3D outputs."""

    def __init__(self, domain: int) -> None:
        super().__init__(domain)
        from geometry_msgs.msg import PoseStamped
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import CameraInfo, Image
        from vision_msgs.msg import Detection3DArray
        from visualization_msgs.msg import MarkerArray

        rel = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        self.pub_depth = self.node.create_publisher(Image, "cam/depth/image_raw", rel)
        self.pub_info = self.node.create_publisher(CameraInfo, "cam/depth/camera_info", rel)
        self.d3: list = []
        self.poses: list = []
        self.markers: list = []
        self.node.create_subscription(Detection3DArray, "detections_3d", self.d3.append, rel)
        self.node.create_subscription(PoseStamped, "target_pose", self.poses.append, rel)
        self.node.create_subscription(MarkerArray, "markers", self.markers.append, rel)

    def send_info(self, k: list[float], w: int = W, h: int = H) -> None:
        from sensor_msgs.msg import CameraInfo

        msg = CameraInfo(width=w, height=h)
        msg.k = [float(v) for v in k]
        self.pub_info.publish(msg)

    def send_depth(self, sec: int, mm: np.ndarray, encoding: str = "16UC1") -> None:
        from sensor_msgs.msg import Image

        msg = Image(header=self.header(sec), height=mm.shape[0], width=mm.shape[1], encoding=encoding,
                    step=mm.shape[1] * mm.dtype.itemsize)
        msg.data = mm.tobytes()
        self.pub_depth.publish(msg)

    def d3_for(self, sec: int, timeout: float = 5.0):
        return self.spin_until(lambda: next((m for m in self.d3 if m.header.stamp.sec == sec), None), timeout)


K = [FX, 0.0, CX, 0.0, FX, CY, 0.0, 0.0, 1.0]
FLAT = np.full((H, W), 2000, np.uint16)  # everything 2 m away


def _expected_boxes() -> np.ndarray:
    from probench.models.testing import ScriptedDetector

    det = ScriptedDetector()
    det.set_prompts(PROMPTS)
    return det.detect(np.zeros((H, W, 3), np.uint8), PROMPTS).xyxy


@pytest.fixture(scope="module")
def peer(tmp_path_factory, ros_env, requires_vision_msgs):
    domain = fresh_domain()
    log = tmp_path_factory.mktemp("gn3d") / "node.log"
    node = NodeProcess(ros_env, domain, log, {
        "model": "test-instant", "score_threshold": 0.0, "prompts": PROMPTS,
        "image_reliability": "reliable", "diagnostics_period": 0.3, "depth_topic": "cam/depth/image_raw",
        "depth_tolerance": 0.3, "min_depth_pixels": 10, "tracking": True,
    })
    t = DepthPeer(domain)
    try:
        t.wait_ready(node)
        assert t.label_after(0, PROMPTS), node.output()
        assert t.spin_until(lambda: t.pub_depth.get_subscription_count() > 0
                            and t.pub_info.get_subscription_count() > 0, 20), node.output()
        yield node, t
    finally:
        t.close()
        node.stop()


def _serves_2d(node, t, sec: int) -> None:
    ans = t.answer(sec)
    assert ans is not None, node.output()[-3000:]
    assert sorted(class_ids(ans)) == sorted(PROMPTS)


def test_without_usable_camera_info_3d_waits_and_2d_goes_on(peer) -> None:
    node, t = peer
    t.send_depth(1, FLAT)
    t.send_image(image(), t.header(1))
    _serves_2d(node, t, 1)
    assert t.last_diag_values()["waiting_3d"] == "no CameraInfo received yet"
    t.send_info([0.0] * 9)  # an uncalibrated camera
    t.spin_for(0.3)
    t.send_depth(2, FLAT)
    t.send_image(image(), t.header(2))
    _serves_2d(node, t, 2)
    assert t.d3_for(2, timeout=1.0) is None
    assert t.spin_until(lambda: "K = 0" in t.last_diag_values()["waiting_3d"], 5)
    out = node.output()
    assert "no 3D output: no CameraInfo received yet (2D detections go on)" in out
    assert "CameraInfo unusable: K has no usable focal length (fx=0, fy=0)" in out


def test_depth_before_and_after_colour_gives_3d_pose_and_ids(peer) -> None:
    node, t = peer
    t.send_info(K)
    t.spin_for(0.3)
    t.send_depth(10, FLAT)  # depth first
    t.send_image(image(), t.header(10))
    first = t.d3_for(10)
    assert first is not None, node.output()[-3000:]
    t.send_image(image(), t.header(11))  # colour first, its depth 0.1 s later
    t.spin_for(0.1)
    t.send_depth(11, FLAT)
    second = t.d3_for(11)
    assert second is not None, node.output()[-3000:]
    boxes = _expected_boxes()
    for msg in (first, second):
        assert msg.header == t.header(11 if msg is second else 10)
        assert [d.results[0].hypothesis.class_id for d in msg.detections] == class_ids(t.answer(11))
        for d in msg.detections:
            i = PROMPTS.index(d.results[0].hypothesis.class_id)
            u, v = (boxes[i, 0] + boxes[i, 2]) / 2, (boxes[i, 1] + boxes[i, 3]) / 2
            c = d.bbox.center.position
            assert (c.x, c.y, c.z) == pytest.approx(((u - CX) * 2.0 / FX, (v - CY) * 2.0 / FX, 2.0), abs=1e-6)
            assert d.bbox.size.x == pytest.approx((boxes[i, 2] - boxes[i, 0]) * 2.0 / FX)
    # track ids: the same in 2D and 3D on every frame (from the tracker's first frame on)
    ids_2d = {d.results[0].hypothesis.class_id: d.id for d in t.answer(11).detections}
    ids_3d = {d.results[0].hypothesis.class_id: d.id for d in second.detections}
    assert ids_2d == ids_3d and all(ids_2d.values()) and len(set(ids_2d.values())) == 2
    t.send_depth(12, FLAT)
    t.send_image(image(), t.header(12))
    assert t.d3_for(12) is not None
    assert {d.results[0].hypothesis.class_id: d.id for d in t.answer(12).detections} == ids_2d
    pose = t.spin_until(lambda: next((p for p in t.poses if p.header.stamp.sec == 12), None), 5)
    first_prompt = next(d for d in t.d3_for(12).detections if d.results[0].hypothesis.class_id == PROMPTS[0])
    assert pose is not None and pose.pose.position == first_prompt.bbox.center.position
    vals = t.last_diag_values()
    assert int(vals["frames_3d"]) >= 3 and float(vals["coverage_3d"]) > 0
    assert vals["waiting_3d"] == "-"
    assert float(vals["stage_track_p50_ms"]) > 0.0 and float(vals["stage_depth_3d_p50_ms"]) > 0.0


def test_markers_for_a_viewer(peer) -> None:
    node, t = peer
    t.send_info(K)
    t.spin_until(lambda: t.node.count_subscribers("markers") > 0, 5)
    t.spin_for(0.5)  # the node sees the match
    for sec in (20, 21):  # 8 s after the last frame the tracks are gone: ids again from the 2nd frame
        t.send_depth(sec, FLAT)
        t.send_image(image(), t.header(sec))
        assert t.d3_for(sec) is not None
    got = t.spin_until(lambda: next((m for m in t.markers
                                     if m.markers and m.markers[-1].header.stamp.sec == 21), None), 5)
    assert got is not None, node.output()[-3000:]
    assert got.markers[0].action == 3  # DELETEALL first
    texts = [m.text for m in got.markers if m.ns == "labels"]
    assert len(texts) == 2 and all(" m" in s and "#" in s for s in texts)


def test_depth_never_arriving_mismatched_size_and_bad_encoding(peer) -> None:
    node, t = peer
    t.send_info(K)
    t.spin_for(0.3)
    t.send_image(image(), t.header(30))  # its depth never comes
    _serves_2d(node, t, 30)
    assert t.d3_for(30, timeout=1.0) is None
    t.send_depth(31, np.full((H // 2, W // 2), 2000, np.uint16))  # a depth image of another size
    t.send_image(image(), t.header(31))
    _serves_2d(node, t, 31)
    t.send_depth(32, np.zeros((H, W), np.uint8), encoding="mono8")  # not a depth encoding
    t.send_image(image(), t.header(32))
    _serves_2d(node, t, 32)
    assert t.d3_for(31, timeout=0.5) is None and t.d3_for(32, timeout=0.5) is None
    t.send_depth(33, FLAT)  # and a good one still gets its 3D
    t.send_image(image(), t.header(33))
    assert t.d3_for(33) is not None, node.output()[-3000:]
    out = node.output()
    assert "no 3D output: no depth image within 0.3 s (depth_tolerance) of the colour frame" in out
    assert "no 3D output: sizes differ: colour 64x48, depth 32x24, CameraInfo 64x48" in out
    assert "depth image dropped: depth encoding 'mono8' is not supported: use 16UC1" in out
    vals = t.last_diag_values()
    assert int(vals["frames_without_depth"]) >= 1 and int(vals["depth_errors"]) >= 1
    assert node.proc.poll() is None and "Traceback" not in out


def test_console_shows_track_ids_and_distances(peer) -> None:
    from probench.ros.console_bridge import RosConsoleBridge

    node, t = peer
    t.send_info(K)
    bridge = RosConsoleBridge("/grounding_node", domain_id=t.ctx.get_domain_id())
    try:
        items = ()
        for sec in range(40, 80):  # until the bridge has matched the node's topics
            t.send_depth(sec, FLAT)
            t.send_image(image(), t.header(sec))
            t.spin_for(0.15)
            items = bridge.view().detections
            if len(items) == 2 and all(d.track_id and d.distance_m is not None for d in items):
                break
        assert len(items) == 2, node.output()[-2000:]
        boxes = _expected_boxes()
        for d in items:
            i = PROMPTS.index(d.label)
            u, v = (boxes[i, 0] + boxes[i, 2]) / 2, (boxes[i, 1] + boxes[i, 3]) / 2
            xyz = np.array([(u - CX) * 2.0 / FX, (v - CY) * 2.0 / FX, 2.0])
            assert d.distance_m == pytest.approx(float(np.linalg.norm(xyz)))
            assert d.track_id.isdigit() and d.extra() == f"#{d.track_id} {d.distance_m:.2f} m"
    finally:
        bridge.close()
