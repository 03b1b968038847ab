"""Detic adapter (detectron2 + the Detic repository). UNTESTED: detectron2 does not install
in this project's environment (see :mod:`probench.models.specs_detectron` for how to get it).

Written after Detic's own demo (``demo.py`` / ``detic/predictor.py``): a custom vocabulary is
embedded with Detic's CLIP text encoder as ``"a " + prompt`` and set as the zero-shot
classifier with ``reset_cls_test``; ``DefaultPredictor`` resizes the image, runs CenterNet2
and rescales boxes to the original image. Differences from the demo, on purpose: weights are
read only from local files (never downloaded), the score threshold is the benchmark's
(near 0, up to 100 boxes per prompt) instead of the demo's 0.5.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from probench.detections import Detections
from probench.models.base import TEXT_BATCH, BaseDetector
from probench.models.errors import BackendUnavailableError, ModelError, WeightsNotFoundError
from probench.models.hf_common import MAX_PER_PROMPT, cap_per_prompt
from probench.models.spec import ModelSpec

if TYPE_CHECKING:  # names for the checker only: mypy skips torch; detectron2/Detic have no types
    from detectron2.config import CfgNode
    from detectron2.engine.defaults import DefaultPredictor
    from torch import Tensor
    from torch.nn import Module

    # Detic's reset_cls_test(model, (D, n) classifier weights, n classes)
    ResetClsTest = Callable[[Module, Tensor, int], None]

MIN_SCORE = 1e-4  # "everything the model keeps" for the AP sweep; the demo uses 0.5
CLIP_FILE = "ViT-B-32.pt"


class _DeticModules(NamedTuple):
    """The detectron2, CenterNet2 and Detic entry points the build uses."""

    get_cfg: Callable[[], CfgNode]
    DefaultPredictor: type[DefaultPredictor]
    add_centernet_config: Callable[[CfgNode], None]
    add_detic_config: Callable[[CfgNode], None]
    build_text_encoder: Callable[..., Module]
    reset_cls_test: ResetClsTest


def _import_detic(repo: Path | None) -> _DeticModules:
    """detectron2 + Detic + CenterNet2 modules, with the Detic checkout on sys.path."""
    from probench.models.specs_detectron import INSTALL_HINT

    if repo is not None:
        for p in (repo, repo / "third_party" / "CenterNet2"):
            if p.is_dir() and str(p) not in sys.path:
                sys.path.insert(0, str(p))
    try:
        from centernet.config import add_centernet_config
        from detectron2.config import get_cfg
        from detectron2.engine.defaults import DefaultPredictor
        from detic.config import add_detic_config
        from detic.modeling.text.text_encoder import build_text_encoder
        from detic.modeling.utils import reset_cls_test
    except ImportError as exc:
        raise BackendUnavailableError(f"Detic is not importable ({exc}). {INSTALL_HINT}") from exc
    return _DeticModules(
        get_cfg=get_cfg, DefaultPredictor=DefaultPredictor, add_centernet_config=add_centernet_config,
        add_detic_config=add_detic_config, build_text_encoder=build_text_encoder,
        reset_cls_test=reset_cls_test,
    )


def _find(paths: list[Path], what: str) -> Path:
    for p in paths:
        if p.is_file():
            return p
    raise WeightsNotFoundError(f"{what} not found (looked at {', '.join(map(str, paths))})")


class DeticDetector(BaseDetector):
    """Detic with a custom vocabulary (the prompt set) behind the Detector interface."""

    text_cache = "per-prompt"  # CLIP embeds each "a <name>" on its own
    text_cache_size = 4096
    text_batch = TEXT_BATCH

    def __init__(
        self, predictor: DefaultPredictor, text_encoder: Module, reset_cls_test: ResetClsTest, *, device: str,
        score_threshold: float = 0.0, name: str = "detic", weights_source: str = "",
    ) -> None:
        super().__init__(device=device, score_threshold=score_threshold)
        self.name, self.predictor, self.text_encoder = name, predictor, text_encoder
        self._reset_cls_test = reset_cls_test
        self.weights_source = weights_source

    def _encode_texts(self, prompts: tuple[str, ...]) -> list[object]:
        import torch

        with torch.inference_mode():
            # Detic's demo: CLIP text embeddings of "a <name>", one (D,) row per prompt
            emb = self.text_encoder(["a " + p for p in prompts]).detach().cpu()
        return list(emb.clone())

    def _join_texts(self, items: list[object], prompts: tuple[str, ...]) -> object:
        """Stack the rows into (D, n) classifier weights and set them as the vocabulary
        (``reset_cls_test`` only swaps weights: cheap, done on every prompt-set change)."""
        import torch

        emb = torch.stack(items).permute(1, 0).contiguous()
        self._reset_cls_test(self.predictor.model, emb, len(prompts))
        # detectron2 copies TEST.DETECTIONS_PER_IMAGE into each box predictor when it is
        # built: set the per-prompt cap on the live predictors (one per cascade stage).
        predictors = getattr(self.predictor.model.roi_heads, "box_predictor", [])
        for bp in predictors if isinstance(predictors, torch.nn.ModuleList) else [predictors]:
            if hasattr(bp, "test_topk_per_image"):
                bp.test_topk_per_image = MAX_PER_PROMPT * len(prompts)
        return emb

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        import torch

        sync = torch.cuda.synchronize if self.device.startswith("cuda") else None
        t0 = time.perf_counter()
        bgr = np.ascontiguousarray(image[..., ::-1])  # DefaultPredictor expects BGR
        t1 = time.perf_counter()
        if sync:
            sync()
        out = self.predictor(bgr)  # resize + forward + rescale: one call in detectron2
        if sync:
            sync()
        t2 = time.perf_counter()
        inst = out["instances"].to("cpu")
        xyxy = inst.pred_boxes.tensor.numpy()
        scores = inst.scores.numpy()
        cls = inst.pred_classes.numpy().astype(np.int64)

        keep = cap_per_prompt(scores, cls, MAX_PER_PROMPT)
        t3 = time.perf_counter()
        timings = {"preprocess": (t1 - t0) * 1e3, "forward": (t2 - t1) * 1e3, "postprocess": (t3 - t2) * 1e3}
        return Detections.from_arrays(xyxy[keep], scores[keep], cls[keep], image_size=image.shape[:2],
                                      timings_ms=timings)


def build(
    spec: ModelSpec, *, device: str = "cpu", precision: str = "fp32", score_threshold: float = 0.0,
    weights: str | None = None, random_weights: bool = False, preprocess: str = "device",
) -> DeticDetector:
    """``weights``: the Detic checkout (``configs/``, ``models/<checkpoint>``; CLIP's
    ``ViT-B-32.pt`` there or in ~/.cache/clip). ``preprocess`` is accepted for the zoo
    contract; detectron2's ``DefaultPredictor`` always does its own resize (recorded as
    ``preprocess = "reference"`` on the detector)."""
    from probench.errors import UsageError
    from probench.models.specs_detectron import CONFIG

    if random_weights:
        raise UsageError("detic has no random-weights mode: its config needs the Detic repo's metadata")
    if precision != "fp32":
        raise UsageError("detic runs in fp32 only (detectron2's DefaultPredictor has no fp16 switch)")
    repo = Path(weights) if weights else None
    if repo is None or not repo.is_dir():
        raise WeightsNotFoundError(
            "detic needs --weights pointing at a Detic checkout with its models/ folder"
        )
    mods = _import_detic(repo)
    config = _find([repo / CONFIG], "Detic config")
    ckpt = _find([repo / "models" / spec.checkpoint, repo / spec.checkpoint], f"checkpoint {spec.checkpoint}")
    clip_dirs = [repo, Path.home() / ".cache" / "clip"]
    clip_path = _find([d / CLIP_FILE for d in clip_dirs], f"CLIP text encoder {CLIP_FILE}")

    cfg = mods.get_cfg()
    cfg.MODEL.DEVICE = device
    mods.add_centernet_config(cfg)
    mods.add_detic_config(cfg)
    cfg.merge_from_file(str(config))
    cfg.MODEL.WEIGHTS = str(ckpt)
    cfg.MODEL.RETINANET.SCORE_THRESH_TEST = max(MIN_SCORE, score_threshold)
    cfg.MODEL.ROI_HEADS.SCORE_THRESH_TEST = max(MIN_SCORE, score_threshold)
    cfg.MODEL.ROI_BOX_HEAD.ZEROSHOT_WEIGHT_PATH = "rand"  # the vocabulary is set per prompt set
    cfg.MODEL.ROI_HEADS.ONE_CLASS_PER_PROPOSAL = True  # the demo's default
    cfg.MODEL.ROI_BOX_HEAD.CAT_FREQ_PATH = str(repo / cfg.MODEL.ROI_BOX_HEAD.CAT_FREQ_PATH)
    cfg.freeze()
    try:
        predictor = mods.DefaultPredictor(cfg)
        text_encoder = _local_text_encoder(mods.build_text_encoder, clip_path, device)
    except (RuntimeError, OSError, KeyError) as exc:
        raise ModelError(f"detic: cannot build the model: {exc}") from exc
    det = DeticDetector(predictor, text_encoder, mods.reset_cls_test, device=device,
                        score_threshold=score_threshold, weights_source=str(ckpt))
    return det


def _local_text_encoder(build_text_encoder: Callable[..., Module], clip_path: Path, device: str) -> Module:
    """Detic's CLIPTEXT filled from a local CLIP file (Detic's own ``pretrain=True`` path
    calls ``clip.load("ViT-B/32")``, which downloads)."""
    import clip

    encoder = build_text_encoder(pretrain=False)
    pretrained, _ = clip.load(str(clip_path), device="cpu", jit=False)
    state = {k: v for k, v in pretrained.state_dict().items()
             if not k.startswith("visual.") and k not in ("logit_scale", "input_resolution",
                                                         "context_length", "vocab_size")}
    encoder.load_state_dict(state)
    return encoder.eval().to(device)
