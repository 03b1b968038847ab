"""Building and reading ROS messages (Detection2DArray, LabelInfo, Image, DiagnosticArray).

The message classes are imported lazily: they need the ROS message packages, not rclpy.
"""

from __future__ import annotations

import array
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from probench.detections import Detections
from probench.msgs.errors import MessageConversionError
from probench.msgs.images import rgb_to_fields
from probench.msgs.shapes import Detection2DArray as Detection2DArrayShape
from probench.msgs.shapes import DiagnosticArray, Header, LabelInfo, Stamp
from probench.msgs.wire import checked_prompt_index, top_order
from probench.realtime.params import Param


# -- messages (need the ROS message packages, not a running rclpy) -------------------------
def _msgs() -> SimpleNamespace:
    global _MSGS
    if _MSGS is None:
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
        from geometry_msgs.msg import PoseWithCovariance
        from sensor_msgs.msg import Image
        from std_msgs.msg import Header
        from vision_msgs.msg import (
            BoundingBox2D,
            Detection2D,
            Detection2DArray,
            LabelInfo,
            ObjectHypothesis,
            ObjectHypothesisWithPose,
            Point2D,
            Pose2D,
            VisionClass,
        )

        _MSGS = SimpleNamespace(
            Image=Image, Header=Header, Detection2D=Detection2D, Detection2DArray=Detection2DArray,
            ObjectHypothesisWithPose=ObjectHypothesisWithPose, ObjectHypothesis=ObjectHypothesis,
            BoundingBox2D=BoundingBox2D, Pose2D=Pose2D, Point2D=Point2D,
            PoseWithCovariance=PoseWithCovariance, LabelInfo=LabelInfo,
            VisionClass=VisionClass, DiagnosticArray=DiagnosticArray,
            DiagnosticStatus=DiagnosticStatus, KeyValue=KeyValue,
        )
    return _MSGS


_MSGS: SimpleNamespace | None = None
_DIRECT: dict[Any, bool] = {}


def _new(cls: Any, **fields: Any) -> Any:
    """``cls(**fields)`` without building the default value of every field first.

    Used only when ``fields`` names every field of the message (checked once per class
    against ``get_fields_and_field_types``), so no slot is left unset; otherwise, and for
    message classes that do not look like rosidl-generated ones, the real constructor runs.
    ``cls`` is a rosidl-generated message class: untyped (``Any``), the packages have no stubs.
    """
    direct = _DIRECT.get(cls)
    if direct is None:
        try:
            direct = set(cls.get_fields_and_field_types()) == set(fields)
        except AttributeError:
            direct = False
        _DIRECT[cls] = direct
    if not direct:
        return cls(**fields)
    obj = cls.__new__(cls)
    if "_check_fields" in getattr(cls, "__slots__", ()):
        obj._check_fields = False  # the values come from numpy/validated Detections
    for k, v in fields.items():
        setattr(obj, k, v)
    return obj


def _pose_default() -> Any:
    return _msgs().PoseWithCovariance()


def stamp_ns(stamp: Stamp) -> int:
    """A ``builtin_interfaces/Time`` (anything with ``sec`` and ``nanosec``) in nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def set_stamp(stamp: Stamp, ns: int) -> None:
    """Set a ``builtin_interfaces/Time`` in place from nanoseconds."""
    stamp.sec, stamp.nanosec = divmod(int(ns), 1_000_000_000)


def to_header(header: Header) -> Any:
    """A ``std_msgs/Header`` from any object with ``stamp.sec``, ``stamp.nanosec``, ``frame_id``."""
    m = _msgs()
    if isinstance(header, m.Header):
        return header
    out = m.Header(frame_id=str(header.frame_id))
    out.stamp.sec, out.stamp.nanosec = int(header.stamp.sec), int(header.stamp.nanosec)
    return out


def rgb_to_image_msg(rgb: np.ndarray, header: Header, encoding: str = "rgb8") -> Any:
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
    header: Any,
    prompts: Sequence[str],
    *,
    max_detections: int | None = None,
) -> Any:
    """``vision_msgs/Detection2DArray``: the array and each detection carry ``header``; each
    result's ``class_id`` is the prompt text, ``score`` in [0, 1]; bbox center/size in pixels.
    With ``max_detections`` only the highest-scoring ones are kept. An empty ``detections``
    gives an empty array (still published: the evaluator counts it as an answer)."""
    m = _msgs()
    out = m.Detection2DArray()
    out.header = header
    n = len(detections)
    if n == 0:
        return out
    order = top_order(detections, max_detections)
    xyxy = detections.xyxy[order]
    pidx = checked_prompt_index(detections, order, prompts)
    cx = ((xyxy[:, 0] + xyxy[:, 2]) * 0.5).tolist()
    cy = ((xyxy[:, 1] + xyxy[:, 3]) * 0.5).tolist()
    sx = (xyxy[:, 2] - xyxy[:, 0]).tolist()
    sy = (xyxy[:, 3] - xyxy[:, 1]).tolist()
    scores = detections.scores[order].tolist()
    labels = [prompts[i] for i in pidx.tolist()]
    # Hot path (up to 100 detections per frame): the generated constructors build every
    # default sub-message (a PoseWithCovariance with 36 doubles each...), ~40 us per
    # detection; _new fills the fields directly, and the unused pose is one shared object.
    pose = _pose_default()
    new, cls = _new, m
    out.detections = [
        new(cls.Detection2D, header=header, id="",
            bbox=new(cls.BoundingBox2D, size_x=sx[i], size_y=sy[i],
                     center=new(cls.Pose2D, theta=0.0, position=new(cls.Point2D, x=cx[i], y=cy[i]))),
            results=[new(cls.ObjectHypothesisWithPose, pose=pose,
                         hypothesis=new(cls.ObjectHypothesis, class_id=labels[i], score=scores[i]))])
        for i in range(len(order))
    ]
    return out


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


def prompts_to_label_info(prompts: Sequence[str], header: Any, threshold: float = 0.0) -> Any:
    """``vision_msgs/LabelInfo`` for the active prompts: class_map[i] = (i, prompt i)."""
    m = _msgs()
    msg = m.LabelInfo()
    msg.header = header
    for i, p in enumerate(prompts):
        vc = m.VisionClass()
        vc.class_id = i
        vc.class_name = p
        msg.class_map.append(vc)
    msg.threshold = float(threshold)
    return msg


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
    stamp: Any,
) -> Any:
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


def string_parameters_request(values: Mapping[str, str]) -> Any:
    """``rcl_interfaces/SetParametersAtomically.Request`` setting string parameters (the
    evaluator and the console set a grounding node's ``prompt_policy`` and ``prompt_profile``)."""
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParametersAtomically

    kind = ParameterType.PARAMETER_STRING
    return SetParametersAtomically.Request(parameters=[
        Parameter(name=k, value=ParameterValue(type=kind, string_value=str(v))) for k, v in values.items()])
