"""Memory for masks scales with what is drawn, not with the prompt count (issue 38): `ground
--model test-masks` with 1024 prompts peaked at 2.9 GB on the 10-frame sample. The measured
proxy is tracemalloc's peak on a small frame, never a clock: the scripted model costs its
(N, H, W) output and one box's work space; what the core draws and encodes beyond the model's
output is the same for 16 prompts as for 250 (max_detections of them are published)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np

from probench.bags.typestore import typestore
from probench.models.testing import ScriptedDetector, ellipse_masks
from probench.realtime.frame_core import CoreSettings, FrameCore, Wanted

H, W = 240, 320
MIB = 2**20


def _peak(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _frame() -> bytes:
    ts = typestore()
    stamp = ts.types["builtin_interfaces/msg/Time"](sec=1, nanosec=0)
    img = ts.types["sensor_msgs/msg/Image"](
        header=ts.types["std_msgs/msg/Header"](stamp=stamp, frame_id="cam"),
        height=H,
        width=W,
        encoding="rgb8",
        is_bigendian=0,
        step=W * 3,
        data=np.zeros(H * W * 3, np.uint8),
    )
    return bytes(ts.serialize_cdr(img, "sensor_msgs/msg/Image"))


def test_scripted_masks_cost_their_output_and_one_box() -> None:
    boxes = np.array([[10.0, 10.0, 300.0, 230.0]] * 256)
    out_bytes = 256 * H * W  # the (N, H, W) bool output itself
    assert _peak(lambda: ellipse_masks(boxes, (H, W))) < out_bytes + MIB  # was ~17x the output in floats


def test_what_is_drawn_costs_the_same_for_16_or_250_prompts() -> None:
    core = FrameCore(ScriptedDetector("test-masks", masks=True), settings=CoreSettings(max_detections=8))
    wanted = Wanted(masks=True, debug_image=True)
    frame = _frame()
    beyond_model: dict[int, int] = {}
    for n in (16, 250):  # 250: the semantic image (mono8) holds 255 prompts
        prompts = tuple(f"thing {i}" for i in range(n))
        core.answer(frame, compressed=False, prompts=prompts, wanted=wanted)  # the text side made ready
        answer = None

        def run(prompts: tuple[str, ...] = prompts) -> None:
            nonlocal answer
            answer = core.answer(frame, compressed=False, prompts=prompts, wanted=wanted)

        peak = _peak(run)
        assert (
            answer is not None
            and len(answer.detections) == 8
            and answer.mask_cdr
            and answer.debug_rgb is not None
        )
        beyond_model[n] = peak - n * H * W  # less the model's own (N, H, W) masks
    assert beyond_model[250] < beyond_model[16] + MIB, beyond_model
