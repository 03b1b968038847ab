"""Names shared by the bag writer, the reader and the evaluator node (no heavy imports)."""

from __future__ import annotations

BAG_FORMAT = "probench-bag/1"
IMAGE_TOPIC = "/camera/image_raw"
COMPRESSED_TOPIC = "/camera/image_raw/compressed"
FRAME_INFO_TOPIC = "/probench/frame_info"
DATASET_TOPIC = "/probench/dataset"
CAMERA_FRAME_ID = "probench_camera"

IMAGE_MSGTYPE = "sensor_msgs/msg/Image"
COMPRESSED_MSGTYPE = "sensor_msgs/msg/CompressedImage"
STRING_MSGTYPE = "std_msgs/msg/String"

# A fixed start time (2026-01-01T00:00:00Z) so that the same dataset always gives the same
# bag; the evaluator replays with fresh stamps anyway.
DEFAULT_START_NS = 1_767_225_600 * 1_000_000_000

STORAGES = ("mcap", "sqlite3")
# metadata custom_data: the --negatives the frames' label spaces hold (JSON {"k", "seed"})
NEGATIVES_KEY = "probench.negatives"

# metadata custom_data: the dataset folder the bag was made from (absolute), so that a run of
# the bag finds the images again (report, compare); absent from bags made without it
DATASET_FOLDER_KEY = "probench.dataset_folder"
