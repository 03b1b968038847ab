"""docs/EVALUATION.md names every evaluator parameter and every real-time figure the code
writes (so the user's page cannot drift from the code)."""

from __future__ import annotations

from pathlib import Path

from probench.realtime.eval_realtime import realtime_summary
from probench.realtime.node_spec import EVALUATOR_PARAMS, GROUNDING_PARAMS


def test_every_parameter_and_figure_is_documented(repo_root: Path) -> None:
    doc = (repo_root / "docs" / "EVALUATION.md").read_text(encoding="utf-8")
    table = doc[doc.index("## Parameters"):]
    for p in EVALUATOR_PARAMS:
        assert f"| `{p.name}` | " in table, p.name
    assert "frame_prompts_wait" in table and GROUNDING_PARAMS["frame_prompts_wait"].default == 0.5
    figures = doc[doc.index("## Real-time figures"):doc.index("## The trace")]
    rt = realtime_summary([], budget_ms=33.3, rate_hz=30.0, mode="camera-rate", warmup_frames=3).to_json()
    internal = {"budget_ms", "rate_hz", "mode", "jitter_of", "by_formulation", "n_send_intervals"}
    for key in set(rt) - internal:
        assert f"`{key}`" in figures, key
