"""probench.ros.convert: every image encoding, every malformed image, and the message builders."""

from __future__ import annotations

import array
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from probench.detections import Detections
from probench.msgs.errors import (
    CompressedImageError,
    ImageDataError,
    ImageEncodingError,
    ImageSizeError,
    ImageStepError,
    MessageConversionError,
)
from probench.ros import convert


@pytest.fixture
def rgb() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, size=(7, 11, 3), dtype=np.uint8)


def _gray(rgb: np.ndarray) -> np.ndarray:
    import cv2

    return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)


def _msg(**kw: object) -> SimpleNamespace:
    base = dict(height=2, width=3, encoding="rgb8", is_bigendian=0, step=9, data=bytes(18))
    base.update(kw)
    return SimpleNamespace(**base)


# -- every supported encoding -------------------------------------------------------------
@pytest.mark.parametrize("encoding", ["rgb8", "bgr8", "rgba8", "bgra8"])
def test_color_encodings_round_trip_exactly(rgb: np.ndarray, encoding: str) -> None:
    out = convert.image_to_rgb(convert.rgb_to_fields(rgb, encoding))
    assert out.dtype == np.uint8 and out.shape == rgb.shape
    np.testing.assert_array_equal(out, rgb)


def test_bgr8_channel_order_is_swapped() -> None:
    bgr = np.zeros((1, 2, 3), np.uint8)
    bgr[0, 0] = (255, 0, 0)  # blue in BGR
    msg = _msg(height=1, width=2, encoding="bgr8", step=6, data=bgr.tobytes())
    assert tuple(convert.image_to_rgb(msg)[0, 0]) == (0, 0, 255)


@pytest.mark.parametrize("encoding", ["mono8", "8UC1", "mono16", "16UC1"])
def test_mono_encodings_become_gray_rgb(rgb: np.ndarray, encoding: str) -> None:
    out = convert.image_to_rgb(convert.rgb_to_fields(rgb, encoding))
    gray = _gray(rgb)
    for c in range(3):
        np.testing.assert_array_equal(out[:, :, c], gray)


def test_mono16_is_scaled_like_cv_bridge_and_honours_endianness() -> None:
    values = np.array([[0, 257, 32768, 65535]], dtype=np.uint16)
    expected = np.round(values * 255.0 / 65535.0).astype(np.uint8)  # 0, 1, 128, 255
    little = _msg(height=1, width=4, encoding="mono16", step=8, data=values.astype("<u2").tobytes())
    big = _msg(height=1, width=4, encoding="mono16", step=8, is_bigendian=1,
               data=values.astype(">u2").tobytes())
    np.testing.assert_array_equal(convert.image_to_rgb(little)[:, :, 0], expected)
    np.testing.assert_array_equal(convert.image_to_rgb(big)[:, :, 0], expected)
    # The same big-endian bytes read as little-endian would be different values:
    wrong = _msg(height=1, width=4, encoding="mono16", step=8, data=values.astype(">u2").tobytes())
    assert not np.array_equal(convert.image_to_rgb(wrong)[:, :, 0], expected)


def test_row_padding_is_skipped(rgb: np.ndarray) -> None:
    h, w = rgb.shape[:2]
    step = w * 3 + 5
    padded = np.full((h, step), 77, np.uint8)
    padded[:, : w * 3] = rgb.reshape(h, w * 3)
    msg = _msg(height=h, width=w, step=step, data=padded.tobytes())
    np.testing.assert_array_equal(convert.image_to_rgb(msg), rgb)


def test_rgb8_is_a_zero_copy_view(rgb: np.ndarray) -> None:
    buf = array.array("B", rgb.tobytes())
    out = convert.image_to_rgb(_msg(height=7, width=11, step=33, data=buf))
    assert np.shares_memory(out, np.frombuffer(buf, np.uint8))


def test_numpy_data_as_rosbags_gives_it(rgb: np.ndarray) -> None:
    msg = _msg(height=7, width=11, step=33, data=np.frombuffer(rgb.tobytes(), np.uint8))
    np.testing.assert_array_equal(convert.image_to_rgb(msg), rgb)


# -- every malformed image ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "error", "words"),
    [
        (dict(encoding="yuv422"), ImageEncodingError, "unsupported image encoding 'yuv422'"),
        (dict(encoding=""), ImageEncodingError, "unsupported image encoding"),
        (dict(height=0, data=b""), ImageSizeError, "zero size"),
        (dict(width=0, step=0, data=b""), ImageSizeError, "zero size"),
        (dict(height=1, width=40000, step=120000, data=b""), ImageSizeError, "exceeds"),
        (dict(step=8), ImageStepError, "step 8 is smaller"),
        (dict(encoding="mono16", width=3, step=7, data=bytes(14)), ImageStepError, "multiple"),
        (dict(data=bytes(17)), ImageDataError, "truncated: 17 bytes, expected"),
        (dict(data=bytes(19)), ImageDataError, "too long"),
        (dict(data=[1, 2, 300] * 6), ImageDataError, "not a byte buffer"),
    ],
)
def test_malformed_images_raise_specific_errors(fields: dict, error: type, words: str) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(")):
        convert.image_to_rgb(_msg(**fields))


def test_not_an_image_message() -> None:
    with pytest.raises(MessageConversionError, match="not an image message"):
        convert.image_to_rgb(SimpleNamespace(height=1))


# -- compressed -------------------------------------------------------------------------------
def _encode(rgb: np.ndarray, ext: str) -> bytes:
    import cv2

    ok, buf = cv2.imencode(ext, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    assert ok
    return buf.tobytes()


def test_png_decodes_exactly(rgb: np.ndarray) -> None:
    msg = SimpleNamespace(format="png", data=_encode(rgb, ".png"))
    np.testing.assert_array_equal(convert.compressed_to_rgb(msg), rgb)


@pytest.mark.parametrize("fmt", ["jpeg", "rgb8; jpeg compressed bgr8", ""])
def test_jpeg_decodes_to_rgb(fmt: str) -> None:
    img = np.zeros((16, 16, 3), np.uint8)
    img[:, :, 0] = 200  # red
    out = convert.compressed_to_rgb(SimpleNamespace(format=fmt, data=_encode(img, ".jpg")))
    assert out.shape == (16, 16, 3)
    assert out[:, :, 0].mean() > 150 and out[:, :, 2].mean() < 50  # red stayed red (RGB order)


@pytest.mark.parametrize(
    ("fmt", "data", "words"),
    [
        ("h264", b"\x00\x01", "unsupported compressed format"),
        ("16UC1; compressedDepth", b"\x00\x01", "unsupported compressed format"),
        ("jpeg", b"", "no data"),
        ("jpeg", b"not a jpeg at all", "does not decode"),
    ],
)
def test_bad_compressed_images(fmt: str, data: bytes, words: str) -> None:
    with pytest.raises(CompressedImageError, match=words):
        convert.compressed_to_rgb(SimpleNamespace(format=fmt, data=data))


# -- message builders (ROS message packages, no running rclpy) --------------------------------
def _header(sec: int = 12, nanosec: int = 345, frame_id: str = "cam") -> object:
    from std_msgs.msg import Header

    h = Header(frame_id=frame_id)
    h.stamp.sec, h.stamp.nanosec = sec, nanosec
    return h


def test_real_image_message_round_trip(requires_vision_msgs: None, rgb: np.ndarray) -> None:
    msg = convert.rgb_to_image_msg(rgb, _header())
    assert (msg.encoding, msg.step, msg.height, msg.width) == ("rgb8", 33, 7, 11)
    np.testing.assert_array_equal(convert.image_to_rgb(msg), rgb)
    bgr_msg = convert.rgb_to_image_msg(rgb, _header(), encoding="bgr8")
    assert bgr_msg.encoding == "bgr8"
    np.testing.assert_array_equal(convert.image_to_rgb(bgr_msg), rgb)


def test_detection_array_fields(requires_vision_msgs: None) -> None:
    dets = Detections.from_arrays([[10, 20, 30, 60], [0, 0, 5, 5], [1, 1, 2, 2]], [0.5, 0.9, 0.1],
                                  [1, 0, 1])
    header = _header()
    msg = convert.detections_to_msg(dets, header, ["a cup", "the door"], max_detections=2)
    assert msg.header == header
    assert len(msg.detections) == 2  # the 0.1 one is cut by max_detections
    first, second = msg.detections
    assert first.header == header and second.header == header
    assert first.results[0].hypothesis.class_id == "a cup"
    assert first.results[0].hypothesis.score == pytest.approx(0.9)
    assert second.results[0].hypothesis.class_id == "the door"
    assert (second.bbox.center.position.x, second.bbox.center.position.y) == (20.0, 40.0)
    assert (second.bbox.size_x, second.bbox.size_y) == (20.0, 40.0)
    xyxy, scores, ids = convert.detection_array_to_arrays(msg)
    np.testing.assert_allclose(xyxy, [[0, 0, 5, 5], [10, 20, 30, 60]])
    np.testing.assert_allclose(scores, [0.9, 0.5])
    assert ids == ["a cup", "the door"]
    from rclpy.serialization import deserialize_message, serialize_message
    from vision_msgs.msg import Detection2DArray

    assert deserialize_message(serialize_message(msg), Detection2DArray) == msg


def test_empty_detections_still_make_an_array_with_the_header(requires_vision_msgs: None) -> None:
    header = _header(frame_id="left")
    msg = convert.detections_to_msg(Detections.empty(), header, ["x"])
    assert msg.header == header and len(msg.detections) == 0


def test_prompt_index_out_of_range_is_an_error(requires_vision_msgs: None) -> None:
    dets = Detections.from_arrays([[0, 0, 1, 1]], [0.5], [3])
    with pytest.raises(MessageConversionError, match="prompt 3 but only 1"):
        convert.detections_to_msg(dets, _header(), ["x"])


def test_label_info(requires_vision_msgs: None) -> None:
    msg = convert.prompts_to_label_info(["a cup", "the door"], _header(), 0.25)
    assert [(c.class_id, c.class_name) for c in msg.class_map] == [(0, "a cup"), (1, "the door")]
    assert msg.threshold == pytest.approx(0.25)
    assert convert.label_info_to_prompts(msg) == ["a cup", "the door"]


def test_diagnostics(requires_vision_msgs: None) -> None:
    from builtin_interfaces.msg import Time
    from diagnostic_msgs.msg import DiagnosticStatus

    msg = convert.stats_to_diagnostics("gn", "cpu", "WARN", "slow", {"rate_hz": 2.5, "frames": 3},
                                       Time(sec=5))
    (status,) = msg.status
    assert status.level == DiagnosticStatus.WARN and status.hardware_id == "cpu"
    assert {kv.key: kv.value for kv in status.values} == {"rate_hz": "2.500", "frames": "3"}
    with pytest.raises(MessageConversionError, match="level"):
        convert.stats_to_diagnostics("gn", "cpu", "BAD", "", {}, Time())
    back = convert.diagnostics_to_statuses(msg)
    assert back == [("gn", "WARN", "slow", {"rate_hz": "2.500", "frames": "3"})]
    for level in convert.LEVELS:
        back = convert.diagnostics_to_statuses(convert.stats_to_diagnostics("n", "", level, "", {}, Time()))
        assert back[0][1] == level
    msg.status[0].level = b"\x07"  # not a level diagnostic_msgs defines
    assert convert.diagnostics_to_statuses(msg)[0][1] == "STALE"


def test_param_declaration_types_are_rclpy_types(requires_vision_msgs: None) -> None:
    from rclpy.parameter import Parameter

    from probench.realtime.node_spec import EVALUATOR_PARAMS, GROUNDING_PARAMS

    samples = {"string": "x", "double": 1.5, "integer": 2, "bool": True, "string_array": ["x"]}
    for table in (GROUNDING_PARAMS, EVALUATOR_PARAMS):
        for param in table:
            _, desc = convert.param_declaration(param)
            assert desc.type == Parameter.Type.from_parameter_value(samples[param.type]).value, param.name


def test_convert_imports_without_rclpy() -> None:
    import subprocess

    code = (
        "import sys, probench.ros.convert as c, types, numpy as np;"
        "m = types.SimpleNamespace(height=1, width=1, encoding='mono8', step=1, is_bigendian=0, data=b'x');"
        "c.image_to_rgb(m); print('rclpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_image_from_cdr_matches_rclpy(requires_vision_msgs, rgb: np.ndarray) -> None:
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import CompressedImage

    for encoding in ("rgb8", "bgr8", "mono16"):
        msg = convert.rgb_to_image_msg(rgb, _header(frame_id="cäm"), encoding=encoding)
        wire = serialize_message(msg)
        f = convert.image_from_cdr(wire)
        assert (f.header.stamp.sec, f.header.stamp.nanosec, f.header.frame_id) == (12, 345, "cäm")
        assert (f.height, f.width, f.encoding, f.step, f.is_bigendian) == (
            msg.height, msg.width, msg.encoding, msg.step, msg.is_bigendian)
        np.testing.assert_array_equal(convert.image_to_rgb(f), convert.image_to_rgb(msg))
        assert convert.to_header(f.header) == msg.header
    wire = serialize_message(convert.rgb_to_image_msg(rgb, _header()))
    view = convert.image_to_rgb(convert.image_from_cdr(wire))
    assert np.shares_memory(view, np.frombuffer(wire, np.uint8))  # zero-copy from the wire
    comp = CompressedImage(header=_header(), format="png")
    comp.data = _encode(rgb, ".png")
    f = convert.compressed_from_cdr(serialize_message(comp))
    assert f.format == "png" and f.header.frame_id == "cam"
    np.testing.assert_array_equal(convert.compressed_to_rgb(f), rgb)


def test_rgb_from_cdr_reads_either_kind(requires_vision_msgs, rgb: np.ndarray) -> None:
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import CompressedImage

    wire = serialize_message(convert.rgb_to_image_msg(rgb, _header(frame_id="cäm"), encoding="bgr8"))
    header, out = convert.rgb_from_cdr(wire, compressed=False)
    assert (header.stamp.sec, header.stamp.nanosec, header.frame_id) == (12, 345, "cäm")
    np.testing.assert_array_equal(out, rgb)
    comp = CompressedImage(header=_header(), format="png")
    comp.data = _encode(rgb, ".png")
    header, out = convert.rgb_from_cdr(serialize_message(comp), compressed=True)
    assert header.frame_id == "cam"
    np.testing.assert_array_equal(out, rgb)
    with pytest.raises(MessageConversionError):  # a raw image read as compressed
        convert.rgb_from_cdr(wire, compressed=True)


def test_bad_cdr_is_a_conversion_error(requires_vision_msgs, rgb: np.ndarray) -> None:
    from rclpy.serialization import serialize_message

    wire = serialize_message(convert.rgb_to_image_msg(rgb, _header()))
    for bad, words in [(wire[:2], "too short"), (b"\x00\x07" + wire[2:], "encapsulation"),
                       (wire[:30], "truncated"), (wire[:-5], "truncated")]:
        with pytest.raises(MessageConversionError, match=words):
            convert.image_from_cdr(bad)
