"""``probench import mot``: MOT Challenge sequences plus a prompts table as a sequence dataset
(docs/FORMATS.md, "Importing other datasets", "MOT Challenge").

A MOT split folder (``--root``, e.g. ``MOT17/train``) holds one folder per sequence, each with
``seqinfo.ini`` (``[Sequence]``: ``imDir``, ``frameRate``, ``seqLength``, ``imWidth``,
``imHeight``, ``imExt``), ``gt/gt.txt`` (``frame, id, x, y, w, h, conf[, class,
visibility]``; frames from 1) and the frames ``<imDir>/000001<imExt>``, .... The prompts
table (CSV) names the targets: one row per query, ``sequence, track_id, orig`` and optionally
``cat``, ``tmpl``, ``prompt_types``, ``coref`` (lists ``;``-separated) and ``start_frame``.
The rows of a sequence with the same ``start_frame`` (empty: 1) are its prompt set from that
frame on, up to the next group's: a later group is a prompt change. Only the sequences the
table names are imported, and of their ground truth only the boxes of tracked targets.

Each sequence becomes a video (ids 1, 2, ... in table order), each frame an image (id
``video * 1_000_000 + frame``, ``frame_index`` = frame - 1, ``timestamp`` = (frame - 1) /
frameRate), each row a query (ids 1, 2, ... in row order). A gt row of a target under a
query of the frame's set becomes an annotation, its box clipped to the image (MOT boxes
overhang the border), with a ``track_id`` per (sequence, MOT id, query). gt rows with
``conf`` 0 (MOT's "not to be considered") or a ``visibility`` under ``--min-visibility`` are
left out.
"""

from __future__ import annotations

import configparser
import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probench.data.errors import DatasetError
from probench.data.importers.coco import ImportSummary, source_problems
from probench.data.importers.common import (
    _derive_forms,
    check_out,
    check_problems,
    place_images,
    write_dataset,
)
from probench.errors import UsageError

__all__ = ["import_mot", "mot_coco"]

_COLUMNS = ("sequence", "track_id", "orig", "cat", "tmpl", "prompt_types", "coref", "start_frame")
FRAME_ID_BASE = 1_000_000


@dataclass(frozen=True)
class _Row:
    line: int
    sequence: str
    track: int
    start: int
    query: dict[str, Any]


def _list(cell: str) -> list[str] | None:
    items = [x.strip() for x in cell.split(";") if x.strip()]
    return items or None


def _read_table(path: Path, problems: list[str]) -> list[_Row]:
    if not path.is_file():
        raise UsageError(f"{path}: no such prompts table")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from exc
    reader = csv.DictReader(text.splitlines())
    fields = reader.fieldnames or []
    missing = [c for c in ("sequence", "track_id", "orig") if c not in fields]
    unknown = [c for c in fields if c not in _COLUMNS]
    if missing or unknown:
        what = (
            f"lacks column(s) {', '.join(missing)}"
            if missing
            else f"has unknown column(s) {', '.join(unknown)}"
        )
        raise DatasetError(
            f"{path}: 1 problem(s)",
            problems=[f"{path.name}: the header {what} (columns: {', '.join(_COLUMNS)})"],
        )
    rows: list[_Row] = []
    for k, rec in enumerate(reader):
        where = f"{path.name} line {k + 2}"
        cells = {key: (rec.get(key) or "").strip() for key in _COLUMNS}
        try:
            track = int(cells["track_id"])
            start = int(cells["start_frame"] or 1)
        except ValueError:
            problems.append(f"{where}: 'track_id' and 'start_frame' must be integers")
            continue
        if start < 1:
            problems.append(
                f"{where}: 'start_frame' must be 1 or more (MOT frames count from 1), not {start}"
            )
            continue
        if not cells["sequence"] or not cells["orig"]:
            problems.append(f"{where}: 'sequence' and 'orig' must not be empty")
            continue
        name = cells["cat"] or "object"
        prompts = {"orig": cells["orig"], **_derive_forms(cells["orig"], name)}
        prompts.update({f: cells[f] for f in ("cat", "tmpl") if cells[f]})
        query: dict[str, Any] = {
            "id": len(rows) + 1,
            "name": name,
            "prompts": prompts,
            "source": {"sequence": cells["sequence"], "track_id": track},
        }
        for key in ("prompt_types", "coref"):
            if (items := _list(cells[key])) is not None:
                query[key] = items
        rows.append(_Row(k + 2, cells["sequence"], track, start, query))
    return rows


def _seqinfo(folder: Path) -> dict[str, Any]:
    path = folder / "seqinfo.ini"
    if not path.is_file():
        raise UsageError(f"{folder}: no seqinfo.ini (not a MOT Challenge sequence folder)")
    ini = configparser.ConfigParser()
    try:
        ini.read(path, encoding="utf-8")
        s = ini["Sequence"]
        info: dict[str, Any] = {
            "im_dir": s.get("imDir", "img1"),
            "ext": s.get("imExt", ".jpg"),
            "rate": float(s["frameRate"]),
            "length": int(s["seqLength"]),
            "width": int(s["imWidth"]),
            "height": int(s["imHeight"]),
        }
    except (KeyError, ValueError, configparser.Error) as exc:
        raise DatasetError(f"{path}: not a readable [Sequence] section ({exc})") from exc
    if not (info["rate"] > 0 and info["length"] > 0 and info["width"] > 0 and info["height"] > 0):
        raise DatasetError(f"{path}: frameRate, seqLength, imWidth and imHeight must be positive")
    return info


def _gt(
    folder: Path, length: int, min_visibility: float, problems: list[str]
) -> list[tuple[int, int, list[float]]]:
    """(frame, MOT id, [x, y, w, h]) of the considered gt rows."""
    path = folder / "gt" / "gt.txt"
    if not path.is_file():
        raise UsageError(f"{folder}: no gt/gt.txt")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{folder.name}/gt/gt.txt line {n}"
        parts = [p.strip() for p in line.split(",")]
        try:
            frame, tid = int(float(parts[0])), int(float(parts[1]))
            box = [float(v) for v in parts[2:6]]
            conf = float(parts[6]) if len(parts) > 6 else 1.0
            vis = float(parts[8]) if len(parts) > 8 else 1.0
        except (ValueError, IndexError):
            problems.append(
                f"{where}: expected 'frame, id, x, y, w, h, conf[, class, visibility]', got {line[:60]!r}"
            )
            continue
        if not all(math.isfinite(v) for v in box):
            problems.append(f"{where}: the box is not finite")
        elif not 1 <= frame <= length:
            problems.append(f"{where}: frame {frame} is not in 1..{length} (seqLength)")
        elif conf != 0 and vis >= min_visibility:
            out.append((frame, tid, box))
    return out


def _clip(box: list[float], width: int, height: int) -> list[float] | None:
    x0, y0 = max(0.0, box[0]), max(0.0, box[1])
    x1, y1 = min(float(width), box[0] + box[2]), min(float(height), box[1] + box[3])
    return [round(x0, 2), round(y0, 2), round(x1 - x0, 2), round(y1 - y0, 2)] if x1 > x0 and y1 > y0 else None


def mot_coco(
    root: Path, prompts: Path, *, min_visibility: float = 0.0, domain: str | None = None
) -> dict[str, Any]:
    """The annotations dict of the import (module doc); every problem at once as a
    :class:`DatasetError`. File names are relative to ``root``."""
    problems: list[str] = []
    rows = _read_table(prompts, problems)
    by_seq: dict[str, list[_Row]] = {}
    for r in rows:
        by_seq.setdefault(r.sequence, []).append(r)
    coco: dict[str, Any] = {
        "info": {"source": "MOT Challenge", "root": str(root)},
        "videos": [],
        "images": [],
        "categories": [r.query for r in rows],
        "annotations": [],
    }
    tracks: dict[tuple[int, int, int], int] = {}  # (video, MOT id, query) -> track id
    for v, (seq, seq_rows) in enumerate(by_seq.items(), start=1):
        folder = root / seq
        if not folder.is_dir():
            problems.append(
                f"{prompts.name} line {seq_rows[0].line}: no sequence folder {seq!r} under {root}"
            )
            continue
        info = _seqinfo(folder)
        starts = sorted({r.start for r in seq_rows})
        if starts[0] != 1:
            problems.append(
                f"{prompts.name}: sequence {seq!r} has no prompt set from frame 1 (its first "
                f"start_frame is {starts[0]})"
            )
            continue
        late = [r for r in seq_rows if r.start > info["length"]]
        for r in late:
            problems.append(
                f"{prompts.name} line {r.line}: start_frame {r.start} is beyond {seq}'s "
                f"{info['length']} frames"
            )
        sets = {s: [r for r in seq_rows if r.start == s] for s in starts}
        coco["videos"].append(
            {
                "id": v,
                "name": seq,
                "prompt_changes": [
                    {"frame_index": s - 1, "query_ids": [r.query["id"] for r in sets[s]]}
                    for s in starts[1:]
                    if s <= info["length"]
                ],
            }
        )
        gt = _gt(folder, info["length"], min_visibility, problems)
        active: dict[int, list[_Row]] = {}
        current: list[_Row] = []
        for f in range(1, info["length"] + 1):
            current = sets.get(f, current)
            active[f] = current
            im: dict[str, Any] = {
                "id": v * FRAME_ID_BASE + f,
                "file_name": f"{seq}/{info['im_dir']}/{f:06d}{info['ext']}",
                "width": info["width"],
                "height": info["height"],
                "video_id": v,
                "frame_index": f - 1,
                "timestamp": round((f - 1) / info["rate"], 6),
                "query_ids": [r.query["id"] for r in current],
            }
            if domain is not None:
                im["domain"] = domain
            coco["images"].append(im)
        known = {tid for _, tid, _ in gt}
        for r in seq_rows:
            if r.track not in known:
                problems.append(
                    f"{prompts.name} line {r.line}: sequence {seq!r} has no considered gt track {r.track}"
                )
        for frame, tid, box in gt:
            for r in active[frame]:
                if r.track != tid or (clipped := _clip(box, info["width"], info["height"])) is None:
                    continue
                track = tracks.setdefault((v, tid, r.query["id"]), len(tracks) + 1)
                coco["annotations"].append(
                    {
                        "id": len(coco["annotations"]) + 1,
                        "image_id": v * FRAME_ID_BASE + frame,
                        "category_id": r.query["id"],
                        "bbox": clipped,
                        "area": round(clipped[2] * clipped[3], 2),
                        "iscrowd": 0,
                        "track_id": track,
                    }
                )
    check_problems(prompts, problems)
    return coco


def import_mot(
    root: Path,
    prompts: Path,
    out: Path,
    *,
    copy: bool = False,
    min_visibility: float = 0.0,
    domain: str | None = None,
    overwrite: bool = False,
) -> ImportSummary:
    """Import (module doc), check with ``probench validate``'s checks, then write ``out``."""
    if not root.is_dir():
        raise UsageError(f"--root {root}: no such folder")
    if not 0.0 <= min_visibility <= 1.0:
        raise UsageError(f"--min-visibility must lie in [0, 1], got {min_visibility}")
    check_out(out, overwrite)
    coco = mot_coco(root, prompts, min_visibility=min_visibility, domain=domain)
    check_problems(prompts, source_problems(coco, prompts))
    place_images(coco["images"], root, out, copy=copy)
    path = write_dataset(coco, out)
    return ImportSummary(path, len(coco["images"]), len(coco["categories"]), len(coco["annotations"]))
