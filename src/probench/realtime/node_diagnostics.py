"""The grounding node's /diagnostics status, computed without rclpy: the key-value pairs and
the level, from the node's counters and the core's parts. The node only converts the result
into a ``diagnostic_msgs/DiagnosticArray`` (:func:`probench.ros.convert.stats_to_diagnostics`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from probench.prompting.policy import PromptPolicy, resolve_policy
from probench.realtime.grounding_stats import (
    GroundingStats,
    Health,
    TransportLoss,
    diagnostic_level,
    loss_hint,
    loss_warning,
)
from probench.realtime.grounding_worker import Prompts

if TYPE_CHECKING:
    from probench.realtime.frame_core import FrameCore
    from probench.realtime.node_spec import GroundingConfig


# the node's parameters a report reads (current values; the configure-time ones come from its config)
DIAGNOSTICS_PARAMS = ("model", "device", "precision", "diagnostics_period", "camera_timeout")


def policy_values(policy: PromptPolicy, active: Prompts, rejected: int) -> dict[str, Any]:
    """The policy, and per active prompt "you typed X -> the model gets Y"."""
    plan = policy.plan(active) if active else None
    out: dict[str, Any] = {"prompt_policy": policy.describe(), "prompt_profile": policy.profile or "",
                           "policy_rejected": rejected,
                           "prompts_as_typed_fallback": plan.fallbacks if plan else 0}
    if plan is not None:
        for i, (typed, given) in enumerate(plan.given().items()):
            out[f"prompt_{i}"] = f"you typed {typed!r} -> the model gets {given!r}"
    return out


@dataclass
class NodeDiagnostics:
    """One report period after another: new errors and frames are counted since the last call."""

    stats: GroundingStats
    transport: TransportLoss
    active_since: float = field(default_factory=time.monotonic)
    _errors_reported: int = 0
    _processed_reported: int = 0

    def report(self, *, state: str, params: dict[str, Any], cfg: GroundingConfig | None, active: Prompts,
               policy: PromptPolicy | None, policy_rejected: int, core: FrameCore | None,
               topics: tuple[str, str], last_error: str,
               profile_hint: Callable[[], str | None] | None = None, configure_error: str = "",
               configure_failures: int = 0) -> tuple[str, str, dict[str, Any], str]:
        """``(level, message, values, transport warning or "")`` for this period; with a
        transport warning, ``values["transport_hint"]`` says how to fix it (``profile_hint``:
        the Fast DDS profile's own line). ``params``: the node's current values; ``cfg``: those
        taken at configure (None before), which rule the configure-time ones. ``configure_error``:
        why the last configure failed ("" once one worked), with ``configure_failures``, the
        count a caller tells its own refusal by."""
        period = cfg.diagnostics_period if cfg else float(params["diagnostics_period"])
        camera_timeout = cfg.camera_timeout if cfg else float(params["camera_timeout"])
        snap = self.stats.snapshot(stale_after_s=max(2.0, 2 * period))
        values: dict[str, Any] = {
            "state": state, "model": params["model"], "device": params["device"],
            "precision": params["precision"], "prompts": " ; ".join(active), "n_prompts": len(active), **snap,
            "configure_error": configure_error, "configure_failures": configure_failures,
        }
        if core is not None:
            cache = core.detector.text_cache_stats()
            values.update(text_encoder_calls=core.detector.text_encoder_calls, text_cache_hits=cache["hits"],
                          text_cache_misses=cache["misses"], text_cache_evictions=cache["evictions"])
            values.update(core.frame_sets.counters())
        as_typed = policy or resolve_policy("as_typed")  # the worker's None: prompts as typed
        values.update(policy_values(as_typed, active, policy_rejected))
        values.update(image_topic=topics[0], compressed_topic=topics[1])
        loss = self.transport.snapshot()
        values.update(loss)
        transport = loss_warning(loss, " or ".join(topics)) if state == "active" else ""
        if transport:
            values["transport_hint"] = loss_hint(profile_hint() if profile_hint is not None else None)
        if core is not None and core.spatial is not None:
            values.update(core.spatial.diagnostics())
        if core is not None:
            values.update(core.output_diagnostics())
        new_errors = int(snap["errors"]) - self._errors_reported
        new_processed = int(snap["frames_processed"]) - self._processed_reported
        self._errors_reported, self._processed_reported = int(snap["errors"]), int(snap["frames_processed"])
        last = self.stats.last_arrival
        since = self.active_since if last is None else max(last, self.active_since)
        level, message = diagnostic_level(Health(
            state=state, n_prompts=len(active), new_processed=new_processed, new_errors=new_errors,
            rate_hz=float(snap["rate_hz"]), silent_s=time.monotonic() - since, camera_timeout=camera_timeout,
            topics=" or ".join(topics), last_error=last_error, transport=transport,
            configure_error=configure_error))
        return level, message, values, transport
