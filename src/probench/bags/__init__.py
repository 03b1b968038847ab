"""Pro-Bench datasets as rosbag2 files (mcap or sqlite3), written and read with ``rosbags``.

No rclpy here: a bag is written and read on any machine. Layout of a probench bag
(``probench-bag/1``):

- ``/camera/image_raw`` (sensor_msgs/Image, rgb8) or ``/camera/image_raw/compressed``
  (sensor_msgs/CompressedImage, jpeg): one frame per dataset image, frame id ``probench_camera``;
- ``/probench/frame_info`` (std_msgs/String): JSON describing the frame at the same timestamp
  (image id, file name, size, domain, label space with the three prompt formulations);
- ``/probench/dataset`` (std_msgs/String), at the bag's first timestamp: the dataset's
  annotations.json, so the bag alone is enough to replay and score;
- metadata ``custom_data``: ``probench.format``, ``probench.dataset_hash``, ``probench.n_frames``,
  ``probench.dataset_folder`` (the dataset's folder, absolute; not in older bags, nor in bags
  made with ``--no-dataset-folder``) and ``probench.negatives`` for a bag made with
  ``--negatives`` (data/negatives.py).
"""

from probench.bags.layout import (
    BAG_FORMAT,
    CAMERA_FRAME_ID,
    COMPRESSED_TOPIC,
    DATASET_TOPIC,
    FRAME_INFO_TOPIC,
    IMAGE_TOPIC,
)

__all__ = [
    "BAG_FORMAT",
    "CAMERA_FRAME_ID",
    "COMPRESSED_TOPIC",
    "DATASET_TOPIC",
    "FRAME_INFO_TOPIC",
    "IMAGE_TOPIC",
]
