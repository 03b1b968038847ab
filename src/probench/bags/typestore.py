"""The message type stores used to (de)serialize bag messages.

Every type a probench bag holds (sensor_msgs/Image, CompressedImage, std_msgs/String) is in
rosbags' built-in ROS 2 Kilted store, so no ``.msg`` text needs registering for
:func:`typestore`. vision_msgs is not in any built-in store: :func:`vision_typestore` adds it
from the package's own ``.msg`` files (the installed ROS package, else the source tree's
``interfaces/vision_msgs``), so the RIHS01 hashes written into a bag are those of the real
package.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from probench.bags.errors import BagError

if TYPE_CHECKING:
    from rosbags.typesys.store import Typestore

# What a grounding output bag needs (the 3D messages are registered too when present).
VISION_MSGS = (
    "Point2D", "Pose2D", "BoundingBox2D", "ObjectHypothesis", "ObjectHypothesisWithPose",
    "Detection2D", "Detection2DArray", "VisionClass", "LabelInfo",
)


@lru_cache(maxsize=1)
def typestore() -> Typestore:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def vision_msgs_folders() -> list[Path]:
    """Where vision_msgs' ``.msg`` files may be, best first: every ament prefix (a ROS 2
    install, the venv the set-up built it into), then the source tree."""
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes.append(sys.prefix)
    folders = [Path(p) / "share" / "vision_msgs" / "msg" for p in prefixes]
    folders.append(Path(__file__).resolve().parents[3] / "interfaces" / "vision_msgs" / "msg")
    return folders


@lru_cache(maxsize=1)
def vision_typestore() -> Typestore:
    """The Kilted store plus vision_msgs (a store of its own: :func:`typestore` stays as is)."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    for folder in vision_msgs_folders():
        if all((folder / f"{name}.msg").is_file() for name in VISION_MSGS):
            break
    else:
        raise BagError(
            "vision_msgs message definitions not found (looked in "
            f"{', '.join(str(f) for f in vision_msgs_folders())}); run scripts/setup.sh, or "
            "install ros-$ROS_DISTRO-vision-msgs and source ROS 2"
        )
    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for path in sorted(folder.glob("*.msg")):
        types.update(get_types_from_msg(path.read_text(encoding="utf-8"), f"vision_msgs/msg/{path.stem}"))
    store.register(types)
    return store
