"""COCO's greedy one-to-one matching, vectorised across (image, query) pairs and thresholds.

pycocotools (``COCOeval.evaluateImg``) walks, per pair, the detections in descending score
order (stable, at most ``maxDets``) and gives each the unmatched ground truth of highest IoU
``>= t`` (IoU ties: the later GT), preferring non-ignored GT over ignored (crowd or out of
the area range) ones; crowd GT can absorb any number of detections. This module computes
exactly that, but:

- IoUs are computed once per (detection, GT) edge of a pair and reused by every threshold
  and area range;
- detections that reach no GT at the lowest threshold can never match and skip the loop;
- the remaining ("candidate") detections are processed rank by rank for all pairs,
  thresholds and area ranges at once, on padded ``(pairs, areas, thresholds, GT)`` blocks
  (pairs grouped by GT count so the padding stays small).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from probench.scoring.constants import AREA_RANGES, MAX_DETS
from probench.scoring.tables import DetArrays, GroundTruth

_BLOCK_ELEMS = 1 << 21  # elements of one (pairs, areas, thresholds, GT) work block


@dataclass
class Matched:
    """The kept detections of one formulation (sorted by pair, then score) and their fate."""

    det_pair: np.ndarray  # (N,)
    det_score: np.ndarray  # (N,)
    det_box: np.ndarray  # (N, 4)
    det_order: np.ndarray  # (N,) index in the given predictions (COCO's tie-break)
    det_rank: np.ndarray  # (N,) place in its pair's score order: 0 = the pair's first prediction
    tp: npt.NDArray[np.bool_]  # (N, A, T) bool: matched to a non-ignored GT
    # (N, A, T) bool: matched to an ignored GT, or unmatched and out of area range
    ignored: npt.NDArray[np.bool_]
    gt_match: np.ndarray  # (n_gt, A, T) int64: kept-detection index matched to each GT, -1 if none
    gt_ignored: np.ndarray  # (n_gt, A) bool
    n_given: int
    n_outside: int  # predictions outside every label-space pair (not evaluated)
    n_beyond_max: int  # predictions beyond maxDets for their pair
    areas: tuple[str, ...]  # the A columns
    thresholds: np.ndarray  # (T,) the T columns, ascending

    def column(self, area: str, threshold: float) -> tuple[int, int]:
        """The (area, threshold) column of the matching at IoU ``threshold`` (exactly one of
        the matched thresholds)."""
        t = int(np.searchsorted(self.thresholds, threshold))
        if area not in self.areas or t >= len(self.thresholds) or self.thresholds[t] != threshold:
            raise ValueError(f"no matching at area {area!r}, IoU {threshold}")
        return self.areas.index(area), t

    @property
    def fp(self) -> npt.NDArray[np.bool_]:
        return ~self.tp & ~self.ignored


def box_iou_edges(d: np.ndarray, g: np.ndarray, crowd: np.ndarray | None = None) -> np.ndarray:
    """IoU of row-aligned xywh boxes, with pycocotools' arithmetic (``bbIou`` in maskApi.c);
    for crowd GT the union is the detection's area."""
    w = np.minimum(d[:, 2] + d[:, 0], g[:, 2] + g[:, 0]) - np.maximum(d[:, 0], g[:, 0])
    h = np.minimum(d[:, 3] + d[:, 1], g[:, 3] + g[:, 1]) - np.maximum(d[:, 1], g[:, 1])
    inter = w * h
    da = d[:, 2] * d[:, 3]
    ga = g[:, 2] * g[:, 3]
    union = da + ga - inter
    if crowd is not None:
        union = np.where(crowd, da, union)
    ok = (w > 0) & (h > 0)
    out = np.zeros(len(d))
    out[ok] = inter[ok] / union[ok]
    return out


def _runs(sorted_keys: np.ndarray) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(start, length) of each run of equal values in a sorted array."""
    if len(sorted_keys) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    start = np.concatenate([[0], np.flatnonzero(np.diff(sorted_keys)) + 1])
    length = np.diff(np.concatenate([start, [len(sorted_keys)]]))
    return start.astype(np.int64), length.astype(np.int64)


def _rank_in_runs(sorted_keys: np.ndarray) -> np.ndarray:
    start, length = _runs(sorted_keys)
    return np.arange(len(sorted_keys)) - np.repeat(start, length)


def det_pairs(gt: GroundTruth, dets: DetArrays) -> np.ndarray:
    """Each prediction's label-space pair (index into ``gt.pair_keys``), -1 for one outside
    every pair (an unknown image or query, or a query not evaluated on its image)."""
    n_q = max(gt.n_queries, 1)
    img_pos = np.searchsorted(gt.image_ids, dets.image_id)
    q_pos = np.searchsorted(gt.query_ids, dets.query_id)
    ok = (img_pos < len(gt.image_ids)) & (q_pos < len(gt.query_ids))
    ok[ok] &= gt.image_ids[img_pos[ok]] == dets.image_id[ok]
    ok[ok] &= gt.query_ids[q_pos[ok]] == dets.query_id[ok]
    key = img_pos * n_q + q_pos
    pair = np.searchsorted(gt.pair_keys, key)
    ok[ok] &= pair[ok] < len(gt.pair_keys)
    ok[ok] &= gt.pair_keys[pair[ok]] == key[ok]
    return np.where(ok, pair, -1)


def gt_ignored(gt: GroundTruth, areas: tuple[str, ...]) -> np.ndarray:
    """(n_gt, A) bool: crowd, or out of the area range (inclusive bounds, as pycocotools)."""
    lo = np.array([AREA_RANGES[a][0] for a in areas])
    hi = np.array([AREA_RANGES[a][1] for a in areas])
    area = gt.gt_area[:, None]
    return gt.gt_crowd[:, None] | (area < lo) | (area > hi)


def n_positive(gt: GroundTruth, areas: tuple[str, ...], key: np.ndarray, n_keys: int) -> np.ndarray:
    """(n_keys, A): the non-ignored GT of each key (a GT's query, or its (domain, query)) per area range."""
    ignored = gt_ignored(gt, areas)
    cols = [np.bincount(key[~ignored[:, a]], minlength=n_keys) for a in range(len(areas))]
    return np.stack(cols, axis=1) if cols else np.zeros((n_keys, 0), np.int64)


def match(
    gt: GroundTruth, dets: DetArrays, areas: tuple[str, ...], thresholds: np.ndarray,
    pair: np.ndarray | None = None,
) -> Matched:  # fmt: skip
    """COCO's matching of ``dets`` at every (area range, threshold); ``pair`` is
    :func:`det_pairs` when the caller has it already."""
    n_given = len(dets)
    # 1. each prediction's pair (or none: outside the label spaces, not evaluated)
    pair = det_pairs(gt, dets) if pair is None else pair
    ok = pair >= 0
    sel = np.flatnonzero(ok)
    # 2. per pair, descending score, stable in the given order; keep maxDets
    sel = sel[np.lexsort((sel, -dets.score[sel], pair[sel]))]
    rank = _rank_in_runs(pair[sel])
    keep = rank < MAX_DETS
    sel = sel[keep]
    d_pair = pair[sel]
    d_box = dets.box[sel]
    d_score = dets.score[sel]
    n = len(sel)

    a_lo = np.array([AREA_RANGES[a][0] for a in areas])
    a_hi = np.array([AREA_RANGES[a][1] for a in areas])
    n_a, n_t = len(areas), len(thresholds)
    thr = np.minimum(thresholds, 1 - 1e-10)  # as pycocotools
    d_area = d_box[:, 2] * d_box[:, 3]
    d_out = (d_area[:, None] < a_lo) | (d_area[:, None] > a_hi)  # (N, A)
    gt_ig = gt_ignored(gt, areas)

    tp = np.zeros((n, n_a, n_t), dtype=bool)
    det_ig = np.repeat(d_out[:, :, None], n_t, axis=2)
    gt_match = np.full((len(gt.gt_pair), n_a, n_t), -1, dtype=np.int64)

    # 3. IoU edges (detection x GT of its pair)
    cnt = gt.pair_gt_count[d_pair]
    n_e = int(cnt.sum())
    e_det = np.repeat(np.arange(n), cnt)
    e_rank = np.arange(n_e) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    e_gt = np.repeat(gt.pair_gt_start[d_pair], cnt) + e_rank
    iou = box_iou_edges(d_box[e_det], gt.gt_box[e_gt], gt.gt_crowd[e_gt])
    reach = iou >= thr.min() if n_t else np.zeros(n_e, bool)
    cand = np.zeros(n, dtype=bool)
    cand[e_det[reach]] = True
    # 4. candidates only, grouped into padded blocks of pairs
    c_det = np.flatnonzero(cand)  # sorted by pair then score already
    c_pair = d_pair[c_det]
    c_rank = _rank_in_runs(c_pair)
    c_start, n_cand = _runs(c_pair)  # c_pair is sorted: its runs are its unique values
    pairs = c_pair[c_start]
    g_cnt = gt.pair_gt_count[pairs]
    # group by GT count, most candidates first inside a group (so active pairs are a prefix)
    porder = np.lexsort((-n_cand, g_cnt))
    pairs, n_cand, g_cnt = pairs[porder], n_cand[porder], g_cnt[porder]
    # blocks: consecutive pairs with the same GT count, sized to bound the work arrays
    n_pairs_all = len(gt.pair_keys)
    pair_block = np.full(n_pairs_all, -1, np.int64)
    pair_pos = np.full(n_pairs_all, -1, np.int64)
    blocks: list[tuple[int, int, int]] = []
    start = 0
    while start < len(pairs):
        g_max = int(g_cnt[start])
        width = max(1, _BLOCK_ELEMS // (n_a * max(n_t, 1) * g_max))
        stop = min(len(pairs), start + width)
        stop = start + int(np.searchsorted(g_cnt[start:stop], g_max, side="right"))
        pair_block[pairs[start:stop]] = len(blocks)
        pair_pos[pairs[start:stop]] = np.arange(stop - start)
        blocks.append((start, stop, g_max))
        start = stop
    # candidate detections and their IoU edges, sorted by block
    c_block = pair_block[c_pair]
    c_sort = np.argsort(c_block, kind="stable")
    c_bounds = np.searchsorted(c_block[c_sort], np.arange(len(blocks) + 1))
    e_sel = np.flatnonzero(reach & cand[e_det])
    e_block = pair_block[d_pair[e_det[e_sel]]]
    e_sort = e_sel[np.argsort(e_block, kind="stable")]
    e_bounds = np.searchsorted(np.sort(e_block), np.arange(len(blocks) + 1))
    cand_rank = np.full(n, -1, np.int64)
    cand_rank[c_det] = c_rank
    for b, (start, stop, g_max) in enumerate(blocks):
        cs = c_sort[c_bounds[b] : c_bounds[b + 1]]
        es = e_sort[e_bounds[b] : e_bounds[b + 1]]
        dets_b = c_det[cs]
        edges = (pair_pos[d_pair[e_det[es]]], cand_rank[e_det[es]], e_rank[es], iou[es])
        _match_block(
            gt, pairs[start:stop], n_cand[start:stop], g_max, dets_b, pair_pos[d_pair[dets_b]],
            cand_rank[dets_b], edges, gt_ig, thr, tp, det_ig, gt_match,
        )  # fmt: skip
    return Matched(
        det_pair=d_pair,
        det_score=d_score,
        det_box=d_box,
        det_order=sel,
        det_rank=rank[keep],
        tp=tp,
        ignored=det_ig,
        gt_match=gt_match,
        gt_ignored=gt_ig,
        n_given=n_given,
        n_outside=int(n_given - ok.sum()),
        n_beyond_max=int((~keep).sum()),
        areas=areas,
        thresholds=np.asarray(thresholds),
    )


# IoU edges of a block: (pair position, detection rank, GT rank, IoU), one entry per edge
Edges = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _match_block(gt: GroundTruth, pairs: np.ndarray, n_cand: np.ndarray, g_n: int, dets: np.ndarray,
                 det_pos: np.ndarray, det_rank: np.ndarray, edges: Edges, gt_ig: np.ndarray, thr: np.ndarray,
                 tp: np.ndarray, det_ig: np.ndarray, gt_match: np.ndarray) -> None:  # fmt: skip
    """Greedy matching of one block of pairs that all have ``g_n`` GT, most candidates first."""
    n_p = len(pairs)
    d_max = int(n_cand.max())
    n_a, n_t = gt_ig.shape[1], len(thr)
    det_lookup = np.full((n_p, d_max), -1, np.int64)
    det_lookup[det_pos, det_rank] = dets
    e_pos, e_drank, e_grank, e_iou = edges
    ious = np.full((n_p, d_max, g_n), -1.0)  # (pair, detection rank, GT); -1: below every threshold
    ious[e_pos, e_drank, e_grank] = e_iou
    g_rows = gt.pair_gt_start[pairs][:, None] + np.arange(g_n)  # (P, G)
    crowd = gt.gt_crowd[g_rows]  # (P, G)
    ig = np.transpose(gt_ig[g_rows], (0, 2, 1))  # (P, A, G)
    state = np.full((n_p, n_a, n_t, g_n), -1, np.int32)  # rank of the matched detection
    thr4 = thr[None, None, :, None]
    neg_cand = -n_cand
    for d in range(d_max):
        na = int(np.searchsorted(neg_cand, -d, side="left"))  # pairs with more than d candidates
        x = ious[:na, d][:, None, None, :]  # (na, 1, 1, G)
        hit = ((state[:na] < 0) | crowd[:na, None, None, :]) & (x >= thr4)
        reg = hit & ~ig[:na, :, None, :]
        use = np.where(reg.any(-1, keepdims=True), reg, hit)  # non-ignored GT first
        val = np.where(use, x, -2.0)
        g = g_n - 1 - np.argmax(val[..., ::-1], axis=-1)  # the last best GT, as pycocotools
        p_i, a_i, t_i = np.nonzero(use.any(-1))
        g_i = g[p_i, a_i, t_i]
        state[p_i, a_i, t_i, g_i] = d
        det = det_lookup[p_i, d]
        was_ig = ig[p_i, a_i, g_i]
        tp[det, a_i, t_i] = ~was_ig
        det_ig[det, a_i, t_i] = was_ig
    p_i, a_i, t_i, g_i = np.nonzero(state >= 0)
    gt_match[g_rows[p_i, g_i], a_i, t_i] = det_lookup[p_i, state[p_i, a_i, t_i, g_i]]
