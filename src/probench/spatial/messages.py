"""The 3D outputs as serialized messages (the one encoder, :mod:`probench.msgs.wire`), from
a frame's :class:`~probench.spatial.depth.Detections3D` and its 2D detections: what the
grounding node publishes and ``probench ground`` writes.

- ``Detection3DArray`` with the colour image's header (the camera's optical frame); one
  ``Detection3D`` per 3D estimate: bbox centre = the estimate's centre (identity
  orientation), bbox size = (width, height, depth spread) in metres, ``id`` = the track id
  ("" without one), one hypothesis = the 2D detection's prompt text and score, its pose the
  same centre;
- ``PoseStamped``: the best-scoring 3D estimate of the first prompt (None when there is none).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from probench.detections import Detections
from probench.msgs.shapes import Header
from probench.msgs.wire import detections_3d_to_cdr, pose_stamped_to_cdr
from probench.spatial.depth import Detections3D

DETECTION_3D_ARRAY = "vision_msgs/msg/Detection3DArray"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"


def detections_3d_cdr(est: Detections3D, dets: Detections, header: Header, prompts: Sequence[str]) -> bytes:
    """The serialized ``vision_msgs/Detection3DArray`` of ``est`` (estimates of ``dets``,
    detected with ``prompts``)."""
    labels = [prompts[int(pi)] for pi in dets.prompt_index[est.index].tolist()]
    return detections_3d_to_cdr(header, est.centre, est.size, labels, dets.scores[est.index].tolist(),
                                est.track_id.tolist())


def best_of_first_prompt(est: Detections3D, dets: Detections) -> int | None:
    """The row of ``est`` with the highest score among the first prompt's estimates, or None."""
    if not len(est):
        return None
    first = np.flatnonzero(dets.prompt_index[est.index] == 0)
    if not len(first):
        return None
    return int(first[np.argmax(dets.scores[est.index[first]])])


def target_pose_cdr(est: Detections3D, dets: Detections, header: Header) -> bytes | None:
    """The serialized ``geometry_msgs/PoseStamped`` at the best 3D estimate of the first
    prompt, or None."""
    row = best_of_first_prompt(est, dets)
    return None if row is None else pose_stamped_to_cdr(header, est.centre[row].tolist())
