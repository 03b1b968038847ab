"""The numbers of a ``probench ground`` run: printed at the end and stored in the output
bag's metadata (``custom_data["probench.ground.summary"]``, JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from probench.cache.records import Temporal
from probench.ground.spatial import TrackFigures
from probench.stats import summarize


@dataclass
class GroundSummary:
    image_topic: str
    model: str
    realtime: bool
    frames: int = 0
    grounded: int = 0  # processed by the model (with prompts)
    no_prompts: int = 0  # processed before any prompt was active: empty answers, as the node
    dropped: int = 0  # --realtime: frames the node would have dropped
    detections: int = 0
    prompt_sets: int = 0  # prompt sets applied (each one a LabelInfo)
    prompts_rejected: int = 0  # recorded prompt messages the node would have rejected
    failed: int = 0  # frames whose model call raised (reported on frame_errors)
    first_failure: str | None = None  # the first of them: where, and the error
    processing_ms: list[float] = field(default_factory=list)  # per processed frame
    latency_ms: list[float] = field(default_factory=list)  # arrival -> answer, per processed frame
    wall_s: float = 0.0  # the grounding loop (reading, model, drawing, writing)
    model_load_s: float = 0.0
    video_fps: float | None = None
    outputs: list[str] = field(default_factory=list)
    spatial: TrackFigures | None = None  # --track or an RGB-D bag
    depth_topic: str | None = None
    temporal: Temporal | None = None  # a sequence bag: scoring/temporal.py's metrics of the answers

    @property
    def mode(self) -> str:
        return "realtime (newest-frame policy, measured times)" if self.realtime else "as fast as possible"

    def as_dict(self) -> dict[str, Any]:
        processed = self.grounded + self.no_prompts
        return {
            "image_topic": self.image_topic, "model": self.model, "mode": self.mode,
            "frames": self.frames, "grounded": self.grounded, "no_prompts": self.no_prompts,
            "dropped": self.dropped, "detections": self.detections, "prompt_sets": self.prompt_sets,
            "prompts_rejected": self.prompts_rejected,
            "processing_ms": summarize(self.processing_ms), "latency_ms": summarize(self.latency_ms),
            "wall_s": self.wall_s, "model_load_s": self.model_load_s,
            "frames_per_s": self.frames / self.wall_s if self.wall_s > 0 else None,
            "model_frames_per_s": (processed / (sum(self.processing_ms) / 1000.0)
                                   if sum(self.processing_ms) > 0 else None),
            "video_fps": self.video_fps,
            **({"depth_topic": self.depth_topic, **self.spatial.as_dict()}
               if self.spatial is not None else {}),
            **({"temporal": self.temporal.to_json()} if self.temporal is not None else {}),
            # only when a frame failed: a run without one keeps the summary it always had
            **({"failed": self.failed, "first_failure": self.first_failure} if self.failed else {}),
        }

    def _spatial_line(self, d: dict[str, Any]) -> str:
        parts = []
        if d.get("id_switches_per_100_frames") is not None and d["tracks"]:
            parts.append(f"tracks {d['tracks']}: id switches {d['id_switches_per_100_frames']:.2f} per 100 "
                         f"frames, mean track length {d['mean_track_length_frames']:.1f} frames")
        if "coverage_3d" in d:
            cov = d["coverage_3d"]
            share = f"{100 * cov:.1f}% of detections" if cov is not None else "no detections"
            parts.append(f"3D from {self.depth_topic}: {share}")
        return "; ".join(parts) or "tracking: no tracks"

    def lines(self) -> list[str]:
        d = self.as_dict()

        def pct(stats: dict[str, float | None]) -> str:
            if stats["p50"] is None:
                return "n/a"
            return " ".join(f"{k} {stats[k]:.1f}" for k in ("p50", "p95", "p99", "max"))

        per_frame = self.detections / self.grounded if self.grounded else 0.0
        out = [
            f"{self.frames} frames from {self.image_topic}, model {self.model}, {self.mode}",
            f"  grounded {self.grounded}, dropped {self.dropped}, without prompts {self.no_prompts}; "
            f"{self.detections} detections ({per_frame:.1f} per grounded frame)",
            f"  prompt sets applied {self.prompt_sets}, prompt messages rejected {self.prompts_rejected}",
            *([f"  FAILED {self.failed} frame(s): the model raised (the first: {self.first_failure})"]
              if self.failed else []),
            f"  processing ms (decode+detect+serialize): {pct(d['processing_ms'])}",
            f"  latency ms (arrival -> answer{', incl. waiting' if self.realtime else ''}): "
            f"{pct(d['latency_ms'])}",
        ]
        if d["frames_per_s"] is not None:
            model_fps = d["model_frames_per_s"]
            out.append(f"  {d['frames_per_s']:.2f} frames/s overall ({self.wall_s:.2f} s; model load "
                       f"{self.model_load_s:.1f} s)" + (f"; processing alone {model_fps:.2f} frames/s"
                                                        if model_fps is not None else ""))
        if self.spatial is not None:
            out.append("  " + self._spatial_line(d))
        if self.temporal is not None:
            from probench.scoring.temporal import temporal_lines

            out += ["  " + line if line else "" for line in temporal_lines(self.temporal)]
        out += [f"  wrote {o}" for o in self.outputs]
        return out
