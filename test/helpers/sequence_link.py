"""The fake grounding node with operator prompts (a sequence bag's replay,
realtime/eval_sequence.py), and the example plugin's colour detector that finds the
synthetic sequences' shapes (their prompts name the colour)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from helpers.fake_link import FakeGroundingLink

EXAMPLE_SRC = Path(__file__).resolve().parents[2] / "examples" / "probench-example-plugin" / "src"


def colour_detector() -> Any:
    """The example plugin's ColourDetector (boxes the pixels of the colour a prompt names)."""
    if str(EXAMPLE_SRC) not in sys.path:
        sys.path.insert(0, str(EXAMPLE_SRC))
    from probench_example_plugin.detector import ColourDetector

    return ColourDetector(device="cpu", score_threshold=0.0)


# The fake link takes operator prompts itself (set_prompts, acknowledged when its worker has
# made them ready, ``ack_s`` later on the evaluator's side), as the grounding node does.
OperatorFakeLink = FakeGroundingLink


def build(spec: Any, *, preprocess: str = "device", **_options: Any) -> Any:
    """A one-off plugin model (``--model helpers.sequence_link:build``; the zoo's factory
    arguments, of which it needs only ``preprocess``): the colour detector."""
    det = colour_detector()
    det.preprocess = preprocess
    det.weights_source = "none (numpy colour rule)"
    return det


def offline_temporal(ds_path: Path) -> dict[str, Any]:
    """The temporal metrics (orig) of the colour detector run offline on the dataset's own
    images: the reference the replays (eval, ground) are compared with."""
    from probench.data.dataset import load_dataset
    from probench.scoring.temporal import temporal_metrics
    from probench.vocabulary import detections_to_results, unique_prompts

    ds = load_dataset(ds_path)
    det = colour_detector()
    preds: list[Any] = []
    for iid in ds.images:
        qids, prompts = ds.prompts_for(iid, "orig")
        texts, groups = unique_prompts(qids, prompts)
        preds += detections_to_results(det.detect(ds.read_image(iid), texts), iid, groups)
    out = temporal_metrics(ds, {"orig": preds})
    assert out is not None
    return out.to_json()
