"""What a zoo entry is: :class:`ModelSpec`, its :class:`Capabilities`, and the ``model``
record a run folder keeps (:class:`ModelRecord`).

The bottom of the models room: it imports nothing else from :mod:`probench.models`. Spec
lists (``specs_*``) and adapters import it; the registry (:mod:`probench.models.zoo`)
collects the spec lists and builds detectors; the runtime layer
(:mod:`probench.models.accel`) reads :attr:`Capabilities.accel` to pick its wrapper.
"""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass, field
from typing import Literal, TypedDict

TINY_PREFIX = "tiny-"
RUNTIMES: tuple[str, ...] = ("torch", "compiled", "onnxruntime", "tensorrt")

TextCache = Literal["per-prompt", "per-set"]
# "head": any adapter exposing an image head (probench.models.head), exported generically
AccelFamily = Literal["owl", "ultralytics", "head"]


@dataclass(frozen=True)
class Capabilities:
    """What a model configuration can do, as data (``probench models --json`` prints it)."""

    masks: bool = False  # predicts instance masks (boxes are what is scored)
    batched: bool = False  # detect_batch runs several images in one forward
    onnx: bool = False  # an ONNX Runtime path exists (probench.models.accel)
    tensorrt: bool = False  # a TensorRT path exists (probench.models.accel)
    # How the text side is cached: "per-prompt" when each prompt is encoded on its own (a
    # new combination of known prompts costs no encoder call), "per-set" when the prompts
    # are encoded jointly (one caption: Grounding DINO family).
    text_cache: TextCache = "per-prompt"
    # Which wrapper of the runtime layer serves onnxruntime/tensorrt (None: torch only).
    accel: AccelFamily | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class ModelSpec:
    """One configuration of the paper's Table II (or a scripted test model)."""

    name: str  # zoo name, e.g. "owlv2-b"
    paper_name: str  # Table II row, e.g. "OWLv2-B"
    family: str  # "owl", "grounding-dino", "omdet", "sam3", "yolo-world", ...
    backend: str  # "transformers", "ultralytics", "detectron2", "scripted"
    checkpoint: str  # hub id / weights file name of the published weights
    capabilities: Capabilities = field(default_factory=Capabilities)
    # "module:function" building the real model:
    #   factory(spec, *, device, precision, score_threshold, weights, random_weights, preprocess)
    factory: str | None = None
    # "module:function" building the tiny variant (random, deterministic weights), or None:
    #   tiny_factory(spec, *, device, precision, score_threshold, preprocess) -> detector
    # (preprocess: "device" or "reference", probench.models.preprocess)
    tiny_factory: str | None = None
    notes: str = ""  # checkpoint mapping, uncertainty, what is not supported
    install_hint: str = ""  # how to make the backend available where it is not
    requires: tuple[str, ...] = ()  # importable modules the backend needs ("transformers", ...)

    def installable_here(self) -> bool:
        """Whether every module the backend needs can be found here (nothing is imported)."""
        for mod in self.requires:
            try:
                if importlib.util.find_spec(mod) is None:
                    return False
            except (ImportError, ValueError):
                return False
        return self.factory is not None


@dataclass(frozen=True)
class Backend:
    """What the zoo entries of one backend share: its name, the modules it needs and how to
    install it. :meth:`spec` makes an entry whose factories are an adapter module's
    ``build`` and ``build_tiny``."""

    name: str  # ModelSpec.backend
    requires: tuple[str, ...]
    install_hint: str

    def spec(
        self, module: str, name: str, paper_name: str, family: str, checkpoint: str,
        capabilities: Capabilities, notes: str,
    ) -> ModelSpec:
        return ModelSpec(
            name=name, paper_name=paper_name, family=family, backend=self.name, checkpoint=checkpoint,
            capabilities=capabilities, factory=f"{module}:build", tiny_factory=f"{module}:build_tiny",
            notes=notes, install_hint=self.install_hint, requires=self.requires,
        )


class ModelRecord(TypedDict):
    """run.json's ``model``: which model produced a run. Every field is known before the
    model loads (so a resume is checked before paying for a load) and is part of the run's
    identity (:mod:`probench.cache.identity`)."""

    name: str  # the name asked for (``tiny-owlv2``, ``owlv2-b``, ``test-instant``)
    paper_name: str
    family: str
    backend: str
    checkpoint: str
    random_weights: bool
    weights_source: str  # "tiny: random init", "random init (real-size config)", a path, a hub id
    runtime: str  # one of RUNTIMES
    preprocess: str  # "device" (torch ops on the model's device) or "reference" (the library's processor)
