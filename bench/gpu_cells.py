"""The real-size cells of the GPU check (bench/gpu_check.py): one configuration under one
runtime and precision, measured under the paper's latency protocol cut to fit, with its GPU
kernel time; and the issue's goals, pass or fail, from the cells.

A cell is ``probench.models.latency``'s protocol (each image with its own prompt set,
warm-up, timed passes; ``measure_latency``), then a ``torch.profiler`` pass over a few of
the same frames for the GPU kernel time and launches per frame (``bench/op_count.py``).
Eager cells run in the check's process; the other runtimes' in a child process
(``python bench/gpu_cells.py NAME RUNTIME PRECISION DEVICE ROOT RESULT PROTOCOL ENGINES``)
with a time limit, so a compile or an export that hangs or crashes costs its cell only.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # op_count

BUDGET_P95_MS = 1000.0 / 30  # 30 Hz
WALL_OVER_KERNEL_MAX = 1.5
SPEEDUP_MIN, LAUNCH_BOUND = 2.0, 2.0  # >= 2x over eager where eager's wall / kernel >= 2
CHILD_MIN_S = 30.0  # a child cell's time limit: a third of its section's time left, at least this


@functools.lru_cache(maxsize=2)
def workload(root: Path, n_images: int) -> list[tuple[int, Any, list[str]]]:
    from probench.data.dataset import load_dataset
    from probench.models.latency import latency_subset, load_workload

    dataset = load_dataset(root / "frames720")
    return load_workload(dataset, latency_subset(dataset, n_images))


def measure_cell(
    name: str,
    runtime: str,
    precision: str,
    device: str,
    root: Path,
    protocol: dict[str, int],
    engine_dir: Path,
) -> dict[str, Any]:
    """One configuration under one runtime: build, the latency protocol, the kernel profile."""
    from op_count import count_ops
    from probench.models.latency import cuda_sync, measure_latency, summarize
    from probench.models.zoo import load_detector

    work = workload(root, protocol["images"])
    t0 = time.perf_counter()
    kwargs: dict[str, Any] = {"engine_cache": str(engine_dir)} if runtime == "tensorrt" else {}
    det = load_detector(
        name,
        device=device,
        precision=precision,
        random_weights=not name.startswith("tiny-"),
        runtime=runtime,
        **kwargs,
    )
    build_s = time.perf_counter() - t0
    warmup_s = None
    if runtime == "compiled":  # its graphs for this frame size and 1..max prompts, as the node's warm-up
        t0 = time.perf_counter()
        _, first, _ = work[0]
        det.warmup(first.shape[:2], max(len(p) for _, _, p in work))
        warmup_s = round(time.perf_counter() - t0, 2)
    result = measure_latency(
        det, work, warmup=protocol["warmup"], runs=protocol["runs"], sync=cuda_sync(device)
    )
    stats = summarize(result.samples_ms)
    row = {
        "model": name,
        "runtime": runtime,
        "precision": precision,
        "build_s": round(build_s, 2),
        "warmup_s": warmup_s,
        "frames": len(result.samples_ms),
        "mean_ms": stats["mean"],
        "p95_ms": stats["p95"],
        "kernel_ms": None,
        "launches": None,
        "wall_over_kernel": None,
    }
    if device.startswith("cuda") or runtime == "torch":  # the CPU rehearsal profiles eager only

        def frames() -> None:
            for _, image, prompts in work[: protocol["profile_frames"]]:
                det.set_prompts(prompts)
                det.detect(image)

        counts = count_ops(frames, device=device, calls=1)
        n = min(protocol["profile_frames"], len(work))
        row["launches"] = counts["launches"] / n
        if counts["kernel_ms"]:
            row["kernel_ms"] = counts["kernel_ms"] / n
            row["wall_over_kernel"] = stats["mean"] / row["kernel_ms"]
    return row


def child_cell(
    name: str,
    runtime: str,
    precision: str,
    device: str,
    root: Path,
    protocol: dict[str, int],
    work: Path,
    timeout_s: float,
) -> dict[str, Any]:
    """:func:`measure_cell` in a child process that may take at most ``timeout_s``."""
    from probench.models.spec import RUNTIMES

    if runtime not in RUNTIMES:
        return {
            "model": name,
            "runtime": runtime,
            "precision": precision,
            "note": "not available in this tree",
        }
    result = work / f"cell-{name}-{runtime}-{precision}.json"
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        name,
        runtime,
        precision,
        device,
        str(root),
        str(result),
        json.dumps(protocol),
        str(work / "engines"),
    ]
    # its own process group: a cut also ends what it started (torch.compile's workers)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {
            "model": name,
            "runtime": runtime,
            "precision": precision,
            "note": f"cut: over its {timeout_s:.0f} s (the section's budget left)",
        }
    if result.is_file():
        row: dict[str, Any] = json.loads(result.read_text())
        return row
    tail = (stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return {"model": name, "runtime": runtime, "precision": precision, "error": tail[-300:]}


def cell_main(argv: list[str]) -> int:
    """The child of :func:`child_cell`: one cell, its row (or its one-line refusal) as JSON."""
    name, runtime, precision, device, root, result, protocol, engines = argv
    try:
        row = measure_cell(name, runtime, precision, device, Path(root), json.loads(protocol), Path(engines))
    except Exception as exc:  # noqa: BLE001 - a refusal (ProbenchError) or a failure: one line either way
        from probench.errors import ProbenchError

        kind = "refused" if isinstance(exc, ProbenchError) else "error"
        row = {
            "model": name,
            "runtime": runtime,
            "precision": precision,
            kind: f"{type(exc).__name__}: {exc}",
        }
    Path(result).write_text(json.dumps(row))
    return 0


def real_section(
    sec: Any,  # gpu_check.Section
    root: Path,
    work: Path,
    device: str,
    precision: str,
    runtimes: tuple[str, ...],
    models: list[str],
    protocol: dict[str, int],
    dry_run: bool,
) -> str:
    for name, runtime in sec.items([(m, r) for r in runtimes for m in models]):
        if runtime == "torch":  # eager: in this process (predictable, and it builds fastest)
            sec.guarded(
                f"{name} {runtime}",
                lambda n=name: measure_cell(n, "torch", precision, device, root, protocol, work / "engines"),
            )
        elif runtime == "tensorrt" and dry_run:
            sec.add(
                {"model": name, "runtime": runtime, "precision": precision, "note": "dry run: no TensorRT"}
            )
        else:
            # a third of what is left (30 s at least): one compile that hangs leaves time for others
            limit = min(max(sec.left(), 1.0), max(sec.left() / 3, CHILD_MIN_S))
            sec.add(child_cell(name, runtime, precision, device, root, protocol, work, limit))
    return cell_table(sec.record["rows"])


def _fmt(v: Any, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def cell_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| config | runtime | precision | build s | warm-up s | mean ms | p95 ms | GPU kernel ms/frame | "
        "launches/frame | wall / kernel | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        note = r.get("note") or r.get("refused") or r.get("error") or ""
        label = r.get("model", r.get("item", "?"))
        lines.append(
            f"| {label} | {r.get('runtime', '')} | {r.get('precision', '')} | {_fmt(r.get('build_s'), 1)} | "
            f"{_fmt(r.get('warmup_s'), 1)} | {_fmt(r.get('mean_ms'))} | {_fmt(r.get('p95_ms'))} | "
            f"{_fmt(r.get('kernel_ms'))} | "
            f"{_fmt(r.get('launches'), 0)} | {_fmt(r.get('wall_over_kernel'))} | {note} |"
        )
    return "\n".join(lines)


def goals(rows: list[dict[str, Any]], models: list[str], precision: str) -> list[dict[str, Any]]:
    """Per configuration, the issue's goals for the compiled runtime, pass / fail / not measured."""
    by = {(r.get("model"), r.get("runtime")): r for r in rows if r.get("precision") == precision}
    out = []
    for name in models:
        eager, comp = by.get((name, "torch")), by.get((name, "compiled"))
        g: dict[str, Any] = {"model": name}
        if not comp or comp.get("p95_ms") is None:
            g["verdict"] = "not measured: " + str(
                (comp or {}).get("note")
                or (comp or {}).get("error")
                or (comp or {}).get("refused")
                or "cut or not run"
            )
            out.append(g)
            continue
        g["p95_ok"] = comp["p95_ms"] <= BUDGET_P95_MS
        if comp.get("wall_over_kernel") is not None:
            g["wall_kernel_ok"] = comp["wall_over_kernel"] <= WALL_OVER_KERNEL_MAX
        if eager and eager.get("wall_over_kernel") is not None and eager["wall_over_kernel"] >= LAUNCH_BOUND:
            g["speedup"] = eager["mean_ms"] / comp["mean_ms"]
            g["speedup_ok"] = g["speedup"] >= SPEEDUP_MIN
        checks = [v for k, v in g.items() if k.endswith("_ok")]
        g["verdict"] = "PASS" if all(checks) else "FAIL"
        g.update(p95_ms=comp["p95_ms"], wall_over_kernel=comp.get("wall_over_kernel"))
        out.append(g)
    return out


def goal_lines(goal_rows: list[dict[str, Any]]) -> str:
    lines = []
    for g in goal_rows:
        if "p95_ok" not in g:
            lines.append(f"- {g['model']}: {g['verdict']}")
            continue
        parts = [f"p95 {g['p95_ms']:.1f} ms (<= {BUDGET_P95_MS:.1f}: {'pass' if g['p95_ok'] else 'FAIL'})"]
        if "wall_kernel_ok" in g:
            parts.append(
                f"wall / kernel {g['wall_over_kernel']:.2f} (<= {WALL_OVER_KERNEL_MAX:g}: "
                f"{'pass' if g['wall_kernel_ok'] else 'FAIL'})"
            )
        if "speedup_ok" in g:
            parts.append(
                f"{g['speedup']:.2f}x eager (>= {SPEEDUP_MIN:g}x: {'pass' if g['speedup_ok'] else 'FAIL'})"
            )
        lines.append(f"- {g['model']} compiled: {g['verdict']}: " + "; ".join(parts))
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(cell_main(sys.argv[1:]))
