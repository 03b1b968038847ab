"""The OWL detector with its image path on another runtime (ONNX Runtime, TensorRT).

Only ``run_head`` (the image head: image + cached text embeddings -> logits, boxes) changes; the
preprocessing (device or reference path, as the base detector), the text tower and the
post-processing stay the PyTorch detector's, so outputs are comparable box for box.
"""

from __future__ import annotations

from probench.models.owl import OwlDetector


class ExportedOwlDetector(OwlDetector):
    runtime = "torch"  # set by each subclass; also the suffix of the detector's name

    def __init__(self, base: OwlDetector) -> None:
        super().__init__(
            base.model, base.image_processor, base.tokenizer, name=f"{base.name}@{self.runtime}",
            dev=base.dev, dtype=base.dtype, score_threshold=base.score_threshold,
            preprocess=base.preprocess,
        )
        self.weights_source = base.weights_source
