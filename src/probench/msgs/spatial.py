"""3D detections and the target pose as ROS messages, built from any set of message classes:
rclpy's (the node, :mod:`probench.ros.convert.spatial`) or a rosbags typestore's
(``probench ground``), so both publish the same messages (no rclpy here).

``types`` maps full type names (``vision_msgs/msg/Detection3D``) to classes; every field is
given, as rosbags' classes need. Conventions:

- ``Detection3DArray`` with the colour image's header (the camera's optical frame); one
  ``Detection3D`` per 3D estimate: bbox centre = the estimate's centre (identity
  orientation), bbox size = (width, height, depth spread) in metres, ``id`` = the track id
  ("" without one), one hypothesis = the 2D detection's prompt text and score, its pose the
  same centre;
- ``PoseStamped``: the best-scoring 3D estimate of the first prompt (None when there is none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from probench.detections import Detections
from probench.spatial.depth import Detections3D

Types = Mapping[str, Any]
DETECTION_3D_ARRAY = "vision_msgs/msg/Detection3DArray"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"
SPATIAL_TYPES = (
    DETECTION_3D_ARRAY, "vision_msgs/msg/Detection3D", "vision_msgs/msg/BoundingBox3D",
    "vision_msgs/msg/ObjectHypothesisWithPose", "vision_msgs/msg/ObjectHypothesis",
    "geometry_msgs/msg/PoseWithCovariance", "geometry_msgs/msg/Pose", "geometry_msgs/msg/Point",
    "geometry_msgs/msg/Quaternion", "geometry_msgs/msg/Vector3", POSE_STAMPED,
)


def _pose(types: Types, xyz: Sequence[float]) -> Any:
    point = types["geometry_msgs/msg/Point"](x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))
    identity = types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)
    return types["geometry_msgs/msg/Pose"](position=point, orientation=identity)


def detections_3d_message(types: Types, est: Detections3D, dets: Detections, header: Any,
                          prompts: Sequence[str]) -> Any:
    """A ``vision_msgs/Detection3DArray`` for ``est`` (estimates of ``dets``, detected with ``prompts``)."""
    out = []
    for c, size, i, tid in zip(est.centre.tolist(), est.size.tolist(), est.index.tolist(),
                               est.track_id.tolist(), strict=True):
        hyp = types["vision_msgs/msg/ObjectHypothesis"](class_id=prompts[int(dets.prompt_index[i])],
                                                        score=float(dets.scores[i]))
        pose_cov = types["geometry_msgs/msg/PoseWithCovariance"](pose=_pose(types, c),
                                                                 covariance=np.zeros(36))
        bbox = types["vision_msgs/msg/BoundingBox3D"](
            center=_pose(types, c), size=types["geometry_msgs/msg/Vector3"](x=size[0], y=size[1], z=size[2]))
        result = types["vision_msgs/msg/ObjectHypothesisWithPose"](hypothesis=hyp, pose=pose_cov)
        out.append(types["vision_msgs/msg/Detection3D"](header=header, results=[result], bbox=bbox,
                                                        id=str(tid) if tid >= 0 else ""))
    return types[DETECTION_3D_ARRAY](header=header, detections=out)


def best_of_first_prompt(est: Detections3D, dets: Detections) -> int | None:
    """The row of ``est`` with the highest score among the first prompt's estimates, or None."""
    if not len(est):
        return None
    first = np.flatnonzero(dets.prompt_index[est.index] == 0)
    if not len(first):
        return None
    return int(first[np.argmax(dets.scores[est.index[first]])])


def target_pose_message(types: Types, est: Detections3D, dets: Detections, header: Any) -> Any | None:
    """A ``geometry_msgs/PoseStamped`` at the best 3D estimate of the first prompt, or None."""
    row = best_of_first_prompt(est, dets)
    if row is None:
        return None
    return types[POSE_STAMPED](header=header, pose=_pose(types, est.centre[row].tolist()))
