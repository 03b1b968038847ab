"""FrameCore, the one answer to a camera frame: its steps in order, and the masks, points and
problems it hands its callers (the node, ground and the fake link share it: the contract
test in test/ros/test_ros_contract.py checks that they agree)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from probench.bags.typestore import typestore, vision_typestore
from probench.detections import Detections
from probench.models.testing import ScriptedDetector
from probench.prompting.policy import resolve_policy
from probench.realtime.frame_core import CoreSettings, FrameCore, Wanted, enable_masks
from probench.realtime.spatial_stage import SpatialSettings, SpatialStage

H, W = 48, 64
STAMP = SimpleNamespace(sec=12, nanosec=5)


def _image(stamp_sec: int = 12, h: int = H, w: int = W) -> bytes:
    ts = typestore()
    img = ts.types["sensor_msgs/msg/Image"](
        header=ts.types["std_msgs/msg/Header"](stamp=ts.types["builtin_interfaces/msg/Time"](sec=stamp_sec,
                                                                                            nanosec=5),
                                               frame_id="cam"),
        height=h, width=w, encoding="rgb8", is_bigendian=0, step=w * 3,
        data=np.zeros(h * w * 3, np.uint8))
    return bytes(ts.serialize_cdr(img, "sensor_msgs/msg/Image"))


class _Plugin(ScriptedDetector):
    """A plugin-like detector with chosen masks (``shape``: the masks' (H, W))."""

    def __init__(self, shape: tuple[int, int] | None) -> None:
        super().__init__("plugin")
        self.shape = shape

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        n = len(self._prompts)
        xyxy = np.array([[2.0 + 10 * i, 2.0, 12.0 + 10 * i, 20.0] for i in range(n)])
        masks = None
        if self.shape is not None:
            masks = np.zeros((n, *self.shape), bool)
            for i in range(n):
                masks[i, 2:20, 2 + 10 * i:12 + 10 * i] = True
        return Detections(xyxy, np.linspace(0.9, 0.5, n), np.arange(n), masks)


def test_an_explicit_form_is_answered_under_the_operators_part() -> None:
    core = FrameCore(ScriptedDetector())
    answer = core.answer(_image(), compressed=False, prompts=("the red cup on the saucer => cup", "a door"))
    assert answer.answered and not answer.error
    assert answer.prompts == ("the red cup on the saucer", "a door")
    msg = vision_typestore().deserialize_cdr(answer.detections_cdr, "vision_msgs/msg/Detection2DArray")
    assert {d.results[0].hypothesis.class_id for d in msg.detections} == set(answer.prompts)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id) == (12, 5, "cam")
    # the model got the explicit form's ORIG ("as typed"), the categorical policy its CAT
    cat = core.answer(_image(), compressed=False, prompts=("the red cup on the saucer => cup",),
                      policy=resolve_policy("categorical"))
    want = ScriptedDetector().detect(np.zeros((H, W, 3), np.uint8), ["cup"])
    np.testing.assert_allclose(cat.detections.xyxy, want.xyxy)


def test_the_published_set_is_the_top_k_and_on_2d_comes_before_the_rest() -> None:
    core = FrameCore(ScriptedDetector(), settings=CoreSettings(max_detections=2))
    order: list[str] = []
    answer = core.answer(_image(), compressed=False, prompts=("a", "b", "c", "d"),
                         wanted=Wanted(debug_image=True), on_2d=lambda a: order.append(
                             "2d" if a.debug_rgb is None else "late"))
    assert order == ["2d"] and answer.debug_rgb is not None
    assert len(answer.detections) == 2 and answer.detections.scores[0] >= answer.detections.scores[1]
    assert answer.published_at > 0


def test_a_bad_image_is_an_error_not_an_answer() -> None:
    answer = FrameCore(ScriptedDetector()).answer(b"\x00\x01\x00\x00\x01", compressed=False, prompts=("a",))
    assert not answer.answered and answer.error.startswith("image dropped: ")


def test_a_model_that_raises_fails_its_frame_with_a_report_and_the_next_is_answered() -> None:
    from helpers.failing_detector import ERROR, FailingDetector
    from probench.msgs.wire import FAILED_FRAME_STATUS, frame_failure_from_cdr

    core = FrameCore(FailingDetector(fail_calls={0}))
    failed = core.answer(_image(12), compressed=False, prompts=("a door",))
    assert not failed.answered and failed.detections_cdr is None and not failed.error
    assert failed.failed == f"ValueError: {ERROR}"
    assert failed.failure_cdr is not None
    header, error = frame_failure_from_cdr(failed.failure_cdr)
    assert error == failed.failed
    assert (header.stamp.sec, header.stamp.nanosec, header.frame_id) == (12, 5, "cam")  # the frame's own
    msg = vision_typestore().deserialize_cdr(failed.failure_cdr, "diagnostic_msgs/msg/DiagnosticArray")
    assert [(s.level, s.name, s.hardware_id) for s in msg.status] == [(2, FAILED_FRAME_STATUS,
                                                                      "test-instant")]
    ok = core.answer(_image(13), compressed=False, prompts=("a door",))
    assert ok.answered and not ok.failed and ok.failure_cdr is None and len(ok.detections) == 1


def test_without_prompts_an_empty_answer_and_a_hint() -> None:
    answer = FrameCore(ScriptedDetector()).answer(_image(), compressed=False, prompts=())
    assert answer.answered and len(answer.detections) == 0
    assert any("no prompts yet" in p for p in answer.problems)


def test_a_stamped_set_answers_its_frame_and_a_missing_one_waits_then_falls_back() -> None:
    core = FrameCore(ScriptedDetector(), settings=CoreSettings(frame_prompts_wait=0.0))
    core.put_frame_prompts(12_000_000_005, ("a grey wall",))
    own = core.answer(_image(12), compressed=False, prompts=("a door",))
    assert own.bound and own.prompts == ("a grey wall",)
    other = core.answer(_image(13), compressed=False, prompts=("a door",))
    assert not other.bound and other.prompts == ("a door",)
    assert any("no prompt set stamped for the frame" in p for p in other.problems)
    none = core.answer(_image(14), compressed=False, prompts=())
    assert not none.answered and not none.error  # no set, no operator prompts: no answer at all


def test_masks_of_the_wrong_shape_are_one_problem_and_the_boxes_still_go_out() -> None:
    core = FrameCore(_Plugin((H // 2, W)))
    answers = [core.answer(_image(), compressed=False, prompts=("a", "b"), wanted=Wanted(masks=True))
               for _ in range(3)]
    assert all(a.answered and len(a.detections) == 2 and a.detections.masks is None for a in answers)
    assert all(not a.mask_cdr for a in answers)
    said = [p for a in answers for p in a.problems if "masks dropped" in p]
    assert len(said) == 1 and f"{W}x{H // 2}" in said[0], said  # once, naming both sizes


def test_mask_images_link_every_pixel_to_its_detection_and_class() -> None:
    core = FrameCore(_Plugin((H, W)))
    quiet = core.answer(_image(), compressed=False, prompts=("a", "b"))
    assert quiet.mask_cdr == {}  # nobody subscribes: nothing built
    answer = core.answer(_image(), compressed=False, prompts=("a", "b"), wanted=Wanted(masks=True))
    ts = typestore()
    images = {t: ts.deserialize_cdr(raw, "sensor_msgs/msg/Image") for t, raw in answer.mask_cdr.items()}
    inst = np.frombuffer(bytes(images["segmentation/instances"].data), "<u2").reshape(H, W)
    sem = np.frombuffer(bytes(images["segmentation/semantic"].data), np.uint8).reshape(H, W)
    conf = np.frombuffer(bytes(images["segmentation/confidence"].data), np.uint8).reshape(H, W)
    dets = answer.detections
    for k in range(len(dets)):  # value k + 1: the (k + 1)-th Detection2D, its prompt, its score
        region = inst == k + 1
        assert region.sum() == dets.masks[k].sum() and np.all(dets.masks[k][region])
        assert np.all(sem[region] == dets.prompt_index[k] + 1)
        assert np.all(conf[region] == round(255 * dets.scores[k]))
    assert np.all((inst == 0) == (sem == 0)) and images["segmentation/semantic"].encoding == "mono8"


def test_the_target_points_come_from_its_mask_and_depth() -> None:
    from probench.spatial.synthetic import encode

    k = [50.0, 0.0, W / 2, 0.0, 50.0, H / 2, 0.0, 0.0, 1.0]
    spatial = SpatialStage(SpatialSettings(depth=True, tracking=False, tolerance_s=0.0, wait_s=0.0,
                                           min_depth_pixels=1))
    core = FrameCore(_Plugin((H, W)), spatial=spatial)
    assert core.put_camera_info(k, W, H) is None
    ts = typestore()
    depth = encode(np.full((H, W), 2.0), "16UC1")
    stamp = ts.types["builtin_interfaces/msg/Time"](sec=12, nanosec=5)
    msg = ts.types["sensor_msgs/msg/Image"](
        header=ts.types["std_msgs/msg/Header"](stamp=stamp, frame_id="cam"), height=H, width=W,
        encoding="16UC1", is_bigendian=0, step=W * 2, data=depth.view(np.uint8).reshape(-1))
    assert core.put_depth_cdr(bytes(ts.serialize_cdr(msg, "sensor_msgs/msg/Image"))) is None
    answer = core.answer(_image(), compressed=False, prompts=("a", "b"), wanted=Wanted(points=True))
    assert answer.d3 is not None and answer.points_cdr is not None and not answer.mask_cdr
    cloud = ts.deserialize_cdr(answer.points_cdr, "sensor_msgs/msg/PointCloud2")
    pts = np.frombuffer(bytes(cloud.data), "<f4").reshape(-1, 3)
    dets = answer.detections
    target = dets.masks[int(np.argmax(dets.scores * (dets.prompt_index == 0)))]
    assert len(pts) == target.sum() and np.allclose(pts[:, 2], 2.0)


def test_enable_masks_knows_which_models_give_them() -> None:
    assert enable_masks(ScriptedDetector("test-masks", masks=True), True) is True
    assert enable_masks(ScriptedDetector(), True) is False  # test-instant: no masks, so no mask topics
    det = ScriptedDetector("test-masks", masks=True)
    assert enable_masks(det, False) is False and det.return_masks is False


@pytest.mark.parametrize("n", [255, 256])
def test_more_prompts_than_the_semantic_image_holds_is_one_problem(n: int) -> None:
    core = FrameCore(_Plugin((H, W)), settings=CoreSettings(max_detections=10_000))
    prompts = tuple(f"thing {i}" for i in range(n))
    answer = core.answer(_image(), compressed=False, prompts=prompts, wanted=Wanted(masks=True))
    assert answer.answered and len(answer.detections) == n
    if n == 255:
        assert set(answer.mask_cdr) == {"segmentation/instances", "segmentation/semantic",
                                        "segmentation/confidence"}
    else:
        assert answer.mask_cdr == {} and any("no mask images" in p for p in answer.problems)


def test_the_semantic_class_map_comes_with_the_first_masks_and_again_when_prompts_change() -> None:
    core = FrameCore(_Plugin((H, W)))
    wanted = Wanted(masks=True)
    first, same, other = (core.answer(_image(), compressed=False, prompts=p, wanted=wanted)
                          for p in (("a", "b"), ("a", "b"), ("c",)))
    assert same.mask_labels_cdr is None and first.mask_labels_cdr is not None and other.mask_labels_cdr
    labels = vision_typestore().deserialize_cdr(other.mask_labels_cdr, "vision_msgs/msg/LabelInfo")
    assert [(c.class_id, c.class_name) for c in labels.class_map] == [(0, "background"), (1, "c")]
