"""Tracking libraries side by side: the cost per frame of tracking 50 detections of 5 prompts
(640x480, the boxes of ``bench_spatial.py``: 10 per prompt, moving back and forth 2 px a
frame) and the IDF1 of each on the tracking tests' scene (``probench.spatial.synthetic``'s
moving boxes, 10% missed detections, 1.5 px box noise, 150 frames, two seeds).

Candidates, each with the settings ``probench.spatial.tracking`` uses (every detection may
start a track, IoU >= 0.1 to match, a track lost for 1 s ends, time from the frames' stamps):

- ``PromptTrackers``: probench's tracker as it is now (``probench.spatial.tracking``:
  edgefirst-tracker's ByteTrack, one per prompt, stepped by the stamps);
- ``edgefirst-tracker`` (Au-Zone's EdgeFirst HAL, Rust) directly, one ByteTrack per prompt
  (it matches boxes whatever their labels): with the gain probench uses (1.0) and with the
  library's default gain (0.25), both without probench's stepping over skipped frames;
- the ``trackers`` library (Roboflow, the pinned 2.6.1): ByteTrack, SORT and OC-SORT, either
  one tracker per prompt or one tracker for every prompt with each prompt's boxes moved to
  a region of their own (an offset far beyond any image: boxes of two prompts never overlap,
  so they never match; Kalman filtering is translation-invariant, so each track moves as it
  would alone);
- boxmot's ByteTrack and OC-SORT (``per_class``: one per prompt, boxmot's own split), when
  boxmot imports. It is not a dependency of probench (it needs torch, pandas < 3, OpenCV < 5,
  pyarrow, scikit-learn, gdown, filterpy, lapx); to measure it without touching the venv:
  ``pip install --target /tmp/bm --no-deps boxmot==25.0.0 filterpy==1.4.5 lapx gdown
  platformdirs`` and run this with ``PYTHONPATH=/tmp/bm``.

supervision's own ByteTrack is gone from supervision 0.31 (the pinned version): it moved to
the ``trackers`` library. Baseline, in the same process and interleaved frame by frame: the
grounding node's decode of a 640x480 bgr8 Image message (``rgb_from_cdr``), as
``bench_spatial.py``. Printed per candidate: median and p95 ms per frame, the ratio to the
baseline and to the 1 ms target (``/ 1 ms``: at most 1.0 meets it), IDF1 per seed and ID
switches, on every frame and on every third (``@10fps``, 300 frames) or sixth (``@5fps``, 600
frames) of the 30 fps scene: its boxes move three or six times as far between tracked
frames. The least time (``min``) is printed too: on a loaded machine it is the closest to an
idle one's.

    python bench/bench_tracking.py                 # 300 frames
    python bench/bench_tracking.py --frames 1000
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

# ids (N,) for (xyxy (N, 4), scores (N,), prompt index (N,), stamp in seconds)
Track = Callable[[np.ndarray, np.ndarray, np.ndarray, float], np.ndarray]
OFFSET = 1e5  # pixels between two prompts' regions
TARGET_MS = 1.0  # issue 30: tracking 50 detections may add at most this per frame (median)


def _trackers_cls(name: str) -> Any:
    import trackers

    return {"bytetrack": trackers.ByteTrackTracker, "sort": trackers.SORTTracker,
            "ocsort": trackers.OCSORTTracker}[name]


def _trackers_kwargs(name: str) -> dict[str, Any]:
    kw: dict[str, Any] = {"lost_track_buffer": 30, "frame_rate": 30.0, "minimum_consecutive_frames": 1,
                          "minimum_iou_threshold": 0.1}
    if name != "ocsort":
        kw["track_activation_threshold"] = 0.0
    if name != "sort":
        kw["high_conf_det_threshold"] = 0.0
    return kw


def _run_trackers(tracker: Any, xyxy: np.ndarray, scores: np.ndarray, rows: np.ndarray, t: float,
                  out: np.ndarray) -> None:
    import supervision as sv

    d = sv.Detections(xyxy=xyxy.astype(np.float32).reshape(-1, 4), confidence=scores.astype(np.float32),
                      data={"row": rows})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tracker.update(d, timestamp=t)
    if len(res):
        out[res.data["row"]] = res.tracker_id


def trackers_per_prompt(name: str) -> Track:
    cls, kw = _trackers_cls(name), _trackers_kwargs(name)
    per: dict[int, Any] = {}

    def track(xyxy: np.ndarray, scores: np.ndarray, pidx: np.ndarray, t: float) -> np.ndarray:
        out = np.full(len(xyxy), -1, np.int64)
        for p in np.unique(pidx):
            rows = np.flatnonzero(pidx == p)
            tr = per.setdefault(int(p), cls(**kw))
            _run_trackers(tr, xyxy[rows], scores[rows], rows, t, out)
            out[rows] = np.where(out[rows] >= 0, out[rows] + int(p) * 1_000_000, -1)
        return out

    return track


def trackers_one(name: str) -> Track:
    tracker = _trackers_cls(name)(**_trackers_kwargs(name))

    def track(xyxy: np.ndarray, scores: np.ndarray, pidx: np.ndarray, t: float) -> np.ndarray:
        out = np.full(len(xyxy), -1, np.int64)
        shifted = xyxy + (pidx * OFFSET)[:, None]
        _run_trackers(tracker, shifted, scores, np.arange(len(xyxy)), t, out)
        return out

    return track


def probench_tracker() -> Track:
    from probench.detections import Detections
    from probench.spatial.tracking import PromptTrackers

    tr = PromptTrackers()
    names = tuple(f"prompt {i}" for i in range(64))

    def track(xyxy: np.ndarray, scores: np.ndarray, pidx: np.ndarray, t: float) -> np.ndarray:
        n_p = int(pidx.max()) + 1 if len(pidx) else 1
        return tr.update(Detections(xyxy, scores, pidx), names[:n_p], t_s=t)

    return track


def edgefirst_per_prompt(gain: float) -> Track:
    from edgefirst.tracker import ByteTrack

    per: dict[int, Any] = {}
    ids: dict[str, int] = {}

    def track(xyxy: np.ndarray, scores: np.ndarray, pidx: np.ndarray, t: float) -> np.ndarray:
        out = np.full(len(xyxy), -1, np.int64)
        ns = round(t * 1e9)
        box32, score32 = xyxy.astype(np.float32).reshape(-1, 4), scores.astype(np.float32)
        for p in np.unique(pidx):
            rows = np.flatnonzero(pidx == p)
            tr = per.get(int(p))
            if tr is None:
                tr = per[int(p)] = ByteTrack(high_conf=0.0, iou=0.1, update=gain, lifespan_ns=1_000_000_000)
            infos = tr.update(box32[rows], score32[rows], np.zeros(len(rows), np.uint64), ns)
            for row, info in zip(rows.tolist(), infos, strict=True):
                if info is not None and info.created != ns:  # an id from a track's second frame on
                    out[row] = ids.setdefault(info.uuid, len(ids))
        return out

    return track


def boxmot_tracker(name: str) -> Track:
    import boxmot

    cls = {"bytetrack": boxmot.ByteTrack, "ocsort": boxmot.OcSort}[name]
    kw: dict[str, Any] = {"min_conf": 0.0, "per_class": True}
    if name == "bytetrack":
        kw.update(track_thresh=0.0, match_thresh=0.9, track_buffer=30, frame_rate=30)
    else:
        kw.update(det_thresh=0.0, max_age=30, min_hits=1, iou_threshold=0.1)
    tracker = cls(**kw)

    def track(xyxy: np.ndarray, scores: np.ndarray, pidx: np.ndarray, t: float) -> np.ndarray:
        out = np.full(len(xyxy), -1, np.int64)
        dets = np.column_stack([xyxy, scores, pidx]).astype(np.float32)
        res = tracker.update(dets, np.zeros((480, 640, 3), np.uint8))
        if len(res):
            out[res[:, 7].astype(np.int64)] = res[:, 4].astype(np.int64)
        return out

    return track


def ultralytics_tracker() -> Track:
    """ultralytics' BYTETracker (a pinned dependency already; its matching needs ``lap``,
    which the pinned set lacks: measured where ``lapx`` imports), prompts apart by offset."""
    from types import SimpleNamespace

    from ultralytics.trackers.byte_tracker import BYTETracker

    args = SimpleNamespace(track_high_thresh=0.0, track_low_thresh=0.0, new_track_thresh=0.0, track_buffer=30,
                           match_thresh=0.9, fuse_score=False)  # match_thresh: a cost, 1 - IoU
    tracker = BYTETracker(args)

    def track(xyxy: np.ndarray, scores: np.ndarray, pidx: np.ndarray, t: float) -> np.ndarray:
        out = np.full(len(xyxy), -1, np.int64)
        shifted = xyxy + (pidx * OFFSET)[:, None]
        wh = shifted[:, 2:] - shifted[:, :2]
        got = tracker.update(_Results(scores, shifted, np.hstack([shifted[:, :2] + wh / 2, wh]),
                                      np.zeros(len(xyxy))), None)
        if len(got):
            out[got[:, -1].astype(np.int64)] = got[:, 4].astype(np.int64)
        return out

    return track


class _Results:
    """The part of ultralytics' Results.boxes that BYTETracker reads (indexable by a mask)."""

    def __init__(self, conf: np.ndarray, xyxy: np.ndarray, xywh: np.ndarray, cls: np.ndarray) -> None:
        self.conf, self.xyxy, self.xywh, self.cls = conf, xyxy, xywh, cls

    def __len__(self) -> int:
        return len(self.conf)

    def __getitem__(self, i: Any) -> _Results:
        return _Results(self.conf[i], self.xyxy[i], self.xywh[i], self.cls[i])


def candidates() -> dict[str, Callable[[], Track]]:
    out: dict[str, Callable[[], Track]] = {"PromptTrackers (probench)": probench_tracker}
    try:
        import edgefirst.tracker  # noqa: F401
    except ImportError as exc:
        print(f"(edgefirst-tracker not measured directly: {exc})")
    else:
        out["edgefirst per prompt, gain 1.0"] = lambda: edgefirst_per_prompt(1.0)
        out["edgefirst per prompt, gain 0.25 (its default)"] = lambda: edgefirst_per_prompt(0.25)
    for name in ("bytetrack", "sort", "ocsort"):
        out[f"trackers {name}, one per prompt"] = lambda name=name: trackers_per_prompt(name)
        out[f"trackers {name}, one for all"] = lambda name=name: trackers_one(name)
    try:
        import lap  # noqa: F401
    except ImportError:
        print("(ultralytics BYTETracker not measured: its matching needs lap, e.g. lapx)")
    else:
        out["ultralytics BYTETracker, one for all"] = ultralytics_tracker
    try:
        import boxmot  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - not installed, or does not import here
        print(f"(boxmot not measured: {type(exc).__name__}: {str(exc)[:80]})")
    else:
        for name in ("bytetrack", "ocsort"):
            out[f"boxmot {name}, per_class"] = lambda name=name: boxmot_tracker(name)
    return out


def idf1(make: Callable[[], Track], seed: int, n_frames: int = 150, miss: float = 0.1,
         every: int = 1) -> tuple[float, int]:
    """The tracking tests' measure (test/spatial/test_spatial_tracking.py): a 30 fps scene of
    which every ``every``-th frame is tracked."""
    import motmetrics as mm
    import supervision as sv

    from probench.spatial.synthetic import moving_scene

    rng = np.random.default_rng(seed)
    acc = mm.MOTAccumulator(auto_id=True)
    track = make()
    for f in range(0, n_frames, every):
        truth = moving_scene(f, 4).boxes()
        keep = rng.random(len(truth)) >= miss
        boxes = (truth + rng.normal(0.0, 1.5, truth.shape))[keep]
        ids = track(boxes, rng.uniform(0.4, 0.9, len(boxes)), np.zeros(len(boxes), np.int64), f / 30.0)
        ok = ids >= 0
        iou = sv.box_iou_batch(truth.reshape(-1, 4), boxes[ok].reshape(-1, 4))
        acc.update(list(range(len(truth))), list(ids[ok]), np.where(iou >= 0.5, 1.0 - iou, np.nan))
    s = mm.metrics.create().compute(acc, metrics=["idf1", "num_switches"], name="t")
    return float(s["idf1"].iloc[0]), int(s["num_switches"].iloc[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args(argv)

    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_spatial import MovingBoxes, _image_cdr  # the node's colour frame and boxes, as there
    from probench.msgs.wire import rgb_from_cdr

    boxes = MovingBoxes(np.random.default_rng(0))
    n, scores, pidx = boxes.n, boxes.scores, boxes.pidx
    frame = np.zeros((480, 640, 3), np.uint8)
    made = {name: make() for name, make in candidates().items()}
    times: dict[str, list[float]] = {name: [] for name in made}
    base: list[float] = []
    switches: dict[str, int] = {name: 0 for name in made}
    last: dict[str, np.ndarray] = {}
    for f in range(args.warmup + args.frames):
        msg = _image_cdr(frame, 1_700_000_000 + f // 30, (f % 30) * 33_333_333, "bgr8")
        xyxy = boxes.xyxy(f)
        t_s = 1_700_000_000 + f / 30.0
        t0 = time.perf_counter()
        rgb_from_cdr(msg, compressed=False)
        b = time.perf_counter() - t0
        if f >= args.warmup:
            base.append(b * 1e3)
        for name, track in made.items():
            t0 = time.perf_counter()
            ids = track(xyxy, scores, pidx, t_s)
            dt = time.perf_counter() - t0
            if f >= args.warmup:
                times[name].append(dt * 1e3)
                if name in last:
                    switches[name] += int(((last[name] >= 0) & (ids >= 0) & (ids != last[name])).sum())
            last[name] = ids
    b50 = statistics.median(base)
    print(f"tracking {n} detections ({len(set(pidx.tolist()))} prompts) per frame, {args.frames} frames; "
          f"baseline (node decode of a 640x480 bgr8 frame): median {b50:.3f} ms")
    print(f"  {'candidate':46} {'median ms':>9} {'min ms':>7} {'p95 ms':>7} {'/ base':>7} {'/ 1 ms':>7}  "
          f"{'IDF1 s0':>7} {'IDF1 s1':>7} {'ID sw':>5}  {'@10fps s0':>9} {'s1':>5} {'ID sw':>5}  "
          f"{'@5fps s0':>8} {'s1':>5} {'ID sw':>5}  "
          f"{'id changes (bench)':>18}")
    for name, make in candidates().items():
        med = statistics.median(times[name])
        p95 = float(np.percentile(times[name], 95))
        (i0, s0), (i1, s1) = idf1(make, 0), idf1(make, 1)
        (j0, w0), (j1, w1) = idf1(make, 0, 300, every=3), idf1(make, 1, 300, every=3)
        (k0, v0), (k1, v1) = idf1(make, 0, 600, every=6), idf1(make, 1, 600, every=6)
        met = "met" if med <= TARGET_MS else "NOT met"
        least = min(times[name])
        print(f"  {name:46} {med:9.3f} {least:7.3f} {p95:7.3f} {med / b50:7.2f} {med / TARGET_MS:7.2f}  "
              f"{i0:7.3f} {i1:7.3f} {s0 + s1:5d}  {j0:9.3f} {j1:5.3f} {w0 + w1:5d}  "
              f"{k0:8.3f} {k1:5.3f} {v0 + v1:5d}  {switches[name]:18d}  "
              f"target <= {TARGET_MS:g} ms: {met}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
