"""Benchmarks of scoring and dataset loading.

By default, the targets of scoring side by side in one run:

1. ``probench score`` end to end (a fresh ``python -m probench score`` process: start-up,
   dataset load and validation, the three formulations' predictions, the full suite,
   metrics.json) on a synthetic case of 4,000 images x 150 queries (``--images``,
   ``--queries``; synthetic_coco's ~5.7 instances per image; predictions with
   ``--case-fp-per-pair`` random boxes per label-space pair, the synthetic generator's
   default 3; 0 gives about 22k predictions per formulation), against its peers on the
   same three formulations (label-space-filtered results, written once to files):

   - **hotcoco** (a Rust, pycocotools-compatible evaluator) end to end: a fresh process
     that imports it, loads the dataset's JSON and each formulation's results file, and
     runs ``evaluate() + accumulate() + summarize()`` on each. Target: ours <= 1.0x, ours
     with ``--bootstrap 0 --no-errors`` (the suite without its confidence intervals and TIDE
     errors, which hotcoco's run does not compute); with the TIDE errors (``--bootstrap 0``)
     and the command's default (errors and 1000 resamples, timed once) beside it.
   - the Python floor: a fresh process that imports numpy and orjson and parses the four
     JSON files into Python objects, nothing else (what any Python scorer pays first);
   - the metric core alone, in this process (JSON already loaded, ``loadRes`` not
     timed): hotcoco, faster-coco-eval and pycocotools ``evaluate() + accumulate()`` of the
     three formulations at the standard ten thresholds, beside ours (``score`` of the
     three formulations' columns: the full suite).
2. ``load_dataset`` (parse + validation + indexing, no image files) of a Pro-Bench-size
   dataset (13k images, 74.5k instances, 515 queries). Target: <= 1 s.

Each timing is the best of ``--repeat`` runs, taken in turns; wall time and CPU time
(user + system) are both printed, and the ratio of each (the machine is shared: CPU time
is the steadier one). ``--skip-pycocotools`` leaves pycocotools out (the slowest).

``--suite``: the older comparison instead, the metric suite in this process against
pycocotools at Pro-Bench's scale. It builds a synthetic dataset and run the size of
Pro-Bench (13k images, 74.5k instances, 515 queries; ``--scale`` shrinks it), then times
in this process:

- ours: ``probench.scoring.score`` on the three formulations from COCO result dicts (the
  full suite: AP at 14 thresholds x 3 formulations, 4 area ranges under orig, PCR,
  PLC and their top-1 variants, prompt-type/domain/size breakdowns);
- reference: pycocotools ``COCOeval.evaluate() + accumulate()`` for ONE formulation at the
  standard ten thresholds (its default 4 area ranges), on the label-space-filtered results
  (``loadRes`` not timed).

Prints both times, their ratio (ours / pycocotools; < 1 means faster) and the peak RSS
after our run (before pycocotools runs).

    python bench/bench_score.py                        # the targets (a minute or two)
    python bench/bench_score.py --case-fp-per-pair 0   # ~22k predictions per formulation
    python bench/bench_score.py --suite                # full scale (pycocotools takes minutes)
    python bench/bench_score.py --suite --scale 0.05   # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of Pro-Bench's size (default 1)")
    ap.add_argument("--fp-per-pair", type=float, default=20.0, help="mean false positives per pair")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-pycocotools", action="store_true")
    ap.add_argument("--suite", action="store_true", help="the suite against pycocotools (older benchmark)")
    ap.add_argument("--images", type=int, default=4000, help="images of the end-to-end case (default 4000)")
    ap.add_argument("--queries", type=int, default=150, help="queries of the end-to-end case (default 150)")
    ap.add_argument("--case-fp-per-pair", type=float, default=3.0,
                    help="random boxes per label-space pair in the end-to-end case (default 3)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each timing; the best is kept (default 3)")
    ap.add_argument("--bootstrap", type=int, default=1000,
                    help="resamples of the extra end-to-end run with confidence intervals (default 1000, the "
                    "command's default; the ratio to hotcoco is taken without them)")
    args = ap.parse_args(argv)
    if not args.suite:
        return targets(args)

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
    out = score(ds, preds).to_json()
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


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _best(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """(wall, cpu): the least of each over the runs."""
    return min(w for w, _ in runs), min(c for _, c in runs)


def _write_case(folder: Path, coco: dict, fp_per_pair: float, seed: int) -> tuple[Path, Path]:
    """A dataset folder and a run folder (three formulations) for ``probench score``."""
    from probench.data.dataset import Dataset
    from probench.data.synthetic import arrays_to_results, synthetic_prediction_arrays

    ds_dir, run_dir = folder / "dataset", folder / "run"
    (run_dir / "predictions").mkdir(parents=True)
    ds_dir.mkdir()
    (ds_dir / "annotations.json").write_text(json.dumps(coco))
    for f in ("orig", "cat", "tmpl"):
        res = arrays_to_results(synthetic_prediction_arrays(coco, f, seed=seed, fp_per_pair=fp_per_pair))
        (run_dir / "predictions" / f"{f}.json").write_text(json.dumps(res))
    info = {"dataset": {"hash": Dataset.from_dict(coco).content_hash}, "model": {"name": "synthetic"}}
    (run_dir / "run.json").write_text(json.dumps(info))
    return ds_dir, run_dir


# hotcoco end to end, as a user runs it: a fresh process, JSON loaded from the files
HOTCOCO_E2E = """
import contextlib, io, sys
from hotcoco import COCO, COCOeval
gt = COCO(sys.argv[1])
for path in sys.argv[2:]:
    ev = COCOeval(gt, gt.load_res(path), "bbox")
    ev.evaluate()
    ev.accumulate()
    with contextlib.redirect_stdout(io.StringIO()):
        ev.summarize()
    print(ev.stats[1])
"""


# what any Python scorer pays before its first metric: the interpreter, numpy, and the four
# JSON files parsed into Python objects by orjson (the fastest parser the project uses)
PYTHON_FLOOR = """
import sys
import numpy, orjson
for path in sys.argv[1:]:
    with open(path, "rb") as fh:
        orjson.loads(fh.read())
"""


def _lscpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return "unknown CPU"
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
                "unknown CPU")


def _timed_child(cmd: list[str]) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), _cpu_children()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - w0, _cpu_children() - c0


def _timed_self(fn: Callable[[], object]) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), _cpu_self()
    fn()
    return time.perf_counter() - w0, _cpu_self() - c0


def _peer_core(module: str, coco: dict, results: dict[str, list[dict]]) -> Callable[[], tuple[float, float]]:
    """evaluate() + accumulate() of the three formulations with a COCO-API engine; the
    ground truth and the results are loaded beforehand (not timed)."""
    if module == "hotcoco":
        from hotcoco import COCO, COCOeval
    elif module == "faster_coco_eval":
        from faster_coco_eval import COCO
        from faster_coco_eval import COCOeval_faster as COCOeval
    else:
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval

    def run() -> tuple[float, float]:
        with contextlib.redirect_stdout(io.StringIO()):
            gt = COCO()
            gt.dataset = coco
            gt.createIndex()
            evs = [COCOeval(gt, gt.loadRes(res), "bbox") for res in results.values()]

        def core() -> None:
            with contextlib.redirect_stdout(io.StringIO()):
                for ev in evs:
                    ev.evaluate()
                    ev.accumulate()

        return _timed_self(core)

    return run


def targets(args: argparse.Namespace) -> int:
    from probench.data.dataset import Dataset, load_dataset
    from probench.data.synthetic import synthetic_coco
    from probench.scoring import score
    from probench.scoring.tables import DetArrays, GroundTruth

    print(f"machine: {_lscpu_model()}, {os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.1f}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-score-") as tmp:
        coco = synthetic_coco(args.images, args.queries, seed=args.seed)
        ds_dir, run_dir = _write_case(Path(tmp) / "case", coco, args.case_fp_per_pair, args.seed)
        ds = Dataset.from_dict(coco)
        pairs = {(im["id"], q) for im in coco["images"] for q in ds.label_space(im["id"])}
        forms = ("orig", "cat", "tmpl")
        given = {f: json.loads((run_dir / "predictions" / f"{f}.json").read_text()) for f in forms}
        # the peers get the label-space-filtered results (what probench evaluates), as files too
        results = {f: [r for r in given[f] if (r["image_id"], r["category_id"]) in pairs] for f in forms}
        peer_dir = Path(tmp) / "peer"
        peer_dir.mkdir()
        for f in forms:
            (peer_dir / f"{f}.json").write_text(json.dumps(results[f]))
        print(f"case: {args.images} images x {args.queries} queries, {len(coco['annotations'])} instances, "
              f"predictions per formulation {[len(given[f]) for f in forms]} "
              f"({[len(results[f]) for f in forms]} in the label spaces)", flush=True)  # fmt: skip

        # the suite hotcoco is held to (the list: the mAPs, the IoU sweep, PCR, PLC, the
        # breakdowns); the TIDE errors (which run hotcoco's own evaluation) and the bootstrap's
        # intervals are extra analyses hotcoco's run does not do: timed beside it
        ours_base = [sys.executable, "-m", "probench", "score", "--dataset", str(ds_dir),
                     "--run", str(run_dir), "--quiet"]
        ours_cmd = [*ours_base, "--bootstrap", "0", "--no-errors"]
        ours_errors = [*ours_base, "--bootstrap", "0"]
        ours_boot = [*ours_base, "--bootstrap", str(args.bootstrap)]
        hc_cmd = [sys.executable, "-c", HOTCOCO_E2E, str(ds_dir / "annotations.json"),
                  *(str(peer_dir / f"{f}.json") for f in forms)]
        floor_cmd = [sys.executable, "-c", PYTHON_FLOOR, str(ds_dir / "annotations.json"),
                     *(str(run_dir / "predictions" / f"{f}.json") for f in forms)]
        gt = GroundTruth.from_dataset(ds)
        columns = {f: DetArrays.from_results(given[f]) for f in forms}
        fns: dict[str, Callable[[], tuple[float, float]]] = {
            "ours e2e": lambda: _timed_child(ours_cmd),
            "ours e2e, TIDE errors": lambda: _timed_child(ours_errors),
            f"ours e2e, errors, bootstrap {args.bootstrap}": lambda: _timed_child(ours_boot),
            "hotcoco e2e": lambda: _timed_child(hc_cmd),
            "python floor e2e": lambda: _timed_child(floor_cmd),
            "ours core": lambda: _timed_self(lambda: score(gt, columns)),
            "hotcoco core": _peer_core("hotcoco", coco, results),
            "faster-coco-eval core": _peer_core("faster_coco_eval", coco, results),
        }
        if not args.skip_pycocotools:
            fns["pycocotools core"] = _peer_core("pycocotools", coco, results)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
        for k in range(args.repeat):
            for name, fn in fns.items():
                if k == 0 or not (name.startswith("pycocotools") or "bootstrap" in name):  # once is enough
                    runs[name].append(fn())
        best = {name: _best(r) for name, r in runs.items()}
        metrics = json.loads((run_dir / "metrics.json").read_text())
        print(f"(ours: map50 {metrics['map50']:.4f}; e2e = fresh process, 3 formulations; core = in this "
              "process, 3 formulations, ours the full suite, the peers evaluate+accumulate at 10 thresholds)")
        for name, (w, c) in best.items():
            print(f"  {name:26} {w:6.3f} s wall {c:6.3f} s CPU")

        def ratio(a: str, b: str, target: str = "") -> None:
            (wa, ca), (wb, cb) = best[a], best[b]
            print(f"ratio {a} / {b}: {wa / wb:.3f} wall, {ca / cb:.3f} CPU{target}")

        ratio("ours e2e", "hotcoco e2e", " (target <= 1.0)")
        ratio("ours e2e, TIDE errors", "hotcoco e2e")
        ratio("python floor e2e", "hotcoco e2e", " (start-up, numpy, the four files parsed: no scoring)")
        for peer in ("hotcoco core", "faster-coco-eval core", "pycocotools core"):
            if peer in best:
                ratio("ours core", peer)
        sys.stdout.flush()

        # load + validate at Pro-Bench's size
        big = Path(tmp) / "probench-size"
        big.mkdir()
        pb = synthetic_coco(13000, 515, 74500, seed=args.seed)
        (big / "annotations.json").write_text(json.dumps(pb))
        del pb
        load_runs = []
        for _ in range(args.repeat):
            w0, c0 = time.perf_counter(), _cpu_self()
            loaded = load_dataset(big, check_files=False)
            load_runs.append((time.perf_counter() - w0, _cpu_self() - c0))
        w_l, c_l = _best(load_runs)
        print(f"load_dataset at Pro-Bench's size ({len(loaded.images)} images, {len(loaded.annotations)} "
              f"instances, {len(loaded.queries)} queries): {w_l:.2f} s wall, {c_l:.2f} s CPU (target <= 1 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
