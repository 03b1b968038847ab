"""Dataset validation: every problem named with its record id, one line each.

PLACEHOLDER (minimal structural checks); the data helper replaces it with the full
validator of issue 3.
"""

from __future__ import annotations

from pathlib import Path


def validate_coco(coco: object, root: Path | None = None) -> list[str]:
    if not isinstance(coco, dict):
        return ["annotations.json: top level must be a JSON object"]
    problems = []
    for key in ("images", "categories", "annotations"):
        if not isinstance(coco.get(key), list):
            problems.append(f"annotations.json: '{key}' must be a list")
    return problems
