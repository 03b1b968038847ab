"""The message type store used to (de)serialize bag messages.

Every type a probench bag holds (sensor_msgs/Image, CompressedImage, std_msgs/String) is in
rosbags' built-in ROS 2 Kilted store, so no ``.msg`` text needs registering.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rosbags.typesys.store import Typestore


@lru_cache(maxsize=1)
def typestore() -> Typestore:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)
