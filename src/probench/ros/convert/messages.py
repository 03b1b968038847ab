"""ROS message objects (Detection2DArray, LabelInfo, Image, DiagnosticArray) and reading them.

Detection2DArray and LabelInfo objects are :mod:`probench.msgs.wire`'s bytes deserialized
(one encoder for the node, ``probench ground`` and the bags). The message classes are
imported lazily: they need the ROS message packages, not a running rclpy.
"""

from __future__ import annotations

import array
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from probench.detections import Detections
from probench.msgs.errors import MessageConversionError
from probench.msgs.images import rgb_to_fields
from probench.msgs.shapes import Detection2DArray as Detection2DArrayShape
from probench.msgs.shapes import DiagnosticArray, Header, LabelInfo, Stamp, stamp_at
from probench.msgs.wire import detections_to_cdr, label_info_to_cdr
from probench.realtime.params import Param, ParamTable

if TYPE_CHECKING:  # the message classes convert builds (untyped packages)
    from diagnostic_msgs.msg import DiagnosticArray as DiagnosticArrayMsg
    from rcl_interfaces.srv import SetParametersAtomically
    from rclpy.node import Node
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header as HeaderMsg
    from vision_msgs.msg import Detection2DArray as Detection2DArrayMsg
    from vision_msgs.msg import LabelInfo as LabelInfoMsg


# -- messages (need the ROS message packages, not a running rclpy) -------------------------
def _msgs() -> SimpleNamespace:
    global _MSGS
    if _MSGS is None:
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
        from sensor_msgs.msg import Image
        from std_msgs.msg import Header
        from vision_msgs.msg import Detection2DArray, LabelInfo

        _MSGS = SimpleNamespace(
            Image=Image, Header=Header, Detection2DArray=Detection2DArray, LabelInfo=LabelInfo,
            DiagnosticArray=DiagnosticArray, DiagnosticStatus=DiagnosticStatus, KeyValue=KeyValue,
        )
    return _MSGS


_MSGS: SimpleNamespace | None = None


def set_stamp(stamp: Stamp, ns: int) -> None:
    """Set a ``builtin_interfaces/Time`` in place from nanoseconds."""
    at = stamp_at(ns)
    stamp.sec, stamp.nanosec = at.sec, at.nanosec


def to_header(header: Header) -> HeaderMsg:
    """A ``std_msgs/Header`` from any object with ``stamp.sec``, ``stamp.nanosec``, ``frame_id``."""
    m = _msgs()
    if isinstance(header, m.Header):
        return header
    out = m.Header(frame_id=str(header.frame_id))
    out.stamp.sec, out.stamp.nanosec = int(header.stamp.sec), int(header.stamp.nanosec)
    return out


def rgb_to_image_msg(rgb: np.ndarray, header: Header, encoding: str = "rgb8") -> Image:
    """An RGB uint8 array as a ``sensor_msgs/Image`` with ``header`` (one buffer copy)."""
    m = _msgs()
    msg = m.Image()
    msg.header = to_header(header)
    if encoding == "rgb8" and rgb.ndim == 3 and rgb.shape[2] == 3 and rgb.dtype == np.uint8:
        out = np.ascontiguousarray(rgb)
        msg.height, msg.width = out.shape[:2]
        msg.encoding, msg.is_bigendian, msg.step = "rgb8", 0, out.strides[0]
        data = array.array("B")
        data.frombytes(out.data.cast("B"))  # skips the per-element checks of the setter
        msg.data = data
        return msg
    f = rgb_to_fields(rgb, encoding)
    msg.height, msg.width, msg.encoding = f.height, f.width, f.encoding
    msg.is_bigendian, msg.step = f.is_bigendian, f.step
    msg.data = array.array("B", f.data)
    return msg


def detections_to_msg(
    detections: Detections,
    header: Header,
    prompts: Sequence[str],
    *,
    max_detections: int | None = None,
) -> Detection2DArrayMsg:
    """:func:`probench.msgs.wire.detections_to_cdr` as a ``vision_msgs/Detection2DArray``
    message object (the one encoder's bytes, deserialized: no second builder); the
    detections' ``tracker_id`` go into each Detection2D.id."""
    from rclpy.serialization import deserialize_message

    data = detections_to_cdr(detections, header, prompts, max_detections=max_detections)
    return deserialize_message(data, _msgs().Detection2DArray)


def detection_array_to_arrays(msg: Detection2DArrayShape) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The inverse of :func:`detections_to_msg`: ``(xyxy (N, 4), scores (N,), class_ids)``.
    A detection without results gets score 0 and class_id ""."""
    n = len(msg.detections)
    xyxy = np.zeros((n, 4))
    scores = np.zeros(n)
    class_ids: list[str] = []
    for i, d in enumerate(msg.detections):
        b = d.bbox
        cx, cy, sx, sy = b.center.position.x, b.center.position.y, b.size_x, b.size_y
        xyxy[i] = (cx - sx / 2, cy - sy / 2, cx + sx / 2, cy + sy / 2)
        if d.results:
            scores[i] = d.results[0].hypothesis.score
            class_ids.append(d.results[0].hypothesis.class_id)
        else:
            class_ids.append("")
    return xyxy, scores, class_ids


def prompts_to_label_info(prompts: Sequence[str], header: Header, threshold: float = 0.0) -> LabelInfoMsg:
    """:func:`probench.msgs.wire.label_info_to_cdr` as a ``vision_msgs/LabelInfo`` message
    object: class_map[i] = (i, prompt i)."""
    from rclpy.serialization import deserialize_message

    return deserialize_message(label_info_to_cdr(prompts, header, threshold), _msgs().LabelInfo)


def label_info_to_prompts(msg: LabelInfo) -> list[str]:
    """The prompt list a LabelInfo describes, in class_id order."""
    return [vc.class_name for vc in sorted(msg.class_map, key=lambda vc: vc.class_id)]


LEVELS = ("OK", "WARN", "ERROR", "STALE")


def stats_to_diagnostics(
    name: str,
    hardware_id: str,
    level: str,
    message: str,
    values: Mapping[str, Any],
    stamp: Stamp,
) -> DiagnosticArrayMsg:
    """A ``diagnostic_msgs/DiagnosticArray`` with one status; floats get 3 decimals."""
    if level not in LEVELS:
        raise MessageConversionError(f"diagnostic level must be one of {LEVELS}, got {level!r}")
    m = _msgs()
    status = m.DiagnosticStatus()
    status.level = getattr(m.DiagnosticStatus, level)
    status.name = name
    status.hardware_id = hardware_id
    status.message = message
    for k, v in values.items():
        kv = m.KeyValue()
        kv.key = str(k)
        kv.value = f"{v:.3f}" if isinstance(v, float) else str(v)
        status.values.append(kv)
    out = m.DiagnosticArray()
    out.header.stamp = stamp
    out.status.append(status)
    return out


def diagnostics_to_statuses(msg: DiagnosticArray) -> list[tuple[str, str, str, dict[str, str]]]:
    """The inverse of :func:`stats_to_diagnostics`: one ``(name, level, message, values)``
    per status, ``level`` one of :data:`LEVELS` (an unknown byte reads as ``STALE``)."""
    out = []
    for status in msg.status:
        raw = status.level
        byte = raw[0] if isinstance(raw, bytes | bytearray) else int(raw)
        level = LEVELS[byte] if 0 <= byte < len(LEVELS) else "STALE"  # the byte is LEVELS' index
        values = {str(kv.key): str(kv.value) for kv in status.values}
        out.append((str(status.name), level, str(status.message), values))
    return out


# -- parameter declarations ------------------------------------------------------------------
def checked_parameters(node: Node, table: ParamTable) -> dict[str, Any]:
    """A node's parameter values as given at startup (``-p``, a params file: they bypass the
    set-parameters callback), each checked by ``table``; the first bad one raises
    :class:`probench.realtime.errors.ParameterValueError` naming it."""
    from rclpy.exceptions import ParameterUninitializedException

    from probench.errors import ProbenchError
    from probench.realtime.errors import ParameterValueError

    out: dict[str, Any] = {}
    for spec in table:
        try:
            out[spec.name] = table.check(spec.name, node.get_parameter(spec.name).value)
        except ParameterUninitializedException:
            continue
        except (ProbenchError, ValueError) as exc:
            raise ParameterValueError(f"parameter {spec.name}: {exc}") from exc
    return out


def param_declaration(param: Param) -> tuple[Any, Any]:
    """``(default, ParameterDescriptor)`` to declare a :class:`probench.realtime.params.Param`:
    its type, description, when it applies, and its range or choices as data."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType
    from rclpy.parameter import Parameter

    rcl_types = {"string": ParameterType.PARAMETER_STRING, "double": ParameterType.PARAMETER_DOUBLE,
                 "integer": ParameterType.PARAMETER_INTEGER, "bool": ParameterType.PARAMETER_BOOL,
                 "string_array": ParameterType.PARAMETER_STRING_ARRAY}
    extra = f" [{param.range_text()}]" if param.range_text() else ""
    desc = ParameterDescriptor(
        name=param.name, type=rcl_types[param.type],
        description=f"{param.description}{extra} (applies: {param.applies})",
        read_only=param.applies == "startup",
    )
    lo, hi = param.low, param.high
    if param.type == "double" and (lo is not None or hi is not None):
        lo_f = float(lo) if lo is not None else -1e300
        hi_f = float(hi) if hi is not None else 1e300
        desc.floating_point_range = [FloatingPointRange(from_value=lo_f, to_value=hi_f)]
    elif param.type == "integer" and (lo is not None or hi is not None):
        lo_i = int(lo) if lo is not None else -(2**62)
        hi_i = int(hi) if hi is not None else 2**62
        desc.integer_range = [IntegerRange(from_value=lo_i, to_value=hi_i)]
    default = param.default
    if param.type == "string_array" and not default:
        # An empty list would be typed as a byte array (and YAML `[]` arrives unset):
        # declare the type only; "unset" means "nothing given".
        default = Parameter.Type.STRING_ARRAY
    return default, desc


def string_parameters_request(values: Mapping[str, str]) -> SetParametersAtomically.Request:
    """``rcl_interfaces/SetParametersAtomically.Request`` setting string parameters (the
    evaluator and the console set a grounding node's ``prompt_policy`` and ``prompt_profile``)."""
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParametersAtomically

    kind = ParameterType.PARAMETER_STRING
    return SetParametersAtomically.Request(parameters=[
        Parameter(name=k, value=ParameterValue(type=kind, string_value=str(v))) for k, v in values.items()])
