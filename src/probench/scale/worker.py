"""What runs inside a Ray worker; plain classes and functions (``ray.remote`` wraps them in
the driver), so this module imports no Ray and tests can call them directly.

A worker never touches the run folder: it returns results and the driver writes them. It
needs no access to the dataset's files either: the driver ships each image's encoded bytes
with the work (a few hundred KB per image), and the worker decodes them with the same
decoder a single-process run uses. What a worker does need: probench installed, and the
model's weights (the local Hugging Face / ultralytics cache or ``--weights`` on a path
every node sees; docs/SCALE.md).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from probench.data.dataset import Dataset
from probench.data.errors import ImageDecodeError
from probench.data.images import decode_rgb
from probench.vocabulary import CocoResult

if TYPE_CHECKING:
    from ray import ObjectRef  # a name for the checker only: mypy skips ray (pyproject)

    from probench.cache.records import LatencyRecord
    from probench.models.base import Detector


@dataclass(frozen=True)
class ModelArgs:
    """How to build the model: the arguments of ``load_detector`` (and so of the run's model
    record, which the registry builds from the same arguments in every process)."""

    name: str
    device: str = "cpu"
    precision: str = "fp32"
    score_threshold: float = 0.0
    weights: str | None = None
    random_weights: bool = False
    runtime: str = "torch"
    preprocess: str = "device"

    def record(self) -> dict[str, object]:
        from probench.models.zoo import model_record

        return dict(model_record(self.name, weights=self.weights, random_weights=self.random_weights,
                                 runtime=self.runtime, preprocess=self.preprocess))  # fmt: skip

    def load(self) -> Detector:
        from probench.models.zoo import load_detector

        return load_detector(**asdict(self))


def read_encoded(dataset: Dataset, image_id: int) -> bytes:
    """The bytes of an image's file, as shipped to a worker."""
    path = dataset.image_path(image_id)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ImageDecodeError(f"{path}: cannot read the image file: {exc.strerror or exc}") from exc


def where_am_i() -> dict[str, Any]:
    """The host, node address and process of this worker (for run.json and the summary)."""
    try:
        import ray

        ip = ray.util.get_node_ip_address()
        gpu_ids = [str(g) for g in ray.get_gpu_ids()]
    except Exception:  # noqa: BLE001 - outside Ray (tests): no node address, no GPUs given
        ip, gpu_ids = "", []
    return {"host": socket.gethostname(), "ip": ip, "pid": os.getpid(), "gpu_ids": gpu_ids}


def _limit_threads(cpus: int | None) -> None:
    """A CPU worker uses the CPUs it reserved (Ray sets OMP_NUM_THREADS for it; torch, when
    the model imported it, is told too, in case it was initialised before)."""
    if cpus and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(cpus))


class InferWorker:
    """One model, loaded once; takes chunks of (formulation, images) and streams each
    image's COCO results back as soon as it is done.

    The dataset (its annotations) comes with the work as ``[ref]``: a Ray object reference
    wrapped in a list, so Ray does not resolve it on every call; the worker fetches it once
    (and again after a restart). Constructor arguments stay small and by value, which is
    what lets Ray restart a worker that died."""

    def __init__(self, model: ModelArgs, cpus: int | None = None) -> None:
        self.dataset: Dataset | None = None
        self._dataset_ref: ObjectRef | None = None
        self.error: BaseException | None = None
        t0 = time.perf_counter()
        try:
            self.detector = model.load()
            _limit_threads(cpus)
        except Exception as exc:  # noqa: BLE001 - given back by describe(), not a restart loop
            self.error = exc
        self.load_s = time.perf_counter() - t0

    def describe(self) -> dict[str, Any]:
        """Where this worker is and the model record it built; raises the load error."""
        if self.error is not None:
            raise self.error
        info = where_am_i()
        torch = sys.modules.get("torch")
        info.update(device=str(self.detector.device), load_s=round(self.load_s, 3),
                    model=dict(self.detector.model_info or {}),
                    torch_threads=torch.get_num_threads() if torch is not None else None)  # fmt: skip
        return info

    def _dataset(self, dataset: Dataset | list[ObjectRef]) -> Dataset:
        if isinstance(dataset, Dataset):
            return dataset
        ref = dataset[0]
        if self.dataset is None or ref != self._dataset_ref:
            import ray

            self.dataset, self._dataset_ref = ray.get(ref), ref
        return self.dataset

    def run_chunk(
        self, dataset: Dataset | list[ObjectRef], formulation: str, items: Sequence[tuple[int, bytes]]
    ) -> Iterator[tuple[int, list[CocoResult], float]]:
        """``(image_id, results, seconds)`` per image, in order, each as soon as it is done.
        ``dataset``: the dataset itself, or ``[ref]`` to it in Ray's object store."""
        from probench.models.infer import infer_image

        if self.error is not None:
            raise self.error
        ds = self._dataset(dataset)
        for image_id, data in items:
            t0 = time.perf_counter()
            rec = ds.images[image_id]
            image = decode_rgb(data, rec.file_name, declared=(rec.width, rec.height))
            results = infer_image(self.detector, ds, image_id, image, formulation)
            yield image_id, results, time.perf_counter() - t0


@dataclass
class ShippedDataset(Dataset):
    """A dataset whose images travel with it (encoded bytes): ``read_image`` decodes those,
    so code written for a dataset on disk runs unchanged on a worker of another host."""

    files: dict[int, bytes] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, dataset: Dataset, image_ids: Sequence[int]) -> ShippedDataset:
        base = {f.name: getattr(dataset, f.name) for f in fields(Dataset)}
        return cls(**base, files={int(i): read_encoded(dataset, i) for i in image_ids})

    def read_image(self, image_id: int) -> np.ndarray:
        data = self.files.get(image_id)
        if data is None:
            raise ImageDecodeError(f"image {image_id} was not shipped to this worker")
        rec = self.images[image_id]
        return decode_rgb(data, rec.file_name, declared=(rec.width, rec.height))


def latency_task(
    model: ModelArgs, dataset: ShippedDataset, *, n_images: int, warmup: int, runs: int
) -> tuple[LatencyRecord, dict[str, Any]]:
    """The paper's latency protocol (:func:`probench.models.latency.measure_record`) on this
    worker: latency.json's record (the driver writes the run folder) and where it ran."""
    from probench.models.latency import measure_record

    detector = model.load()
    record = measure_record(detector, dataset, n_images=n_images, warmup=warmup, runs=runs,
                            device=model.device, precision=model.precision, progress=False)
    return record, where_am_i()
