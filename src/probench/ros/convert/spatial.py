"""3D output messages for the grounding node: Detection3DArray and PoseStamped (built by
:mod:`probench.msgs.spatial` from rclpy's classes) and a MarkerArray for RViz/Foxglove.

Markers (namespace ``boxes``: a CUBE per 3D detection, ``labels``: its text "prompt #id
2.34 m" above it), each array starting with a DELETEALL so the previous frame's disappear.
"""

from __future__ import annotations

import colorsys
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from probench.detections import Detections
from probench.msgs.spatial import SPATIAL_TYPES, detections_3d_message, target_pose_message
from probench.spatial.depth import Detections3D


@lru_cache(maxsize=1)
def rclpy_types() -> dict[str, Any]:
    """The classes of :data:`probench.msgs.spatial.SPATIAL_TYPES` from the ROS message packages."""
    import importlib

    out = {}
    for name in SPATIAL_TYPES:
        pkg, _, cls = name.split("/")
        out[name] = getattr(importlib.import_module(f"{pkg}.msg"), cls)
    return out


def detections_3d_to_msg(est: Detections3D, dets: Detections, header: Any, prompts: Sequence[str]) -> Any:
    return detections_3d_message(rclpy_types(), est, dets, header, prompts)


def target_pose_to_msg(est: Detections3D, dets: Detections, header: Any) -> Any | None:
    return target_pose_message(rclpy_types(), est, dets, header)


def _colour(prompt_index: int) -> tuple[float, float, float]:
    return colorsys.hsv_to_rgb((prompt_index * 0.618034) % 1.0, 0.8, 1.0)


def markers_to_msg(est: Detections3D, dets: Detections, header: Any, prompts: Sequence[str]) -> Any:
    """A ``visualization_msgs/MarkerArray``: DELETEALL, then a box and a label per 3D detection."""
    from std_msgs.msg import ColorRGBA
    from visualization_msgs.msg import Marker, MarkerArray

    types = rclpy_types()
    out = MarkerArray()
    clear = Marker(header=header, action=Marker.DELETEALL)
    out.markers.append(clear)
    distance = est.distance.tolist()
    for row, (c, size, i, tid) in enumerate(zip(est.centre.tolist(), est.size.tolist(), est.index.tolist(),
                                                 est.track_id.tolist(), strict=True)):
        pi = int(dets.prompt_index[i])
        r, g, b = _colour(pi)
        pose = types["geometry_msgs/msg/Pose"]()
        pose.position.x, pose.position.y, pose.position.z = c
        box = Marker(header=header, ns="boxes", id=row, type=Marker.CUBE, action=Marker.ADD, pose=pose,
                     color=ColorRGBA(r=r, g=g, b=b, a=0.4))
        box.scale.x, box.scale.y, box.scale.z = size[0], size[1], max(size[2], 0.01)
        ident = f" #{tid}" if tid >= 0 else ""
        label_pose = types["geometry_msgs/msg/Pose"]()
        label_pose.position.x, label_pose.position.z = c[0], c[2]
        label_pose.position.y = c[1] - size[1] / 2 - 0.05  # above the box (y points down)
        label = Marker(header=header, ns="labels", id=row, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD,
                       pose=label_pose, color=ColorRGBA(r=r, g=g, b=b, a=1.0),
                       text=f"{prompts[pi]}{ident} {distance[row]:.2f} m")
        label.scale.z = 0.08
        out.markers += [box, label]
    return out
