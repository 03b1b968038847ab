"""COCO average precision per query, area range and IoU threshold, computed by hotcoco (a
Rust evaluator whose precision arrays are pycocotools' bit for bit).

The suite's AP is pycocotools' ``evaluate()`` + ``accumulate()`` on the label-space pairs:
probench gives hotcoco its ground-truth tables (:class:`~probench.scoring.tables.GroundTruth`)
as columns, and each formulation's predictions inside the label spaces in their given order
(hotcoco sorts them by score, stably, and keeps 100 per image and query, as pycocotools
does). Images and queries are numbered by their index (+1) in the tables. A query's AP is
the mean of its precision at the 101 recall points, -1 where it has no non-ignored ground
truth (pycocotools' convention). The per-domain breakdown is the same evaluation with each
(domain, query) a category of its own.

The matching that PCR, PLC, the curves and the bootstrap read, per detection and per GT,
is probench's own (:mod:`probench.scoring.match`; hotcoco's per-image records are Python
dicts, slow to read back).
"""

from __future__ import annotations

import contextlib
import io
from typing import TYPE_CHECKING

import numpy as np

from probench.data.dataset import Dataset
from probench.scoring.constants import AREA_RANGES, MAX_DETS, REC_THRS
from probench.scoring.errors import ScoringError
from probench.scoring.match import n_positive
from probench.scoring.tables import DetArrays, GroundTruth

if TYPE_CHECKING:
    import hotcoco


class CocoAP:
    """hotcoco's evaluation over one dataset's ground truth, for any formulation's predictions."""

    def __init__(self, gt: GroundTruth) -> None:
        self.gt = gt
        self._coco: dict[bool, hotcoco.COCO] = {}

    @classmethod
    def of(cls, dataset: Dataset | GroundTruth | CocoAP) -> CocoAP:
        """The evaluation over a dataset's tables (built here), over tables already built, or
        the evaluation given (so its hotcoco ground truth is shared)."""
        if isinstance(dataset, CocoAP):
            return dataset
        return cls(dataset if isinstance(dataset, GroundTruth) else GroundTruth.from_dataset(dataset))

    def ground_truth(self, by_domain: bool = False) -> hotcoco.COCO:
        """The ground truth as a hotcoco dataset, its categories the queries (or the (domain,
        query) keys)."""
        if by_domain not in self._coco:
            from hotcoco import COCO

            gt, n_keys = self.gt, self._n_keys(by_domain)
            images = [{"id": i + 1, "width": 1, "height": 1} for i in range(len(gt.image_ids))]
            categories = [{"id": k + 1, "name": str(k + 1)} for k in range(n_keys)]
            with contextlib.redirect_stdout(io.StringIO()):
                self._coco[by_domain] = COCO.from_arrays(
                    images, categories, gt.gt_image + 1, self._gt_key(by_domain) + 1, gt.gt_box,
                    ids=np.arange(1, len(gt.gt_pair) + 1), area=gt.gt_area,
                    iscrowd=gt.gt_crowd.astype(np.int64),
                )  # fmt: skip
        return self._coco[by_domain]

    def _n_keys(self, by_domain: bool) -> int:
        return self.gt.n_queries * (len(self.gt.domains) if by_domain else 1)

    def _gt_key(self, by_domain: bool) -> np.ndarray:
        gt = self.gt
        if not by_domain:
            return gt.gt_query
        key: np.ndarray = gt.image_domain[gt.gt_image] * gt.n_queries + gt.gt_query
        return key

    def average_precision(
        self, dets: DetArrays, pair: np.ndarray, areas: tuple[str, ...], thresholds: np.ndarray, *,
        by_domain: bool = False,
    ) -> np.ndarray:  # fmt: skip
        """AP (keys, areas, thresholds) of the predictions ``dets`` whose label-space pair
        is ``pair`` (-1: outside every pair, not evaluated); keys are the queries, or the
        (domain, query) pairs (domain-major) with ``by_domain``."""
        gt = self.gt
        n_keys = self._n_keys(by_domain)
        ap = np.full((n_keys, len(areas), len(thresholds)), -1.0)
        rows = self.results(dets, pair, by_domain)
        if not len(rows):  # nothing predicted: every precision read of a key with GT is 0
            ap[n_positive(gt, areas, self._gt_key(by_domain), n_keys) > 0] = 0.0
            return ap
        precision = _precision(self.ground_truth(by_domain), rows, areas, thresholds)  # (T, R, K, A)
        # (K, A, T, R), the recall points contiguous: each sum in the same order whatever the
        # number of areas (numpy sums a strided axis in another order)
        by_point = np.ascontiguousarray(precision.transpose(2, 3, 0, 1))
        counted = by_point[..., 0] > -1
        ap[:] = np.where(counted, by_point.sum(axis=-1) / len(REC_THRS), -1.0)
        return ap

    def results(self, dets: DetArrays, pair: np.ndarray, by_domain: bool = False) -> np.ndarray:
        """The predictions inside the label spaces (``pair`` >= 0), in their given order, as
        the (N, 7) rows hotcoco's ``load_res`` reads: image, x, y, w, h, score, category."""
        inside = np.flatnonzero(pair >= 0)
        p = pair[inside]
        det_image, det_query = self.gt.pair_image[p], self.gt.pair_query[p]
        det_key = self.gt.image_domain[det_image] * self.gt.n_queries + det_query if by_domain else det_query
        columns = [det_image + 1, dets.box[inside], dets.score[inside], det_key + 1]
        return np.column_stack(columns).astype(np.float64).reshape(-1, 7)


def mean_ap(ap: np.ndarray) -> np.ndarray:
    """Mean over queries with ground truth, per column; NaN where no query has any."""
    valid = ap > -1
    cnt = valid.sum(axis=0)
    tot = np.where(valid, ap, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)


def _precision(
    coco: hotcoco.COCO, rows: np.ndarray, areas: tuple[str, ...], thresholds: np.ndarray
) -> np.ndarray:
    """hotcoco's ``accumulate()`` precision (T, R, K, A) at ``maxDets`` 100."""
    from hotcoco import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        ev = COCOeval(coco, coco.load_res(rows), "bbox")
        params = ev.params
        params.iou_thrs = [float(t) for t in thresholds]
        params.max_dets = [MAX_DETS]
        params.area_rng = [list(AREA_RANGES[a]) for a in areas]
        params.area_rng_lbl = list(areas)
        ev.params = params
        ev.evaluate()
        ev.accumulate()
    result = ev.eval
    if result is None:  # accumulate() always sets it; a hotcoco that did not is a broken install
        raise ScoringError("hotcoco's accumulate() gave no precision array")
    precision: np.ndarray = np.asarray(result["precision"])[..., 0]
    return precision
