"""The console's one view of the ROS graph: plain data types and the protocol the web app
uses (no rclpy here; :mod:`probench.ros.console_bridge` implements it, tests fake it).

Threading: a bridge is called from the web server's threads while its own thread takes
messages; every method must be safe to call from any thread and return quickly, except
:meth:`ConsoleBridge.change_state`, which waits for the node's answer (the app runs it in a
worker thread).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from probench.console.errors import ConsoleUsageError
from probench.vocabulary import is_ros_name_token

# What the page may ask of the node's lifecycle (rclpy LifecycleNode transition labels).
TRANSITIONS = ("configure", "activate", "deactivate")
STREAM_SOURCES = ("debug_image", "image")


def split_node_name(node: str) -> tuple[str, str]:
    """``"/robot1/grounding_node"`` -> ``("/robot1", "grounding_node")``; ``"grounding_node"``
    means ``/grounding_node``. ConsoleUsageError for anything that is not a ROS node name."""
    parts = node.strip().strip("/").split("/")
    if not node.strip() or not all(is_ros_name_token(p) for p in parts):
        raise ConsoleUsageError(
            f"--node {node!r} is not a ROS node name (e.g. /grounding_node or /robot1/grounding_node)"
        )
    return "/" + "/".join(parts[:-1]), parts[-1]


def graph_names(node: str, image_topic: str | None = None) -> dict[str, str]:
    """The topics and services the console uses for a grounding node: its relative topics
    resolve in the node's namespace, lifecycle services under the node's own name."""
    ns, name = split_node_name(node)
    base = ns.rstrip("/")
    fqn = f"{base}/{name}"
    image = "/" + (image_topic or f"{base}/image").strip().strip("/")
    if not all(is_ros_name_token(p) for p in image[1:].split("/")):
        raise ConsoleUsageError(
            f"--image-topic {image_topic!r} is not a ROS topic name (e.g. /camera/image_raw)"
        )
    return {
        "node": fqn, "prompt": f"{base}/prompt", "label_info": f"{base}/label_info",
        "detections": f"{base}/detections", "detections_3d": f"{base}/detections_3d",
        "debug_image": f"{base}/debug_image",
        "image": image, "image/compressed": f"{image.rstrip('/')}/compressed",
        "diagnostics": "/diagnostics", "get_state": f"{fqn}/get_state",
        "change_state": f"{fqn}/change_state", "transition_event": f"{fqn}/transition_event",
        "target_select": f"{base}/target_select", "target": f"{base}/target",
    }


@dataclass(frozen=True)
class DetectionItem:
    label: str
    score: float
    box: tuple[float, float, float, float]  # x1, y1, x2, y2 in pixels
    track_id: str = ""  # Detection2D.id: the node's track id (tracking on), "" without
    distance_m: float | None = None  # from the node's detections_3d (depth_topic set), else None

    def extra(self) -> str:
        """``#<id> <distance> m`` (what is known of it) for labels on the stream."""
        parts = ([f"#{self.track_id}"] if self.track_id else []) + (
            [f"{self.distance_m:.2f} m"] if self.distance_m is not None else [])
        return " ".join(parts)


@dataclass(frozen=True)
class DiagnosticsView:
    """The node's last DiagnosticStatus: level (OK/WARN/ERROR/STALE), message, raw values."""

    level: str
    message: str
    values: dict[str, str]
    age_s: float  # seconds since it arrived


@dataclass(frozen=True)
class NodeView:
    """What the console knows about the grounding node right now."""

    node: str  # fully qualified node name, e.g. /grounding_node
    present: bool  # the node's lifecycle services are on the graph
    lifecycle: str  # unconfigured, inactive, active, finalized, ... or "unknown"
    prompts: tuple[str, ...] = ()  # the active set, from the node's LabelInfo
    prompts_age_s: float | None = None
    threshold: float | None = None  # the score threshold in force (LabelInfo.threshold)
    target: tuple[str, str] | None = None  # (track id, prompt) the node's latched `target` names
    detections: tuple[DetectionItem, ...] = ()  # of the newest Detection2DArray
    detections_stamp: float | None = None  # its header stamp (s)
    diagnostics: DiagnosticsView | None = None
    topics: dict[str, str] = field(default_factory=dict)  # role -> topic name, for the page


@dataclass(frozen=True)
class Frame:
    """One annotated image for the stream: ``seq`` grows by one per new frame."""

    seq: int
    rgb: np.ndarray  # (H, W, 3) uint8, read-only for the app
    stamp: float  # header stamp (s)


class ConsoleBridge(Protocol):
    def view(self) -> NodeView:
        """A snapshot of the node's state (cheap)."""
        ...

    def latest_frame(self) -> Frame | None:
        """The newest annotated frame, or None before the first."""
        ...

    def want_frames(self, wanted: bool) -> None:
        """Whether anyone watches the stream: a bridge subscribes to images only then (the
        node draws its debug image only while someone subscribes)."""
        ...

    def send_prompts(self, prompts: tuple[str, ...]) -> None:
        """Publish a prompt set (already checked) to the node; BridgeError when no node listens."""
        ...

    def change_state(self, transition: str, timeout_s: float) -> str:
        """Ask for a lifecycle transition (one of :data:`TRANSITIONS`) and wait for the
        answer: the new state, or BridgeError (refused, no node, timeout)."""
        ...

    def set_parameter(self, name: str, value: object, kind: str, timeout_s: float) -> None:
        """Set one node parameter of type ``kind`` (already checked against the node's table)
        and wait for the answer: BridgeError with the node's reason when it refuses."""
        ...

    def select_target(self, track_id: int | None) -> None:
        """Publish a target selection on ``target_select`` (None: back to the best detection);
        BridgeError when no node listens."""
        ...

    def close(self) -> None:
        ...
