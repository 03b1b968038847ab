"""The work of a distributed inference run as chunks of (formulation, images), with the
bookkeeping that makes each image's record exactly-once (pure Python: no Ray here).

The driver takes chunks in order (formulation by formulation, image ids ascending), hands
them to workers, records each image the first time its results come back and ignores any
later copy. When a worker dies mid-chunk, the images of that chunk not yet received go
back to the front of the queue; the image the worker was on (the first not received)
counts one attempt, so an image that keeps killing its worker stops the run instead of
looping forever.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from probench.scale.errors import WorkerLostError

MAX_CHUNK = 16  # images per chunk at most: a lost worker costs at most this much redone work
CHUNKS_PER_WORKER = 4  # at least this many chunks per worker, so the load stays balanced
MAX_ATTEMPTS = 3  # a worker dying on the same image this many times ends the run


@dataclass(frozen=True)
class Chunk:
    formulation: str
    image_ids: tuple[int, ...]


def default_chunk_size(n_images: int, n_workers: int) -> int:
    """Chunks small enough that every worker gets several, and at most ``MAX_CHUNK``."""
    if n_images <= 0:
        return 1
    return max(1, min(MAX_CHUNK, math.ceil(n_images / (max(1, n_workers) * CHUNKS_PER_WORKER))))


class WorkPlan:
    """What is left to do. ``todo`` maps each formulation (in run order) to its image ids."""

    def __init__(
        self, todo: Mapping[str, Sequence[int]], chunk_size: int, *, max_attempts: int = MAX_ATTEMPTS
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk size must be >= 1, got {chunk_size}")
        self.chunk_size = chunk_size
        self.max_attempts = max_attempts
        self._queue: deque[Chunk] = deque()
        self._left: dict[str, set[int]] = {}
        for formulation, image_ids in todo.items():
            ids = sorted(set(int(i) for i in image_ids))
            self._left[formulation] = set(ids)
            for k in range(0, len(ids), chunk_size):
                self._queue.append(Chunk(formulation, tuple(ids[k:k + chunk_size])))
        self._attempts: Counter[tuple[str, int]] = Counter()
        self.retried_images = 0  # images handed out again after their worker died

    @property
    def done(self) -> bool:
        return not any(self._left.values())

    @property
    def remaining(self) -> int:
        return sum(len(v) for v in self._left.values())

    def formulation_done(self, formulation: str) -> bool:
        return not self._left.get(formulation)

    def next_chunk(self) -> Chunk | None:
        """The next chunk to hand out, or None when everything is handed out."""
        while self._queue:
            chunk = self._queue.popleft()
            left = self._left[chunk.formulation]
            ids = tuple(i for i in chunk.image_ids if i in left)  # recorded meanwhile: not redone
            if ids:
                return Chunk(chunk.formulation, ids)
        return None

    def record(self, formulation: str, image_id: int) -> bool:
        """True the first time an image's results arrive (write them), False for a copy."""
        left = self._left.get(formulation)
        if left is None or image_id not in left:
            return False
        left.remove(image_id)
        return True

    def give_back(
        self, chunk: Chunk, received: Iterable[int], where: str = "a worker", *, charge: bool = True
    ) -> None:
        """A worker died with ``chunk`` handed to it, after sending ``received``: queue the
        rest again (first in line). ``charge``: the worker was working on this chunk (not
        merely holding it in its queue), so the first image not received counts one attempt;
        :class:`WorkerLostError` when that image has now been on ``max_attempts`` deaths."""
        got = set(received)
        left = self._left[chunk.formulation]
        rest = tuple(i for i in chunk.image_ids if i not in got and i in left)
        if not rest:
            return
        self.retried_images += len(rest)
        self._queue.appendleft(Chunk(chunk.formulation, rest))
        if not charge:
            return
        key = (chunk.formulation, rest[0])
        self._attempts[key] += 1
        if self._attempts[key] >= self.max_attempts:
            raise WorkerLostError(
                f"image {rest[0]} ({chunk.formulation}) was being processed each time {where} died, "
                f"{self._attempts[key]} times: it is probably what kills the worker (out of memory?); "
                "run it alone without --ray to see the error"
            )
