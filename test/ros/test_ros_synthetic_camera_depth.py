"""3D without a camera: ``synthetic_camera --depth`` feeds a live grounding node (its
``depth_topic``), and the node's ``detections_3d`` put each detection at the known scene's
3D point: centre error <= 2% of the distance, with 1% depth noise and 5% holes. The
detector is the scripted ``test-instant``, whose boxes depend only on the prompt text:
prompts whose boxes lie inside a panel are picked from the known scene, so the truth of
each centre is the point of that panel (at its known depth) on the box centre's ray."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, fresh_domain
from helpers.panel_prompts import prompts_on_panels

pytestmark = [pytest.mark.ros, pytest.mark.timeout(240)]

W, H = 640, 480


def test_live_node_3d_on_the_synthetic_rgbd_camera(tmp_path, ros_env, requires_vision_msgs) -> None:
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from vision_msgs.msg import Detection3DArray

    from probench.spatial.rgbd_scene import camera_intrinsics

    truth = prompts_on_panels(W, H)
    domain = fresh_domain()
    env = {**ros_env, "ROS_DOMAIN_ID": str(domain)}
    node = NodeProcess(ros_env, domain, tmp_path / "node.log", {
        "model": "test-instant", "score_threshold": 0.0, "prompts": list(truth),
        "image_reliability": "reliable", "depth_topic": "depth/image_raw", "tracking": True,
        "depth_tolerance": 0.05})
    camera = subprocess.Popen([sys.executable, "-m", "probench.ros.synthetic_camera", "--depth", "--reliable",
                               "--rate", "5", "--size", f"{W}x{H}", "--depth-noise", "0.01",
                               "--depth-invalid", "0.05"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    peer = RosPeer(domain)
    got: list = []
    peer.node.create_subscription(Detection3DArray, "detections_3d", got.append,
                                  QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE))
    try:
        full = peer.spin_until(lambda: next((m for m in got if len(m.detections) == len(truth)), None), 90)
        assert full is not None, node.output()[-3000:]
        k = camera_intrinsics(W, H)
        assert full.header.frame_id == "synthetic_camera_optical_frame"
        for d in full.detections:
            box, z = truth[d.results[0].hypothesis.class_id]
            u, v = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
            want = np.array([(u - k.cx) * z / k.fx, (v - k.cy) * z / k.fy, z])
            c = d.bbox.center.position
            err = float(np.linalg.norm(np.array([c.x, c.y, c.z]) - want) / np.linalg.norm(want))
            assert err <= 0.02, (d.results[0].hypothesis.class_id, (c.x, c.y, c.z), want, err)
            print(f"{d.results[0].hypothesis.class_id}: centre error {err:.2%} at {z} m")
        assert "Traceback" not in node.output()
    finally:
        peer.close()
        camera.terminate()
        out = camera.communicate(timeout=20)[0]
        assert node.stop() == 0
    assert "Traceback" not in out, out
