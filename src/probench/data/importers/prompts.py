"""The ``--prompts TABLE`` of ``probench import coco``: per category, the prompts and
annotations that replace the defaults (docs/FORMATS.md, "Importing other datasets").

CSV: a header row with ``category`` and any of ``orig``, ``cat``, ``tmpl``,
``prompt_types``, ``coref``; lists are separated by ``;``; an empty cell is "not given".
JSON: an object ``{category: {field: value}}`` or a list of objects with a ``category``
field; lists are JSON lists. ``category`` is a category's name, or its id when no name
matches.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from probench.data.errors import DatasetError
from probench.data.importers.common import read_json_file
from probench.errors import UsageError
from probench.files import UserFileError, open_user_file

FIELDS = ("orig", "cat", "tmpl", "prompt_types", "coref")
LIST_FIELDS = ("prompt_types", "coref")


def _rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) of every entry of the table."""
    if path.suffix.lower() == ".csv":
        try:  # bounded: a regular file under the CSV size cap (docs/SECURITY.md)
            with io.TextIOWrapper(open_user_file(path, what="--prompts", kind="csv"), newline="",
                                  encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                header = list(reader.fieldnames or [])
                rows = list(reader)
        except UserFileError as exc:
            raise DatasetError(str(exc)) from None
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise DatasetError(f"{path}: cannot read the prompts table: {exc}") from exc
        unknown = [h for h in header if h not in ("category", *FIELDS)]
        if "category" not in header or unknown:
            raise DatasetError(f"{path}: the header must hold 'category' and any of {', '.join(FIELDS)}"
                               + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
        out = []
        for i, row in enumerate(rows, start=2):  # line 1 is the header
            entry: dict[str, Any] = {"category": row.get("category")}
            for k in FIELDS:
                v = (row.get(k) or "").strip()
                if v:
                    entry[k] = [x.strip() for x in v.split(";") if x.strip()] if k in LIST_FIELDS else v
            out.append((f"{path.name} line {i}", entry))
        return out
    if path.suffix.lower() != ".json":
        raise UsageError(f"--prompts {path}: a .csv or .json table")
    data = read_json_file(path, "prompts table")
    if isinstance(data, dict):
        items = [{**v, "category": k} if isinstance(v, dict) else {"category": k, "_bad": v}
                 for k, v in data.items()]
        return [(f"{path.name} {it['category']!r}", it) for it in items]
    if isinstance(data, list):
        return [(f"{path.name} [{i}]", it if isinstance(it, dict) else {"_bad": it})
                for i, it in enumerate(data)]
    raise DatasetError(f"{path}: the prompts table must be a JSON object or list")


def read_prompts_table(path: Path, categories: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Category id -> the fields the table gives for it. Every problem is named with its
    row (one line each): an unknown or repeated category, an unknown field, a value of the
    wrong type."""
    by_name = {str(c.get("name")): int(c["id"]) for c in categories}
    ids = {int(c["id"]) for c in categories}
    out: dict[int, dict[str, Any]] = {}
    problems: list[str] = []
    for where, row in _rows(path):
        if "_bad" in row:
            problems.append(f"{where}: an entry must be an object, not {type(row['_bad']).__name__}")
            continue
        key = row.get("category")
        cid = by_name.get(str(key)) if key is not None else None
        if cid is None and str(key).strip().lstrip("-").isdigit() and int(str(key)) in ids:
            cid = int(str(key))
        if cid is None:
            problems.append(f"{where}: unknown category {key!r} (neither a category name nor an id)")
            continue
        if cid in out:
            problems.append(f"{where}: category {key!r} is given twice")
            continue
        fields: dict[str, Any] = {}
        for k, v in row.items():
            if k == "category":
                continue
            if k not in FIELDS:
                problems.append(f"{where}: unknown field {k!r} (expected {', '.join(FIELDS)})")
            elif k in LIST_FIELDS and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                problems.append(f"{where}: {k!r} must be a list of strings, not {v!r}")
            elif k not in LIST_FIELDS and not (isinstance(v, str) and v.strip()):
                problems.append(f"{where}: {k!r} must be a non-empty string, not {v!r}")
            else:
                fields[k] = v
        out[cid] = fields
    if problems:
        raise DatasetError(f"{path}: {len(problems)} problem(s)", problems=problems)
    return out
