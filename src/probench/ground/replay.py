"""The grounding node's worker rules on a bag's own clock.

The node's :class:`~probench.realtime.grounding_worker.FrameWorker` (one-slot frame mailbox,
prompt queue applied first, a prompt change dropping the waiting frame) is driven here
without its thread: each recorded frame or prompt change is put in at its recorded time,
and the jobs the worker would start run one by one on a virtual clock.

- ``realtime=True``: a job occupies the worker for the time it really took here (measured
  per frame: decode + detect + serialize, what the node's worker does; per prompt set: the
  text encoding). A frame arriving while the worker is busy waits in the mailbox, and a
  newer one replaces it: the replaced frame is *dropped*, as the node would drop it. This is
  a faithful simulation with measured times, not a wall-clock replay: it never sleeps, and
  the result does not depend on how loaded the machine is beyond the measured times.
- ``realtime=False`` (as fast as possible): jobs take no virtual time, so the worker is
  always free when the next message arrives and every frame is grounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from probench.realtime.grounding_stats import GroundingStats
from probench.realtime.grounding_worker import FrameWorker, ImageKind, Prompts

if TYPE_CHECKING:
    from probench.ground.frames import Frame
    from probench.prompting.policy import PromptPolicy

REPLACED = "replaced by a newer frame while the model was busy"
PROMPT_CHANGE = "dropped by a prompt change before it was processed"
SHORT_REASONS = {REPLACED: "model busy", PROMPT_CHANGE: "prompt change"}  # for the image banner

# ground(frame, prompts, wait_s, policy) -> busy seconds; apply(prompts, stamp (bag ns), policy) ->
# (accepted, busy seconds); policy: the worker's prompt policy in force (None: as typed)
GroundFn = Callable[["Frame", Prompts, float, "PromptPolicy | None"], float]
ApplyFn = Callable[[Prompts, int, "PromptPolicy | None"], tuple[bool, float]]
DroppedFn = Callable[["Frame", str], None]


def _reraise(exc: BaseException) -> None:
    raise exc  # a failed frame ends the run (the node would log it and go on)


class MailboxReplay:
    """Feed it :meth:`frame` and :meth:`prompts` in time order (seconds on any clock whose
    differences are the bag's), then :meth:`finish`. Callbacks: ``ground`` for each frame
    the worker takes, ``apply`` for each prompt set, ``dropped`` for each frame it never takes."""

    def __init__(self, ground: GroundFn, apply: ApplyFn, dropped: DroppedFn, *, realtime: bool) -> None:
        self.stats = GroundingStats()
        self.worker: FrameWorker[Frame, int] = FrameWorker(self.stats, self._on_frame, self._on_prompts,
                                                           _reraise)
        self.worker.activate()
        self.realtime = realtime
        self._ground, self._apply, self._dropped = ground, apply, dropped
        self._free_at = -math.inf  # when the worker finishes its current job
        self._start = -math.inf  # when the job being run started
        self._busy_s = 0.0  # what the job being run took

    def frame(self, t_s: float, frame: Frame) -> None:
        self._advance(t_s)
        replaced = self.worker.put_frame("recorded", frame, t_s)
        if replaced is not None:
            self._dropped(replaced, REPLACED)

    def prompts(self, t_s: float, prompts: Prompts, stamp: int) -> None:
        self._advance(t_s)
        dropped = self.worker.put_prompts(prompts, stamp)
        if dropped is not None:
            self._dropped(dropped, PROMPT_CHANGE)

    def policy(self, t_s: float, policy: PromptPolicy | None, stamp: int) -> None:
        """A live policy switch (the node's ``prompt_policy`` parameter set at ``t_s``)."""
        self._advance(t_s)
        self.worker.put_policy(policy, stamp)

    def finish(self) -> None:
        """Run what is still waiting (the node would process its last frame too)."""
        self._advance(math.inf)

    def _advance(self, t_s: float) -> None:
        """Run every job the worker starts no later than ``t_s``."""
        while self._free_at <= t_s:
            job = self.worker.take_job()
            if job is None:
                self._free_at = t_s  # idle: the next job starts when it arrives
                return
            self._start, self._busy_s = self._free_at, 0.0
            self.worker.run_job(job)
            self._free_at = self._start + (self._busy_s if self.realtime else 0.0)

    # -- the worker's handlers ------------------------------------------------------------
    def _on_frame(self, kind: ImageKind, frame: Frame, t_arrival: float, prompts: Prompts) -> None:
        wait_s = self._start - t_arrival if self.realtime else 0.0
        self._busy_s = self._ground(frame, prompts, wait_s, self.worker.policy)

    def _on_prompts(self, prompts: Prompts, stamp: int) -> bool:
        accepted, self._busy_s = self._apply(prompts, stamp, self.worker.policy)
        return accepted
