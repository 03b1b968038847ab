"""The ultralytics detector (YOLO-World v2, YOLOE) behind the probench detector interface,
and its zoo factories ``build`` / ``build_tiny`` (the package doc, :mod:`probench.models.ultra`,
says how it works)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from probench.detections import Detections
from probench.models.base import TEXT_BATCH, BaseDetector, StageTimer
from probench.models.errors import ModelError
from probench.models.head import ImageHead
from probench.models.hf_common import MAX_PER_PROMPT, cuda_sync, resolve_device
from probench.models.spec import ModelSpec
from probench.models.specs_ultralytics import UltraArch
from probench.models.ultra.postprocess import ImageBoxes, postprocess, results_to_detections
from probench.models.ultra.tiny import random_model
from probench.models.ultra.weights import Kind, find_checkpoint, model_class, real_text_encoder

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and ultralytics (pyproject)
    from torch import Tensor
    from torch import device as TorchDevice
    from torch.nn import Module
    from ultralytics import YOLOE, YOLOWorld
    from ultralytics.engine.results import Results

    from probench.models.preprocess import Frame
    from probench.models.ultra.postprocess import RawOutput
    from probench.models.ultra_text import TextEncoder

MIN_CONF = 0.001  # what "keep what the native post-processing keeps" means for ultralytics
STRIDE = 32  # ultralytics' AutoBackend: max(model stride, 32)


class UltralyticsDetector(BaseDetector):
    """A YOLO-World or YOLOE model behind the probench Detector interface."""

    text_cache = "per-prompt"
    text_cache_size = 4096  # prompt embeddings (D floats each)
    text_batch = TEXT_BATCH  # misses encoded in fixed-size batches: bit-reproducible (base.py)

    def __init__(
        self,
        name: str,
        model: YOLOWorld | YOLOE,
        kind: Kind,
        text_encoder: TextEncoder,
        *,
        imgsz: int,
        device: TorchDevice,
        half: bool = False,
        score_threshold: float = 0.0,
        masks: bool = False,
        weights_source: str = "",
        preprocess: str = "device",
    ) -> None:
        import torch

        from probench.models.preprocess import Letterbox, Uploader, check_preprocess

        super().__init__(device=str(device), score_threshold=score_threshold)
        if kind not in ("world", "yoloe"):
            raise ModelError(f"unknown ultralytics model kind {kind!r}")
        self.name, self.model, self.kind = name, model, kind
        self.text_encoder = text_encoder
        self.imgsz, self.half, self.return_masks = int(imgsz), bool(half), bool(masks)
        self._torch_device = torch.device(device)
        self.weights_source = weights_source
        self.conf = max(MIN_CONF, self.score_threshold)
        self.preprocess = check_preprocess(preprocess)
        # Fused once, as ultralytics' predictor fuses its model; the reference path's predictor
        # deep-copies this fused network (its own fuse is then a no-op), so both paths run
        # the same weights.
        self.net = model.model
        self.net.fuse(verbose=False)
        self.net.to(self._torch_device).eval()
        if self.half:
            self.net.half()
        if _channels_last(self._torch_device, self.half):
            # the layout the convolution kernels read natively (see _channels_last); both
            # paths run this network, so their numbers stay identical
            self.net.to(memory_format=torch.channels_last)
        self._param = next(self.net.parameters())
        self.segment = "Segment" in type(self.net.model[-1]).__name__
        self._upload = Uploader(self._torch_device)
        self._letterbox = Letterbox(self.imgsz, STRIDE, self._torch_device, self._param.dtype)

    # -- text side: encode per prompt (cached), apply a vocabulary per switch (cheap) ---------
    def _encode_texts(self, prompts: tuple[str, ...]) -> list[Tensor]:
        import torch

        with torch.inference_mode():
            # cached on the device in the network's dtype: a prompt set is then joined with
            # no cast (fp16: YOLO-World's embeddings were cast at every prompt change)
            feats = self.text_encoder(prompts).to(self._torch_device, self._param.dtype)  # (1, n, D)
            if self.kind == "yoloe":  # the RepRTA adapter + L2 norm, row-wise
                feats = self.net.model[-1].get_tpe(feats)
        return list(feats[0].clone())

    def _join_texts(self, items: list[object], prompts: tuple[str, ...]) -> Tensor:
        import torch

        feats = torch.stack(items)[None]  # (1, n, D), in the network's dtype already
        self._apply_vocabulary(feats, prompts)
        return feats

    def _apply_vocabulary(self, feats: Tensor, prompts: tuple[str, ...]) -> None:
        """The prompt set's embeddings become the model's classes (the head reads them at
        every forward). ultralytics' predictor, if the reference path built one, runs its own
        fused copy of the network: that copy gets the same vocabulary in place."""
        names = dict(enumerate(prompts))
        backend = getattr(getattr(self.model, "predictor", None), "model", None)
        live = getattr(backend, "model", None)
        for net in (self.net, live):
            if net is None:
                continue
            if self.kind == "world":
                net.txt_feats = feats
            else:
                net.pe = feats
            net.model[-1].nc = len(prompts)
            net.names = names
        if backend is not None:
            backend.names = names

    # -- per frame ---------------------------------------------------------------------------
    def _predict(self, images_bgr: list[np.ndarray], n_prompts: int) -> list[Results]:
        results: list[Results] = self.model.predict(
            images_bgr if len(images_bgr) > 1 else images_bgr[0],
            imgsz=self.imgsz, conf=self.conf, max_det=MAX_PER_PROMPT * n_prompts,
            device=self.device, verbose=False, retina_masks=self.return_masks,
            **({"quantize": 16} if self.half else {}),  # ultralytics' FP16 switch ("half" is deprecated)
        )
        return results

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        return self._run_many([image], text_state)[0]

    def _run_batch(self, images: list[np.ndarray], text_state: object) -> list[Detections]:
        """One batched forward for all images (same prompts for all)."""
        return self._run_many(images, text_state)

    def image_head(self) -> ImageHead | None:
        """The network's forward with the prompt set's embeddings as a tensor input
        (:func:`ultra_image_head`), or None on the ``reference`` path (ultralytics' own
        predictor runs the network there: no seam to replace)."""
        if self.preprocess == "reference":
            return None
        import torch

        from probench.models.ultra.tiny import embed_dim

        dtype, dev, side = self._param.dtype, self._torch_device, self.imgsz
        dim = embed_dim(self.model, self.kind)

        def example(n_prompts: int) -> tuple[Tensor, Tensor]:
            return (torch.zeros(1, 3, side, side, dtype=dtype, device=dev),
                    torch.zeros(1, n_prompts, dim, dtype=dtype, device=dev))

        outputs = HEAD_OUTPUTS + (SEGMENT_OUTPUTS if self.segment else ())
        return ImageHead(self.kind, ultra_image_head(self.net, self.kind), HEAD_INPUTS,
                         outputs, example, prompt_axes={"text": 1, "scores": 1})

    def pixel_inputs(self, images: Sequence[Frame]) -> dict[str, Tensor]:
        """The network input for ``images`` by the detector's path: the device letterbox, or
        ultralytics' own (OpenCV ``LetterBox``, as its predictor prepares a batch)."""
        import torch

        if self.preprocess == "device":
            return {"pixel_values": self._letterbox(self._upload(images))}
        from ultralytics.data.augment import LetterBox

        from probench.models.preprocess import as_numpy_rgb

        frames = [as_numpy_rgb(im) for im in images]
        box = LetterBox(self.imgsz, auto=len({f.shape for f in frames}) == 1, stride=STRIDE)
        batch = np.stack([np.asarray(box(image=f)) for f in frames])  # image only: an array
        x = torch.from_numpy(batch).to(self._torch_device).permute(0, 3, 1, 2)
        return {"pixel_values": (x.to(self._param.dtype) / 255.0).contiguous()}

    def _run_many(self, images: list[Frame], text: object) -> list[Detections]:
        try:
            if self.preprocess == "reference":
                return self._run_reference(images)
            return self._run_device(images, text)
        except (RuntimeError, ValueError) as exc:
            raise ModelError(f"{self.name}: ultralytics inference failed: {exc}") from exc

    def _run_reference(self, images: list[Frame]) -> list[Detections]:
        # ultralytics reads numpy images as BGR (OpenCV convention); ours are RGB.
        bgr = [np.ascontiguousarray(im[..., ::-1]) for im in images]
        results = self._predict(bgr, len(self._prompts))
        return [
            results_to_detections(r, (int(im.shape[0]), int(im.shape[1])), self.return_masks)
            for r, im in zip(results, images, strict=True)
        ]

    def _run_device(self, images: list[Frame], text: object) -> list[Detections]:
        import torch

        timer = StageTimer(sync=cuda_sync(self._torch_device))
        with timer.stage("preprocess"):
            x = self.pixel_inputs(images)["pixel_values"]
        with timer.stage("forward"), torch.inference_mode():
            outs = self.run_head(x, text)
            # the predictions as the network gives them: (B, 4 + nc [+ mask coefficients], A)
            y = torch.cat(outs[:3] if self.segment else outs, 1)
            preds: RawOutput = (y, outs[3]) if self.segment else y
        with timer.stage("postprocess"):
            sizes = [(int(im.shape[0]), int(im.shape[1])) for im in images]
            parts = self.postprocess(preds, tuple(x.shape[2:]), sizes)
        share = {k: v / len(images) for k, v in timer.timings_ms.items()}
        return [
            Detections.from_arrays(b, s, c, image_size=hw, masks=m, timings_ms=share)
            for (b, s, c, m), hw in zip(parts, sizes, strict=True)
        ]

    def postprocess(
        self, preds: RawOutput, input_hw: tuple[int, int], sizes: list[tuple[int, int]]
    ) -> list[ImageBoxes]:
        """Raw network output -> per image (boxes in original pixels, scores, prompt index,
        masks or None): ultralytics' predictor's NMS, empty-mask filter and box scaling, with
        no mask built unless ``return_masks`` (module doc)."""
        return postprocess(
            preds, input_hw, sizes, conf=self.conf, n_classes=len(self._prompts),
            agnostic=self.kind == "yoloe", segment=self.segment,
            end2end=bool(getattr(self.net, "end2end", False)), return_masks=self.return_masks,
        )




HEAD_INPUTS = ("images", "text")  # [B,3,H,W], [1,n,D] (YOLOE: after its RepRTA adapter)
HEAD_OUTPUTS = ("boxes", "scores")  # [B,4,A] xywh in input pixels, [B,n,A] sigmoid scores
SEGMENT_OUTPUTS = ("mask_coefficients", "protos")  # [B,32,A], [B,32,H/4,W/4] (-seg models)


def ultra_image_head(net: Module, kind: Kind) -> Module:
    """A ``torch.nn.Module`` over the fused network's forward, the prompt set's embeddings
    an input (YOLO-World: ``txt_feats``, which ``WorldModel.predict`` takes; YOLOE: the class
    embeddings its head appends, already through the RepRTA adapter as the text cache holds
    them; the network is called as a module, so its hooks see one call), the decoded
    predictions split so that the class scores are one tensor whose
    axis 1 is the prompt axis. The head's class count follows the prompt count of the input.
    Every prompt's scores depend on the image and that prompt alone, or on a max over the
    prompts (YOLO-World's text-guided attention): padding by repeating a prompt is safe."""
    import torch

    # torch is not followed by mypy (pyproject: follow_imports = "skip"), so Module is Any here
    class UltraImageHead(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, images: Tensor, text: Tensor) -> tuple[Tensor, ...]:
            n = text.shape[1]
            self.net.model[-1].nc = n  # the class count of this forward (as _apply_vocabulary)
            # YOLOE: ready class embeddings go in as ``vpe`` (its head passes a (B, n, D) one
            # through as is); ``tpe`` would run the RepRTA adapter the text cache already applied
            out = self.net(images, txt_feats=text) if kind == "world" else self.net(images, vpe=text)
            y = out[0]
            if isinstance(y, tuple):  # a -seg model: (predictions, mask prototypes)
                pred, protos = y
                return pred[:, :4], pred[:, 4 : 4 + n], pred[:, 4 + n :], protos
            return y[:, :4], y[:, 4 : 4 + n]

    return UltraImageHead().eval()


def _channels_last(dev: TorchDevice, half: bool) -> bool:
    """Channels-last weights where the convolutions read that layout natively: on an x86 CPU
    with oneDNN (Linux/Windows; ultralytics' AutoBackend's rule), and for fp16 on CUDA
    (tensor-core convolutions read NHWC; on NCHW tensors cuDNN adds a layout transpose
    around each convolution: launches, in a forward that is launch-bound on a fast GPU)."""
    import platform

    import torch

    if dev.type == "cuda":
        return half
    return (
        dev.type == "cpu" and platform.machine() in {"AMD64", "x86_64"} and platform.system() != "Darwin"
        and torch.backends.mkldnn.is_available() and bool(torch.backends.mkldnn.enabled)
    )


# -- factories (zoo contract) --------------------------------------------------------------------
def _arch(spec: ModelSpec) -> UltraArch:
    from probench.models.specs_ultralytics import ARCH

    try:
        return ARCH[spec.name]
    except KeyError as exc:
        raise ModelError(f"{spec.name} is not an ultralytics zoo model") from exc


def build_tiny(
    spec: ModelSpec, *, device: str = "cpu", precision: str = "fp32", score_threshold: float = 0.0,
    preprocess: str = "device",
) -> UltralyticsDetector:
    """``tiny-<name>``: real architecture, seeded random weights, small input, hash text encoder."""
    dev, _ = resolve_device(device, precision)
    arch = _arch(spec)
    model, encoder = random_model(arch, dev)
    return UltralyticsDetector(
        f"tiny-{spec.name}", model, arch["kind"], encoder,
        imgsz=arch["tiny_imgsz"], device=dev, half=precision == "fp16", score_threshold=score_threshold,
        weights_source="tiny config, random init (deterministic seed)", preprocess=preprocess,
    )


def build(
    spec: ModelSpec, *, device: str = "cpu", precision: str = "fp32", score_threshold: float = 0.0,
    weights: str | None = None, random_weights: bool = False, preprocess: str = "device",
) -> UltralyticsDetector:
    """The real model from local files (``weights``: the checkpoint file or a folder holding
    it and its text encoder), or the real-size architecture with random weights."""
    dev, _ = resolve_device(device, precision)
    arch = _arch(spec)
    encoder: TextEncoder
    if random_weights:
        if weights:
            from probench.errors import UsageError

            raise UsageError("give either weights or random_weights, not both")
        # as the tiny variants (calibrated, tiny head bias), at the real input size
        model, encoder = random_model(arch, dev)
        source = "random init (real-size config)"
    else:
        ckpt = find_checkpoint(spec.checkpoint, weights)
        cls = model_class(arch["kind"])
        try:
            model = cls(str(ckpt))
        except (TypeError, RuntimeError, KeyError, ValueError) as exc:
            raise ModelError(f"{spec.name}: cannot load {ckpt}: {exc}") from exc
        model.model.to(dev).eval()
        encoder = real_text_encoder(model, arch["kind"], ckpt.parent, weights, dev)
        source = str(ckpt)
    return UltralyticsDetector(
        spec.name, model, arch["kind"], encoder, imgsz=arch["imgsz"], device=dev,
        half=precision == "fp16", score_threshold=score_threshold, weights_source=source,
        preprocess=preprocess,
    )
