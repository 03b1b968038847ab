"""Makes the inputs and the golden bytes of test_cache_records_golden.py.

Run ONCE, at main 778a37e (before the typed records): the golden files are what the code
of that commit wrote for these inputs, and the test requires the typed records to write the
same bytes. Rerunning it now would only copy the new code's output, so do not, unless a
change of a file's content is intended (say so in the commit).

    PYTHONPATH=src python test/cache/records_golden/make_golden.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # test/ for helpers

from helpers.records_golden import (  # noqa: E402
    build_image_run,
    build_sequence_run,
    eval_files,
    latency_file,
    run_file,
    score_image,
    score_sequence,
)


def make_inputs(inputs: Path) -> None:
    """The committed inputs (deterministic from their seeds; made once with the goldens)."""
    from helpers.scoring_data import hard_coco, hard_predictions
    from probench.cache.trace import frame_record
    from probench.data.synthetic_sequences import sequence_coco

    def dump(path: Path, obj: object) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj, sort_keys=True) + "\n")

    coco = hard_coco(7, n_images=10, n_queries=5)
    dump(inputs / "image_annotations.json", coco)
    run = inputs / "image_run"
    dump(run / "run.json", {"model": {"name": "test-instant", "random_weights": True},
                            "dataset": {"hash": "sha256:not-this-one"}, "status": "complete",
                            "formulations": ["orig", "cat", "tmpl", "policy"]})
    for k, f in enumerate(("orig", "cat", "tmpl", "policy")):
        preds = hard_predictions(coco, "orig" if f == "policy" else f, seed=11 + k)
        preds = [p for p in preds if p["image_id"] != 5000 or f == "orig"]
        dump(run / "predictions" / f"{f}.json", preds)
    dump(run / "latency.json", {"summary_ms": {"mean": 12.5, "std": 1.25, "p50": 12.0, "p95": 14.75,
                                               "p99": 15.0, "max": 15.5}})
    trace = []
    t = 5_000_000_000
    for session in (0, 1):
        for w in range(2):
            trace.append(frame_record("orig", 1 + w, sent_ns=t, received_ns=t + 40_000_000, status="answered",
                                      session=session, seq=w, warmup=True))
            t += 100_000_000
        for f in ("orig", "cat"):
            for seq, image_id in enumerate(range(1, 11)):
                status = "missed" if image_id % 4 == 0 else "misattributed" if image_id == 7 else "answered"
                lat = 20_000_000 + 3_000_000 * ((image_id * 7 + seq) % 5)
                trace.append(frame_record(f, image_id, sent_ns=t, received_ns=t + lat, status=status,
                                          session=session, seq=seq, n_prompts=2, n_detections=3, n_results=2))
                t += 50_000_000 + 1_000_000 * (seq % 3)
            t += 1_000_000_000
    trace.append({"kind": "stray", "stamp_ns": 1, "received_ns": t, "session": 1})
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in trace)
    (inputs / "realtime_frames.jsonl").write_text(lines)
    dump(run / "realtime.json", {"budget_ms": 50.0, "rate_hz": 20.0, "mode": "camera-rate",
                                 "warmup_frames": 2, "frames_sent": 20, "frames_received": 15,
                                 "frames_missed": 5,
                                 "missed_share": 0.25, "latency_ms": {"mean": 26.0, "std": 4.0, "p50": 26.0,
                                 "p95": 32.0, "p99": 32.0, "max": 32.0}})
    seq = sequence_coco(2, 10, seed=4)
    dump(inputs / "sequence_annotations.json", seq)
    srun = inputs / "sequence_run"
    dump(srun / "run.json", {"model": {"name": "test-instant"}, "status": "complete"})
    for f in ("orig", "cat", "tmpl"):
        preds = []
        for a in seq["annotations"]:
            im = a["image_id"] % 1000
            if (im + len(f)) % 4 == 0:
                continue  # a gap
            x, y, w, h = a["bbox"]
            preds.append({"image_id": a["image_id"], "category_id": a["category_id"],
                          "bbox": [x + 1.0, y, w, h], "score": 0.9,
                          "track_id": None if im % 5 == 1 else a["track_id"] + (im > 6)})
        dump(srun / "predictions" / f"{f}.json", preds)
    dump(inputs / "latency_measured.json", {
        "samples_ms": [10.5, 11.25, 9.75, 10.0, 12.5, 11.0],
        "stages": {"text": [2.0, 0.01, 0.01, 0.02, 0.01, 0.01],
                   "preprocess": [1.0, 1.5, 1.25, 1.0, 1.5, 1.0],
                   "forward": [6.0, 8.0, 7.0, 7.5, 9.0, 8.5],
                   "postprocess": [0.5, 0.5, 0.25, 0.5, 0.75, 0.5]},
        "text_cold": [True, False, False, False, False, False],
        "text_encoder_calls": 1,
        "text_cache": {"kind": "per-prompt", "capacity": 256, "entries": 1, "hits": 5, "misses": 1,
                       "evictions": 0}})


def main() -> None:
    out = HERE
    if "--inputs" in sys.argv:
        make_inputs(out / "inputs")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        (out / "metrics_image.json").write_bytes(score_image(build_image_run(HERE, tmp_path / "img")))
        sequence = build_sequence_run(HERE, tmp_path / "seq")
        (out / "metrics_sequence.json").write_bytes(score_sequence(sequence))
        for name, data in eval_files(HERE, tmp_path / "eval").items():
            (out / f"eval_{name}").write_bytes(data)
        (out / "latency.json").write_bytes(latency_file(HERE, tmp_path / "lat"))
        (out / "run.json").write_bytes(run_file(HERE, tmp_path / "run"))
    print(json.dumps(sorted(p.name for p in out.iterdir())))


if __name__ == "__main__":
    main()
