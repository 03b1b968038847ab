"""The model zoo: every configuration of the paper's Table II by name, plus test variants.

PLACEHOLDER: only the scripted ``test-*`` detectors are registered yet; the models helper
adds the 16 paper configurations and their ``tiny-*`` variants (issue 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from probench.models.base import Detector
from probench.models.errors import UnknownModelError
from probench.models.testing import scripted_detector


@dataclass(frozen=True)
class ModelSpec:
    name: str  # zoo name, e.g. "owlv2-b"
    paper_name: str  # Table II row, e.g. "OWLv2-B"
    family: str
    backend: str  # "transformers", "ultralytics", "detectron2", "scripted"
    checkpoint: str
    capabilities: dict = field(default_factory=dict)


ZOO: dict[str, ModelSpec] = {}


def list_models() -> list[ModelSpec]:
    return list(ZOO.values())


def load_detector(
    name: str,
    *,
    device: str = "cpu",
    precision: str = "fp32",
    score_threshold: float = 0.0,
    weights: str | None = None,
    random_weights: bool = False,
) -> Detector:
    """Build a detector by zoo name. Never downloads: real weights come from ``weights``
    (a local folder) or the local Hugging Face / ultralytics cache."""
    scripted = scripted_detector(name, device=device, score_threshold=score_threshold)
    if scripted is not None:
        return scripted
    raise UnknownModelError(f"unknown model {name!r}; `probench models` lists the zoo")
