"""The evaluator's core without DDS (issue 9): collect's attribution rules, the stream, and
whole runs (plan, stream, collect, finish) against an in-process grounding node
(fake_link.FakeGroundingLink) for missed, stray, late, misattributed and resumed frames."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from helpers.fake_link import FakeClock, FakeGroundingLink
from probench.cache.trace import frame_record, latest_frames
from probench.detections import Detections
from probench.realtime.eval_plan import FramePlan
from probench.realtime.eval_realtime import MAILBOX, explain_misses, realtime_summary
from probench.realtime.eval_stream import Answer, AnswerInbox, Collector, Interrupted, stream, warm_up
from probench.realtime.node_spec import EvaluatorConfig

pytestmark = pytest.mark.timeout(180)


def _fp(image_id: int, texts: tuple[str, ...] = ("a cup", "the door")) -> FramePlan:
    return FramePlan("orig", image_id, 0, texts, tuple((10 * image_id + k,) for k in range(len(texts))))


def _answer(stamp: int, class_ids: list[str], received_ns: int = 0) -> Answer:
    n = len(class_ids)
    labels = tuple(dict.fromkeys(class_ids))
    dets = Detections(np.tile([1.0, 2.0, 11.0, 12.0], (n, 1)), np.full(n, 0.5),
                      np.array([labels.index(c) for c in class_ids], dtype=np.int64))
    return Answer(stamp, received_ns or time.monotonic_ns(), dets, labels)


class Emitted:
    def __init__(self) -> None:
        self.frames: list[dict] = []
        self.strays: list[dict] = []
        self.warm: list[int] = []
        self.warm_records: list[dict] = []
        self.results: dict[int, list] = {}

    def __call__(self, frame, record, results) -> None:
        if record.get("kind") == "warmup":
            assert frame is None and results == []
            self.warm.append(record["image_id"])
            self.warm_records.append(record)
        elif frame is None:
            self.strays.append(record)
        else:
            self.frames.append(record)
            self.results[frame.image_id] = results

    def status(self) -> dict[int, str]:
        return {r["image_id"]: r["status"] for r in self.frames}


# -- collect ------------------------------------------------------------------------------------
def test_an_answer_is_credited_only_to_its_frame_and_only_with_its_set() -> None:
    out = Emitted()
    c = Collector(out, answer_timeout_s=5.0)
    now = time.monotonic_ns()
    c.expect(_fp(9), stamp_ns=99, scheduled_ns=now, sent_ns=now, warmup=True)
    for i in range(1, 5):
        c.expect(_fp(i), stamp_ns=100 + i, scheduled_ns=now, sent_ns=now)
    assert c.collect(_answer(99, ["a cup"])) == "answered"  # a warm-up answer: scored nowhere
    assert out.warm == [9] and 9 not in out.results
    assert c.collect(_answer(103, ["the door", "a cup"])) == "answered"
    assert sorted(r["category_id"] for r in out.results[3]) == [30, 31]
    # an answer out of order, within the timeout, is credited: 1 and 2 are still pending
    assert out.status() == {3: "answered"} and c.pending() == 3
    assert c.collect(_answer(101, ["a cup"])) == "answered" and out.results[1]
    assert c.collect(_answer(103, ["a cup"])) == "stray"  # a repeat is never credited twice
    assert c.collect(_answer(999, ["a cup"])) == "stray"  # a stamp nobody sent
    assert c.collect(_answer(104, ["a cup", "a chair"])) == "misattributed"  # "a chair" was not asked
    assert out.status()[4] == "misattributed" and out.results[4] == []
    assert c.expire(now_ns=now + 6_000_000_000) == 1  # frame 2: given up after the timeout
    assert c.collect(_answer(102, ["a cup"])) == "stray"  # given up already
    assert out.status() == {1: "answered", 2: "missed", 3: "answered", 4: "misattributed"}
    assert (c.stray, c.misattributed, c.pending()) == (3, 1, 0) and len(out.strays) == 3
    assert (c.sent, c.warmup_sent) == (4, 1)


def test_a_late_answer_after_the_timeout_is_stray() -> None:
    out = Emitted()
    c = Collector(out, answer_timeout_s=0.5)
    sent = time.monotonic_ns()
    c.expect(_fp(1), 201, sent, sent)
    assert c.expire(now_ns=sent + 100_000_000) == 0  # not yet
    assert c.expire(now_ns=sent + 600_000_000) == 1
    assert out.status() == {1: "missed"}
    assert c.collect(_answer(201, ["a cup"])) == "stray" and out.results[1] == []


# -- stream, on a fake clock: the real FrameWorker and the real Collector --------------------------
def _frames(n: int) -> list[FramePlan]:
    return [_fp(i, (f"prompt {i}", "a cup")) for i in range(1, n + 1)]


def _raw_images(n: int) -> list[bytes]:
    """n serialized sensor_msgs/Image (rgb8), as a raw-image bag holds them."""
    from probench.bags.typestore import typestore

    ts = typestore()
    Image, Header, Time = (ts.types[t] for t in ("sensor_msgs/msg/Image", "std_msgs/msg/Header",
                                                 "builtin_interfaces/msg/Time"))
    out = []
    for i in range(n):
        rgb = np.full((24, 32, 3), i, dtype=np.uint8)
        msg = Image(header=Header(stamp=Time(sec=0, nanosec=0), frame_id="cam"), height=24, width=32,
                    encoding="rgb8", is_bigendian=0, step=96, data=rgb.reshape(-1))
        out.append(bytes(ts.serialize_cdr(msg, "sensor_msgs/msg/Image")))
    return out


def _stream(
    n: int, model_s: float, mode: str = "camera-rate", *, clock: FakeClock | None = None, **knobs
) -> tuple[Emitted, Collector, FakeGroundingLink]:
    """n frames streamed at 30 Hz (or as answered) into the fake node (the real FrameWorker)
    taking ``model_s`` a frame; on a fake clock unless ``clock`` is given as None."""
    clock = FakeClock() if clock is None else clock
    link = FakeGroundingLink(model_s=model_s, clock=clock, **knobs)
    link.wait_ready(False, 1.0)
    out = Emitted()
    c = Collector(out, answer_timeout_s=3.0, clock=clock)
    link.set_answer_handler(c.collect)
    try:
        stream(link, _frames(n), iter(_raw_images(n)), c, mode=mode, rate_hz=30.0, answer_timeout_s=3.0)
    finally:
        link.close()
    return out, c, link


def test_a_fast_node_misses_nothing_at_30_hz() -> None:
    """The pipeline itself drops nothing: a node that takes 30 ms a frame keeps up with 30 Hz."""
    out, _c, link = _stream(60, 0.030)
    assert [r["status"] for r in out.frames] == ["answered"] * 60 and link.skipped == 0
    rt = realtime_summary(out.frames, budget_ms=33.3, rate_hz=30.0, mode="camera-rate",
                          warmup_frames=0).to_json()
    assert rt["frames_missed"] == 0 and rt["within_budget"] == 1.0
    assert rt["achieved_send_rate_hz"] == pytest.approx(30.0, abs=1e-3)
    assert rt["delivered_rate_hz"] == rt["achieved_send_rate_hz"]
    assert all(r["latency_ms"] == pytest.approx(30.0) for r in out.frames)


def test_a_node_a_little_slower_than_the_camera_misses_frames() -> None:
    """The same test can fail: 36 ms a frame at 30 Hz falls behind and its mailbox drops frames."""
    out, _, link = _stream(60, 0.036)
    missed = [r for r in out.frames if r["status"] == "missed"]
    assert missed and len(missed) == link.skipped
    why = explain_misses(out.frames, link.node_records(), period_ms=1000 / 30)
    assert {cause for cause, _ in why.values()} == {MAILBOX}  # each excused by the node's evidence


def test_camera_rate_stream_with_a_slow_node_misses_what_the_mailbox_drops() -> None:
    n = 15
    out, c, link = _stream(n, 0.1)
    assert len(out.frames) == n and c.pending() == 0  # every frame resolved exactly once
    answered = [r for r in out.frames if r["status"] == "answered"]
    assert 2 <= len(answered) < n
    assert len(out.frames) - len(answered) == link.skipped  # what the node dropped
    assert all(r["latency_ms"] >= 100.0 for r in answered)  # the model alone takes 100 ms
    assert [r["stamp_ns"] for r in sorted(out.frames, key=lambda r: r["seq"])] == link.sent
    assert all(out.results[r["image_id"]] for r in answered)  # each answered with its own set
    rt = realtime_summary(out.frames, budget_ms=33.3, rate_hz=30.0, mode="camera-rate",
                          warmup_frames=0).to_json()
    assert rt["delivered_rate_hz"] < rt["achieved_send_rate_hz"] == pytest.approx(30.0, abs=1e-3)
    assert rt["missed_share"] == pytest.approx((n - len(answered)) / n, abs=1e-6)


def test_a_late_prompt_set_is_reported_as_such_not_excused() -> None:
    """Frame 4's prompt set comes 200 ms late: the node's worker waits for it (frame_prompts_wait)
    and its mailbox drops the frames behind: a miss the mailbox rule must not excuse."""
    out, _, link = _stream(20, 0.005, late_prompts={4: 0.2})
    why = explain_misses(out.frames, link.node_records(), period_ms=1000 / 30)
    assert why, "a late prompt set must cost frames"
    assert {cause for cause, _ in why.values()} == {"late prompt set"}
    assert all("waited" in text for _, text in why.values())


def test_a_wall_clock_step_leaves_every_latency_positive() -> None:
    """An NTP step of the wall clock (5 s back, mid-stream) moves only the stamps: send and
    arrival times come from the monotonic clock."""
    clock = FakeClock()

    class Stepping(FakeGroundingLink):
        def send(self, image, stamp_ns: int) -> None:
            if len(self.sent) == 5:
                clock.step_wall(-5_000_000_000)
            super().send(image, stamp_ns)

    link = Stepping(model_s=0.01, clock=clock)
    link.wait_ready(False, 1.0)
    out = Emitted()
    c = Collector(out, answer_timeout_s=3.0, clock=clock)
    link.set_answer_handler(c.collect)
    stream(link, _frames(12), iter(_raw_images(12)), c, mode="camera-rate", rate_hz=30.0,
           answer_timeout_s=3.0)
    stream(link, _frames(4), iter(_raw_images(4)), c, mode="as-fast-as-answered", rate_hz=30.0,
           answer_timeout_s=3.0)
    assert len(out.frames) == 16 and all(r["status"] == "answered" for r in out.frames)
    assert all(r["latency_ms"] == pytest.approx(10.0) for r in out.frames)
    assert link.sent == sorted(link.sent) and len(set(link.sent)) == 16  # stamps stay increasing


def test_warm_up_is_a_discarded_trial() -> None:
    clock = FakeClock()
    link = FakeGroundingLink(model_s=0.06, clock=clock)
    link.wait_ready(False, 1.0)
    out = Emitted()
    c = Collector(out, answer_timeout_s=3.0, clock=clock)
    link.set_answer_handler(c.collect)
    warm_up(link, _frames(2), _raw_images(2), c, n=3, answer_timeout_s=3.0)
    assert out.warm == [1, 2, 1] and out.frames == [] and out.results == {}  # cycled, scored nowhere
    assert c.sent == 0 and c.warmup_sent == 3
    assert [r["status"] for r in out.warm_records] == ["answered"] * 3  # one at a time: none dropped


def test_as_fast_as_answered_drops_nothing_even_with_a_slow_node() -> None:
    out, _, link = _stream(6, 0.05, "as-fast-as-answered")
    assert [r["status"] for r in out.frames] == ["answered"] * 6 and link.skipped == 0


def test_the_threaded_fake_node_keeps_up_on_real_time() -> None:
    """The same fake node on its worker thread and the real clocks (as the whole-run tests use it)."""
    out, _, link = _real_stream(10)
    assert [r["status"] for r in out.frames] == ["answered"] * 10 and link.skipped == 0
    assert all(r["latency_ms"] > 0 for r in out.frames)


def _real_stream(n: int) -> tuple[Emitted, Collector, FakeGroundingLink]:
    link = FakeGroundingLink()
    link.wait_ready(False, 1.0)
    out = Emitted()
    c = Collector(out, answer_timeout_s=3.0)
    link.set_answer_handler(c.collect)
    try:
        stream(link, _frames(n), iter(_raw_images(n)), c, mode="as-fast-as-answered", rate_hz=30.0,
               answer_timeout_s=3.0)
    finally:
        link.close()
    return out, c, link


# -- whole runs (plan, stream, collect, finish) ----------------------------------------------
def _dataset(root: Path, n: int) -> Path:
    """n small images, each with its own label space (as in Pro-Bench)."""
    import cv2

    (root / "images").mkdir(parents=True)
    names = ["red valve", "rusty pipe", "door handle", "fire extinguisher", "ladder", "gauge"]
    cats = [
        {"id": k + 1, "name": nm.split()[-1], "prompts": {"orig": f"the {nm}"}} for k, nm in enumerate(names)
    ]
    images, anns = [], []
    for i in range(1, n + 1):
        yy, xx = np.mgrid[0:36, 0:48]
        rgb = np.stack([xx * 5, yy * 7, np.full_like(xx, 11 * i)], axis=2).astype(np.uint8)
        cv2.imwrite(str(root / f"images/{i}.png"), rgb[:, :, ::-1])
        qids = sorted({1 + i % 6, 1 + (i * 2) % 6, 1 + (i * 5) % 6})
        images.append({"id": i, "file_name": f"images/{i}.png", "width": 48, "height": 36, "query_ids": qids})
        anns.append(
            {
                "id": i,
                "image_id": i,
                "category_id": qids[0],
                "bbox": [4.0, 4.0, 20.0, 16.0],
                "area": 320.0,
                "iscrowd": 0,
            }
        )
    (root / "annotations.json").write_text(
        json.dumps({"images": images, "categories": cats, "annotations": anns})
    )
    return root


@pytest.fixture(scope="module")
def bag(tmp_path_factory) -> tuple[Path, Path]:
    from probench.bags.writer import write_bag
    from probench.data.dataset import load_dataset

    root = tmp_path_factory.mktemp("evcore")
    ds = _dataset(root / "ds", 9)
    write_bag(load_dataset(ds), root / "bag", progress=False)
    return ds, root / "bag"


def _cfg(bag: Path, out: Path, **kw) -> EvaluatorConfig:
    values = {
        "bag": str(bag),
        "out": str(out),
        "mode": "as-fast-as-answered",
        "rate_hz": 30.0,
        "formulations": ["orig", "cat"],
        "answer_timeout": 3.0,
        "startup_timeout": 10.0,
        "budget_ms": 33.3,
        "warmup_frames": 2,
        "grounding_node": "/grounding_node",
        "overwrite": False,
    }
    values.update(kw)
    return EvaluatorConfig(**values)


def _run(cfg: EvaluatorConfig, link: FakeGroundingLink) -> dict:
    from probench.realtime.eval_run import run_evaluation

    try:
        return run_evaluation(link, cfg)
    finally:
        link.close()


def _preds(run: Path, f: str) -> bytes:
    return (run / "predictions" / f"{f}.json").read_bytes()


def test_run_through_the_fake_node_equals_offline_inference(bag, tmp_path: Path) -> None:
    from probench.cli import main

    ds, bag_path = bag
    metrics = _run(_cfg(bag_path, tmp_path / "ros"), FakeGroundingLink()).to_json()
    # the real command line, so every flag the command has is there with its default
    assert main(["infer", "--model", "test-instant", "--dataset", str(ds), "--out", str(tmp_path / "off"),
                 "--formulations", "orig,cat", "--no-progress"]) == 0
    for f in ("orig", "cat"):
        assert _preds(tmp_path / "ros", f) == _preds(tmp_path / "off", f)
    rt = metrics["realtime"]
    assert rt["frames_sent"] == 18 and rt["frames_missed"] == 0 and rt["stray_messages"] == 0
    assert set(rt["by_formulation"]) == {"orig", "cat"} and rt["by_formulation"]["cat"]["frames_sent"] == 9
    assert rt["warmup"]["frames"] == 2 and rt["latency_ms"]["p50"] is not None
    info = json.loads((tmp_path / "ros" / "run.json").read_text())
    assert info["status"] == "complete" and info["settings"]["warmup_frames"] == 2
    trace = [
        json.loads(line) for line in (tmp_path / "ros" / "realtime_frames.jsonl").read_text().splitlines()
    ]
    assert len(latest_frames(trace)) == 18 and all(r["n_prompts"] >= 1 for r in trace)
    warm = [r for r in trace if r["kind"] == "warmup"]
    assert len(warm) == 2 and all(r["formulation"] == "orig" for r in warm)  # before the first stream
    assert rt["delivered_rate_hz"] <= rt["achieved_send_rate_hz"]


def test_the_peak_rate_of_a_50_ms_node_on_a_fake_clock(bag, tmp_path: Path) -> None:
    """--find-max-rate's search through the real FrameWorker and Collector: a node taking 50 ms
    a frame keeps up with at most 20 Hz; the search lands between 15 and 21 Hz."""
    from probench.realtime.eval_peak import MAX_RATE_FILE, find_max_rate_run

    _, bag_path = bag
    clock = FakeClock()
    link = FakeGroundingLink(model_s=0.05, clock=clock)
    cfg = _cfg(bag_path, tmp_path / "peak", find_max_rate=True, max_missed=0.01, trial_s=3.0,
               answer_timeout=1.0)
    found = find_max_rate_run(link, cfg, clock)
    assert 15.0 <= found["max_rate_hz"] <= 21.0, found
    assert json.loads((tmp_path / "peak" / MAX_RATE_FILE).read_text()) == found
    trials = found["trials"]
    assert trials[0]["rate_hz"] == 30.0 and not trials[0]["passed"]  # it starts at the replay rate
    assert all(t["passed"] == (t["missed_share"] <= 0.01) for t in trials)
    assert any(t["passed"] and t["rate_hz"] == found["max_rate_hz"] for t in trials)
    assert all(t["frames_sent"] >= 9 for t in trials) and found["n_bag_frames"] == 9
    assert not (tmp_path / "peak" / "predictions").exists()  # nothing scored


class _LinkFailingAtSetUp(FakeGroundingLink):
    def set_answer_handler(self, handler) -> None:
        raise RuntimeError("no detections subscription")


def test_a_failure_while_setting_up_the_stream_is_recorded(bag, tmp_path: Path) -> None:
    _, bag_path = bag
    with pytest.raises(RuntimeError, match="no detections subscription"):
        _run(_cfg(bag_path, tmp_path / "run"), _LinkFailingAtSetUp())
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["status"] == "failed" and "no detections subscription" in info["error"]


def test_an_interrupted_run_resumes_to_the_same_predictions(bag, tmp_path: Path) -> None:
    _, bag_path = bag
    cfg = _cfg(bag_path, tmp_path / "run")
    with pytest.raises(Interrupted):
        _run(cfg, FakeGroundingLink(stop_after=5))
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["status"] == "interrupted"
    assert not (tmp_path / "run" / "predictions" / "orig.json").exists()
    second = FakeGroundingLink()
    _run(cfg, second)
    # 5 sent: 2 warm-up frames, then 3 measured ones, some recorded; each session warms up again
    assert 18 - 3 <= len(second.sent) - cfg.warmup_frames < 18  # what was recorded is not sent again
    _run(_cfg(bag_path, tmp_path / "fresh"), FakeGroundingLink())
    for f in ("orig", "cat"):
        assert _preds(tmp_path / "run", f) == _preds(tmp_path / "fresh", f)
    a = json.loads((tmp_path / "run" / "metrics.json").read_text())
    b = json.loads((tmp_path / "fresh" / "metrics.json").read_text())
    assert a.pop("realtime")["frames_sent"] == b.pop("realtime")["frames_sent"] == 18
    assert a == b
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["status"] == "complete" and info["resumed"] == 1


def test_stray_repeated_and_misattributed_answers_are_counted_never_credited(bag, tmp_path: Path) -> None:
    _, bag_path = bag
    cfg = _cfg(bag_path, tmp_path / "run", formulations=["orig"])
    metrics = _run(cfg, FakeGroundingLink(wrong_class=[3], duplicate=[5], stray_after=[6])).to_json()
    rt = metrics["realtime"]
    assert rt["misattributed"] == 1 and rt["stray_messages"] == 2
    assert rt["frames_sent"] == 9 and rt["frames_missed"] == 1 and rt["frames_received"] == 8
    trace = [
        json.loads(line) for line in (tmp_path / "run" / "realtime_frames.jsonl").read_text().splitlines()
    ]
    bad = next(r for r in trace if r.get("status") == "misattributed")
    preds = json.loads(_preds(tmp_path / "run", "orig"))
    assert bad["image_id"] not in {p["image_id"] for p in preds}  # nothing credited to it


def test_a_late_answer_is_missed_then_stray(bag, tmp_path: Path) -> None:
    _, bag_path = bag
    # frame 4 is answered 0.8 s late: given up at 0.5 s, its answer then comes as a stray;
    # frame 5, sent at 0.5 s into the busy node, is answered at ~0.8 s, within its timeout
    cfg = _cfg(bag_path, tmp_path / "run", formulations=["orig"], answer_timeout=0.5)
    metrics = _run(cfg, FakeGroundingLink(late={4: 0.8})).to_json()
    rt = metrics["realtime"]
    assert rt["frames_missed"] == 1 and rt["stray_messages"] == 1 and rt["frames_received"] == 8


# -- realtime figures ---------------------------------------------------------------------------
def _rec(
    f: str, image_id: int, sent_ms: float, recv_ms: float | None, session: int = 0, warmup: bool = False
) -> dict:
    return frame_record(
        f,
        image_id,
        sent_ns=int(sent_ms * 1e6),
        received_ns=None if recv_ms is None else int(recv_ms * 1e6),
        status="missed" if recv_ms is None else "answered",
        session=session,
        warmup=warmup,
    )


def test_realtime_figures() -> None:
    recs = [
        _rec("orig", 1, 0, 200, warmup=True),  # the warm-up trial: counted apart
        _rec("orig", 2, 1000, 1010),
        _rec("orig", 3, 1034, None),
        _rec("orig", 4, 1066, 1086),
        _rec("orig", 5, 1100, 1140),
        _rec("cat", 1, 3000, 3005, session=1),  # a second session (resumed): its own stream
        _rec("cat", 2, 3033, 3043, session=1),
        {"kind": "stray", "session": 1, "stamp_ns": 5, "received_ns": 3050},
    ]
    rt = realtime_summary(recs, budget_ms=33.3, rate_hz=30.0, mode="camera-rate", warmup_frames=1).to_json()
    assert (rt["frames_sent"], rt["frames_received"], rt["frames_missed"]) == (6, 5, 1)
    assert rt["missed_share"] == pytest.approx(1 / 6, abs=1e-6)
    assert rt["cold_start_ms"] == 200 and rt["warmup"] == {"frames": 1, "received": 1, "latency_ms": [200.0]}
    assert rt["latency_ms"]["max"] == 40 and rt["latency_ms"]["p50"] == 10  # 10, 20, 40, 5, 10
    assert rt["within_budget"] == pytest.approx(4 / 6)  # 4 of the 6 measured frames
    # send: (3 + 1) intervals over (100 + 33) ms; replay jitter |interval - 33.33|: 34, 32, 34, 33
    assert rt["achieved_send_rate_hz"] == pytest.approx(4 / 0.133, rel=1e-3)
    assert rt["span_s"] == pytest.approx(0.133) and rt["received_span_s"] == pytest.approx(0.168)
    assert rt["delivered_rate_hz"] == pytest.approx(rt["achieved_send_rate_hz"] * 5 / 6, rel=1e-3)
    assert rt["replay_jitter_ms"]["max"] == pytest.approx(1.3333, abs=1e-3)
    # output: arrivals 1010, 1086, 1140 | 3005, 3043: intervals 76, 54 | 38; jitter |54 - 76| = 22
    assert rt["output_rate_hz"] == pytest.approx(3 / 0.168, rel=1e-3)
    assert rt["output_jitter_ms"]["max"] == 22 and rt["jitter_ms"] == rt["output_jitter_ms"]
    # first arrival - first send, last arrival - last send, per stream: (10 + 5) / 2, (40 + 10) / 2
    assert rt["first_sent_to_received_ms"] == 7.5 and rt["last_sent_to_received_ms"] == 25.0
    assert rt["stray_messages"] == 1 and rt["by_formulation"]["cat"]["frames_sent"] == 2
    assert "warmup" not in rt["by_formulation"]["orig"]  # the session's, reported once
    again = realtime_summary(
        [*recs, _rec("orig", 3, 4000, 4010, session=2)],
        budget_ms=33.3,
        rate_hz=30.0,
        mode="camera-rate",
        warmup_frames=1,
    ).to_json()
    assert again["frames_missed"] == 0  # a frame sent again after a resume counts by its last record
    fast = realtime_summary(recs, budget_ms=33.3, rate_hz=30.0, mode="as-fast-as-answered",
                            warmup_frames=1).to_json()
    assert fast["replay_jitter_ms"]["p50"] is None  # no intended period to compare with


def test_the_delivered_rate_never_exceeds_the_send_rate() -> None:
    """Latency falling from 60 to 15 ms spaces the answers closer than the frames (the answer
    spacing reads above 30 Hz) and a node that dies after 10 frames leaves no gap in the
    spacing; the delivered rate sees both."""
    period = 1000 / 30
    drift = [_rec("orig", i, i * period, i * period + 60 - 5 * i) for i in range(10)]
    rt = realtime_summary(drift, budget_ms=33.3, rate_hz=30.0, mode="camera-rate", warmup_frames=0).to_json()
    assert rt["output_rate_hz"] > 30.0 and rt["delivered_rate_hz"] <= rt["achieved_send_rate_hz"]
    dies = [_rec("orig", i, i * period, i * period + 10 if i < 10 else None) for i in range(30)]
    rt = realtime_summary(dies, budget_ms=33.3, rate_hz=30.0, mode="camera-rate", warmup_frames=0).to_json()
    assert rt["output_rate_hz"] == pytest.approx(30.0, rel=1e-3)
    assert rt["delivered_rate_hz"] == pytest.approx(10.0, rel=1e-3)


def test_a_prompt_policy_is_set_for_its_own_frames_only(bag, tmp_path: Path) -> None:
    """The evaluator sets the grounding node's policy per formulation (as typed for the
    paper's, the policy for `policy`), and the result equals offline inference."""
    from probench.cli import main

    ds, bag_path = bag
    link = FakeGroundingLink()
    metrics = _run(_cfg(bag_path, tmp_path / "ros", prompt_policy="categorical"), link).to_json()
    assert link.policies == ["as_typed", "as_typed", "categorical"]
    assert main(["infer", "--model", "test-instant", "--dataset", str(ds), "--out", str(tmp_path / "off"),
                 "--formulations", "orig,cat", "--prompt-policy", "categorical", "--no-progress"]) == 0
    for f in ("orig", "cat", "policy"):
        assert _preds(tmp_path / "ros", f) == _preds(tmp_path / "off", f)
    assert metrics["m_policy"] is not None and "delta_policy_orig" in metrics
    info = json.loads((tmp_path / "ros" / "run.json").read_text())
    assert info["formulations"] == ["orig", "cat", "policy"]
    assert info["settings"]["prompt_policy"]["gives"] == ["cat"]


# -- failed frames: the node's report on frame_errors, counted apart from missed frames --------
def test_a_failed_frame_is_counted_apart_with_its_first_error() -> None:
    out = Emitted()
    c = Collector(out, answer_timeout_s=5.0)
    now = time.monotonic_ns()
    c.expect(_fp(9), stamp_ns=99, scheduled_ns=now, sent_ns=now, warmup=True)
    for i in (1, 2, 3):
        c.expect(_fp(i), stamp_ns=100 + i, scheduled_ns=now + i, sent_ns=now + i)
    assert c.collect(Answer(99, now, error="ValueError: in the warm-up")) == "failed"  # counted nowhere
    assert c.collect(Answer(102, now, error="ValueError: sent second")) == "failed"
    assert c.collect(Answer(101, now, error="RuntimeError: sent first")) == "failed"
    assert c.collect(_answer(103, ["a cup"])) == "answered"
    assert c.collect(Answer(102, now, error="ValueError: again")) == "stray"  # resolved already
    assert (c.misattributed, c.stray) == (0, 1)
    assert out.status() == {2: "failed", 1: "failed", 3: "answered"} and out.results[2] == []
    assert [r["error"] for r in out.frames if r["status"] == "failed"] == ["ValueError: sent second",
                                                                          "RuntimeError: sent first"]
    assert all("error" not in r for r in out.frames if r["status"] != "failed")  # other records as before
    assert out.warm_records[0]["status"] == "failed"
    rt = realtime_summary(out.frames + out.warm_records, budget_ms=33.3, rate_hz=30.0, mode="camera-rate",
                          warmup_frames=1)
    # counted apart from missed frames; the first by send order; the warm-up's nowhere
    assert (rt.frames_sent, rt.frames_received, rt.frames_missed, rt.frames_failed) == (3, 1, 0, 2)
    assert rt.first_error == "RuntimeError: sent first"


def test_the_inbox_reads_the_nodes_bytes_and_names_what_it_cannot() -> None:
    """Both links hand the node's bytes to an AnswerInbox: the same reader builds every Answer."""
    from types import SimpleNamespace

    from probench.msgs.wire import detections_to_cdr, frame_failure_to_cdr

    warned: list[str] = []
    got: list[Answer] = []
    inbox = AnswerInbox(warned.append)
    header = SimpleNamespace(stamp=SimpleNamespace(sec=1, nanosec=5), frame_id="cam")
    inbox.detections(b"\x00\x01", 7)  # no handler yet: nothing read, nothing said
    inbox.handler = got.append
    dets = Detections(np.array([[1.0, 2, 11, 12], [3, 4, 5, 6]]), np.array([0.9, 0.3]), np.array([1, 0]),
                      tracker_id=np.array([4, -1]))
    inbox.detections(detections_to_cdr(dets, header, ("a cup", "the door")), 7)
    inbox.failure(frame_failure_to_cdr(header, "ValueError: boom"), 8)
    from probench.bags.typestore import vision_typestore

    ts = vision_typestore()  # a node's answer whose score is no score: its frame is never credited
    msg = ts.deserialize_cdr(detections_to_cdr(dets, header, ("a cup", "the door")),
                             "vision_msgs/msg/Detection2DArray")
    msg.detections[0].results[0].hypothesis.score = 3.0
    inbox.detections(bytes(ts.serialize_cdr(msg, "vision_msgs/msg/Detection2DArray")), 9)
    inbox.detections(b"\x00\x01\x00", 10)
    inbox.failure(b"garbage!", 11)
    assert [(a.stamp_ns, a.received_ns) for a in got] == [(1_000_000_005, 7), (1_000_000_005, 8),
                                                          (1_000_000_005, 9)]
    first, failed, unreadable = got
    assert first.class_ids == ["the door", "a cup"] and first.detections.tracker_id.tolist() == [4, -1]
    assert failed.error == "ValueError: boom" and len(failed.detections) == 0
    assert unreadable.unreadable and len(unreadable.detections) == 0
    assert [w.split(",")[0] for w in warned] == [
        "unreadable Detection2DArray", "undecodable Detection2DArray", "undecodable frame_errors message"]


def test_a_model_that_raises_fails_frames_and_the_run_goes_on(bag, tmp_path: Path) -> None:
    """A whole run whose model raises on two measured frames: the fake node reports them on
    frame_errors, the evaluator records them failed with the node's error, never credited,
    never waited for; every other frame is answered."""
    from helpers.failing_detector import ERROR, FailingDetector
    from probench.cache.trace import read_trace

    _, bag_path = bag
    # calls 0-1: the warm-up; 2..10: orig's 9 frames; frames 3 and 7 of the stream fail
    link = FakeGroundingLink(detector=FailingDetector(fail_calls={2 + 3, 2 + 7}))
    metrics = _run(_cfg(bag_path, tmp_path / "run", formulations=["orig"]), link)
    trace = latest_frames(read_trace(tmp_path / "run" / "realtime_frames.jsonl"))
    failed = [r for r in trace if r["status"] == "failed"]
    assert [r["seq"] for r in failed] == [3, 7] and {r["error"] for r in failed} == {f"ValueError: {ERROR}"}
    assert all(r["received_ns"] is None and r["n_results"] == 0 for r in failed)
    assert sum(r["status"] == "answered" for r in trace) == 7
    preds = json.loads(_preds(tmp_path / "run", "orig"))
    assert not {r["image_id"] for r in failed} & {p["image_id"] for p in preds}
    assert sum(line.startswith("ERROR frame failed: ValueError") for line in link.logs) == 2
    rt = metrics.realtime
    assert rt is not None and (rt.frames_received, rt.frames_missed, rt.frames_failed) == (7, 0, 2)
    assert rt.first_error == f"ValueError: {ERROR}"
    info = json.loads((tmp_path / "run" / "run.json").read_text())  # not silently complete
    assert info["status"] == "failed" and f"ValueError: {ERROR}" in info["error"]
