"""The GPU check: CPU-against-CUDA parity of every tiny model's network, the 15 real-size
configurations under each runtime against the 30 Hz goals, YOLOE's post-processing, in one
call of at most 8 minutes on a lent GPU.

    python bench/gpu_check.py prepare DIR             # here, on the CPU: the frames and a frame dataset
    python bench/gpu_check.py run DIR OUT             # on the CUDA machine (bench/gpu_check.sh run)
    python bench/gpu_check.py run DIR OUT --dry-run   # CPU rehearsal: every section, CUDA calls skipped

``run`` writes ``OUT/gpu_check.json`` and ``OUT/gpu_check.md`` after every item of every
section, so a run killed by its time limit keeps what it measured. A failing item is
recorded with its error and the next one runs. Sections run in order of priority, each with
a share of ``--budget`` seconds (:data:`SECTIONS`; what a section leaves unused goes to the
next); an item starts only while its section has budget left, the rest is recorded as cut.

Sections:

1. **environment**: versions, the GPU, whether tensorrt imports.
2. **ultralytics on the GPU**: YOLOE-S's stage row at 1280x720 on a noise frame (post/fwd
   against its 0.25 target, launches and syncs per frame and of the postprocess), and
   YOLO-World-S / YOLOE-S at fp16 in the channels-last layout the adapter uses against
   NCHW (kernels, kernel time, wall per frame).
3. **parity** (:mod:`gpu_parity`): every tiny model, fp32 (TF32 off) and fp16: the
   preprocessed inputs and the raw outputs of its network, CPU against CUDA, max abs/rel
   error, pass or fail against the stated tolerance.
4. **real-size, fp16**: every real-size configuration (random weights; the hub is not
   reachable) under the paper's latency protocol cut to fit (``probench latency``'s code:
   per image its own prompt set, warm-up, timed passes over 1280x720 frames): mean, p95,
   GPU kernel time per frame (``torch.profiler``: the summed CUDA kernel times of a
   frame), kernel launches per frame, wall / kernel time. Eager first (in this process),
   then ``compiled``, ``onnxruntime`` and ``tensorrt`` (each cell in a child process with
   a time limit: a compile or an export that hangs or crashes costs its cell only); a
   runtime this tree does not have is recorded as such, one a model refuses with its
   one-line reason.
5. **goals**: per configuration, pass or fail: p95 <= 33.3 ms, wall <= 1.5 x kernel time,
   and >= 2x faster than eager where eager's wall / kernel time is >= 2.
6. **real-size, fp32, eager**: for the paper's comparison.
7. **decode** (nvJPEG against the CPU frame) and the **prompt policies**: leftover budget only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))  # bench_* helpers

from gpu_cells import _fmt, goal_lines, goals, real_section  # noqa: E402 - after the path

PROMPTS = ["a person", "the red fire extinguisher", "an open door", "a chair next to the table"]
FRAME = (720, 1280)
# (section, share of the budget): a section may use its share plus what earlier ones left
SECTIONS = (
    ("ultralytics", 0.08),
    ("parity", 0.15),
    ("real fp16 eager", 0.22),
    ("real fp16 compiled", 0.30),
    ("real fp16 onnxruntime/tensorrt", 0.08),
    ("real fp32 eager", 0.17),
    ("decode", 0.0),
    ("prompt policies over as_typed", 0.0),
)
PROTOCOL = {"images": 10, "warmup": 3, "runs": 2, "profile_frames": 3}  # the paper's: 50, 3, 10
DRY_PROTOCOL = {"images": 2, "warmup": 1, "runs": 1, "profile_frames": 1}
OTHER_RUNTIMES = ("compiled", "onnxruntime", "tensorrt")


def tiny_models() -> list[str]:
    from bench_stages import tiny_models as names

    return names()


# cheapest to build first (the H200 run: 0.3 s for YOLO to 18 s for SAM3), so a section cut
# at its budget loses the fewest configurations
BUILD_ORDER = (
    "yolo-world-s",
    "yoloe-s",
    "yolo-world-x",
    "yoloe-x",
    "owlvit",
    "owlv2-b",
    "owlv2-l",
    "omdet-turbo",
    "grounding-dino-t",
    "mm-grounding-dino-t",
    "grounding-dino-s-t",
    "llmdet-l",
    "mm-grounding-dino-l",
    "sam3-lite",
    "sam3",
)


def real_models() -> list[str]:
    """The 15 real-size configurations (the tiny variants' real architectures), cheapest
    to build first; any the zoo adds later come last."""
    names = [n.removeprefix("tiny-") for n in tiny_models()]
    return [n for n in BUILD_ORDER if n in names] + [n for n in names if n not in BUILD_ORDER]


# -- prepare (CPU) ---------------------------------------------------------------------------
def prepare(root: Path) -> None:
    """The frames the run reads (lossless .npy and JPEG) and a 20-image 1280x720 frame
    dataset for the latency protocol; the wheels are bench/gpu_check.sh's part."""
    import numpy as np

    from bench_stages import jpeg_message, synthetic_frame
    from make_frames import make_frames

    root.mkdir(parents=True, exist_ok=True)
    for h, w in ((480, 640), FRAME):
        frame = synthetic_frame(h, w, seed=1)
        np.save(root / f"frame_{w}x{h}.npy", frame)
        (root / f"frame_{w}x{h}.jpg").write_bytes(jpeg_message(frame).data)
    make_frames(root / "frames720", size=FRAME, n_images=20)


# -- the report, with its budget -----------------------------------------------------------------
class Report:
    """Sections of results, written after every item (a killed run keeps what it measured)."""

    def __init__(self, out: Path, budget_s: float) -> None:
        self.out, self.t0, self.budget_s = out, time.perf_counter(), budget_s
        self.data: dict[str, Any] = {}
        self.markdown: dict[str, str] = {}
        self.spent: dict[str, float] = {}
        out.mkdir(parents=True, exist_ok=True)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def cap(self, name: str) -> float:
        """The section's seconds: its share, plus what the sections before it left unused."""
        total, used = 0.0, 0.0
        for section, share in SECTIONS:
            total += share * self.budget_s
            if section == name:
                return max(0.0, total - used)
            used += self.spent.get(section, 0.0)
        return max(0.0, self.budget_s - self.elapsed())

    def write(self) -> None:
        (self.out / "gpu_check.json").write_text(json.dumps(self.data, indent=1, default=str))
        (self.out / "gpu_check.md").write_text("\n".join(self.markdown.values()))

    def section(self, name: str, fn: Callable[[Section], str]) -> None:
        sec = Section(self, name, min(self.cap(name), max(0.0, self.budget_s - self.elapsed())))
        self.data[name] = sec.record
        try:
            text = fn(sec)
            sec.record["status"] = "done" if not sec.record["cut"] else "cut"
        except Exception as exc:  # noqa: BLE001 - recorded; the next section still runs
            sec.record.update(
                status="failed", error=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc()
            )
            text = f"FAILED: {type(exc).__name__}: {exc}"
        sec.record["seconds"] = round(time.perf_counter() - sec.t0, 1)
        self.spent[name] = sec.record["seconds"]
        cut = (
            f"\n\ncut ({sec.cap:.0f} s budget spent): {', '.join(sec.record['cut'])}"
            if sec.record["cut"]
            else ""
        )
        self.markdown[name] = f"## {name} ({sec.record['seconds']:.0f} s of {sec.cap:.0f} s)\n\n{text}{cut}\n"
        self.write()
        print(self.markdown[name], flush=True)


class Section:
    """One section's items: each runs only while the section has budget left."""

    def __init__(self, report: Report, name: str, cap: float) -> None:
        self.report, self.name, self.cap, self.t0 = report, name, cap, time.perf_counter()
        self.record: dict[str, Any] = {"status": "running", "budget_s": round(cap, 1), "rows": [], "cut": []}

    def left(self) -> float:
        return self.cap - (time.perf_counter() - self.t0)

    def items(self, labels: list[Any]) -> Iterator[Any]:
        """The labels whose turn comes while budget is left; the others are recorded as cut."""
        for i, label in enumerate(labels):
            if self.left() <= 0:
                self.record["cut"] += [str(x) for x in labels[i:]]
                return
            yield label

    def add(self, row: dict[str, Any]) -> None:
        self.record["rows"].append(row)
        self.report.write()

    def guarded(self, label: str, fn: Callable[[], dict[str, Any]]) -> None:
        """One item: its row, or its error as the row (the next item still runs)."""
        try:
            row = fn()
        except Exception as exc:  # noqa: BLE001 - recorded per item
            row = {"item": label, "error": f"{type(exc).__name__}: {exc}"}
        self.add(row)


def environment(device: str) -> dict[str, Any]:
    import torch
    import torchvision

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cuda_available": torch.cuda.is_available(),
        "device": device,
        "cpus": os.cpu_count(),
    }
    if device.startswith("cuda"):
        info["gpu"], info["cuda"] = torch.cuda.get_device_name(torch.device(device)), torch.version.cuda
    for mod in ("transformers", "ultralytics", "onnxruntime", "tensorrt"):
        try:
            info[mod] = __import__(mod).__version__
        except ImportError:
            info[mod] = None
    from probench.models.spec import RUNTIMES

    info["runtimes_in_tree"] = list(RUNTIMES)
    return info


# -- the sections ----------------------------------------------------------------------------
def ultralytics_section(sec: Section, device: str, precision: str, models: list[str], dry_run: bool) -> str:
    """The YOLOE model's stage row on a noise frame (post/fwd, launches, syncs), and each
    model's per-frame cost in the adapter's layout against NCHW."""
    from bench_stages import bench_model, targets
    from bench_stages import table as stage_table

    lines = []
    for name in sec.items([m for m in models if "yoloe" in m][:1]):
        sec.guarded(
            name,
            lambda n=name: bench_model(
                n,
                (FRAME[0] // 2, FRAME[1] // 2) if dry_run else FRAME,  # the dry run: the code path, cheaper
                device=device,
                precision=precision,
                runtime="torch",
                random_weights=not n.startswith("tiny-"),
                runs=1 if dry_run else 10,
                warmup=1,
                stream=1 if dry_run else 3,
                noise=True,
            ),
        )
        rows = [r for r in sec.record["rows"] if "model" in r]
        lines += [stage_table(rows), "", *targets(rows)]
    layout_rows = []
    for model in sec.items(models[:1] if dry_run else models):  # the dry run: the code path once
        sec.guarded(model, lambda m=model: layouts(m, device, precision, not m.startswith("tiny-"), dry_run))
        layout_rows.append(sec.record["rows"][-1])
    lines += [
        "",
        "| model | layout | launches/frame | kernel ms/frame | wall ms/frame |",
        "|---|---|---|---|---|",
    ]
    for r in layout_rows:
        for lay in r.get("layouts", []):
            lines.append(
                f"| {r['model']} | {lay['layout']} | {lay['launches']:.0f} | {_fmt(lay['kernel_ms'])} | "
                f"{lay['wall_ms']:.2f} |"
            )
        if "error" in r:
            lines.append(f"| {r['item']} | FAILED: {r['error']} | | | |")
    return "\n".join(lines)


def layouts(name: str, device: str, precision: str, random_weights: bool, dry_run: bool) -> dict[str, Any]:
    """The adapter's layout (channels-last where it uses it) against NCHW: per frame
    launches, kernel time and wall time of ``detect``."""
    import numpy as np
    import torch

    from bench_stages import noise_frame
    from op_count import count_ops
    from probench.models.zoo import load_detector

    det = load_detector(name, device=device, precision=precision, random_weights=random_weights)
    frame = noise_frame(*FRAME)
    det.set_prompts(PROMPTS)
    out = []
    for layout in ("adapter", "nchw"):
        if layout == "nchw":
            det.net.to(memory_format=torch.contiguous_format)
        for _ in range(1 if dry_run else 3):
            det.detect(frame)
        counts = count_ops(lambda: det.detect(frame), device=device, calls=1 if dry_run else 3)
        walls = [_wall(lambda: det.detect(frame), device) for _ in range(2 if dry_run else 10)]
        channels_last = next(det.net.parameters()).is_contiguous(memory_format=torch.channels_last)
        out.append(
            {
                "layout": f"{layout} ({'channels-last' if channels_last else 'NCHW'})",
                "launches": counts["launches"],
                "kernel_ms": counts["kernel_ms"],
                "wall_ms": float(np.median(walls)),
            }
        )
    return {"model": name, "precision": precision, "layouts": out}


def _wall(fn: Callable[[], Any], device: str) -> float:
    import torch

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1000.0


def parity_section(sec: Section, root: Path, device: str, precisions: list[str], models: list[str]) -> str:
    import numpy as np

    from gpu_parity import check_model, strict_fp32
    from probench.models.zoo import load_detector

    if device.startswith("cuda"):
        strict_fp32()  # fp32 is compared without TF32 (fp16 is unaffected)
    frame = np.load(root / "frame_640x480.npy")
    for name in sec.items(models):
        try:
            rows = check_model(
                lambda d, q, n=name: load_detector(n, device=d, precision=q),
                name,
                device,
                precisions,
                frame,
                PROMPTS,
            )
        except Exception as exc:  # noqa: BLE001 - recorded per model
            rows = [{"item": name, "error": f"{type(exc).__name__}: {exc}"}]
        for row in rows:
            sec.add(row)
    lines = [
        "| model | precision | network calls | preprocessed max abs / rel | raw outputs max abs / rel "
        "(worst tensor) | tolerance (rel) | CPU's own fp16 rel | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sec.record["rows"]:
        if "error" in r:
            lines.append(f"| {r['item']} | | | | FAILED: {r['error']} | | | FAIL |")
            continue
        verdict = "pass" if r["passed"] else "FAIL"
        if r.get("fp16_limited"):
            verdict = "pass (fp16-limited: within 4x the CPU's fp16)"
        own = r.get("cpu_fp16_max_rel")
        lines.append(
            f"| {r['model']} | {r['precision']} | {', '.join(r['calls'])} | {r['pre_max_abs']:.2e} / "
            f"{r['pre_max_rel']:.2e} | {r['raw_max_abs']:.2e} / {r['raw_max_rel']:.2e} ({r['raw_worst']}) | "
            f"{r['tolerance']:g} | {'-' if own is None else f'{own:.2e}'} | {verdict} |"
        )
    return "\n".join(lines)


def decode_section(sec: Section, root: Path, device: str, repeats: int) -> str:
    from types import SimpleNamespace

    import numpy as np

    from probench.msgs.images import compressed_to_device

    lines = ["| frame | decode ms | max diff to the CPU frame |", "|---|---|---|"]
    for jpg in sec.items(sorted(root.glob("frame_*.jpg"))):
        msg = SimpleNamespace(format="jpeg", data=jpg.read_bytes())
        ref = compressed_to_device(msg, "cpu")
        out = compressed_to_device(msg, device)
        ms = float(
            np.median([_wall(lambda m=msg: compressed_to_device(m, device), device) for _ in range(repeats)])
        )
        got = out.cpu().numpy() if hasattr(out, "cpu") else out
        diff = int(np.abs(got.astype(int) - ref).max())
        sec.add({"frame": jpg.stem, "ms": ms, "max_diff": diff})
        lines.append(f"| {jpg.stem} | {ms:.2f} | {diff} |")
    return "\n".join(lines)


def policy_section(sec: Section, root: Path, device: str, tiny: list[str], dry_run: bool) -> str:
    """Per model, each prompt policy's per-frame latency over as_typed (bench_prompt_policy.py)."""
    import numpy as np

    from bench_prompt_policy import bench_one, table

    image = np.load(root / "frame_640x480.npy")
    for name, rw in sec.items([(n, False) for n in tiny]):
        sec.guarded(
            name,
            lambda n=name, r=rw: bench_one(n, r, image, 1 if dry_run else 3, 1 if dry_run else 5, device),
        )
    return table([r for r in sec.record["rows"] if "error" not in r])


def run(
    root: Path,
    out: Path,
    *,
    dry_run: bool,
    budget_s: float,
    models: list[str] | None = None,
    runtimes: tuple[str, ...] = OTHER_RUNTIMES,
) -> int:
    """Every section; ``models`` (tiny names) and ``runtimes`` (besides eager) narrow a dry
    run further (the test's)."""
    if not (root / "frames720").is_dir():
        print(f"{root}: no frames720; run `bench/gpu_check.sh prepare` first", file=sys.stderr)
        return 2
    import torch

    device = "cpu" if dry_run else "cuda"
    if not dry_run and not torch.cuda.is_available():
        print("no CUDA device here; use --dry-run for the CPU rehearsal", file=sys.stderr)
        return 2
    # the dry run: CUDA's fp16 cells run as fp32 (fp16 needs CUDA), tiny models stand in for real ones
    fast, precisions = ("fp32", ["fp32"]) if dry_run else ("fp16", ["fp32", "fp16"])
    t = "tiny-" if dry_run else ""  # the dry run's stand-ins for real-size models
    tiny = models or (["tiny-yolo-world-s", "tiny-owlvit"] if dry_run else tiny_models())
    real = models or (["tiny-yoloe-s", "tiny-owlvit"] if dry_run else real_models())
    protocol = DRY_PROTOCOL if dry_run else PROTOCOL
    report = Report(out, budget_s)
    # the cells' children's results and TensorRT's engines: not in OUT, whose files all come back
    work = Path(tempfile.mkdtemp(prefix="gpu_check-"))
    report.data["plan"] = {
        "dry_run": dry_run,
        "budget_s": budget_s,
        "protocol": protocol,
        "sections": SECTIONS,
    }
    env = environment(device)
    report.data["environment"] = env
    report.markdown["environment"] = (
        "## environment\n\n" + "\n".join(f"- {k}: {v}" for k, v in env.items()) + "\n"
    )
    report.write()
    ultra = [m for m in models if "yolo" in m] if models else [f"{t}yolo-world-s", f"{t}yoloe-s"]
    report.section("ultralytics", lambda s: ultralytics_section(s, device, fast, ultra, dry_run))
    report.section("parity", lambda s: parity_section(s, root, device, precisions, tiny))
    report.section(
        "real fp16 eager",
        lambda s: real_section(s, root, work, device, fast, ("torch",), real, protocol, dry_run),
    )
    eager = report.data["real fp16 eager"]["rows"]
    # the slowest first: they decide whether every configuration makes 30 Hz
    slowest = sorted(
        real,
        key=lambda m: (
            -next((r["p95_ms"] for r in eager if r.get("model") == m and r.get("p95_ms") is not None), 0.0)
        ),
    )
    report.section(
        "real fp16 compiled",
        lambda s: real_section(
            s,
            root,
            out,
            device,
            fast,
            tuple(r for r in runtimes if r == "compiled"),
            slowest[:1] if dry_run and not models else slowest,
            protocol,
            dry_run,
        ),
    )
    report.section(
        "real fp16 onnxruntime/tensorrt",
        lambda s: real_section(
            s,
            root,
            work,
            device,
            fast,
            tuple(r for r in runtimes if r != "compiled"),
            real,
            protocol,
            dry_run,
        ),
    )
    rows = [
        r
        for k in ("real fp16 eager", "real fp16 compiled", "real fp16 onnxruntime/tensorrt")
        for r in report.data[k]["rows"]
    ]
    goal_rows = goals(rows, real, fast)
    report.data["goals"] = goal_rows
    report.markdown["goals"] = f"## goals (compiled, {fast})\n\n{goal_lines(goal_rows)}\n"
    report.write()
    report.section(
        "real fp32 eager",
        lambda s: real_section(s, root, work, device, "fp32", ("torch",), real, protocol, dry_run),
    )
    report.section("decode", lambda s: decode_section(s, root, device, 3 if dry_run else 20))
    report.section("prompt policies over as_typed", lambda s: policy_section(s, root, device, tiny, dry_run))
    failed = [k for k, v in report.data.items() if isinstance(v, dict) and v.get("status") == "failed"]
    cut = [k for k, v in report.data.items() if isinstance(v, dict) and v.get("cut")]
    print(
        f"gpu check done in {report.elapsed():.0f} s; failed sections: {failed or 'none'}; "
        f"sections with cut items: {cut or 'none'}"
    )
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare", help="the frames and the frame dataset (here, on the CPU)")
    p.add_argument("dir")
    r = sub.add_parser("run", help="the measurements (on the CUDA machine)")
    r.add_argument("dir")
    r.add_argument("out")
    r.add_argument("--dry-run", action="store_true", help="CPU rehearsal: every section, CUDA calls skipped")
    r.add_argument("--budget", type=float, default=420.0, help="seconds the sections may take together")
    r.add_argument(
        "--models", default=None, help="comma-separated tiny models for every section (a dry run's)"
    )
    r.add_argument(
        "--runtimes",
        default=",".join(OTHER_RUNTIMES),
        help="runtimes measured besides eager (default: %(default)s)",
    )
    args = ap.parse_args(argv)
    if args.step == "prepare":
        prepare(Path(args.dir))
        print(f"prepared {args.dir}")
        return 0
    models = [m.strip() for m in args.models.split(",")] if args.models else None
    runtimes = tuple(r.strip() for r in args.runtimes.split(",") if r.strip())
    return run(
        Path(args.dir),
        Path(args.out),
        dry_run=args.dry_run,
        budget_s=args.budget,
        models=models,
        runtimes=runtimes,
    )


if __name__ == "__main__":
    raise SystemExit(main())
