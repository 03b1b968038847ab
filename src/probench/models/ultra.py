"""Ultralytics adapters: YOLO-World v2 and YOLOE (Table II rows YOLO-W-S/X, YOLOE-S/X).

Native prompt interface: a class vocabulary. The prompts are embedded by a text encoder
(CLIP ViT-B/32 for YOLO-World, MobileCLIP(2) for YOLOE) and set as the model's classes; the
image side then runs ultralytics' own predictor (letterbox, forward, NMS or the end-to-end
head, boxes scaled back to the original image). Ultralytics is imported here only, forced
offline (no downloads, no pip auto-install).

Text cache: ``set_prompts`` embeds the prompt set once and prepares ultralytics' predictor
(rebuilt for YOLOE, which fuses the text embeddings into its head; updated in place for
YOLO-World, which reads them at every forward), so a prompt change costs nothing in
``detect``.

Tiny variants (``tiny-yolo-world-s`` ...): the real architecture from its YAML, seeded random
weights, a small inference size, and a deterministic stand-in text encoder
(:class:`HashTextEncoder`). Their BatchNorm statistics are calibrated on seeded random
batches (:func:`_calibrate_batchnorm`): without that, a randomly initialised deep YOLO
outputs the same score everywhere. Their contrastive-head bias is -4 instead of ultralytics'
training init (-10), so that random weights keep enough boxes to test with.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from probench.detections import Detections
from probench.models.base import BaseDetector
from probench.models.errors import BackendUnavailableError, ModelError, WeightsNotFoundError
from probench.models.ultra_text import (  # re-exported: the adapter's text side
    TINY_SEED,
    ClipTextEncoder,
    HashTextEncoder,
    MobileClipTextEncoder,
)

MAX_PER_PROMPT = 100  # COCO maxDets (DESIGN.md detector contract)
MIN_CONF = 0.001  # what "keep what the native post-processing keeps" means for ultralytics
TINY_HEAD_BIAS = -4.0  # ultralytics' training init is -10: random tiny models would keep ~no box


def import_ultralytics() -> Any:
    """Import ultralytics with downloads and auto-install switched off (also if it was
    imported before with other settings)."""
    os.environ["YOLO_OFFLINE"] = "1"
    os.environ["YOLO_AUTOINSTALL"] = "false"
    os.environ.setdefault("YOLO_VERBOSE", "false")
    # Checkpoints are pickles: restricted (weights_only + allow-list) loading unless the user opts out.
    os.environ.setdefault("ULTRALYTICS_SAFE_LOAD", "1")
    try:
        import ultralytics
        import ultralytics.nn.tasks as tasks
        import ultralytics.utils as uutils
        from ultralytics.utils import checks
    except ImportError as exc:
        raise BackendUnavailableError(
            f"ultralytics is not importable ({exc}); pip install ultralytics"
        ) from exc
    uutils.ONLINE = checks.ONLINE = False
    checks.AUTOINSTALL = uutils.AUTOINSTALL = False
    tasks.SAFE_LOAD = os.environ["ULTRALYTICS_SAFE_LOAD"].lower() in ("1", "true")
    return ultralytics


# -- the detector ------------------------------------------------------------------------------
class UltralyticsDetector(BaseDetector):
    """A YOLO-World or YOLOE model behind the probench Detector interface."""

    # _encode_prompts sets the vocabulary on the model itself (a side effect), so a cached
    # state cannot be switched back to without it: keep one set until the vocabulary swap
    # is separated from the encoding.
    text_cache_size = 1

    def __init__(
        self,
        name: str,
        model: Any,
        kind: str,
        text_encoder: Callable[[Sequence[str]], Any],
        *,
        imgsz: int,
        device: Any,
        half: bool = False,
        score_threshold: float = 0.0,
        masks: bool = False,
        weights_source: str = "",
    ) -> None:
        super().__init__(device=str(device), score_threshold=score_threshold)
        if kind not in ("world", "yoloe"):
            raise ModelError(f"unknown ultralytics model kind {kind!r}")
        self.name, self.model, self.kind = name, model, kind
        self.text_encoder = text_encoder
        self.imgsz, self.half, self.return_masks = int(imgsz), bool(half), bool(masks)
        self._torch_device = device
        self.weights_source = weights_source
        self.conf = max(MIN_CONF, self.score_threshold)

    # text side: embed, set as the vocabulary, rebuild the predictor (fuses YOLOE's head)
    def _encode_prompts(self, prompts: tuple[str, ...]) -> object:
        import torch

        feats = self.text_encoder(prompts).to(self._torch_device)
        inner = self.model.model
        with torch.inference_mode():
            if self.kind == "world":
                inner.txt_feats = feats
                inner.model[-1].nc = len(prompts)
                inner.names = list(prompts)
                state = feats
                if self._swap_world_vocabulary(feats, prompts):
                    return state
                self.model.predictor = None
            else:
                param = next(inner.parameters())
                state = inner.model[-1].get_tpe(feats.to(param.dtype))
                self.model.set_classes(list(prompts), state)
        self._predict([np.zeros((32, 32, 3), np.uint8)], len(prompts))  # build predictor now
        return state

    def _swap_world_vocabulary(self, feats: Any, prompts: tuple[str, ...]) -> bool:
        """YOLO-World reads its text features at every forward (nothing is fused from them),
        so the live predictor's model copy takes the new vocabulary in place instead of
        ultralytics' rebuild (deep copy + fuse) on each prompt change. False when there is
        no predictor yet or it does not look as expected (then it is rebuilt)."""
        predictor = getattr(self.model, "predictor", None)
        backend = getattr(predictor, "model", None)
        live = getattr(backend, "model", None)
        if live is None or not hasattr(live, "txt_feats") or not hasattr(backend, "names"):
            return False
        live.txt_feats = feats.to(next(live.parameters()).dtype)
        live.model[-1].nc = len(prompts)
        names = dict(enumerate(prompts))
        live.names = backend.names = names
        return True

    def _predict(self, images_bgr: list[np.ndarray], n_prompts: int) -> list:
        return self.model.predict(
            images_bgr if len(images_bgr) > 1 else images_bgr[0],
            imgsz=self.imgsz, conf=self.conf, max_det=MAX_PER_PROMPT * n_prompts,
            device=self.device, verbose=False, retina_masks=self.return_masks,
            **({"quantize": 16} if self.half else {}),  # ultralytics' FP16 switch ("half" is deprecated)
        )

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        return self._run_many([image])[0]

    def _run_batch(self, images: list[np.ndarray], text_state: object) -> list[Detections]:
        """One batched ultralytics call for all images (same prompts for all)."""
        return self._run_many(images)

    def _run_many(self, images: list[np.ndarray]) -> list[Detections]:
        t0 = time.perf_counter()
        # ultralytics reads numpy images as BGR (OpenCV convention); ours are RGB.
        bgr = [np.ascontiguousarray(im[..., ::-1]) for im in images]
        try:
            results = self._predict(bgr, len(self._prompts))
        except (RuntimeError, ValueError) as exc:
            raise ModelError(f"{self.name}: ultralytics inference failed: {exc}") from exc
        wall_ms = (time.perf_counter() - t0) * 1000.0 / len(images)
        return [
            results_to_detections(r, im.shape[:2], wall_ms, self.return_masks)
            for r, im in zip(results, images, strict=True)
        ]


def results_to_detections(r: Any, hw: tuple[int, int], wall_ms: float, masks: bool = False) -> Detections:
    """An ultralytics ``Results`` (any backend: PyTorch, ONNX, TensorRT engine) as Detections,
    at most 100 boxes per prompt, with ultralytics' own stage times."""
    t0 = time.perf_counter()
    boxes = r.boxes
    xyxy = boxes.xyxy.float().cpu().numpy()
    scores = boxes.conf.float().cpu().numpy()
    cls = boxes.cls.cpu().numpy().astype(np.int64)
    keep = cap_per_prompt(scores, cls, MAX_PER_PROMPT)
    mask_arr = None
    if masks and r.masks is not None:
        mask_arr = r.masks.data.cpu().numpy()[keep] > 0.5
    convert_ms = (time.perf_counter() - t0) * 1000.0
    speed = r.speed or {}  # ultralytics' own per-image stage times (CUDA-synchronised)
    timings = {
        "preprocess": speed.get("preprocess", 0.0),
        "forward": speed.get("inference", 0.0),
        "postprocess": speed.get("postprocess", 0.0) + convert_ms,
    }
    # total: the whole call, the predictor's bookkeeping between stages included
    timings["total"] = max(wall_ms + convert_ms, sum(timings.values()))
    return Detections.from_arrays(
        xyxy[keep], scores[keep], cls[keep], image_size=hw, masks=mask_arr, timings_ms=timings
    )

def cap_per_prompt(scores: np.ndarray, prompt_index: np.ndarray, cap: int) -> np.ndarray:
    """Indices of the ``cap`` best-scoring boxes of each prompt, in descending score order."""
    order = np.argsort(-scores, kind="stable")
    counts: dict[int, int] = {}
    keep = []
    for i in order:
        p = int(prompt_index[i])
        if counts.get(p, 0) < cap:
            counts[p] = counts.get(p, 0) + 1
            keep.append(i)
    return np.asarray(keep, dtype=np.int64)


# -- factories (zoo contract) --------------------------------------------------------------------
def _arch(spec: Any) -> dict:
    from probench.models.specs_ultralytics import ARCH

    try:
        return ARCH[spec.name]
    except KeyError as exc:
        raise ModelError(f"{spec.name} is not an ultralytics zoo model") from exc


def _model_class(kind: str) -> Any:
    import_ultralytics()
    from ultralytics import YOLOE, YOLOWorld

    return YOLOWorld if kind == "world" else YOLOE


def _build_random(arch: dict, seed: int) -> Any:
    """The architecture from its YAML with seeded random weights (no file is read)."""
    from probench.models.hf_common import seeded

    cls = _model_class(arch["kind"])
    with seeded(seed):
        model = cls(arch["yaml"])
    model.model.eval()
    return model


def _set_head_bias(model: Any, bias: float) -> None:
    import torch
    from ultralytics.nn.modules.block import BNContrastiveHead, ContrastiveHead

    with torch.no_grad():
        for m in model.model.modules():
            if isinstance(m, (ContrastiveHead, BNContrastiveHead)):
                m.bias.fill_(bias)


def _calibrate_batchnorm(model: Any, kind: str, imgsz: int, seed: int = TINY_SEED) -> None:
    """Set BatchNorm running statistics from two seeded random batches. With the default
    (mean 0, var 1) statistics, activations of a randomly initialised deep YOLO shrink
    layer by layer to ~1e-9 and every output is the same; normalised, they stay alive."""
    import torch

    inner = model.model
    bns = [m for m in inner.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration batches
    feats = HashTextEncoder(_embed_dim(model, kind), seed)([f"calibration {i}" for i in range(4)])
    if kind == "world":
        inner.model[-1].nc = feats.shape[1]  # the head's class count follows the vocabulary
    gen = torch.Generator().manual_seed(seed)
    inner.train()
    try:
        with torch.no_grad():
            for _ in range(2):
                x = torch.rand(2, 3, imgsz, imgsz, generator=gen)
                inner.predict(x, txt_feats=feats) if kind == "world" else inner.predict(x, tpe=feats)
    finally:
        inner.eval()
        for m in bns:
            m.momentum = 0.1


def _embed_dim(model: Any, kind: str) -> int:
    if kind == "world":
        return int(model.model.txt_feats.shape[-1])
    return int(model.model.model[-1].embed)


def build_tiny(
    spec: Any, *, device: str = "cpu", precision: str = "fp32", score_threshold: float = 0.0
) -> Any:
    """``tiny-<name>``: real architecture, seeded random weights, small input, hash text encoder."""
    from probench.models.hf_common import resolve_device

    dev, _ = resolve_device(device, precision)
    arch = _arch(spec)
    model = _build_random(arch, TINY_SEED)
    _calibrate_batchnorm(model, arch["kind"], arch["tiny_imgsz"])
    _set_head_bias(model, TINY_HEAD_BIAS)
    model.model.to(dev)
    return UltralyticsDetector(
        f"tiny-{spec.name}", model, arch["kind"], HashTextEncoder(_embed_dim(model, arch["kind"])),
        imgsz=arch["tiny_imgsz"], device=dev, half=precision == "fp16", score_threshold=score_threshold,
        weights_source="tiny config, random init (deterministic seed)",
    )


def build(
    spec: Any,
    *,
    device: str = "cpu",
    precision: str = "fp32",
    score_threshold: float = 0.0,
    weights: str | None = None,
    random_weights: bool = False,
) -> Any:
    """The real model from local files (``weights``: the checkpoint file or a folder holding
    it and its text encoder), or the real-size architecture with random weights."""
    from probench.models.hf_common import resolve_device

    dev, _ = resolve_device(device, precision)
    arch = _arch(spec)
    if random_weights:
        if weights:
            from probench.errors import UsageError

            raise UsageError("give either weights or random_weights, not both")
        model = _build_random(arch, TINY_SEED)
        # as the tiny variants: without this every score is ~0 and NMS (part of the
        # measured latency) would have no box to work on
        _calibrate_batchnorm(model, arch["kind"], arch["tiny_imgsz"])
        _set_head_bias(model, TINY_HEAD_BIAS)
        model.model.to(dev)
        encoder: Callable = HashTextEncoder(_embed_dim(model, arch["kind"]))
        source = "random init (real-size config)"
    else:
        ckpt = find_checkpoint(spec.checkpoint, weights)
        cls = _model_class(arch["kind"])
        try:
            model = cls(str(ckpt))
        except (TypeError, RuntimeError, KeyError, ValueError) as exc:
            raise ModelError(f"{spec.name}: cannot load {ckpt}: {exc}") from exc
        model.model.to(dev).eval()
        encoder = _real_text_encoder(model, arch["kind"], ckpt.parent, weights, dev)
        source = str(ckpt)
    return UltralyticsDetector(
        spec.name, model, arch["kind"], encoder, imgsz=arch["imgsz"], device=dev,
        half=precision == "fp16", score_threshold=score_threshold, weights_source=source,
    )


def _search_dirs(weights: str | None) -> list[Path]:
    dirs = []
    if weights and Path(weights).is_dir():
        dirs.append(Path(weights))
    elif weights:
        dirs.append(Path(weights).parent)
    dirs.append(Path.cwd())
    try:
        from ultralytics.utils import SETTINGS  # where ultralytics keeps downloaded weights

        dirs.append(Path(SETTINGS["weights_dir"]))
    except (ImportError, KeyError):
        pass
    return list(dict.fromkeys(d.resolve() for d in dirs))


def find_checkpoint(checkpoint: str, weights: str | None) -> Path:
    """The local checkpoint file, or :class:`WeightsNotFoundError` saying where it was sought."""
    import_ultralytics()
    if weights and Path(weights).is_file():
        return Path(weights).resolve()
    if weights and not Path(weights).exists():
        raise WeightsNotFoundError(f"--weights {weights}: no such file or folder")
    dirs = _search_dirs(weights)
    for d in dirs:
        if (d / checkpoint).is_file():
            return (d / checkpoint).resolve()
    raise WeightsNotFoundError(
        f"{checkpoint} not found in {', '.join(map(str, dirs))}; on a networked machine download it "
        f"from https://github.com/ultralytics/assets/releases and pass --weights FILE_OR_DIR"
    )


def _real_text_encoder(model: Any, kind: str, ckpt_dir: Path, weights: str | None, dev: Any) -> Callable:
    from probench.models.specs_ultralytics import TEXT_ENCODERS

    variant = "clip:ViT-B/32" if kind == "world" else getattr(model.model, "text_model", "mobileclip:blt")
    fname = TEXT_ENCODERS.get(variant)
    if fname is None:
        raise ModelError(f"unknown text encoder {variant!r} in the checkpoint's config")
    dirs = list(dict.fromkeys([ckpt_dir, *_search_dirs(weights)]))
    if kind == "world":
        dirs += [d / "clip" for d in dirs]  # ultralytics keeps CLIP under weights_dir/clip
    for d in dirs:
        if (d / fname).is_file():
            path = d / fname
            return ClipTextEncoder(path, dev) if kind == "world" else MobileClipTextEncoder(path, dev)
    raise WeightsNotFoundError(
        f"text encoder {fname} ({variant}) not found in {', '.join(map(str, dirs))}; put it next to "
        "the checkpoint (ultralytics assets release, or openaipublic CLIP for ViT-B-32.pt)"
    )


def weights_present(spec: Any) -> bool:
    """Whether the checkpoint is in the working folder or ultralytics' weights folder. Light
    on purpose (``probench models`` calls it for every row): reads ultralytics' settings
    file instead of importing ultralytics (and torch)."""
    dirs = [Path.cwd()]
    cfg = os.environ.get("YOLO_CONFIG_DIR")
    settings = (Path(cfg) if cfg else Path.home() / ".config" / "Ultralytics") / "settings.json"
    try:
        weights_dir = json.loads(settings.read_text()).get("weights_dir")
    except (OSError, ValueError, AttributeError):
        weights_dir = None
    if isinstance(weights_dir, str):
        dirs.append(Path(weights_dir))
    return any((d / spec.checkpoint).is_file() for d in dirs)
