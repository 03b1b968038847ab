"""ALL conversion between ROS messages and probench data (numpy images, Detections).

One entry point, three files:

- :mod:`.images`: image messages -> RGB uint8. Duck-typed: any object with ``height``,
  ``width``, ``encoding``, ``step``, ``is_bigendian`` and ``data`` (an rclpy
  ``sensor_msgs/Image``, a ``rosbags`` message, a ``SimpleNamespace``) converts, without
  rclpy. Every malformed input raises a specific :mod:`probench.ros.errors` exception
  naming the problem; nothing trusts ``step``/``data`` to agree. ``rgb8`` is a zero-copy
  view of the message buffer; other encodings take one ``cv2.cvtColor``.
- :mod:`.messages`: Detections -> Detection2DArray (and back), prompts -> LabelInfo,
  RGB -> Image, stats -> DiagnosticArray (message classes imported lazily: they need the
  ROS message packages, not a running rclpy).
- :mod:`.wire`: the same, straight from/to serialized CDR bytes (the node's hot path).
"""

from probench.ros.convert.images import (
    COMPRESSED_FORMATS,
    ENCODINGS,
    MAX_SIDE,
    compressed_to_rgb,
    image_to_rgb,
    rgb_to_fields,
)
from probench.ros.convert.messages import (
    LEVELS,
    detection_array_to_arrays,
    detections_to_msg,
    diagnostics_to_statuses,
    label_info_to_prompts,
    param_declaration,
    prompts_to_label_info,
    rgb_to_image_msg,
    set_stamp,
    stamp_ns,
    stats_to_diagnostics,
    to_header,
    top_order,
)
from probench.ros.convert.wire import (
    compressed_from_cdr,
    detections_to_cdr,
    image_from_cdr,
    prompt_text,
    rgb_from_cdr,
)

__all__ = [
    "COMPRESSED_FORMATS",
    "ENCODINGS",
    "LEVELS",
    "MAX_SIDE",
    "compressed_from_cdr",
    "compressed_to_rgb",
    "detection_array_to_arrays",
    "detections_to_cdr",
    "detections_to_msg",
    "diagnostics_to_statuses",
    "image_from_cdr",
    "image_to_rgb",
    "label_info_to_prompts",
    "param_declaration",
    "prompt_text",
    "prompts_to_label_info",
    "rgb_from_cdr",
    "rgb_to_fields",
    "rgb_to_image_msg",
    "set_stamp",
    "stamp_ns",
    "stats_to_diagnostics",
    "to_header",
    "top_order",
]
