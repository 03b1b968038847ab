"""probench.msgs.masks: the mask images (mono8 / mono16 sensor_msgs/Image), the semantic
LabelInfo and the target's PointCloud2, byte for byte against rclpy's serialize_message and
the rosbags typestore's serialize_cdr of the same message built field by field."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from helpers.cdr_reference import REFERENCES, check_bytes, header
from probench.msgs.errors import MessageConversionError, SemanticClassesError
from probench.msgs.masks import (
    BACKGROUND,
    MAX_SEMANTIC_CLASSES,
    check_semantic_classes,
    mono_image_to_cdr,
    points_to_cdr,
    semantic_label_info_to_cdr,
)

HEADER = SimpleNamespace(stamp=SimpleNamespace(sec=1_700_000_123, nanosec=456_789), frame_id="camera_optical")


@pytest.fixture(params=sorted(REFERENCES))
def ref(request: pytest.FixtureRequest) -> tuple[str, Callable[[str], Any], Callable[[Any, str], bytes]]:
    if request.param == "rclpy":
        request.getfixturevalue("requires_vision_msgs")
    return (request.param, *REFERENCES[request.param])


def _ref_image(c: Callable[[str], Any], arr: np.ndarray, encoding: str, h: Any = HEADER) -> Any:
    return c("sensor_msgs/msg/Image")(
        header=header(c, h.stamp.sec, h.stamp.nanosec, h.frame_id), height=arr.shape[0], width=arr.shape[1],
        encoding=encoding, is_bigendian=0, step=arr.shape[1] * arr.itemsize,
        data=np.frombuffer(arr.astype(arr.dtype.newbyteorder("<")).tobytes(), np.uint8))


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (7, 2), (48, 64)])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_mono_images_equal_the_reference_serializers(shape: tuple[int, int], dtype: type, ref: Any) -> None:
    name, classes, to_bytes = ref
    rng = np.random.default_rng(shape[0] * 100 + shape[1])
    arr = rng.integers(0, np.iinfo(dtype).max + 1, shape).astype(dtype)
    encoding = "mono8" if dtype == np.uint8 else "mono16"
    for frame_id in ("camera_optical", "", "cäm"):  # header lengths move every later field's alignment
        h = SimpleNamespace(stamp=HEADER.stamp, frame_id=frame_id)
        reference = to_bytes(_ref_image(classes, arr, encoding, h), "sensor_msgs/msg/Image")
        check_bytes(lambda h=h: mono_image_to_cdr(arr, h), reference, name)


def test_mono16_reads_back_little_endian_with_step_twice_the_width() -> None:
    from probench.bags.typestore import vision_typestore

    arr = np.array([[0, 1, 258], [65535, 7, 0]], np.uint16)
    msg = vision_typestore().deserialize_cdr(mono_image_to_cdr(arr, HEADER), "sensor_msgs/msg/Image")
    assert (msg.height, msg.width, msg.encoding, msg.is_bigendian, msg.step) == (2, 3, "mono16", 0, 6)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id) == (
        1_700_000_123, 456_789, "camera_optical")
    assert bytes(msg.data[:6]) == b"\x00\x00\x01\x00\x02\x01"  # 258 = 0x0102, little-endian
    assert np.array_equal(np.frombuffer(bytes(msg.data), "<u2").reshape(2, 3), arr)
    big = arr.astype(">u2")  # any byte order in, little-endian out
    assert mono_image_to_cdr(big, HEADER) == mono_image_to_cdr(arr, HEADER)
    view = np.zeros((4, 6), np.uint16)[::2, ::2]  # a strided view is packed
    assert mono_image_to_cdr(view, HEADER) == mono_image_to_cdr(np.zeros((2, 3), np.uint16), HEADER)


@pytest.mark.parametrize("bad", [np.zeros((2, 2), np.int16), np.zeros((2, 2, 1), np.uint8),
                                 np.zeros(4, np.uint8), np.zeros((2, 2), np.float32)])
def test_a_mono_image_is_2d_uint8_or_uint16(bad: np.ndarray) -> None:
    with pytest.raises(MessageConversionError, match="2-D uint8 or uint16"):
        mono_image_to_cdr(bad, HEADER)


def _ref_label_info(c: Callable[[str], Any], names: list[str], threshold: float) -> Any:
    vc = c("vision_msgs/msg/VisionClass")
    return c("vision_msgs/msg/LabelInfo")(
        header=header(c, HEADER.stamp.sec, HEADER.stamp.nanosec, HEADER.frame_id),
        class_map=[vc(class_id=i, class_name=n) for i, n in enumerate(names)], threshold=threshold)


@pytest.mark.parametrize("prompts", [[], ["a cup"], ["eine Tür", "杯子", "background"],
                                     [f"p{i}" for i in range(MAX_SEMANTIC_CLASSES)]])
def test_semantic_label_info_is_background_then_the_prompts(prompts: list[str], ref: Any) -> None:
    name, classes, to_bytes = ref
    reference = to_bytes(_ref_label_info(classes, [BACKGROUND, *prompts], 0.25), "vision_msgs/msg/LabelInfo")
    check_bytes(lambda: semantic_label_info_to_cdr(prompts, HEADER, 0.25), reference, name)


def test_more_than_255_prompts_are_refused_in_one_line() -> None:
    check_semantic_classes(["p"] * 255)
    with pytest.raises(SemanticClassesError, match=r"^256 prompts: the semantic mask .* at most 255$"):
        check_semantic_classes(["p"] * 256)
    with pytest.raises(SemanticClassesError):
        semantic_label_info_to_cdr(["p"] * 256, HEADER)


def _ref_cloud(c: Callable[[str], Any], pts: np.ndarray) -> Any:
    field = c("sensor_msgs/msg/PointField")
    return c("sensor_msgs/msg/PointCloud2")(
        header=header(c, HEADER.stamp.sec, HEADER.stamp.nanosec, HEADER.frame_id), height=1, width=len(pts),
        fields=[field(name=n, offset=4 * i, datatype=7, count=1) for i, n in enumerate("xyz")],
        is_bigendian=False, point_step=12, row_step=12 * len(pts),
        data=np.frombuffer(pts.astype("<f4").tobytes(), np.uint8), is_dense=True)


@pytest.mark.parametrize("n", [0, 1, 2, 1000])
def test_point_cloud_equals_the_reference_serializers(n: int, ref: Any) -> None:
    name, classes, to_bytes = ref
    pts = np.random.default_rng(n).normal(0, 2, (n, 3)).astype(np.float32)
    reference = to_bytes(_ref_cloud(classes, pts), "sensor_msgs/msg/PointCloud2")
    check_bytes(lambda: points_to_cdr(pts, HEADER), reference, name)


def test_point_cloud_reads_back_and_refuses_invalid_points() -> None:
    from probench.bags.typestore import vision_typestore

    pts = np.array([[1.0, -2.0, 3.5], [0.25, 0.5, 0.75]])  # float64 in: float32 out
    msg = vision_typestore().deserialize_cdr(points_to_cdr(pts, HEADER), "sensor_msgs/msg/PointCloud2")
    assert [(f.name, f.offset, f.datatype, f.count) for f in msg.fields] == [
        ("x", 0, 7, 1), ("y", 4, 7, 1), ("z", 8, 7, 1)]
    assert (msg.height, msg.width, msg.point_step, msg.row_step, msg.is_dense, msg.is_bigendian) == (
        1, 2, 12, 24, True, False)
    assert np.array_equal(np.frombuffer(bytes(msg.data), "<f4").reshape(-1, 3), pts.astype(np.float32))
    with pytest.raises(MessageConversionError, match="only finite points"):
        points_to_cdr(np.array([[0.0, np.nan, 1.0]]), HEADER)
