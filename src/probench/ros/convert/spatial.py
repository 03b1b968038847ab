"""The grounding node's MarkerArray for RViz/Foxglove (its Detection3DArray and PoseStamped
are the one encoder's bytes: :mod:`probench.spatial.messages`).

Markers (namespace ``boxes``: a CUBE per 3D detection, ``labels``: its text "prompt #id
2.34 m" above it), each array starting with a DELETEALL so the previous frame's disappear.
"""

from __future__ import annotations

import colorsys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from probench.detections import Detections
from probench.spatial.depth import Detections3D

if TYPE_CHECKING:
    from std_msgs.msg import Header
    from visualization_msgs.msg import MarkerArray


def _colour(prompt_index: int) -> tuple[float, float, float]:
    return colorsys.hsv_to_rgb((prompt_index * 0.618034) % 1.0, 0.8, 1.0)


def markers_to_msg(est: Detections3D, dets: Detections, header: Header,
                   prompts: Sequence[str]) -> MarkerArray:
    """A ``visualization_msgs/MarkerArray``: DELETEALL, then a box and a label per 3D detection."""
    from geometry_msgs.msg import Pose
    from std_msgs.msg import ColorRGBA
    from visualization_msgs.msg import Marker, MarkerArray

    out = MarkerArray()
    clear = Marker(header=header, action=Marker.DELETEALL)
    out.markers.append(clear)
    distance = est.distance.tolist()
    for row, (c, size, i, tid) in enumerate(zip(est.centre.tolist(), est.size.tolist(), est.index.tolist(),
                                                 est.track_id.tolist(), strict=True)):
        pi = int(dets.prompt_index[i])
        r, g, b = _colour(pi)
        pose = Pose()
        pose.position.x, pose.position.y, pose.position.z = c
        box = Marker(header=header, ns="boxes", id=row, type=Marker.CUBE, action=Marker.ADD, pose=pose,
                     color=ColorRGBA(r=r, g=g, b=b, a=0.4))
        box.scale.x, box.scale.y, box.scale.z = size[0], size[1], max(size[2], 0.01)
        ident = f" #{tid}" if tid >= 0 else ""
        label_pose = Pose()
        label_pose.position.x, label_pose.position.z = c[0], c[2]
        label_pose.position.y = c[1] - size[1] / 2 - 0.05  # above the box (y points down)
        label = Marker(header=header, ns="labels", id=row, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD,
                       pose=label_pose, color=ColorRGBA(r=r, g=g, b=b, a=1.0),
                       text=f"{prompts[pi]}{ident} {distance[row]:.2f} m")
        label.scale.z = 0.08
        out.markers += [box, label]
    return out
