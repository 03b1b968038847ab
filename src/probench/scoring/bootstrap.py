"""Paired bootstrap confidence intervals over images (docs/METRICS.md, "Confidence intervals").

A resample draws the dataset's images with replacement (the same draw for every
formulation, and for both runs of ``probench compare``: paired). An image drawn ``w``
times counts ``w`` times: its detections and its ground truth are weighted by ``w``. This
is exactly scoring the resampled dataset with the image duplicated (the matching is per
image, so copies match alike; copies tie in score and, adjacent in a query's ranking,
reach the same precision envelope), up to the tie order of equal scores across images.

Nothing is matched again: the per-image tables (each kept detection's query, image, rank
in its query's score order and true/false/ignored fate at each COCO IoU threshold, area
"all"; each target's recovery) are taken once from the suite's matching, and each
resample re-accumulates AP with numpy:

- rows that are a false positive at every threshold (most of them) are folded into
  per-(segment, image) counts, a segment being the rows between two others, so a
  resample's weighted row counts are one sparse product;
- per threshold, only the true-positive rows are walked: precision at the k-th one is its
  weighted true positives over the weighted rows (not ignored) up to it; the envelope is
  a segmented suffix maximum; each of the 101 recall points reads the first true positive
  reaching it, which gives AP as a sum over the true positives.

With every weight 1 the resample's values are the suite's point values (a test checks it
to 1e-9). Intervals are percentile intervals (2.5th and 97.5th percentiles by default).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from probench.cache.records import (
    DELTA_MAX,
    DELTA_ORIG_CAT,
    DELTA_TMPL_ORIG,
    MAP50,
    MAP50_95,
    MAP75,
    PCR_VARIANTS,
    Intervals,
    sample_name,
)
from probench.limits import MAX_RESAMPLES, MAX_SEED, MIN_RESAMPLES
from probench.scoring.consistency import Recovery, _mean_pairwise_iou
from probench.scoring.constants import COCO_IOUS, REC_THRS
from probench.scoring.errors import ScoringUsageError
from probench.scoring.match import Matched
from probench.scoring.tables import GroundTruth
from probench.vocabulary import FORMULATIONS

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
LEVEL = 0.95
SIGNIFICANT_SUPPORT = 0.95  # k* is significant when it is best in at least this share of resamples
_EPS = np.spacing(1)
I50 = int(np.flatnonzero(np.isclose(COCO_IOUS, 0.5))[0])
I75 = int(np.flatnonzero(np.isclose(COCO_IOUS, 0.75))[0])


class Evaluated(Protocol):
    """What the bootstrap reads of one formulation's evaluation (the suite's ``_Formulation``)."""

    m: Matched  # at area "all" and every COCO threshold
    det_query: np.ndarray
    det_image: np.ndarray

    def recovered(self) -> Recovery: ...


@dataclass
class _Block:
    """The rows and entries of a range of queries (so that a block's work arrays stay in cache)."""

    row_image: np.ndarray  # (R,) image of each special row
    row_starts: np.ndarray  # first special row of each query
    seg: Any  # scipy CSR (R x I): per special row, the always-false rows since the previous one, by image
    e_row: np.ndarray  # (E,) the entry's special row
    e_image: np.ndarray  # (E,)
    e_query: np.ndarray  # (E,)
    e_ign: np.ndarray  # (E,) the last ignored item of its group up to it (len(i_image): none)
    g_start: np.ndarray  # (G,) first entry of each (query, threshold) group
    g_ap: np.ndarray  # (G,) the group's place in the (T * Q) AP table: threshold * Q + query
    i_image: np.ndarray  # ignored items (a row ignored at a threshold: matched to crowd GT), by group
    i_starts: np.ndarray
    e_off: np.ndarray = field(init=False)  # (E, 1) the envelope's offset: 2 x groups to the block's end
    g_off: np.ndarray = field(init=False)  # (G,)
    g_last: np.ndarray = field(init=False)  # (G,) last entry of each group

    def __post_init__(self) -> None:
        ends = np.concatenate([self.g_start[1:], [len(self.e_row)]])
        self.g_off = 2.0 * np.arange(len(self.g_start), 0, -1, dtype=np.float64)
        self.e_off = np.repeat(self.g_off, ends - self.g_start)[:, None]
        self.g_last = ends - 1

    def group_ap(self, wt: np.ndarray, npos: np.ndarray) -> np.ndarray:
        """AP of every group of the block, (G, B), for image weights ``wt`` (I, B) and the
        weighted GT counts ``npos`` (Q, B; 0 replaced by 1: those queries are dropped)."""
        g_start = self.g_start
        # weighted rows up to each special row, in its query
        rows = np.asarray(self.seg @ wt)
        rows += wt[self.row_image]
        denom = _segmented_cumsum(rows, self.row_starts)[self.e_row]
        if len(self.i_image):  # less the ignored rows up to it
            ig = _segmented_cumsum(wt[self.i_image], self.i_starts)
            denom -= np.concatenate([ig, np.zeros((1, wt.shape[1]))])[self.e_ign]
        cum_tp = _segmented_cumsum(wt[self.e_image], g_start)
        denom += _EPS
        prec = np.divide(cum_tp, denom, out=denom)
        n_read = _reads_upto(cum_tp, npos[self.e_query])
        reads = cum_tp  # reused: recall points first read at each entry
        np.subtract(n_read[1:], n_read[:-1], out=reads[1:])
        reads[g_start] = n_read[g_start]
        # envelope: suffix maximum within each group (an offset of 2 per group keeps it inside)
        prec += self.e_off
        env = np.maximum.accumulate(prec[::-1], axis=0)[::-1]
        env *= reads
        total = np.add.reduceat(env, g_start, axis=0)
        total -= self.g_off[:, None] * n_read[self.g_last]
        return total / len(REC_THRS)


_BLOCK_ENTRIES = 4096  # entries of one block (a query with more is a block of its own)
_CHUNK_RESAMPLES = 16  # resamples per pass over the blocks
_THREADS = min(2, os.cpu_count() or 1)


@dataclass
class FormTable:
    """One formulation's per-image table, in its AP order (query, then descending score).

    *Special* rows are the kept detections that are a true positive or ignored at some
    COCO threshold (area "all"); every other row is a false positive at all of them and
    only counts, folded into per-image counts. *Entries* are the (threshold, special row)
    pairs where the row is a true positive, grouped by (query, threshold)."""

    n_images: int
    n_queries: int
    n_thresholds: int
    n_entries: int
    blocks: list[_Block]
    gt_count: Any  # scipy CSR (Q x I): non-ignored GT per query and image

    @classmethod
    def build(cls, gt: GroundTruth, ev: Evaluated) -> FormTable:
        from scipy.sparse import csr_matrix

        m = ev.m
        a = m.areas.index("all")
        cols = [m.column("all", float(t))[1] for t in COCO_IOUS]
        n_i, n_q, n_t = len(gt.image_ids), gt.n_queries, len(COCO_IOUS)
        o = np.lexsort((m.det_order, ev.det_image, -m.det_score, ev.det_query))
        tp = m.tp[o][:, a][:, cols]
        ign = m.ignored[o][:, a][:, cols]
        q, img = ev.det_query[o], ev.det_image[o]
        special = tp.any(axis=1) | ign.any(axis=1)
        s_idx = np.flatnonzero(special)
        # each always-false row belongs to the segment of the next special row of its query
        plain = np.flatnonzero(~special)
        nxt = np.searchsorted(s_idx, plain)
        ok = nxt < len(s_idx)
        ok[ok] &= q[s_idx[nxt[ok]]] == q[plain[ok]]
        seg = csr_matrix((np.ones(int(ok.sum())), (nxt[ok], img[plain[ok]])), shape=(len(s_idx), n_i))
        row_q, row_img = q[s_idx], img[s_idx]
        e_row, e_t = _by_group(tp[s_idx], row_q)
        i_row, i_t = _by_group(ign[s_idx], row_q)
        # per entry, the last ignored item of its (query, threshold) up to its row
        n_r = max(len(s_idx), 1)
        e_key = (row_q[e_row] * n_t + e_t) * n_r + e_row
        i_key = (row_q[i_row] * n_t + i_t) * n_r + i_row
        j = np.searchsorted(i_key, e_key, "right") - 1
        same = j >= 0
        same[same] = i_key[j[same]] // n_r == e_key[same] // n_r
        e_ign = np.where(same, j, -1)
        g_keep = ~m.gt_ignored[:, a]
        gt_count = csr_matrix(
            (np.ones(int(g_keep.sum())), (gt.gt_query[g_keep], gt.gt_image[g_keep])), shape=(n_q, n_i)
        )
        # blocks of whole queries
        e_q = row_q[e_row]
        per_q = np.bincount(e_q, minlength=n_q)
        cuts, acc = [0], 0
        for qi, n in enumerate(per_q.tolist()):
            if acc and acc + n > _BLOCK_ENTRIES:
                cuts.append(qi)
                acc = 0
            acc += n
        cuts.append(n_q)
        blocks = []
        for q0, q1 in pairwise(cuts):
            r0, r1 = np.searchsorted(row_q, [q0, q1])
            e0, e1 = np.searchsorted(e_q, [q0, q1])
            if e1 == e0:
                continue
            i0, i1 = np.searchsorted(row_q[i_row], [q0, q1])
            bq, bt, brow = e_q[e0:e1], e_t[e0:e1], e_row[e0:e1] - r0
            gk = bq * n_t + bt
            g_start = np.flatnonzero(np.concatenate([[True], gk[1:] != gk[:-1]]))
            ik = row_q[i_row[i0:i1]] * n_t + i_t[i0:i1]
            b_ign = e_ign[e0:e1]
            blocks.append(_Block(
                row_image=row_img[r0:r1], row_starts=np.unique(np.searchsorted(row_q[r0:r1], row_q[r0:r1])),
                seg=seg[r0:r1], e_row=brow, e_image=row_img[r0:r1][brow], e_query=bq,
                e_ign=np.where(b_ign >= 0, b_ign - i0, i1 - i0), g_start=g_start,
                g_ap=bt[g_start] * n_q + bq[g_start], i_image=row_img[i_row[i0:i1]],
                i_starts=np.flatnonzero(np.concatenate([[True], ik[1:] != ik[:-1]])) if i1 > i0 else ik,
            ))  # fmt: skip
        return cls(n_i, n_q, n_t, len(e_row), blocks, gt_count)

    def map_by_threshold(self, wt: np.ndarray) -> np.ndarray:
        """mAP at each COCO threshold for each resample: ``wt`` is (I, B) image weights;
        returns (T, B), NaN where no query has ground truth."""
        n_t, n_q, n_b = self.n_thresholds, self.n_queries, wt.shape[1]
        npos = np.asarray(self.gt_count @ wt)  # (Q, B)
        valid = npos > 0
        flat = np.zeros((n_t * n_q, n_b))
        npos_safe = np.where(valid, npos, 1.0)
        for block in self.blocks:
            flat[block.g_ap] = block.group_ap(wt, npos_safe)
        ap = flat.reshape(n_t, n_q, n_b)
        ap[:, ~valid] = 0.0
        cnt = valid.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(cnt > 0, ap.sum(axis=1) / np.maximum(cnt, 1), np.nan)


def _by_group(flags: np.ndarray, row_q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (row, threshold) pairs where ``flags`` (R, T) holds, ordered by (query, threshold, row)."""
    r, t = np.nonzero(flags)
    o = np.lexsort((r, t, row_q[r]))
    return r[o], t[o].astype(np.int64)


# j where pycocotools' recall point j (REC_THRS[j], a linspace value) exceeds the float j / 100:
# a recall k / n equal to j / 100 does not reach it
_POINT_ABOVE = np.arange(len(REC_THRS)) / 100.0 < REC_THRS


def _reads_upto(tp: np.ndarray, n_pos: np.ndarray) -> npt.NDArray[np.float64]:
    """How many of the 101 recall points are <= the recall ``tp / n_pos`` (integer-valued
    floats), deciding as pycocotools' float comparisons do: floor(100 tp / n_pos) + 1, less
    one where 100 tp / n_pos is exactly an integer j whose point lies above the float j / 100
    (the division of exact integers is exact there, and at least 1 / n_pos from an integer
    elsewhere)."""
    q = np.multiply(tp, 100.0)
    q /= n_pos
    out: npt.NDArray[np.float64] = np.floor(q)
    exact = np.flatnonzero(out == q)
    out += 1.0
    if len(exact):
        flat = out.reshape(-1)
        flat[exact] -= _POINT_ABOVE[(q.reshape(-1)[exact]).astype(np.intp)]
    return out


def _segmented_cumsum(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Cumulative sums along axis 0, restarting at each index of ``starts`` (sorted, first 0),
    in place: ``x`` is overwritten and returned."""
    if len(starts) > 1:
        totals = np.add.reduceat(x, starts, axis=0)
        x[starts[1:]] -= totals[:-1]  # the running sum restarts: the previous segment's total
    return np.cumsum(x, axis=0, out=x)


@dataclass
class Targets:
    """The PCR/PLC targets per image: every resample's PCR and PLC are weighted means."""

    image: np.ndarray  # (n,) image index of each target
    recovered: dict[str, np.ndarray]  # variant -> (n,) bool: recovered under every k in K_i
    plc_iou: np.ndarray  # (n,) mean pairwise IoU (NaN where not a PLC target)
    multi: np.ndarray  # (n,) bool: |K_i| >= 2


def targets_of(gt: GroundTruth, recovery: Mapping[str, Recovery]) -> Targets | None:
    """The per-target outcomes that PCR/PLC average (None when PCR is not computable: a
    formulation some target needs is missing, or there are no targets)."""
    targets = ~gt.gt_crowd & gt.query_coref[gt.gt_query].any(axis=1)
    k_need = gt.query_coref[gt.gt_query] & targets[:, None]
    missing = [i for i, f in enumerate(FORMULATIONS) if f not in recovery]
    if not targets.any() or k_need[:, missing].any():
        return None
    present = [f for f in FORMULATIONS if f in recovery]
    k_set = k_need[:, [FORMULATIONS.index(f) for f in present]]
    n_k = k_need.sum(axis=1)
    pair_iou = _mean_pairwise_iou(present, k_set, n_k, recovery)
    rec: dict[str, np.ndarray] = {}
    for name, attr in (("", "matched"), ("_top1", "top1")):
        got = np.stack([getattr(recovery[f], attr) for f in present], axis=1)
        rec[name] = (targets & np.all(got | ~k_set, axis=1))[targets]
    return Targets(gt.gt_image[targets], rec, pair_iou[targets], (n_k >= 2)[targets])


def _per_image(image: np.ndarray, values: np.ndarray, n_images: int) -> np.ndarray:
    return np.bincount(image, weights=values.astype(np.float64), minlength=n_images)


def target_metrics(t: Targets, wt: np.ndarray, n_images: int) -> dict[str, np.ndarray]:
    """pcr50, plc (and their top-1 variants) per resample: (B,) each, NaN where undefined."""
    out = {}
    n_tgt = _per_image(t.image, np.ones(len(t.image)), n_images) @ wt
    with np.errstate(invalid="ignore", divide="ignore"):
        for suffix, rec in t.recovered.items():
            pcr, _, plc, _ = PCR_VARIANTS[suffix]
            out[pcr] = (_per_image(t.image, rec, n_images) @ wt) / n_tgt
            sel = rec & t.multi
            iou = np.where(sel, np.nan_to_num(t.plc_iou), 0.0)
            out[plc] = (_per_image(t.image, iou, n_images) @ wt) / (
                _per_image(t.image, sel, n_images) @ wt
            )
    return out


def check_resamples(n_resamples: int, seed: int) -> None:
    """A :class:`ScoringUsageError` unless ``n_resamples`` is 0 (no intervals) or in
    ``MIN_RESAMPLES..MAX_RESAMPLES`` (limits.py: fewer leave a tail of the 95% interval without a
    resample) and ``seed`` in ``0..MAX_SEED``."""
    if n_resamples != 0 and not MIN_RESAMPLES <= n_resamples <= MAX_RESAMPLES:
        raise ScoringUsageError(f"{n_resamples} bootstrap resamples: use 0 (no intervals) or "
                                f"{MIN_RESAMPLES}..{MAX_RESAMPLES} (fewer than {MIN_RESAMPLES} leave a 2.5% "
                                "tail of the 95% interval without a single resample)")
    if not 0 <= seed <= MAX_SEED:
        raise ScoringUsageError(f"bootstrap seed {seed}: use 0..{MAX_SEED}")


def weights(n_images: int, n_resamples: int, seed: int) -> np.ndarray:
    """(B, I) image multiplicities of ``n_resamples`` seeded draws with replacement
    (:func:`check_resamples` first)."""
    check_resamples(n_resamples, seed)
    rng = np.random.default_rng(seed)
    if n_images == 0:
        return np.zeros((n_resamples, 0))
    return rng.multinomial(n_images, np.full(n_images, 1.0 / n_images), size=n_resamples).astype(np.float64)


def resample(
    tables: Mapping[str, FormTable], targets: Targets | None, w: np.ndarray
) -> dict[str, np.ndarray]:
    """Every bootstrapped metric, (B,) per key, for the weights ``w`` (B, I): ``<f>.map50``,
    ``<f>.map75``, ``<f>.map50_95`` per formulation, then (over the paper's formulations)
    the deltas, and PCR/PLC when ``targets``."""
    out: dict[str, np.ndarray] = {}
    any_table = next(iter(tables.values()), None)
    n_i = any_table.n_images if any_table else w.shape[1]
    chunk = _CHUNK_RESAMPLES
    for f, table in tables.items():
        parts = _map_chunks(table, w, chunk)
        m = np.concatenate(parts, axis=1) if parts else np.zeros((len(COCO_IOUS), 0))
        out[sample_name(f, MAP50)] = m[I50]
        out[sample_name(f, MAP75)] = m[I75]
        out[sample_name(f, MAP50_95)] = m.mean(axis=0)
    m50 = {f: out[sample_name(f, MAP50)] for f in FORMULATIONS if f in tables}
    if "orig" in m50 and "cat" in m50:
        out[DELTA_ORIG_CAT] = m50["orig"] - m50["cat"]
    if "orig" in m50 and "tmpl" in m50:
        out[DELTA_TMPL_ORIG] = m50["tmpl"] - m50["orig"]
    if len(m50) >= 2:
        stack = np.stack(list(m50.values()))
        out[DELTA_MAX] = stack.max(axis=0) - stack.min(axis=0)
    if targets is not None:
        out.update(target_metrics(targets, w.T, n_i))
    return out


def _map_chunks(table: FormTable, w: np.ndarray, chunk: int) -> list[np.ndarray]:
    """``table.map_by_threshold`` over the resamples in chunks, on up to two threads (numpy
    releases the GIL in its loops; every chunk is independent, so the result is the same)."""
    from concurrent.futures import ThreadPoolExecutor

    starts = range(0, w.shape[0], chunk)

    def run(b: int) -> np.ndarray:
        return table.map_by_threshold(np.ascontiguousarray(w[b : b + chunk].T))

    workers = min(_THREADS, len(starts))
    if workers <= 1:
        return [run(b) for b in starts]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(run, starts))


def interval(values: np.ndarray, level: float = LEVEL) -> list[float] | None:
    """The percentile interval of the finite values; None when there are none."""
    v = values[np.isfinite(values)]
    if len(v) == 0:
        return None
    lo, hi = np.percentile(v, [50 * (1 - level), 50 * (1 + level)])
    return [float(lo), float(hi)]


def best_support(samples: Mapping[str, np.ndarray], forms: Sequence[str]) -> dict[str, float]:
    """Per formulation, the share of resamples where its mAP.5 is the highest (ties to the
    first in orig, cat, tmpl, as k*; a resample where all are equal counts for none)."""
    stack = np.stack([samples[sample_name(f, MAP50)] for f in forms])
    stack = np.nan_to_num(stack, nan=-np.inf)
    best = np.argmax(stack, axis=0)
    all_tied = np.all(stack == stack[:1], axis=0)
    n = stack.shape[1]
    return {f: float(((best == i) & ~all_tied).sum() / n) if n else 0.0 for i, f in enumerate(forms)}


def summarize(
    samples: Mapping[str, np.ndarray], best: str | None, n_resamples: int, seed: int
) -> Intervals:
    """metrics.json's ``intervals``: [low, high] per metric, k*'s support."""
    by_formulation: dict[str, dict[str, list[float] | None]] = {}
    overall: dict[str, list[float] | None] = {}
    for key, v in samples.items():
        if "." in key:
            f, metric = key.split(".", 1)
            by_formulation.setdefault(f, {})[metric] = interval(v)
        else:
            overall[key] = interval(v)
    out = Intervals(method="paired percentile bootstrap over images", resamples=n_resamples, seed=seed,
                    level=LEVEL, by_formulation=by_formulation).updated(**overall)
    forms = [f for f in FORMULATIONS if sample_name(f, MAP50) in samples]
    if len(forms) >= 2:
        support = best_support(samples, forms)
        out = out.updated(formulation_support=support,
                          best_formulation_support=support.get(best) if best else None)
    return out


def tables_of(gt: GroundTruth, evals: Mapping[str, Evaluated]) -> dict[str, FormTable]:
    """The per-image tables of every evaluated formulation (built once)."""
    return {f: FormTable.build(gt, ev) for f, ev in evals.items()}


def intervals(
    gt: GroundTruth, evals: Mapping[str, Evaluated], best: str | None, n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED, *, w: np.ndarray | None = None,
) -> Intervals:
    """The ``intervals`` of metrics.json for the suite's evaluations; ``w``: the resamples'
    weights when the caller drew them already (:func:`weights` of the same count and seed),
    so that other metrics share them."""
    tables = tables_of(gt, evals)
    recovery = {f: ev.recovered() for f, ev in evals.items() if f in FORMULATIONS}
    tgt = targets_of(gt, recovery)
    samples = resample(tables, tgt, weights(len(gt.image_ids), n_resamples, seed) if w is None else w)
    return summarize(samples, best, n_resamples, seed)


def holds_zero(iv: object) -> bool:
    """Whether an interval [low, high] holds 0 (the difference is not significant)."""
    return isinstance(iv, list) and len(iv) == 2 and iv[0] <= 0.0 <= iv[1]
