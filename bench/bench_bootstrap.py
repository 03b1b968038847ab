"""What the bootstrap confidence intervals cost (docs/METRICS.md, "Confidence intervals").

Builds a synthetic run the size of Pro-Bench (13k images, 74.5k instances, 515 queries,
three formulations, ``--fp-per-pair`` false positives per label-space pair; ``--scale``
shrinks it), then times in this process, in turns (best of ``--repeat``):

- the suite alone: ``probench.scoring.score`` (bootstrap off);
- the suite with ``--resamples`` bootstrap resamples (default 1000, as ``probench score``).

Prints both, the bootstrap's own time (the difference) and its ratio to the suite's time.
Target: the bootstrap adds at most 2x the suite's time.

    python bench/bench_bootstrap.py                 # full scale (a few minutes)
    python bench/bench_bootstrap.py --scale 0.1     # a quick look
"""

from __future__ import annotations

import argparse
import resource
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of Pro-Bench's size (default 1)")
    ap.add_argument("--fp-per-pair", type=float, default=20.0, help="mean false positives per pair")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each timing; the best is kept")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from probench.data.dataset import Dataset
    from probench.data.synthetic import synthetic_coco, synthetic_prediction_arrays
    from probench.scoring import score
    from probench.scoring.tables import DetArrays

    n_img = max(1, round(13000 * args.scale))
    n_inst = max(1, round(74500 * args.scale))
    n_q = max(2, min(515, round(515 * max(args.scale, 0.2))))
    t0 = time.perf_counter()
    coco = synthetic_coco(n_img, n_q, n_inst, seed=args.seed)
    preds = {}
    for f in ("orig", "cat", "tmpl"):
        a = synthetic_prediction_arrays(coco, f, seed=args.seed, fp_per_pair=args.fp_per_pair)
        preds[f] = DetArrays.from_columns(a["image_id"], a["category_id"], a["bbox"], a["score"])
    ds = Dataset.from_dict(coco)
    print(f"data: {n_img} images, {n_inst} instances, {n_q} queries, predictions "
          f"{ {f: len(p) for f, p in preds.items()} } (built in {time.perf_counter() - t0:.1f} s)",
          flush=True)  # fmt: skip
    plain: list[tuple[float, float]] = []
    boot: list[tuple[float, float]] = []
    out: dict = {}
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        score(ds, preds)
        plain.append((time.perf_counter() - t0, time.process_time() - c0))
        t0, c0 = time.perf_counter(), time.process_time()
        out = score(ds, preds, bootstrap=args.resamples).to_json()
        boot.append((time.perf_counter() - t0, time.process_time() - c0))
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    iv = out["intervals"]
    print(f"  map50 {out['map50']:.4f} in {iv['by_formulation']['orig']['map50']}, "
          f"k* {out['best_formulation']} support {iv.get('best_formulation_support')}; "
          f"peak RSS {peak_gib:.2f} GiB")
    for i, what in enumerate(("wall", "CPU")):
        suite, with_boot = min(p[i] for p in plain), min(b[i] for b in boot)
        added = with_boot - suite
        print(f"{what}: suite alone {suite:.2f} s; suite + {args.resamples} resamples {with_boot:.2f} s; "
              f"bootstrap's own {added:.2f} s; ratio bootstrap/suite {added / suite:.2f} (target <= 2)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
