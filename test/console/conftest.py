"""A fake ConsoleBridge: the web app's tests run without rclpy or a node."""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest

from probench.console.bridge import DetectionItem, DiagnosticsView, Frame, NodeView
from probench.console.errors import BridgeError


class FakeBridge:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: list[tuple[str, ...]] = []
        self.transitions: list[str] = []
        self.wanted: list[bool] = []
        self.frame: Frame | None = None
        self.node_listening = True
        self.refuse_transition: BridgeError | None = None
        self.params: list[tuple[str, object, str]] = []  # (name, value, type) set on the "node"
        self.refuse_param: BridgeError | None = None  # the node's refusal, when set
        self.targets: list[int | None] = []  # target selections published
        self.node_view = NodeView(
            node="/grounding_node", present=True, lifecycle="active", prompts=("a red cup",),
            prompts_age_s=1.0,
            detections=(DetectionItem("a red cup", 0.9, (1.0, 2.0, 30.0, 40.0)),),
            detections_stamp=12.5,
            diagnostics=DiagnosticsView(
                "OK", "14.8 Hz",
                {"rate_hz": "14.800", "latency_p50_ms": "20.100", "latency_p95_ms": "31.000",
                 "model": "test-instant"},
                0.3,
            ),
            topics={"prompt": "/prompt"},
        )

    # -- the protocol --
    def view(self) -> NodeView:
        with self.lock:
            return self.node_view

    def latest_frame(self) -> Frame | None:
        with self.lock:
            return self.frame

    def want_frames(self, wanted: bool) -> None:
        with self.lock:
            self.wanted.append(wanted)

    def send_prompts(self, prompts: tuple[str, ...]) -> None:
        if not self.node_listening:
            raise BridgeError("no grounding node subscribes /prompt", 503)
        with self.lock:
            self.sent.append(prompts)
            self.node_view = replace(self.node_view, prompts=prompts)

    def change_state(self, transition: str, timeout_s: float) -> str:
        if self.refuse_transition is not None:
            raise self.refuse_transition
        with self.lock:
            self.transitions.append(transition)
        return {"activate": "active", "deactivate": "inactive", "configure": "inactive"}[transition]

    def set_parameter(self, name: str, value: object, kind: str, timeout_s: float) -> None:
        if self.refuse_param is not None:
            raise self.refuse_param
        with self.lock:
            self.params.append((name, value, kind))

    def select_target(self, track_id: int | None) -> None:
        if not self.node_listening:
            raise BridgeError("no grounding node subscribes /target_select", 503)
        with self.lock:
            self.targets.append(track_id)

    def close(self) -> None:
        pass

    # -- test controls --
    def set_frame(self, seq: int, h: int = 48, w: int = 64) -> None:
        rgb = np.full((h, w, 3), seq % 256, dtype=np.uint8)
        with self.lock:
            self.frame = Frame(seq, rgb, float(seq))


@pytest.fixture
def bridge() -> FakeBridge:
    return FakeBridge()
