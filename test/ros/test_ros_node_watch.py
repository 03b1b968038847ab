"""``probench node watch`` against a running grounding node (the scripted ``test-masks``,
depth and tracking on, fed by the synthetic RGB-D camera): every output a newcomer had to
write a subscriber for (track ids, 3D positions, mask summaries, ``target``, ``target_pose``,
``target_points``) comes out as one JSON object per message, and the latched outputs
(``target``, ``segmentation/label_info``) arrive even after the camera has stopped, which
only a transient-local subscription gets."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, fresh_domain

pytestmark = [pytest.mark.ros, pytest.mark.timeout(240)]

PROMPTS = ["a cup", "a door"]


def _watch(env: dict[str, str], *args: str) -> list[dict]:
    cmd = [sys.executable, "-m", "probench", "node", "watch", "--json", "--timeout", "60", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_watch_shows_every_output_with_the_right_qos(tmp_path, ros_env, requires_vision_msgs) -> None:
    domain = fresh_domain()
    env = {**ros_env, "ROS_DOMAIN_ID": str(domain)}
    node = NodeProcess(ros_env, domain, tmp_path / "node.log", {
        "model": "test-masks", "score_threshold": 0.0, "prompts": PROMPTS, "image_reliability": "reliable",
        "depth_topic": "depth/image_raw", "tracking": True, "min_depth_pixels": 5, "depth_tolerance": 0.05})
    camera = subprocess.Popen([sys.executable, "-m", "probench.ros.synthetic_camera", "--depth", "--reliable",
                               "--rate", "10"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    peer = RosPeer(domain)
    try:
        peer.wait_ready(node)
        tracked = peer.spin_until(lambda: any(d.id for _, m in peer.dets for d in m.detections), 60)
        assert tracked, node.output()[-3000:]
        got = _watch(env, "--for", "3")
        by_topic: dict[str, list[dict]] = {}
        for rec in got:
            by_topic.setdefault(rec["topic"], []).append(rec)
        assert {"detections", "detections_3d", "target", "target_pose", "target_points",
                "segmentation/instances", "segmentation/semantic", "segmentation/confidence",
                "segmentation/label_info"} <= set(by_topic)
        last = by_topic["detections"][-1]["detections"]
        assert sorted(d["class"] for d in last) == PROMPTS and all(d["id"] for d in last)  # track ids
        d3 = by_topic["detections_3d"][-1]["detections"]
        assert {d["id"] for d in d3} == {d["id"] for d in last} and all(d["position"][2] > 0 for d in d3)
        inst = by_topic["segmentation/instances"][-1]["instances"]
        assert {(i["class"], i["id"]) for i in inst} == {(d["class"], d["id"]) for d in last}
        assert all(i["pixels"] > 0 for i in inst)
        assert by_topic["segmentation/label_info"][0]["classes"] == ["background", *PROMPTS]
        assert {c["class"] for c in by_topic["segmentation/semantic"][-1]["classes"]} == set(PROMPTS)
        target = by_topic["target"][-1]
        assert target["class"] == PROMPTS[0] and target["id"] in {d["id"] for d in last}
        assert by_topic["target_points"][-1]["points"] > 0
        assert by_topic["target_pose"][-1]["position"][2] > 0
        # the camera stops: only the latched outputs still come, to a watch started afterwards
        camera.terminate()
        camera.communicate(timeout=20)
        peer.spin_for(0.5)
        after = {rec["topic"] for rec in _watch(env, "--for", "1.5")}
        assert after == {"target", "segmentation/label_info"}, after
        assert "Traceback" not in node.output()
    finally:
        peer.close()
        if camera.poll() is None:
            camera.terminate()
            camera.communicate(timeout=20)
        assert node.stop() == 0
