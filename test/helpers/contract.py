"""The contract between the three callers of the frame core: one script of camera frames,
depth, operator prompts (explicit ``ORIG => CAT`` forms), a live policy switch and per-frame
prompt sets, played through the grounding node over DDS, through ``probench ground`` on a
bag, and through the evaluator's fake link; each gives, per frame stamp, what it answered.
The two evaluator links (the DDS link's subscriptions on the node's topics, the fake link)
also give the :class:`~probench.realtime.eval_stream.Answer` the evaluator would collect.

Not a test module (imported by test/ros/test_ros_contract.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from probench.realtime.node_spec import MASK_TOPICS

T0 = 1_700_000_000 * 1_000_000_000
PERIOD = 100_000_000  # 10 Hz: nothing is ever skipped for being late
IMAGE, DEPTH, INFO = "/camera/color/image_raw", "/camera/depth/image_raw", "/camera/depth/camera_info"
PROMPT, FRAME_PROMPTS = "/grounding_node/prompt", "/evaluator/frame_prompts"
MODEL = "test-masks"
# the node's parameters, and the same as ground's flags and the fake link's overrides
NODE = {"model": MODEL, "score_threshold": 0.0, "tracking": True, "max_detections": 100,
        "depth_tolerance": 0.5, "image_reliability": "reliable", "frame_prompts_wait": 0.5}


@dataclass(frozen=True)
class Event:
    t_ns: int
    kind: str  # "prompt" (text), "policy" (name), "frame_prompts" (stamp, texts), "frame" (stamp)
    value: Any


@dataclass
class Script:
    events: list[Event]
    images: dict[int, bytes]  # stamp -> serialized Image (rgb8)
    depths: dict[int, bytes]  # stamp -> serialized Image (16UC1), registered to the colour frame
    info: bytes  # serialized CameraInfo
    k: list[float]
    size: tuple[int, int]  # (width, height)

    @property
    def stamps(self) -> list[int]:
        return [e.value for e in self.events if e.kind == "frame"]


def script() -> Script:
    """Eleven frames of a synthetic RGB-D scene: prompts with an explicit form, a policy
    switch to categorical after frame 3, per-frame sets on frames 6 and 7, back to the
    operator's prompts, a new operator set at frame 9."""
    from probench.bags.typestore import typestore
    from probench.spatial.synthetic import DEFAULT_K, encode, moving_scene

    ts = typestore()
    image_cls, info_cls = ts.types["sensor_msgs/msg/Image"], ts.types["sensor_msgs/msg/CameraInfo"]
    header_cls, time_cls = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    k = DEFAULT_K
    kk = [k.fx, 0.0, k.cx, 0.0, k.fy, k.cy, 0.0, 0.0, 1.0]

    def header(stamp: int) -> Any:
        t = time_cls(sec=stamp // 10**9, nanosec=stamp % 10**9)
        return header_cls(stamp=t, frame_id="camera_optical")

    roi = ts.types["sensor_msgs/msg/RegionOfInterest"](x_offset=0, y_offset=0, height=0, width=0,
                                                      do_rectify=False)
    info = info_cls(header=header(T0), height=k.height, width=k.width, distortion_model="plumb_bob",
                    d=np.zeros(5), k=np.array(kk), r=np.eye(3).reshape(-1), p=np.zeros(12), binning_x=0,
                    binning_y=0, roi=roi)
    events: list[Event] = [Event(T0, "prompt", "a red backpack on the floor => backpack; the open door")]
    images, depths = {}, {}
    for i in range(11):
        t = T0 + (i + 1) * PERIOD
        rgb, depth_m = moving_scene(i, 3, k).render()
        img = image_cls(header=header(t), height=k.height, width=k.width, encoding="rgb8", is_bigendian=0,
                        step=k.width * 3, data=rgb.reshape(-1))
        d = encode(depth_m, "16UC1")
        dep = image_cls(header=header(t), height=k.height, width=k.width, encoding="16UC1", is_bigendian=0,
                        step=k.width * 2, data=d.view(np.uint8).reshape(-1))
        images[t] = bytes(ts.serialize_cdr(img, "sensor_msgs/msg/Image"))
        depths[t] = bytes(ts.serialize_cdr(dep, "sensor_msgs/msg/Image"))
        if i == 3:
            events.append(Event(t - PERIOD // 2, "policy", "categorical"))
        if i == 9:
            events.append(Event(t - PERIOD // 2, "prompt",
                                "the open door; a small valve you can turn => valve"))
        if i in (6, 7):
            events.append(Event(t - PERIOD // 4, "frame_prompts", (t, ("a grey wall", "the open door"))))
        events.append(Event(t, "frame", t))
    return Script(events, images, depths, bytes(ts.serialize_cdr(info, "sensor_msgs/msg/CameraInfo")), kk,
                  (k.width, k.height))


@dataclass
class Answers:
    """What one caller answered, per frame stamp: the decoded outputs (comparable), and for an
    evaluator link the Answers it handed the collector."""

    caller: str
    frames: dict[int, dict[str, Any]] = field(default_factory=dict)
    evaluator: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)  # stamp -> Answer values

    def add(self, kind: str, raw: bytes) -> None:
        stamp, value = decode(kind, raw)
        self.frames.setdefault(stamp, {})[kind] = value

    def collect(self, answer: Any) -> None:
        """An evaluator link's Answer (a collector's handler)."""
        self.evaluator.setdefault(int(answer.stamp_ns), []).append(answer_value(answer))


def answer_value(answer: Any) -> tuple[Any, ...]:
    """An :class:`~probench.realtime.eval_stream.Answer` as compared: everything but its
    arrival time (class ids, boxes, scores, track ids, a failed frame's error)."""
    d = answer.detections
    ids = None if d.tracker_id is None else tuple(d.tracker_id.tolist())
    return (tuple(answer.class_ids), tuple(map(tuple, d.xyxy.tolist())), tuple(d.scores.tolist()), ids,
            answer.error, answer.unreadable)


def answer_differences(a: Answers, b: Answers) -> list[str]:
    """Every way ``b``'s evaluator link built other Answers than ``a``'s (empty: the same)."""
    return [f"frame {stamp}: {a.caller} {_short(a.evaluator.get(stamp))} != {b.caller} "
            f"{_short(b.evaluator.get(stamp))}"
            for stamp in sorted(set(a.evaluator) | set(b.evaluator))
            if a.evaluator.get(stamp) != b.evaluator.get(stamp)]


def decode(kind: str, raw: bytes) -> tuple[int, Any]:
    """``(stamp, comparable value)`` of a serialized output: Detection2DArray ("detections"):
    per detection (class_id, rounded score, rounded bbox, id); Detection3DArray
    ("detections_3d"): (class_id, id, rounded centre); mask images: (encoding, h, w, bytes)."""
    from probench.bags.typestore import vision_typestore

    ts = vision_typestore()
    if kind == "detections":
        msg = ts.deserialize_cdr(raw, "vision_msgs/msg/Detection2DArray")
        value: Any = [(d.results[0].hypothesis.class_id, round(d.results[0].hypothesis.score, 6),
                       tuple(round(v, 3) for v in (d.bbox.center.position.x, d.bbox.center.position.y,
                                                   d.bbox.size_x, d.bbox.size_y)), d.id)
                      for d in msg.detections]
    elif kind == "detections_3d":
        msg = ts.deserialize_cdr(raw, "vision_msgs/msg/Detection3DArray")
        value = [(d.results[0].hypothesis.class_id, d.id,
                  tuple(round(v, 4) for v in (d.bbox.center.position.x, d.bbox.center.position.y,
                                              d.bbox.center.position.z))) for d in msg.detections]
    else:
        msg = ts.deserialize_cdr(raw, "sensor_msgs/msg/Image")
        value = (msg.encoding, msg.height, msg.width, bytes(msg.data))
    stamp = int(msg.header.stamp.sec) * 10**9 + int(msg.header.stamp.nanosec)
    return stamp, value


OUTPUTS = ("detections", "detections_3d", *MASK_TOPICS)


def differences(a: Answers, b: Answers) -> list[str]:
    """Every way ``b`` answered differently from ``a`` (empty: the same answers)."""
    out = []
    for stamp in sorted(set(a.frames) | set(b.frames)):
        fa, fb = a.frames.get(stamp, {}), b.frames.get(stamp, {})
        for kind in OUTPUTS:
            if fa.get(kind) != fb.get(kind):
                out.append(f"frame {stamp}: {kind}: {a.caller} {_short(fa.get(kind))} != {b.caller} "
                           f"{_short(fb.get(kind))}")
    return out


def _short(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 4 and isinstance(value[3], bytes):
        return f"({value[0]}, {value[1]}x{value[2]}, {len(value[3])} bytes, sum {sum(value[3])})"
    return repr(value)[:300]


# -- the fake link --------------------------------------------------------------------------
def through_fake_link(s: Script, *, tamper: Callable[[Any], None] | None = None) -> Answers:
    """The script through :class:`helpers.fake_link.FakeGroundingLink` on a fake
    clock (``tamper`` may change the link's handling, to prove the contract test can fail)."""
    from helpers.fake_link import FakeClock, FakeGroundingLink
    from probench.models.zoo import load_detector
    from probench.realtime.frame_core import Wanted

    clock = FakeClock(start_ns=T0)
    link = FakeGroundingLink(clock=clock, detector=load_detector(MODEL),
                             grounding={**NODE, "depth_topic": DEPTH, "camera_info_topic": INFO})
    link.wanted = Wanted(masks=True)
    out = Answers("fake link")
    link.set_answer_handler(out.collect)  # the Answers the evaluator's collector would get
    if tamper is not None:
        tamper(link)
    link.wait_ready(False, 1.0)
    link.send_camera_info(s.k, *s.size)
    for e in s.events:
        clock.sleep(max(0.0, (e.t_ns - clock.now_ns()) / 1e9))
        if e.kind == "prompt":
            from probench.prompting.messages import prompts_from_message

            link.put_prompts(prompts_from_message(e.value))
        elif e.kind == "policy":
            link.set_prompt_policy(e.value, "", 1.0)
        elif e.kind == "frame_prompts":
            link.announce(e.value[0], e.value[1])
        else:  # sent, then awaited (as the node's driver awaits each answer)
            link.send_depth(s.depths[e.value])
            link.send(s.images[e.value], e.value)
            for _ in range(200):
                if e.value in link.processed and link.next_event_ns() is None:
                    break
                clock.sleep(0.01)
        clock.sleep(0.01)
    link.close()
    for answer in link.answers:
        for kind, raw in _answer_outputs(answer):
            out.add(kind, raw)
    return out


def _answer_outputs(answer: Any) -> list[tuple[str, bytes]]:
    outs = [("detections", answer.detections_cdr)]
    if answer.detections_3d_cdr is not None:
        outs.append(("detections_3d", answer.detections_3d_cdr))
    outs += list(answer.mask_cdr.items())
    return outs


# -- probench ground ------------------------------------------------------------------------
def write_bag(s: Script, path: Path) -> tuple[Path, Path]:
    """The script as a robot's bag (frames, depth, CameraInfo, the prompt topic, the
    evaluator's frame_prompts) and a schedule file with the policy switch."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    from probench.bags.typestore import vision_typestore
    from probench.msgs.wire import label_info_to_cdr

    ts = vision_typestore()
    schedule = path.with_suffix(".schedule")
    lines = []
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {name: w.add_connection(name, msgtype, typestore=ts) for name, msgtype in (
            (IMAGE, "sensor_msgs/msg/Image"), (DEPTH, "sensor_msgs/msg/Image"),
            (INFO, "sensor_msgs/msg/CameraInfo"), (PROMPT, "std_msgs/msg/String"),
            (FRAME_PROMPTS, "vision_msgs/msg/LabelInfo"))}
        w.write(conns[INFO], T0 - 1, s.info)
        for e in s.events:
            if e.kind == "prompt":
                msg = ts.types["std_msgs/msg/String"](data=e.value)
                w.write(conns[PROMPT], e.t_ns, ts.serialize_cdr(msg, "std_msgs/msg/String"))
            elif e.kind == "policy":
                lines.append(f"{(e.t_ns - (T0 - 1)) / 1e9:.9f} --policy {e.value}")
            elif e.kind == "frame_prompts":
                stamp, texts = e.value
                hdr = _ns(stamp)
                w.write(conns[FRAME_PROMPTS], e.t_ns, label_info_to_cdr(texts, hdr))
            else:
                w.write(conns[DEPTH], e.t_ns, s.depths[e.value])
                w.write(conns[IMAGE], e.t_ns, s.images[e.value])
    schedule.write_text("\n".join(lines) + "\n")
    return path, schedule


def _ns(stamp: int) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(stamp=SimpleNamespace(sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id="")


def through_ground(s: Script, tmp: Path) -> Answers:
    from rosbags.highlevel import AnyReader

    from probench.cli import main

    bag, schedule = write_bag(s, tmp / "script")
    out_bag = tmp / "ground_out"
    rc = main(["ground", "--no-progress", "--bag", str(bag), "--out", str(out_bag), "--model", MODEL,
               "--score-threshold", "0", "--track", "--depth-tolerance", str(NODE["depth_tolerance"]),
               "--prompt-schedule", str(schedule)])
    assert rc == 0
    out = Answers("probench ground")
    with AnyReader([out_bag]) as reader:
        for conn, _t, raw in reader.messages():
            kind = conn.topic.removeprefix("/ground/")
            if kind in OUTPUTS:
                out.add(kind, bytes(raw))
    return out


# -- the node over DDS ------------------------------------------------------------------------
def through_node(s: Script, env: dict[str, str], log: Path) -> Answers:
    """The script through a grounding_node process: each event sent, and each frame's
    answers awaited, before the next (so every frame is answered, as in the other two)."""
    import rclpy
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    from rclpy.duration import Duration
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CameraInfo, Image
    from std_msgs.msg import String
    from vision_msgs.msg import Detection2DArray, Detection3DArray, LabelInfo

    from helpers.grounding_harness import NodeProcess, fresh_domain
    from probench.realtime.eval_stream import AnswerInbox
    from probench.ros.evaluator_node import subscribe_answers

    domain = fresh_domain()
    node = NodeProcess(env, domain, log, {**NODE, "depth_topic": DEPTH, "camera_info_topic": INFO},
                       extra=["-r", f"image:={IMAGE}", "-r", f"prompt:={PROMPT}",
                              "-r", f"frame_prompts:={FRAME_PROMPTS}"])
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    peer = rclpy.create_node("contract_peer", context=ctx)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(peer)
    rel = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    pubs = {IMAGE: peer.create_publisher(Image, IMAGE, rel), DEPTH: peer.create_publisher(Image, DEPTH, rel),
            INFO: peer.create_publisher(CameraInfo, INFO, rel),
            PROMPT: peer.create_publisher(String, PROMPT, rel),
            FRAME_PROMPTS: peer.create_publisher(LabelInfo, FRAME_PROMPTS, rel)}
    out = Answers("grounding_node")
    acks: list[Any] = []
    types = {"detections": Detection2DArray, "detections_3d": Detection3DArray,
             **{t: Image for t in MASK_TOPICS}}
    for kind, msg_type in types.items():
        peer.create_subscription(msg_type, f"/{kind}", lambda raw, k=kind: out.add(k, raw), rel, raw=True)
    peer.create_subscription(LabelInfo, "/label_info", acks.append, latched)
    inbox = AnswerInbox(lambda line: out.evaluator.setdefault(-1, []).append((line,)))  # (never expected)
    inbox.handler = out.collect
    subscribe_answers(peer, inbox, rel)  # the evaluator node's DDS link: its subscriptions, its reader
    params = peer.create_client(SetParameters, "/grounding_node/set_parameters")

    def spin_until(pred: Callable[[], Any], timeout: float, what: str) -> None:
        import time

        deadline = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < deadline and node.proc.poll() is None, \
                f"{what}: not within {timeout} s\n{node.output()[-3000:]}"
            executor.spin_once(timeout_sec=0.02)

    def publish_raw(topic: str, raw: bytes, msg_type: Any) -> None:
        from rclpy.serialization import deserialize_message

        pubs[topic].publish(deserialize_message(raw, msg_type))

    try:
        spin_until(lambda: all(p.get_subscription_count() > 0 for t, p in pubs.items()) and
                   params.service_is_ready() and peer.count_publishers("/segmentation/instances") > 0,
                   90, "the node's topics")
        for _ in range(3):  # the intrinsics first (volatile, as a camera driver sends them)
            publish_raw(INFO, s.info, CameraInfo)
            executor.spin_once(timeout_sec=0.1)
        for e in s.events:
            if e.kind == "prompt":
                n = len(acks)
                pubs[PROMPT].publish(String(data=e.value))
                spin_until(lambda n=n: len(acks) > n, 20, "the prompt's acknowledgement")
            elif e.kind == "policy":
                n = len(acks)
                value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=e.value)
                future = params.call_async(SetParameters.Request(
                    parameters=[Parameter(name="prompt_policy", value=value)]))
                spin_until(future.done, 20, "set prompt_policy")
                assert future.result().results[0].successful
                spin_until(lambda n=n: len(acks) > n, 20, "the policy's acknowledgement")
            elif e.kind == "frame_prompts":
                from probench.ros.convert import prompts_to_label_info

                pubs[FRAME_PROMPTS].publish(prompts_to_label_info(list(e.value[1]), _ns(e.value[0])))
                assert pubs[FRAME_PROMPTS].wait_for_all_acked(Duration(seconds=5))
            else:
                publish_raw(DEPTH, s.depths[e.value], Image)
                publish_raw(INFO, s.info, CameraInfo)
                # the depth delivered before its colour frame is sent: on a loaded machine a large
                # message can be repaired by DDS long after the image (the node then rightly gives
                # that frame no 3D), which is transport, not the answers this contract compares
                assert pubs[DEPTH].wait_for_all_acked(Duration(seconds=10)), "the depth was not delivered"
                executor.spin_once(timeout_sec=0.05)
                publish_raw(IMAGE, s.images[e.value], Image)
                stamp = e.value
                spin_until(lambda st=stamp: {"detections", "detections_3d", *MASK_TOPICS} <= set(
                    out.frames.get(st, {})) and st in out.evaluator, 20, f"the answers to frame {stamp}")
    finally:
        executor.shutdown(timeout_sec=1.0)
        peer.destroy_node()
        ctx.try_shutdown()
        assert node.stop() == 0, node.output()[-3000:]
    return out
