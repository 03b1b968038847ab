"""An in-process grounding node behind the evaluator's Link (no DDS, no rclpy).

It follows the real node's rules (docs/DESIGN.md, ROS graph contract): a one-slot mailbox
that keeps the newest frame, one worker thread, each frame answered with the prompt set
stamped for it (:class:`probench.realtime.grounding_worker.StampedPromptSets`) by the scripted
``test-instant`` detector, answers in arrival order. Knobs make it misbehave on purpose:
slow (``model_s``), answering with a class id the frame was not asked (``wrong_class``),
answering twice (``duplicate``), answering a stamp nobody sent (``stray_after``), holding
one answer back past the evaluator's timeout (``late``), or "shutting down" after some
frames (``stop_after``: ``ok()`` turns False, as after Ctrl-C).

Not a test module (imported by test/ros/test_ros_eval_*.py as helpers.fake_link).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from probench.models.testing import ScriptedDetector
from probench.realtime.eval_stream import Answer
from probench.realtime.grounding_worker import StampedPromptSets

GROUNDING = {
    "model": "test-instant",
    "device": "cpu",
    "precision": "fp32",
    "weights": "",
    "score_threshold": 0.0,
    "max_detections": 10000,
    "image_reliability": "reliable",
    "prompts": [],
}


class FakeGroundingLink:
    def __init__(
        self,
        *,
        model_s: float = 0.0,
        wrong_class: Sequence[int] = (),
        duplicate: Sequence[int] = (),
        stray_after: Sequence[int] = (),
        late: dict[int, float] | None = None,
        stop_after: int | None = None,
    ) -> None:
        self.model_s = model_s
        self.wrong_class, self.duplicate, self.stray_after = (
            set(wrong_class),
            set(duplicate),
            set(stray_after),
        )
        self.late = dict(late or {})  # frame number (0-based, in send order) -> extra seconds
        self.stop_after = stop_after
        self.detector = ScriptedDetector("test-instant")
        self.sets = StampedPromptSets()
        self._cond = threading.Condition()
        self._mailbox: tuple[int, int, Any] | None = None  # (frame number, stamp, image)
        self._handler: Callable[[Answer], object] | None = None
        self.sent: list[int] = []  # stamps, in send order
        self.processed: list[int] = []
        self.skipped = 0
        self.logs: list[str] = []
        self._stop = False
        self._thread: threading.Thread | None = None
        self.policy: Any = None  # the prompt policy (as typed when None)
        self.policies: list[str] = []  # every policy set, in order

    # -- EvaluatorLink ----------------------------------------------------------------------
    def grounding_parameters(self, timeout: float) -> dict[str, Any]:
        return dict(GROUNDING)

    def wait_ready(self, compressed: bool, timeout: float) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, daemon=True)
            self._thread.start()

    def image_from_bag(self, raw: bytes) -> Any:
        from probench.ros.convert import compressed_from_cdr, compressed_to_rgb, image_from_cdr, image_to_rgb

        try:
            return compressed_to_rgb(compressed_from_cdr(raw))
        except Exception:  # noqa: BLE001 - a raw-image bag
            return image_to_rgb(image_from_cdr(raw)).copy()

    def set_answer_handler(self, handler: Callable[[Answer], object]) -> None:
        self._handler = handler

    def set_prompt_policy(self, policy: str, profile: str, timeout: float) -> None:
        from probench.prompting.policy import resolve_policy

        self.policies.append(policy)
        self.policy = resolve_policy(policy, model="test-instant", profile=profile or None)

    def info(self, text: str) -> None:
        self.logs.append(text)

    def warning(self, text: str) -> None:
        self.logs.append("WARNING " + text)

    def announce(self, stamp_ns: int, texts: Sequence[str]) -> None:
        self.sets.put(stamp_ns, tuple(texts))

    def send(self, image: Any, stamp_ns: int) -> None:
        with self._cond:
            self.sent.append(stamp_ns)
            if self._mailbox is not None:
                self.skipped += 1
            self._mailbox = (len(self.sent) - 1, stamp_ns, image)
            self._cond.notify_all()

    def ok(self) -> bool:
        return self.stop_after is None or len(self.sent) < self.stop_after

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(5)

    # -- the "node" ---------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                while self._mailbox is None and not self._stop:
                    self._cond.wait(0.1)
                if self._stop:
                    return
                (n, stamp, image), self._mailbox = self._mailbox, None
            texts = self.sets.take(stamp, 0.5)
            if self.model_s:
                time.sleep(self.model_s)
            if texts is None:
                continue
            if self.policy is not None:  # as the node: the policy's texts in, the operator's prompts out
                plan = self.policy.plan(texts)
                dets = plan.detect(self.detector, np.ascontiguousarray(image))
                texts = plan.operator
            else:
                dets = self.detector.detect(np.ascontiguousarray(image), list(texts))
            class_ids = [texts[i] for i in dets.prompt_index]
            if n in self.wrong_class:
                class_ids = ["something never asked"] * len(class_ids)
            self.processed.append(stamp)
            if n in self.late:
                time.sleep(self.late[n])
            answer = Answer(
                stamp, time.time_ns(), dets.xyxy[: len(class_ids)], dets.scores[: len(class_ids)], class_ids
            )
            self._answer(answer)
            if n in self.duplicate:
                self._answer(answer)
            if n in self.stray_after:
                self._answer(Answer(stamp + 1234, time.time_ns(), dets.xyxy, dets.scores, class_ids))

    def _answer(self, answer: Answer) -> None:
        if self._handler is not None:
            self._handler(answer)
