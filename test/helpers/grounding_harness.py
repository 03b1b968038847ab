"""Test harness for the grounding node: the node runs as a subprocess (its console script),
this process publishes images/prompts and collects answers, on a private ROS domain.

Not a test module (imported by test/ros/test_ros_*.py as helpers.grounding_harness).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

_used_domains: set[int] = set()


def fresh_domain() -> int:
    """A ROS_DOMAIN_ID not used by this test process yet (random, so parallel test runs of
    other people rarely meet; traffic stays on loopback anyway)."""
    rng = random.Random(os.getpid() * 7919 + len(_used_domains))
    while True:
        d = rng.randrange(120, 230)
        if d not in _used_domains:
            _used_domains.add(d)
            return d


class NodeProcess:
    """``grounding_node --ros-args -p k:=v ...`` with output to a log file."""

    def __init__(self, env: dict[str, str], domain: int, log: Path, params: dict[str, Any],
                 extra: list[str] | None = None) -> None:
        args = ["grounding_node", "--ros-args"]
        for k, v in params.items():
            args += ["-p", f"{k}:={_param_text(v)}"]
        args += extra or []
        env = {**env, "ROS_DOMAIN_ID": str(domain)}
        assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
        self.log = log
        self._fh = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args, env=env, stdout=self._fh, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._fh.close()
        return self.proc.returncode


def _param_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ",".join(f"'{s}'" for s in v) + "]"
    return str(v)


class RosPeer:
    """An rclpy node in a private context: publishes to the grounding node, records answers."""

    def __init__(self, domain: int, image_reliable: bool = True) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import CompressedImage, Image
        from std_msgs.msg import String
        from vision_msgs.msg import Detection2DArray, LabelInfo

        assert os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST"
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=domain)
        self.node = rclpy.create_node("probench_tester", context=self.ctx)
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(self.node)
        rel = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        img_qos = rel if image_reliable else QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.pub_image = self.node.create_publisher(Image, "image", img_qos)
        self.pub_compressed = self.node.create_publisher(CompressedImage, "image/compressed", img_qos)
        self.pub_prompt = self.node.create_publisher(String, "prompt", rel)
        self.pub_frame_prompts = self.node.create_publisher(LabelInfo, "frame_prompts", rel)
        self.dets: list[tuple[float, Any]] = []
        self.labels: list[Any] = []
        self.diags: list[Any] = []
        self.debug: list[Any] = []
        self.node.create_subscription(Detection2DArray, "detections",
                                      lambda m: self.dets.append((time.monotonic(), m)), rel)
        self.node.create_subscription(LabelInfo, "label_info", self.labels.append, latched)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diags.append, rel)
        self._debug_sub = None

    def subscribe_debug(self) -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image

        qos = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
        self._debug_sub = self.node.create_subscription(Image, "debug_image", self.debug.append, qos)

    def spin_until(self, pred: Callable[[], Any], timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            got = pred()
            if got or time.monotonic() > deadline:
                return got
            self.executor.spin_once(timeout_sec=0.02)

    def spin_for(self, seconds: float) -> None:
        self.spin_until(lambda: False, seconds)

    def wait_ready(self, node: NodeProcess, timeout: float = 60.0) -> None:
        """The node is up and matched: our image publisher has a subscriber and we have its
        detections publisher."""
        ok = self.spin_until(
            lambda: node.proc.poll() is not None
            or (self.pub_image.get_subscription_count() > 0 and self.pub_prompt.get_subscription_count() > 0
                and self.node.count_publishers("detections") > 0),
            timeout,
        )
        assert ok and node.proc.poll() is None, f"node not ready:\n{node.output()[-3000:]}"

    def header(self, sec: int, nanosec: int = 0, frame_id: str = "cam") -> Any:
        from std_msgs.msg import Header

        h = Header(frame_id=frame_id)
        h.stamp.sec, h.stamp.nanosec = sec, nanosec
        return h

    def send_image(self, rgb: np.ndarray, header: Any, encoding: str = "rgb8") -> None:
        from probench.ros.convert import rgb_to_image_msg

        self.pub_image.publish(rgb_to_image_msg(rgb, header, encoding))

    def send_prompt(self, text: str) -> None:
        from std_msgs.msg import String

        self.pub_prompt.publish(String(data=text))

    def send_frame_prompts(self, texts: list[str], header: Any) -> bool:
        """The prompt set of the frame stamped ``header.stamp`` (before the frame), delivered."""
        from rclpy.duration import Duration

        from probench.ros.convert import prompts_to_label_info

        self.pub_frame_prompts.publish(prompts_to_label_info(texts, header))
        return self.pub_frame_prompts.wait_for_all_acked(Duration(seconds=5))

    def answer(self, sec: int, nanosec: int = 0, timeout: float = 10.0) -> Any:
        def find() -> Any:
            for _, m in self.dets:
                if m.header.stamp.sec == sec and m.header.stamp.nanosec == nanosec:
                    return m
            return None

        return self.spin_until(find, timeout)

    def label_after(self, n_before: int, prompts: list[str], timeout: float = 20.0) -> Any:
        from probench.ros.convert import label_info_to_prompts

        return self.spin_until(
            lambda: next((m for m in self.labels[n_before:] if label_info_to_prompts(m) == prompts), None),
            timeout,
        )

    def last_diag_values(self, timeout: float = 5.0) -> dict[str, str]:
        n = len(self.diags)
        self.spin_until(lambda: len(self.diags) > n, timeout)
        assert self.diags, "no /diagnostics received"
        return {kv.key: kv.value for kv in self.diags[-1].status[0].values}

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.ctx.try_shutdown()


def image(h: int = 48, w: int = 64, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def class_ids(msg: Any) -> list[str]:
    return [d.results[0].hypothesis.class_id for d in msg.detections]


def tiny_eval_bag(tmp_path: Path, env: dict[str, str], n: int = 40) -> Path:
    """A probench bag of ``n`` 32x24 frames sharing one prompt ("a red cup"), at TMP/bag."""
    import json
    import sys

    import cv2

    root = tmp_path / "ds"
    (root / "images").mkdir(parents=True)
    images = []
    for i in range(1, n + 1):
        cv2.imwrite(str(root / f"images/{i}.png"), np.full((24, 32, 3), i, dtype=np.uint8))
        images.append({"id": i, "file_name": f"images/{i}.png", "width": 32, "height": 24, "query_ids": [1]})
    coco = {"images": images, "annotations": [],
            "categories": [{"id": 1, "name": "cup", "prompts": {"orig": "a red cup"}}]}
    (root / "annotations.json").write_text(json.dumps(coco))
    subprocess.run([sys.executable, "-m", "probench", "bag", "--dataset", str(root), "--out",
                    str(tmp_path / "bag"), "--quiet"], env=env, check=True, timeout=60)
    return tmp_path / "bag"
