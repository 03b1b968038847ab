"""Benchmark of the metric suite at Pro-Bench's scale against pycocotools.

Builds a synthetic dataset and run the size of Pro-Bench (13k images, 74.5k instances, 515
queries; ``--scale`` shrinks it), then times in this process:

- ours: ``probench.scoring.score`` on the three formulations from COCO result dicts (the
  full suite: 14-threshold matching x 3 formulations, 4 area ranges under orig, AP, PCR,
  PLC and their top-1 variants, prompt-type/domain/size breakdowns);
- reference: pycocotools ``COCOeval.evaluate() + accumulate()`` for ONE formulation at the
  standard ten thresholds (its default 4 area ranges), on the label-space-filtered results
  (``loadRes`` not timed).

Prints both times, their ratio (ours / pycocotools; < 1 means faster) and the peak RSS
after our run (before pycocotools runs).

    python bench/bench_score.py                # full scale (pycocotools takes minutes)
    python bench/bench_score.py --scale 0.05   # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import io
import resource
import sys
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of Pro-Bench's size (default 1)")
    ap.add_argument("--fp-per-pair", type=float, default=20.0, help="mean false positives per pair")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-pycocotools", action="store_true")
    args = ap.parse_args(argv)

    from probench.data.dataset import Dataset
    from probench.data.synthetic import arrays_to_results, synthetic_coco, synthetic_prediction_arrays
    from probench.scoring import score

    n_img = max(1, round(13000 * args.scale))
    n_inst = max(1, round(74500 * args.scale))
    n_q = max(2, min(515, round(515 * max(args.scale, 0.2))))
    fpp = args.fp_per_pair
    t0 = time.perf_counter()
    coco = synthetic_coco(n_img, n_q, n_inst, seed=args.seed)
    preds = {
        f: arrays_to_results(synthetic_prediction_arrays(coco, f, seed=args.seed, fp_per_pair=fpp))
        for f in ("orig", "cat", "tmpl")
    }
    ds = Dataset.from_dict(coco)
    n_pred = {f: len(v) for f, v in preds.items()}
    print(f"data: {n_img} images, {n_inst} instances, {n_q} queries, predictions {n_pred} "
          f"(built in {time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip

    t0 = time.perf_counter()
    out = score(ds, preds)
    ours = time.perf_counter() - t0
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"ours (full suite, 3 formulations): {ours:.2f} s; peak RSS so far {peak_gib:.2f} GiB", flush=True)
    print(f"  map50 {out['map50']:.4f}  map50_95 {out['map50_95']:.4f}  pcr50 {out['pcr50']:.4f}  "
          f"plc {out['plc']:.4f}  pcr50_top1 {out['pcr50_top1']:.4f}  plc_top1 {out['plc_top1']:.4f}",
          flush=True)  # fmt: skip
    if args.skip_pycocotools:
        return 0

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    pairs = {(im["id"], q) for im in coco["images"] for q in ds.label_space(im["id"])}
    res = [r for r in preds["orig"] if (r["image_id"], r["category_id"]) in pairs]
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = coco
        gt.createIndex()
        dt = gt.loadRes(res)
        ev = COCOeval(gt, dt, "bbox")
        t0 = time.perf_counter()
        ev.evaluate()
        ev.accumulate()
        ref = time.perf_counter() - t0
    s = ev.eval["precision"][0, :, :, 0, 2]
    print(f"pycocotools evaluate+accumulate (orig only, 10 thresholds): {ref:.2f} s "
          f"(its map50 {np.mean(s[s > -1]):.4f})")  # fmt: skip
    print(f"ratio ours/pycocotools: {ours / ref:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
