"""The Pro-Bench paper, as the report cites it, and its published Table II (package data).

Nwankwo, Alaran, Rauch, Obilikpa, Rueckert: "Pro-Bench: Prompt-Robust Open-Vocabulary
Visual Grounding Across Real-World Heterogeneous Environments", arXiv 2609.27076 (2026),
https://arxiv.org/abs/2609.27076. ``data/paper_table2.csv`` holds the 16 rows of its
Table II exactly as published (mAP at .5/.75/.5:.95, latency on an RTX 4090, m_cat, m_tmpl,
Δmax, best formulation, PCR, PLC); ``probench report --reference paper`` adds them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

TITLE = ("Pro-Bench: Prompt-Robust Open-Vocabulary Visual Grounding Across Real-World "
         "Heterogeneous Environments")
AUTHORS = "L. Nwankwo, M. Alaran, C. Rauch, S. C. Obilikpa, E. Rueckert"
URL = "https://arxiv.org/abs/2609.27076"
REFERENCE_NAME = "paper"  # `--reference paper`


def table2_path() -> Path:
    """The packaged CSV of the paper's Table II."""
    return Path(str(resources.files("probench.report") / "data" / "paper_table2.csv"))


def resolve_reference(value: str | Path) -> Path:
    """``--reference``: the word ``paper`` (the packaged Table II) or a CSV path."""
    return table2_path() if str(value) == REFERENCE_NAME else Path(value)
