"""--realtime: the node's newest-frame policy on the bag's clock (MailboxReplay), exactly,
with scripted busy times; then through the command with a model slower than the camera."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.camera_bags import PERIOD, STAMP_OFFSET, T0, read_output, write_camera_bag
from probench.ground.replay import PROMPT_CHANGE, REPLACED, MailboxReplay


class Scripted:
    """Replay callbacks: every frame takes ``frame_s``, every prompt set ``prompt_s``."""

    def __init__(self, frame_s: float, prompt_s: float = 0.0) -> None:
        self.frame_s, self.prompt_s = frame_s, prompt_s
        self.grounded: list[tuple[str, tuple[str, ...], float]] = []
        self.applied: list[tuple[str, ...]] = []
        self.dropped: list[tuple[str, str]] = []

    def ground(self, frame: str, prompts: tuple[str, ...], wait_s: float, policy: object) -> float:
        self.grounded.append((frame, prompts, round(wait_s, 6)))
        return self.frame_s

    def apply(self, prompts: tuple[str, ...], stamp: object, policy: object) -> tuple[bool, float]:
        self.applied.append(prompts)
        return True, self.prompt_s

    def drop(self, frame: str, reason: str) -> None:
        self.dropped.append((frame, reason))

    def replay(self, realtime: bool) -> MailboxReplay:
        return MailboxReplay(self.ground, self.apply, self.drop, realtime=realtime)


def test_newest_frame_policy_with_a_slow_model() -> None:
    cb = Scripted(frame_s=0.25)
    r = cb.replay(realtime=True)
    r.prompts(float("-inf"), ("a cup",), 0)
    for i in range(10):  # 10 Hz camera, 0.25 s per frame
        r.frame(i * 0.1, f"f{i}")
    r.finish()
    # f0 runs 0-0.25; f1, f2 arrive meanwhile, f2 replaces f1; f2 runs 0.25-0.5 (waited 0.05);
    # f3, f4 arrive, f4 wins, runs 0.5-0.75; f5..f7 -> f7 runs 0.75-1.0; f8, f9 -> f9 at 1.0.
    assert [(f, w) for f, _, w in cb.grounded] == [("f0", 0.0), ("f2", 0.05), ("f4", 0.1), ("f7", 0.05),
                                                    ("f9", 0.1)]
    assert cb.dropped == [(f, REPLACED) for f in ("f1", "f3", "f5", "f6", "f8")]
    assert r.stats.skipped == 5 and r.stats.received == 10  # the node's own counters agree


def test_as_fast_as_possible_grounds_every_frame() -> None:
    cb = Scripted(frame_s=5.0)
    r = cb.replay(realtime=False)
    r.prompts(float("-inf"), ("a cup",), 0)
    for i in range(6):
        r.frame(i * 0.01, f"f{i}")
    r.finish()
    assert [f for f, _, _ in cb.grounded] == [f"f{i}" for i in range(6)]
    assert all(w == 0.0 for _, _, w in cb.grounded) and cb.dropped == []


def test_prompt_change_rules_are_the_nodes() -> None:
    cb = Scripted(frame_s=0.3, prompt_s=0.05)
    r = cb.replay(realtime=True)
    r.prompts(float("-inf"), ("a",), 0)
    r.frame(0.0, "f0")  # runs 0-0.3
    r.frame(0.1, "f1")  # waits
    r.prompts(0.2, ("b",), 1)  # a change drops the waiting frame
    r.frame(0.25, "f2")  # waits; the prompt job goes first at 0.3 (0.05 s), f2 runs 0.35-0.65
    r.frame(0.5, "f3")  # waits
    r.prompts(0.55, ("b",), 2)  # the same set again: acknowledged first, drops nothing
    r.finish()
    assert cb.dropped == [("f1", PROMPT_CHANGE)]
    assert [(f, p) for f, p, _ in cb.grounded] == [("f0", ("a",)), ("f2", ("b",)), ("f3", ("b",))]
    assert cb.grounded[1][2] == 0.1  # f2 arrived at 0.25, started at 0.35
    assert cb.grounded[2][2] == 0.2  # f3 arrived at 0.5, started at 0.7 (after the 2nd ack)
    assert cb.applied == [("a",), ("b",), ("b",)]


def test_realtime_cli_drops_and_marks_frames(tmp_path: Path, ground) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=10)  # 30 Hz: a 200 ms model cannot keep up
    jsonl = tmp_path / "r.jsonl"
    rc, stdout, err = ground("--bag", bag, "--model", "test-slow-200ms", "--prompt", "a cup",
                             "--score-threshold", "0", "--out", tmp_path / "o", "--jsonl", jsonl,
                             "--realtime")
    assert rc == 0, err
    lines = [json.loads(x) for x in jsonl.read_text().splitlines()]
    dropped = [x["frame"] for x in lines if x["dropped"]]
    # frame 0 takes >= 200 ms; frames 1..6 arrive before 200 ms, each replacing the one before
    assert set(range(1, 6)) <= set(dropped)
    assert 0 not in dropped and 9 not in dropped  # the first, and the last once the model is free
    res = read_output(tmp_path / "o")
    dets = res.topics["/ground/detections"]
    assert len(dets) == 10  # still one per input frame
    for frame, (_, msg) in enumerate(dets):
        assert (len(msg.detections) == 0) == (frame in dropped)
    marks = res.topics["/ground/dropped"]  # the headers of the dropped frames
    stamps = [m.stamp.sec * 10**9 + m.stamp.nanosec for _, m in marks]
    assert stamps == [T0 + f * PERIOD - STAMP_OFFSET for f in dropped]
    latencies = [x["latency_ms"] for x in lines if not x["dropped"]]
    assert all(lat >= 200 for lat in latencies)
    summary = json.loads(res.custom_data["probench.ground.summary"])
    assert summary["dropped"] == len(dropped) and summary["grounded"] == 10 - len(dropped)
    assert f"dropped {len(dropped)}" in stdout
