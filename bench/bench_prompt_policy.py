"""The cost of each prompt policy (docs/PROMPTING.md): per model, the per-frame latency of
``categorical``, ``template``, ``best`` and ``ensemble`` divided by that of ``as_typed``.

For each model (``tiny-*`` variants and real-size architectures built with random weights):
one 640x480 frame, four operator queries; each policy's texts are warmed once (text cache),
then timed over consecutive frames in blocks (a policy's prompt set stays the same from
frame to frame, as on the robot), the blocks of the policies interleaved over ``--rounds``
rounds; printed are the fastest per-frame latency of ``as_typed`` and each policy's ratio to
it (fastest over fastest: on a shared, loaded machine other work only adds time; the JSON
also has the ratios of the medians), and how many texts the ensemble gives the model (in
one call).

    python bench/bench_prompt_policy.py                  # every tiny model + the real-size OWL-ViT,
                                                         # YOLO-World-S, YOLOE-S and OmDet-T
    python bench/bench_prompt_policy.py --tiny-only --json out.json
    python bench/bench_prompt_policy.py --models tiny-owlv2-b,owlvit --rounds 3 --frames 3
    python bench/bench_prompt_policy.py --device cuda    # the GPU rows (bench/gpu_check.py uses them)

Real-size architectures on a few CPU cores take seconds per frame: keep --rounds and
--frames small. Absolute numbers depend on the machine and its load; the ratios compare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_* helpers

QUERIES = [
    "the red fire extinguisher mounted next to the door",
    "a chair without armrests",
    "a tunnel ventilation fan on the ceiling",
    "a person who is not wearing a hat",
]
# Real-size architectures fast enough on a CPU for a modest run, one per family that
# encodes the image once (OWL, YOLO-World, YOLOE, OmDet); the rest with --models.
REAL = ("owlvit", "yolo-world-s", "yoloe-s", "omdet-turbo")
ENSEMBLE_LIMIT = 1.5  # docs/PROMPTING.md: ensemble <= 1.5x as_typed for these families
CHEAP_FAMILIES = ("owl", "yolo-world", "yoloe", "omdet")


def model_names(args: argparse.Namespace) -> list[tuple[str, bool]]:
    """(zoo name, random_weights) pairs to measure."""
    from bench_stages import tiny_models

    if args.models:
        return [(n, not n.startswith(("tiny-", "test-"))) for n in (m.strip() for m in args.models.split(","))
                if n]
    out: list[tuple[str, bool]] = []
    if not args.real_only:
        out += [(n, False) for n in tiny_models()]
    if not args.tiny_only:
        out += [(n, True) for n in REAL]
    return out


def bench_one(
    name: str, random_weights: bool, image: Any, rounds: int, frames: int, device: str
) -> dict[str, Any]:
    from probench.models.zoo import load_detector, model_record
    from probench.prompting.policy import POLICIES, PolicyDetector, resolve_policy

    record = model_record(name, random_weights=random_weights)
    t0 = time.perf_counter()
    det = load_detector(name, device=device, random_weights=random_weights)
    load_s = time.perf_counter() - t0
    policies = {p: resolve_policy(p, model=name, paper_name=str(record["paper_name"])) for p in POLICIES}
    runners = {p: PolicyDetector(det, pol) for p, pol in policies.items()}
    times: dict[str, list[float]] = {p: [] for p in POLICIES}
    for runner in runners.values():  # warm every policy's texts (the text cache), untimed
        runner.detect(image, QUERIES)
    for _ in range(rounds):
        for p, runner in runners.items():
            runner.detect(image, QUERIES)  # the set switches here: its join is not timed
            for _ in range(frames):
                t = time.perf_counter()
                runner.detect(image, QUERIES)
                _sync(device)
                times[p].append((time.perf_counter() - t) * 1000.0)
    # the fastest frame of each policy: on a shared, loaded machine other work only ever adds
    # time, so the minimum is the steadiest estimate of what the policy itself costs
    fast = {p: min(v) for p, v in times.items()}
    med = {p: statistics.median(v) for p, v in times.items()}
    base = fast["as_typed"]
    return {
        "model": name, "family": _family(name), "random_weights": random_weights, "device": device,
        "load_s": round(load_s, 2), "as_typed_ms": round(base, 2),
        "ratio": {p: round(fast[p] / base, 3) for p in POLICIES},
        "median_ratio": {p: round(med[p] / med["as_typed"], 3) for p in POLICIES},
        "best_gives": policies["best"].forms[0],
        "ensemble_texts": len(policies["ensemble"].plan(QUERIES).model_texts),
        "frames_per_policy": rounds * frames,
    }


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _family(name: str) -> str:
    from probench.models.zoo import resolve

    return resolve(name)[0].family


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| model | device | as_typed ms | categorical | template | best (gives) | ensemble (texts) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        q = r["ratio"]
        kind = "random weights" if r["random_weights"] else "tiny"
        lines.append(f"| {r['model']} ({kind}) | {r['device']} | {r['as_typed_ms']:.1f} | "
                     f"{q['categorical']:.2f}x | {q['template']:.2f}x | "
                     f"{q['best']:.2f}x ({r['best_gives']}) | {q['ensemble']:.2f}x ({r['ensemble_texts']}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help="comma-separated zoo names (real ones get random weights)")
    ap.add_argument("--tiny-only", action="store_true")
    ap.add_argument("--real-only", action="store_true")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of one block per policy (default 5)")
    ap.add_argument("--frames", type=int, default=5, help="timed frames per block (default 5)")
    ap.add_argument("--real-rounds", type=int, default=2, help="rounds for real-size models (default 2)")
    ap.add_argument("--real-frames", type=int, default=2, help="frames per block, real-size (default 2)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = ap.parse_args(argv)
    import torch

    from bench_stages import synthetic_frame

    torch.manual_seed(0)
    image = synthetic_frame(480, 640)
    rows, failed = [], []
    for name, rw in model_names(args):
        rounds, frames = (args.real_rounds, args.real_frames) if rw else (args.rounds, args.frames)
        try:
            row = bench_one(name, rw, image, rounds, frames, args.device)
        except Exception as exc:  # noqa: BLE001 - recorded, the next model still runs
            traceback.print_exc()
            failed.append({"model": name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        rows.append(row)
        print(table([row]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    over = [r["model"] for r in rows
            if r["family"] in CHEAP_FAMILIES and r["ratio"]["ensemble"] > ENSEMBLE_LIMIT]
    print(f"\nensemble > {ENSEMBLE_LIMIT}x for an image-once family: {', '.join(over) or 'none'}")
    print(f"threads: {torch.get_num_threads()}, cpus: {os.cpu_count()}, load: {os.getloadavg()[0]:.1f}")
    if failed:
        print(f"failed: {failed}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "failed": failed, "queries": QUERIES}, indent=2)
                             + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
