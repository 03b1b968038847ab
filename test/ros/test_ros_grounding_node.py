"""grounding_node end to end over DDS: the node is a subprocess (its console script), this
process publishes images/prompts and checks the answers (docs/DESIGN.md, ROS graph contract).

One shared node (test-instant) serves the contract and bad-input tests; lifecycle, slow
camera, bad model and tiny-owlv2 each get their own process and ROS domain.
"""

from __future__ import annotations

import numpy as np
import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, class_ids, fresh_domain, image

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def shared(tmp_path_factory, ros_env, requires_vision_msgs):
    domain = fresh_domain()
    log = tmp_path_factory.mktemp("gn") / "node.log"
    node = NodeProcess(ros_env, domain, log, {
        "model": "test-instant", "score_threshold": 0.0, "prompts": ["a red cup"],
        "image_reliability": "reliable", "diagnostics_period": 0.3,
    })
    tester = RosPeer(domain)
    try:
        tester.wait_ready(node)
        assert tester.label_after(0, ["a red cup"]), node.output()
        yield node, tester
    finally:
        tester.close()
        node.stop()


def test_header_copied_and_prompt_change_followed_by_label_info(shared) -> None:
    node, t = shared
    n0 = len(t.labels)
    t.send_prompt("a red cup")  # a repeat of the active set is acknowledged too
    assert t.label_after(n0, ["a red cup"])
    header = t.header(101, 7, "cam_left")
    t.send_image(image(), header)
    ans = t.answer(101, 7)
    assert ans is not None, node.output()[-2000:]
    assert ans.header == header
    assert all(d.header == header for d in ans.detections)
    assert class_ids(ans) == ["a red cup"]
    d = ans.detections[0]
    assert 0 <= d.bbox.center.position.x <= 64 and 0 < d.bbox.size_x <= 64
    assert 0.0 <= d.results[0].hypothesis.score <= 1.0

    n = len(t.labels)
    t.send_prompt(" the door ; a chair;")
    label = t.label_after(n, ["the door", "a chair"])
    assert label is not None and (label.header.stamp.sec or label.header.stamp.nanosec)
    t.send_image(image(seed=1), t.header(102))
    ans = t.answer(102)
    assert ans is not None and sorted(class_ids(ans)) == ["a chair", "the door"]

    n = len(t.labels)
    t.send_prompt("the door;a chair")  # same set again: still one LabelInfo per accepted message
    assert t.label_after(n, ["the door", "a chair"])


def test_compressed_input(shared) -> None:
    import cv2
    from sensor_msgs.msg import CompressedImage

    _, t = shared
    _, buf = cv2.imencode(".png", image(seed=2))
    msg = CompressedImage(format="png", header=t.header(201, 5))
    msg.data = buf.tobytes()
    t.spin_until(lambda: t.pub_compressed.get_subscription_count() > 0, 10)
    t.pub_compressed.publish(msg)
    ans = t.answer(201, 5)
    assert ans is not None and ans.header == msg.header


def test_bad_inputs_leave_the_node_serving(shared) -> None:
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String

    from probench.ros.convert import rgb_to_image_msg

    node, t = shared
    n = len(t.labels)
    t.send_prompt("a lamp")
    assert t.label_after(n, ["a lamp"])
    errors_before = int(t.last_diag_values()["errors"])
    rejected_before = int(t.last_diag_values()["prompts_rejected"])

    good = rgb_to_image_msg(image(), t.header(0))
    bad = []
    for i, change in enumerate([
        dict(encoding="yuv422"),
        dict(encoding="weird"),
        dict(step=10),  # < width * 3
        dict(height=0, width=0, step=0, data=b""),
        dict(data=bytes(good.step * good.height - 1)),  # truncated
        dict(encoding="mono16", step=129),  # odd step for 16-bit samples
    ]):
        m = rgb_to_image_msg(image(), t.header(300 + i))
        for k, v in change.items():
            setattr(m, k, v)
        bad.append(m)
    def errors_now() -> int:
        return int({kv.key: kv.value for kv in t.diags[-1].status[0].values}["errors"])

    for k, m in enumerate(bad, start=1):  # one at a time: a queued bad frame would be "skipped"
        t.pub_image.publish(m)
        assert t.spin_until(lambda k=k: errors_now() == errors_before + k, 10), node.output()[-2000:]
    raw = bytearray(serialize_message(String(data="abcd")))
    raw[raw.index(b"abcd"):raw.index(b"abcd") + 4] = b"\xff\xfe\xc3\x28"  # not UTF-8
    for text in ["", "   ", " ; ; ", "x" * 600, ";".join(["a"] * 1025)]:
        t.send_prompt(text)
    t.pub_prompt.publish(bytes(raw))
    t.spin_for(0.5)

    t.send_image(image(seed=3), t.header(399, 1))
    ans = t.answer(399, 1)
    assert ans is not None, node.output()[-3000:]
    assert class_ids(ans) == ["a lamp"]  # previous prompts stayed active
    assert all(t.answer(300 + i, timeout=0.01) is None for i in range(len(bad)))
    assert node.proc.poll() is None
    diag = t.last_diag_values()
    assert int(diag["errors"]) - errors_before == len(bad)
    assert int(diag["prompts_rejected"]) - rejected_before == 6
    out = node.output()
    assert "image dropped: unsupported image encoding 'yuv422'" in out
    for words in ["empty or whitespace-only prompt message", "prompt 0 is 600", "characters long (limit 512)",
                  "1025 prompts given (limit 1024)", "undecodable message"]:
        assert words in out, words
    assert "Traceback" not in out


def test_debug_image_drawn_for_a_subscriber(shared) -> None:
    _, t = shared
    t.subscribe_debug()
    t.spin_until(lambda: t.node.count_subscribers("debug_image") > 0, 5)
    t.spin_for(0.5)  # let the node see the match
    img = image(96, 128, seed=4)
    header = t.header(501)
    t.send_image(img, header)
    got = t.spin_until(lambda: next((m for m in t.debug if m.header == header), None), 10)
    assert got is not None
    from probench.ros.convert import image_to_rgb

    drawn = image_to_rgb(got)
    assert got.encoding == "rgb8" and drawn.shape == img.shape
    assert not np.array_equal(drawn, img)  # boxes were drawn


def test_prompts_parameter_validated_at_runtime(shared) -> None:
    from rcl_interfaces.msg import Parameter as ParamMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import GetParameters, SetParameters

    _, t = shared
    cli = t.node.create_client(SetParameters, "/grounding_node/set_parameters")
    assert cli.wait_for_service(timeout_sec=10)

    def set_param(name: str, value: ParameterValue) -> object:
        fut = cli.call_async(SetParameters.Request(parameters=[ParamMsg(name=name, value=value)]))
        t.spin_until(fut.done, 10)
        return fut.result().results[0]

    def strings(v: list[str]) -> ParameterValue:
        return ParameterValue(type=ParameterType.PARAMETER_STRING_ARRAY, string_array_value=v)

    n = len(t.labels)
    res = set_param("prompts", strings(["a bottle", "a key"]))
    assert res.successful, res.reason
    assert t.label_after(n, ["a bottle", "a key"])
    res = set_param("prompts", strings([]))
    assert not res.successful and "no prompts given" in res.reason
    res = set_param("prompts", strings(["ok", "  "]))
    assert not res.successful and "prompt 1 is empty" in res.reason
    res = set_param("image_reliability", ParameterValue(type=ParameterType.PARAMETER_STRING,
                                                        string_value="sometimes"))
    assert not res.successful and "best_effort" in res.reason
    # a prompt from the topic shows in the parameter
    n = len(t.labels)
    t.send_prompt("a fork")
    assert t.label_after(n, ["a fork"])
    get = t.node.create_client(GetParameters, "/grounding_node/get_parameters")
    fut = get.call_async(GetParameters.Request(names=["prompts"]))
    t.spin_until(fut.done, 10)
    assert list(fut.result().values[0].string_array_value) == ["a fork"]


def test_incompatible_qos_is_logged(shared) -> None:
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    node, t = shared  # the shared node asks for reliable images
    best_effort = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
    pub = t.node.create_publisher(Image, "image", best_effort)
    try:
        found = t.spin_until(lambda: "incompatible QoS" in node.output(), 15)
        assert found, node.output()[-2000:]
        assert "on 'image'" in node.output() and "RELIABILITY" in node.output()
    finally:
        t.node.destroy_publisher(pub)


def test_diagnostics_report(shared) -> None:
    _, t = shared
    t.send_image(image(), t.header(601))
    assert t.answer(601) is not None
    vals = t.last_diag_values()
    assert vals["model"] == "test-instant" and vals["device"] == "cpu" and vals["state"] == "active"
    assert int(vals["frames_processed"]) >= 1
    assert int(vals["frames_received"]) >= int(vals["frames_processed"])
    for key in ("latency_p50_ms", "latency_p95_ms", "latency_max_ms", "rate_hz", "frames_skipped"):
        float(vals[key])
    assert t.diags[-1].status[0].level == b"\x00"  # OK: active, prompts, no new errors


def test_bad_model_exits_with_one_line(tmp_path, ros_env, requires_vision_msgs) -> None:
    node = NodeProcess(ros_env, fresh_domain(), tmp_path / "log", {"model": "no-such-model"})
    rc = node.proc.wait(60)
    out = node.output()
    node.stop()
    assert rc == 2  # a value the table refuses at startup (its model check), as -p max_detections:=x
    assert "unknown model 'no-such-model'" in out and "Traceback" not in out


def test_node_prompt_command(shared, ros_env) -> None:
    import subprocess
    import sys

    _, t = shared
    env = {**ros_env, "ROS_DOMAIN_ID": str(t.ctx.get_domain_id())}
    r = subprocess.run([sys.executable, "-m", "probench", "node", "prompt", "a kettle; a spoon"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "active prompts: a kettle ; a spoon"
    assert t.label_after(0, ["a kettle", "a spoon"])


def test_a_model_without_masks_has_no_segmentation_topics_and_says_so_once(shared) -> None:
    node, t = shared
    t.spin_for(0.3)
    for topic in ("segmentation/instances", "segmentation/semantic", "segmentation/confidence",
                  "segmentation/label_info", "target_points"):
        assert t.node.count_publishers(topic) == 0, topic
    assert t.node.count_publishers("detections") == 1  # (the node is there)
    assert node.output().count("gives no instance masks here: no segmentation topics") == 1
