"""The GPU check: every family's CUDA path in fp32 and fp16, TensorRT where the zoo lists it,
the stage table on the GPU, and parity against boxes computed on the CPU beforehand.

Two steps (``bench/gpu_check.sh`` wraps them):

    python bench/gpu_check.py prepare DIR         # here, on the CPU: frames + CPU reference boxes
    python bench/gpu_check.py run DIR OUT         # on the CUDA machine: measures only
    python bench/gpu_check.py run DIR OUT --dry-run   # CPU rehearsal: everything but CUDA/TensorRT

``prepare`` writes the frames (lossless ``.npy`` plus their JPEG bytes), a small
Pro-Bench-format frame dataset for ``probench latency`` and, for every tiny model, the CPU
boxes of both preprocessing paths. ``run`` never builds anything it could have prepared; it
writes ``OUT/gpu_check.json`` and ``OUT/gpu_check.md`` (the tables), section by section, so
a run stopped by its time limit keeps what it measured. Each section is guarded: a failure is
recorded with its error and the next section runs. Sections are skipped once ``--budget``
seconds have passed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_* helpers

SIZES = ((480, 640), (720, 1280))
PROMPTS = ["a person", "the red fire extinguisher", "an open door", "a chair next to the table"]
TRT_TINY = ("tiny-owlv2-b", "tiny-owlvit", "tiny-yolo-world-s", "tiny-yoloe-s")  # zoo: tensorrt=True
REAL = ("owlvit", "owlv2-b", "omdet-turbo", "yolo-world-s", "yoloe-s")


def tiny_models() -> list[str]:
    from bench_stages import tiny_models as names

    return names()


# -- prepare (CPU) ---------------------------------------------------------------------------
def boxes_record(dets: Any) -> dict[str, Any]:
    return {"xyxy": dets.xyxy.round(4).tolist(), "scores": dets.scores.round(6).tolist(),
            "prompt_index": dets.prompt_index.tolist()}


def prepare(root: Path) -> dict[str, Any]:
    import numpy as np

    from bench_stages import jpeg_message, synthetic_frame
    from make_frames import make_frames
    from probench.models.zoo import load_detector

    root.mkdir(parents=True, exist_ok=True)
    frames = {}
    for h, w in SIZES:
        frame = synthetic_frame(h, w, seed=1)
        np.save(root / f"frame_{w}x{h}.npy", frame)
        (root / f"frame_{w}x{h}.jpg").write_bytes(jpeg_message(frame).data)
        frames[f"{w}x{h}"] = frame
    make_frames(root / "frames720", size=(720, 1280), n_images=20)
    reference: dict[str, Any] = {}
    for name in tiny_models():
        det = load_detector(name)
        for key, frame in frames.items():
            for path in ("device", "reference"):
                det.preprocess = path
                reference[f"{name}|{key}|{path}"] = boxes_record(det.detect(frame, PROMPTS))
        print(f"prepared {name}", flush=True)
    info = {"prompts": PROMPTS, "sizes": list(frames), "models": tiny_models(), "boxes": reference}
    (root / "cpu_boxes.json").write_text(json.dumps(info))
    return info


# -- run (CUDA) ------------------------------------------------------------------------------
class Report:
    """Sections of results, written after each one (a killed run keeps what it measured)."""

    def __init__(self, out: Path, budget_s: float) -> None:
        self.out, self.t0, self.budget_s = out, time.perf_counter(), budget_s
        self.data: dict[str, Any] = {}
        self.markdown: list[str] = []
        out.mkdir(parents=True, exist_ok=True)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def section(self, name: str, fn: Callable[[], tuple[Any, str]]) -> None:
        if self.elapsed() > self.budget_s:
            self.data[name] = {"skipped": f"time budget ({self.budget_s:.0f} s) spent"}
            self.markdown.append(f"## {name}\n\nskipped: time budget spent\n")
        else:
            t0 = time.perf_counter()
            try:
                result, text = fn()
                self.data[name] = {"result": result, "seconds": round(time.perf_counter() - t0, 1)}
                self.markdown.append(f"## {name} ({time.perf_counter() - t0:.0f} s)\n\n{text}\n")
            except Exception as exc:  # noqa: BLE001 - recorded, the next section still runs
                self.data[name] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
                self.markdown.append(f"## {name}\n\nFAILED: {type(exc).__name__}: {exc}\n")
        (self.out / "gpu_check.json").write_text(json.dumps(self.data, indent=1, default=str))
        (self.out / "gpu_check.md").write_text("\n".join(self.markdown))
        print(self.markdown[-1], flush=True)


def environment(device: str) -> tuple[dict[str, Any], str]:
    import torch
    import torchvision

    info: dict[str, Any] = {
        "python": platform.python_version(), "torch": torch.__version__,
        "torchvision": torchvision.__version__, "cuda_available": torch.cuda.is_available(), "device": device,
    }
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
        info["cuda"] = torch.version.cuda
    try:
        import tensorrt

        info["tensorrt"] = tensorrt.__version__
    except ImportError:
        info["tensorrt"] = None
    return info, "\n".join(f"- {k}: {v}" for k, v in info.items())


def match_fraction(a: dict[str, Any], b: Any, px: float = 0.5, score: float = 1e-3) -> tuple[int, int, int]:
    """(matched, len a, len b): boxes of ``a`` (a stored record) with a partner in ``b``."""
    import numpy as np

    ax, asc, ap = np.asarray(a["xyxy"]).reshape(-1, 4), np.asarray(a["scores"]), np.asarray(a["prompt_index"])
    used = np.zeros(len(b), dtype=bool)
    hits = 0
    for i in np.argsort(-asc, kind="stable"):
        ok = (~used & (b.prompt_index == ap[i]) & (np.abs(b.scores - asc[i]) <= score)
              & (np.abs(b.xyxy - ax[i]).max(axis=1) <= px))
        if ok.any():
            used[np.argmax(ok)] = True
            hits += 1
    return hits, len(asc), len(b)


def parity(root: Path, device: str, precisions: list[str]) -> tuple[Any, str]:
    """Each tiny model on ``device``: both paths, each precision, against the CPU boxes."""
    import numpy as np

    from probench.models.zoo import load_detector

    cpu = json.loads((root / "cpu_boxes.json").read_text())
    frames = {k: np.load(root / f"frame_{k}.npy") for k in cpu["sizes"]}
    rows, lines = [], ["| model | precision | frame | path | boxes (gpu/cpu) | matched within 0.5 px |",
                       "|---|---|---|---|---|---|"]
    for name in cpu["models"]:
        for precision in precisions:
            det = load_detector(name, device=device, precision=precision)
            for key, frame in frames.items():
                for path in ("device", "reference"):
                    det.preprocess = path
                    got = det.detect(frame, cpu["prompts"])
                    hits, n_cpu, n_gpu = match_fraction(cpu["boxes"][f"{name}|{key}|{path}"], got)
                    rows.append({"model": name, "precision": precision, "frame": key, "path": path,
                                 "n_gpu": n_gpu, "n_cpu": n_cpu, "matched": hits})
                    lines.append(f"| {name} | {precision} | {key} | {path} | {n_gpu}/{n_cpu} | "
                                 f"{hits / max(n_cpu, 1):.3f} |")
    return rows, "\n".join(lines)


def tensorrt_check(root: Path, device: str, dry_run: bool) -> tuple[Any, str]:
    """runtime="tensorrt" for the zoo's TensorRT models (tiny), against the torch CUDA boxes."""
    import numpy as np

    from probench.models.zoo import load_detector

    if dry_run:
        return {"skipped": "dry run: no TensorRT calls"}, "dry run: TensorRT calls skipped"
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        return {"skipped": "tensorrt is not installed on this machine"}, "skipped: tensorrt not installed"
    frame = np.load(root / "frame_1280x720.npy")
    cache = root / "engines"
    rows, lines = [], ["| model | build s | torch ms | tensorrt ms | boxes (trt/torch) | matched |",
                       "|---|---|---|---|---|---|"]
    for name in TRT_TINY:
        import torch

        base = load_detector(name, device=device, precision="fp16")
        t0 = time.perf_counter()
        trt = load_detector(name, device=device, precision="fp16", runtime="tensorrt",
                            engine_cache=str(cache))
        trt.set_prompts(PROMPTS)  # ultralytics: the engine is built for the vocabulary here
        build_s = time.perf_counter() - t0
        a, b = base.detect(frame, PROMPTS), trt.detect(frame, PROMPTS)
        times = {}
        for tag, det in (("torch", base), ("trt", trt)):
            samples = []
            for _ in range(10):
                torch.cuda.synchronize()
                s = time.perf_counter()
                det.detect(frame)
                torch.cuda.synchronize()
                samples.append((time.perf_counter() - s) * 1e3)
            times[tag] = float(np.median(samples))
        hits, n_a, n_b = match_fraction(boxes_record(a), b, px=2.0, score=2e-2)  # fp16 engine vs fp16 torch
        rows.append({"model": name, "build_s": build_s, **times, "n_trt": n_b, "n_torch": n_a,
                     "matched": hits})
        lines.append(f"| {name} | {build_s:.0f} | {times['torch']:.2f} | {times['trt']:.2f} | {n_b}/{n_a} | "
                     f"{hits / max(n_a, 1):.3f} |")
    return rows, "\n".join(lines)


def stage_table(
    models: list[str], device: str, precision: str, *, runs: int, warmup: int, stream: int, real: bool
) -> tuple[Any, str]:
    from bench_stages import bench_model, table

    rows = []
    for name in models:
        for size in SIZES:
            rows.append(bench_model(name, size, device=device, precision=precision, runtime="torch",
                                    random_weights=real, runs=runs, warmup=warmup, stream=stream))
    return rows, table(rows)


def decode_check(root: Path, device: str) -> tuple[Any, str]:
    from types import SimpleNamespace

    import numpy as np

    from probench.msgs.images import compressed_to_device

    rows, lines = [], ["| frame | decode ms | max diff to the CPU frame |", "|---|---|---|"]
    for jpg in sorted(root.glob("frame_*.jpg")):
        msg = SimpleNamespace(format="jpeg", data=jpg.read_bytes())
        ref = compressed_to_device(msg, "cpu")
        out = compressed_to_device(msg, device)
        times = []
        for _ in range(20):
            s = time.perf_counter()
            out = compressed_to_device(msg, device)
            if hasattr(out, "device") and str(out.device).startswith("cuda"):
                import torch

                torch.cuda.synchronize()
            times.append((time.perf_counter() - s) * 1e3)
        got = out.cpu().numpy() if hasattr(out, "cpu") else out
        diff = int(np.abs(got.astype(int) - ref).max())
        rows.append({"frame": jpg.stem, "ms": float(np.median(times)), "max_diff": diff})
        lines.append(f"| {jpg.stem} | {np.median(times):.2f} | {diff} |")
    return rows, "\n".join(lines)


def latency_check(
    root: Path, out: Path, device: str, precision: str, models: list[tuple[str, bool]], runs: int
) -> tuple[Any, str]:
    from probench.cli import main as probench

    rows, lines = [], []
    for name, random_weights in models:
        run_dir = out / f"latency-{name}-{precision}"
        argv = ["latency", "--model", name, "--dataset", str(root / "frames720"), "--out", str(run_dir),
                "--device", device, "--precision", precision, "--images", "20", "--runs", str(runs),
                "--no-progress", "--overwrite", *(["--random-weights"] if random_weights else [])]
        rc = probench(argv)
        result = json.loads((run_dir / "latency.json").read_text()) if rc == 0 else None
        rows.append({"model": name, "rc": rc, "latency": result})
        if result:
            from probench.cache.records import LatencyRecord
            from probench.models.latency import format_summary

            summary = format_summary(LatencyRecord.model_validate(result))
            lines.append(f"- `probench {' '.join(argv)}`\n  {summary}")
        else:
            lines.append(f"- {name}: probench latency exited {rc}")
    failed = [r["model"] for r in rows if r["rc"] != 0]
    if failed:
        raise RuntimeError(f"probench latency failed for {', '.join(failed)}: " + "; ".join(lines))
    return rows, "\n".join(lines)


def policy_table(
    models: list[tuple[str, bool]], device: str, rounds: int, frames: int, frame: Path
) -> tuple[Any, str]:
    """Per model, each prompt policy's per-frame latency over as_typed (bench_prompt_policy.py)."""
    import numpy as np

    from bench_prompt_policy import bench_one, table

    image = np.load(frame)
    rows = [bench_one(name, rw, image, rounds, frames, device) for name, rw in models]
    return rows, table(rows)


def run(root: Path, out: Path, *, dry_run: bool, budget_s: float) -> int:
    if not (root / "cpu_boxes.json").is_file():
        print(f"{root}: no cpu_boxes.json; run `bench/gpu_check.sh prepare {root}` first", file=sys.stderr)
        return 2
    import torch

    device = "cpu" if dry_run else "cuda"
    if not dry_run and not torch.cuda.is_available():
        print("no CUDA device here; use --dry-run for the CPU rehearsal", file=sys.stderr)
        return 2
    precisions = ["fp32"] if dry_run else ["fp32", "fp16"]  # fp16 needs CUDA
    tiny_runs = (2, 1, 3) if dry_run else (10, 2, 10)  # runs, warm-up, stream frames
    real_runs = (1, 0, 2) if dry_run else (5, 2, 10)
    report = Report(out, budget_s)
    report.section("environment", lambda: environment(device))
    report.section("parity against the CPU boxes (tiny models)", lambda: parity(root, device, precisions))
    report.section("TensorRT (tiny OWL and YOLO models)", lambda: tensorrt_check(root, device, dry_run))
    report.section("decode", lambda: decode_check(root, device))
    for precision in precisions:
        report.section(f"stage table, tiny models, {precision}", lambda p=precision: stage_table(
            tiny_models(), device, p, runs=tiny_runs[0], warmup=tiny_runs[1], stream=tiny_runs[2],
            real=False))
    real_models = ["owlvit", "yoloe-s"] if dry_run else list(REAL)  # dry run: one per adapter kind, cheap
    for precision in precisions:
        report.section(f"stage table, real-size random weights, {precision}", lambda p=precision: stage_table(
            real_models, device, p, runs=real_runs[0], warmup=real_runs[1], stream=real_runs[2], real=True))
    # the cost of the prompt policies (docs/PROMPTING.md); written without a GPU to try it on
    policy_models = [(n, False) for n in tiny_models()] + [(n, True) for n in REAL]
    report.section("prompt policies over as_typed (tiny + real-size random weights)", lambda: policy_table(
        policy_models[:2] if dry_run else policy_models, device, 1 if dry_run else 3, 1 if dry_run else 5,
        root / "frame_640x480.npy"))
    report.section("probench latency (1280x720 frames)", lambda: latency_check(
        root, out, device, precisions[-1], [("tiny-owlv2", False), ("yoloe-s", True)], 1 if dry_run else 3))
    failed = [k for k, v in report.data.items() if "error" in v]
    print(f"gpu check done in {report.elapsed():.0f} s; {len(failed)} section(s) failed: {failed}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare", help="frames and CPU reference boxes (run here, on the CPU)")
    p.add_argument("dir")
    r = sub.add_parser("run", help="the measurements (on the CUDA machine)")
    r.add_argument("dir")
    r.add_argument("out")
    r.add_argument("--dry-run", action="store_true", help="CPU rehearsal: every path but CUDA/TensorRT")
    r.add_argument("--budget", type=float, default=420.0, help="seconds after which sections are skipped")
    args = ap.parse_args(argv)
    if args.step == "prepare":
        prepare(Path(args.dir))
        print(f"prepared {args.dir}")
        return 0
    return run(Path(args.dir), Path(args.out), dry_run=args.dry_run, budget_s=args.budget)


if __name__ == "__main__":
    raise SystemExit(main())
