"""The device preprocessing path against the reference processors: pixel values and boxes.

Tolerances (docs/MODELS.md, "Preprocessing"):
- transformers families: pixel values within 1e-5 (OWLv2's blur + resize are matrix products
  of the same weights, summed in another order; the others run the processor's own ops);
- ultralytics: OpenCV's fixed-point resize vs a float resize rounded half up: equal at the
  integer scale factors of common camera sizes, at most one uint8 level elsewhere;
- boxes within 0.5 px (box for box, same prompt, scores within 1e-3).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.tiny_adapters import PROMPTS, TINY, image, shared
from probench.errors import UsageError
from probench.models import preprocess as prep
from probench.models.zoo import load_detector

SIZES = [(96, 160), (160, 96), (480, 640), (720, 1280)]
ULTRA = ["tiny-yolo-world-s", "tiny-yoloe-s"]


def _paths(det, images):
    """pixel inputs of both paths for the same images"""
    old = det.preprocess
    try:
        det.preprocess = "device"
        dev = det.pixel_inputs(images)
        det.preprocess = "reference"
        ref = det.pixel_inputs(images)
    finally:
        det.preprocess = old
    return dev, ref


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("shape", SIZES)
def test_pixel_values_match_the_processor(name: str, shape: tuple[int, int]) -> None:
    det = shared(name)
    dev, ref = _paths(det, [image(*shape, seed=shape[0])])
    assert set(dev) == set(ref)
    assert dev["pixel_values"].shape == ref["pixel_values"].shape
    assert float((dev["pixel_values"] - ref["pixel_values"]).abs().max()) <= 1e-5
    if "pixel_mask" in ref:
        assert torch.equal(dev["pixel_mask"], ref["pixel_mask"])


def test_owl_batch_of_mixed_sizes_matches_the_processor() -> None:
    det = shared("tiny-owlv2")
    images = [image(96, 160, seed=1), image(720, 1280, seed=2), image(96, 160, seed=3)]
    dev, ref = _paths(det, images)
    assert dev["pixel_values"].shape == (3, 3, 64, 64)
    assert float((dev["pixel_values"] - ref["pixel_values"]).abs().max()) <= 1e-5


@pytest.mark.parametrize("side", [960, 1008])
def test_owlv2_real_size_pixels(side: int) -> None:
    """The real OWLv2 input sizes (the blur is then a near no-op, still reproduced)."""
    import transformers as tf

    proc = tf.Owlv2ImageProcessor(size={"height": side, "width": side})
    frame = image(720, 1280, seed=4)
    ref = proc(images=[frame], return_tensors="pt")["pixel_values"]
    cpu = torch.device("cpu")
    got = prep.Owlv2Pixels(proc, cpu, torch.float32)(prep.Uploader(cpu)([frame]))
    assert got.shape == ref.shape and float((got - ref).abs().max()) <= 1e-5


def test_real_size_processors_pixels() -> None:
    """The other families' processors at their published sizes, 1280x720 frames."""
    import transformers as tf

    frame = image(720, 1280, seed=5)
    procs = [
        tf.OwlViTImageProcessor(size={"height": 768, "width": 768}, crop_size={"height": 768, "width": 768},
                                do_center_crop=False, resample=3),
        tf.GroundingDinoImageProcessor(size={"shortest_edge": 800, "longest_edge": 1333}),
        tf.DetrImageProcessor(size={"height": 640, "width": 640}, do_pad=False),
        tf.Sam3ImageProcessor(size={"height": 1008, "width": 1008}),
    ]
    cpu = torch.device("cpu")
    for proc in procs:
        ref = proc(images=[frame], return_tensors="pt")["pixel_values"]
        got = prep.ProcessorPixels(proc, cpu, torch.float32)(prep.Uploader(cpu)([frame]))["pixel_values"]
        assert got.shape == ref.shape, type(proc).__name__
        assert float((got - ref).abs().max()) <= 1e-5, type(proc).__name__


def match_boxes(a, b, px: float = 0.5, score: float = 1e-3) -> int:
    """How many boxes of ``a`` have a partner in ``b`` (same prompt, every coordinate within
    ``px``, score within ``score``), each partner used once."""
    used = np.zeros(len(b), dtype=bool)
    hits = 0
    for i in np.argsort(-a.scores, kind="stable"):
        ok = (~used & (b.prompt_index == a.prompt_index[i]) & (np.abs(b.scores - a.scores[i]) <= score)
              & (np.abs(b.xyxy - a.xyxy[i]).max(axis=1) <= px))
        if ok.any():
            used[np.argmax(ok)] = True
            hits += 1
    return hits


def _both(det, frame, prompts):
    old = det.preprocess
    try:
        det.preprocess = "device"
        dev = det.detect(frame, prompts)
        det.preprocess = "reference"
        ref = det.detect(frame, prompts)
    finally:
        det.preprocess = old
    return dev, ref


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("shape", [(96, 160), (720, 1280)])
def test_boxes_match_the_reference_path(name: str, shape: tuple[int, int]) -> None:
    dev, ref = _both(shared(name), image(*shape, seed=7), PROMPTS)
    assert len(dev) == len(ref) > 0
    assert match_boxes(dev, ref) == len(dev)


def test_uploader_takes_read_only_and_strided_frames() -> None:
    frame = image(20, 30)
    ro = frame.copy()
    ro.setflags(write=False)
    up = prep.Uploader(torch.device("cpu"))
    a, b, c = up([frame, ro, frame[:, ::-1]])
    assert a.dtype == torch.uint8 and tuple(a.shape) == (20, 30, 3)
    assert torch.equal(a, b) and torch.equal(c, torch.from_numpy(frame[:, ::-1].copy()))
    assert a.data_ptr() == torch.from_numpy(frame).data_ptr()  # CPU: no copy


def test_tensor_frames_take_the_same_path() -> None:
    """A frame already decoded to a torch tensor (e.g. on the GPU) gives the same answer."""
    det = shared("tiny-owlv2")
    frame = image(96, 160, seed=8)
    a = det.detect(frame, PROMPTS)
    b = det.detect(torch.from_numpy(frame), PROMPTS)
    np.testing.assert_array_equal(a.xyxy, b.xyxy)
    np.testing.assert_array_equal(a.scores, b.scores)


def test_unknown_preprocess_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="preprocess"):
        load_detector("tiny-owlv2", preprocess="gpu")


# -- ultralytics -------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(480, 640), (720, 1280), (1080, 1920), (90, 170), (37, 200), (640, 480)])
@pytest.mark.parametrize("rect", [True, False])
def test_letterbox_geometry_is_ultralytics(shape: tuple[int, int], rect: bool) -> None:
    from ultralytics.data.augment import LetterBox

    for imgsz in (128, 640):
        frame = np.zeros((*shape, 3), np.uint8)
        ref = LetterBox(imgsz, auto=rect, stride=32)(image=frame)
        (nh, nw), (top, bottom, left, right) = prep.letterbox_geometry(
            shape, (imgsz, imgsz), auto=rect, stride=32)
        assert (nh + top + bottom, nw + left + right) == ref.shape[:2]


@pytest.fixture(scope="module")
def ultra_dets():
    return {name: load_detector(name) for name in ULTRA}


@pytest.mark.parametrize("name", ULTRA)
@pytest.mark.parametrize("shape", [(480, 640), (720, 1280), (90, 170), (37, 200)])
def test_letterbox_pixels_match_the_predictor(ultra_dets, name: str, shape: tuple[int, int]) -> None:
    det = ultra_dets[name]
    det.set_prompts(PROMPTS)
    frame = image(*shape, seed=shape[1])
    det.preprocess = "reference"
    det.detect(frame)  # builds ultralytics' predictor
    det.preprocess = "device"
    ref = det.model.predictor.preprocess([np.ascontiguousarray(frame[..., ::-1])])
    got = det._letterbox(det._upload([frame]))
    assert got.shape == ref.shape
    diff = (got - ref).abs().max() * 255
    integer_scale = (shape[0] * shape[1]) in (480 * 640, 720 * 1280)
    assert float(diff) <= (1e-4 if integer_scale else 1.0 + 1e-4)


@pytest.mark.parametrize("name", ULTRA)
@pytest.mark.parametrize("shape", [(480, 640), (720, 1280)])
def test_ultralytics_boxes_match_the_predictor(ultra_dets, name: str, shape: tuple[int, int]) -> None:
    """Where the letterbox pixels are equal (integer scale factors), the device path's boxes
    are the predictor's; elsewhere one-level pixel differences move a random-weight tiny
    model's boxes unpredictably (docs/MODELS.md)."""
    dev, ref = _both(ultra_dets[name], image(*shape, seed=11), PROMPTS)
    assert len(dev) == len(ref) > 0
    assert match_boxes(dev, ref, px=1e-3, score=1e-6) == len(dev)
