"""A stand-in for the grounding node's target side: subscribes ``target_select``
(std_msgs/Int64, reliable, keep last 10) and answers a selection of a track it "sees" with
the latched ``target`` (vision_msgs/Detection2D bytes from probench.msgs.target), as the
node's contract says; ``detections`` at 20 Hz carry the tracks it sees (Detection2D.id), as
a tracking node's do. Spun on its own thread in a private context and ROS domain."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any


class TargetStub:
    def __init__(self, domain: int, visible: dict[int, str]) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Int64
        from vision_msgs.msg import Detection2D, Detection2DArray

        self.visible = visible  # track id -> prompt: the tracks "in view"
        self.received: list[int] = []
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=domain)
        self.node = rclpy.create_node("grounding_node", context=self.ctx)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.pub = self.node.create_publisher(Detection2D, "target", latched)
        self.dets = self.node.create_publisher(Detection2DArray, "detections",
                                               QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE))
        self.frames = 0
        self.node.create_timer(0.05, self._publish_detections)
        self.node.create_subscription(Int64, "target_select", self._on_select,
                                      QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def _on_select(self, msg: Any) -> None:
        from probench.msgs.target import target_to_cdr

        track = int(msg.data)
        self.received.append(track)
        if track in self.visible:
            header = SimpleNamespace(stamp=SimpleNamespace(sec=1, nanosec=0), frame_id="cam")
            self.pub.publish(target_to_cdr(header, (10.0, 10.0, 50.0, 90.0), self.visible[track], 0.8, track))

    def _publish_detections(self) -> None:
        import numpy as np

        from probench.detections import Detections
        from probench.msgs.wire import detections_to_cdr

        self.frames += 1
        tracks = sorted(self.visible)
        header = SimpleNamespace(stamp=SimpleNamespace(sec=2, nanosec=self.frames), frame_id="cam")
        dets = Detections.from_arrays([[10.0 * i, 10.0, 10.0 * i + 8, 30.0] for i in range(len(tracks))],
                                      [0.8] * len(tracks), list(range(len(tracks))))
        dets = dets.with_tracker_id(np.array(tracks, np.int64))
        prompts = [self.visible[t] for t in tracks]
        self.dets.publish(detections_to_cdr(dets, header, prompts))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.ctx.try_shutdown()
