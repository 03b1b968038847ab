"""ALL conversion between ROS messages and probench data (numpy images, Detections), as one
entry point for the nodes. Two modules, one re-export:

- :mod:`.messages` (this package): rclpy message objects. Detection2DArray and LabelInfo
  objects are the bytes of :mod:`probench.msgs.wire` deserialized (no second builder);
  RGB -> Image, stats -> DiagnosticArray, parameter rows -> descriptors, and reading
  Detection2DArray / LabelInfo / DiagnosticArray back (message classes imported lazily: they
  need the ROS message packages, not a running rclpy).
- re-exported from the rclpy-free :mod:`probench.msgs` (shared with ``probench ground`` and
  the bag code): :mod:`probench.msgs.images`, image messages -> RGB uint8, duck-typed, every
  malformed input a specific :mod:`probench.msgs.errors` exception; and
  :mod:`probench.msgs.wire`, serialized (CDR) messages: images read straight from the wire
  and the one encoder of Detection2DArray and LabelInfo (the node's hot path).
"""

from probench.msgs.images import (
    COMPRESSED_FORMATS,
    ENCODINGS,
    MAX_SIDE,
    compressed_to_rgb,
    image_to_rgb,
    rgb_to_fields,
)
from probench.msgs.shapes import stamp_ns
from probench.msgs.wire import (
    compressed_from_cdr,
    detections_to_cdr,
    header_stamp_ns,
    image_from_cdr,
    label_info_to_cdr,
    prompt_text,
    rgb_from_cdr,
    top_order,
)
from probench.ros.convert.messages import (
    LEVELS,
    checked_parameters,
    detection_array_to_arrays,
    detections_to_msg,
    diagnostics_to_statuses,
    label_info_to_prompts,
    param_declaration,
    prompts_to_label_info,
    rgb_to_image_msg,
    set_stamp,
    stats_to_diagnostics,
    string_parameters_request,
    to_header,
)

__all__ = [
    "COMPRESSED_FORMATS",
    "ENCODINGS",
    "LEVELS",
    "MAX_SIDE",
    "checked_parameters",
    "compressed_from_cdr",
    "compressed_to_rgb",
    "detection_array_to_arrays",
    "detections_to_cdr",
    "detections_to_msg",
    "diagnostics_to_statuses",
    "header_stamp_ns",
    "image_from_cdr",
    "image_to_rgb",
    "label_info_to_cdr",
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
    "string_parameters_request",
    "to_header",
    "top_order",
]
