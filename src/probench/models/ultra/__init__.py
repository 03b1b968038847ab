"""Ultralytics adapters: YOLO-World v2 and YOLOE (Table II rows YOLO-W-S/X, YOLOE-S/X).

Native prompt interface: a class vocabulary. The prompts are embedded by a text encoder
(CLIP ViT-B/32 for YOLO-World, MobileCLIP(2) for YOLOE) and the embeddings are the model's
classes. Ultralytics is imported in this package only, forced offline (no downloads, no
auto-install: :func:`probench.models.ultra.weights.import_ultralytics`).

Text cache (per prompt): each prompt is embedded on its own (YOLOE's RepRTA adapter is
applied per row too), so the cache holds one embedding per prompt text; a prompt set is
the stack of its rows. Applying a vocabulary is separate from encoding and cheap: the
stacked embeddings are set on the fused model (YOLO-World ``txt_feats``, YOLOE ``pe``) and
the head's class count follows; no predictor rebuild, no dummy prediction.

Per frame, two paths (``preprocess``):

- ``device`` (default): :class:`probench.models.preprocess.Letterbox` on the model's
  device, the model's forward, and box-only post-processing: ultralytics' own NMS and box
  scaling. For the -seg models (YOLOE) no mask is built unless ``return_masks`` is set;
  ultralytics' segment predictor also drops every box whose mask is empty, and
  :func:`~probench.models.ultra.postprocess.nonempty_masks` reproduces that decision from
  the prototype masks at their own resolution (exact; the full-size masks are built only
  for the rare boxes the cheap tests cannot decide), so boxes and scores are the predictor's.
- ``reference``: ultralytics' predictor as published (letterbox with OpenCV, NMS, masks
  at 0.001 confidence and the empty-mask filter).

Tiny variants (``tiny-yolo-world-s`` ...): the real architecture from its YAML, seeded random
weights, a small inference size, and a deterministic stand-in text encoder
(:class:`~probench.models.ultra_text.HashTextEncoder`). Their BatchNorm statistics are
calibrated on seeded random batches (:func:`~probench.models.ultra.tiny.calibrate_batchnorm`):
without that, a randomly initialised deep YOLO outputs the same score everywhere. Their
contrastive-head bias is -4 instead of ultralytics' training init (-10), so that random
weights keep enough boxes to test with.

Modules: :mod:`~probench.models.ultra.adapter` (the detector and the zoo factories),
:mod:`~probench.models.ultra.postprocess` (NMS, the empty-mask filter, ``Results``
conversion), :mod:`~probench.models.ultra.tiny` (random-weight builds),
:mod:`~probench.models.ultra.weights` (the offline import, checkpoint and text-encoder search).
"""
