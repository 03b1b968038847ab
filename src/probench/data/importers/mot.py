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
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
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
from probench.files import UserFileError, read_user_bytes

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


def _read_text(path: Path, what: str, kind: str, root: Path | None = None) -> str:
    """A text input of the import under the reader rule (docs/SECURITY.md): through the
    bounded reader (a regular file, never a FIFO or device, opened without blocking, under
    the kind's size cap, not sparse); under ``root`` (``--root``), never a link out of it.
    Its content is never echoed when it is refused."""
    if root is not None and not path.resolve().is_relative_to(root.resolve()):
        raise DatasetError(f"{what} {path}: is a link out of --root {root}: not read")
    try:
        data = read_user_bytes(path, what=what, kind=kind, text=True)
    except UserFileError as exc:
        raise DatasetError(str(exc)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{what} {path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def _read_table(path: Path, problems: list[str]) -> list[_Row]:
    if not path.exists() and not path.is_symlink():
        raise UsageError(f"{path}: no such prompts table")
    text = _read_text(path, "prompts table", "csv")
    reader = csv.DictReader(text.splitlines())
    try:
        return _table_rows(reader, path, problems)
    except csv.Error as exc:  # e.g. a cell over the csv module's 131072-character limit
        # (line_num counts the lines read before the one that failed)
        line = reader.line_num + 1
        raise DatasetError(f"{path.name} line {line}: not a readable CSV row ({exc})") from None


def _table_rows(reader: csv.DictReader[str], path: Path, problems: list[str]) -> list[_Row]:
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


_EXT = re.compile(r"^\.[A-Za-z0-9]{1,8}$")


def _seqinfo(folder: Path, root: Path) -> dict[str, Any]:
    path = folder / "seqinfo.ini"
    if not path.exists() and not path.is_symlink():
        raise UsageError(f"{folder}: no seqinfo.ini (not a MOT Challenge sequence folder)")
    ini = configparser.ConfigParser(interpolation=None)
    try:
        ini.read_string(_read_text(path, "seqinfo.ini", "small", root))
    except configparser.Error as exc:  # named by its line, never echoed
        raise DatasetError(f"{path}: not an INI file (line {getattr(exc, 'lineno', '?')}: "
                           f"{type(exc).__name__})") from None
    if not ini.has_section("Sequence"):
        raise DatasetError(f"{path}: no [Sequence] section")
    section = ini["Sequence"]

    def number(key: str, kind: type[int] | type[float]) -> Any:
        raw = section.get(key)
        if raw is None:
            raise DatasetError(f"{path}: [Sequence] has no {key}")
        try:
            return kind(raw)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise DatasetError(f"{path}: {key} is not {what}: {raw[:20]!r}") from None

    info: dict[str, Any] = {
        "im_dir": section.get("imDir", "img1"),
        "ext": section.get("imExt", ".jpg"),
        "rate": number("frameRate", float),
        "length": number("seqLength", int),
        "width": number("imWidth", int),
        "height": number("imHeight", int),
    }
    if not (math.isfinite(info["rate"]) and info["rate"] > 0 and info["length"] > 0 and info["width"] > 0
            and info["height"] > 0):
        raise DatasetError(f"{path}: frameRate, seqLength, imWidth and imHeight must be positive and finite")
    rel = PurePosixPath(info["im_dir"])
    if (not info["im_dir"] or rel.is_absolute() or ".." in rel.parts
            or not (folder / rel).resolve().is_relative_to(root.resolve())):
        raise DatasetError(f"{path}: imDir {info['im_dir'][:40]!r} must be a folder inside the sequence "
                           "folder")
    if not _EXT.match(info["ext"]):
        raise DatasetError(f"{path}: imExt {info['ext'][:20]!r} is not a file extension (.jpg, .png, ...)")
    _check_length(path, folder / rel, info["length"])
    return info


def _check_length(ini: Path, frames: Path, length: int) -> None:
    """``seqLength`` bounded by what is on disk: the frames folder holds at least that many
    files (counted, never opened), so a declared length of 10**9 allocates nothing."""
    n = 0
    try:
        with os.scandir(frames) as entries:
            for _ in entries:
                n += 1
                if n >= length:
                    return
    except OSError as exc:
        raise DatasetError(f"{ini}: its frames folder {frames} cannot be listed "
                           f"({exc.strerror or type(exc).__name__})") from None
    raise DatasetError(f"{ini}: seqLength is {length}, but {frames} holds {n} file(s): the declared length "
                       "must not exceed the frames on disk")


def _whole(text: str) -> int:
    """A MOT frame number or id: a whole number ("3", or "3.0" as some exporters write it);
    "3.9" is a ValueError, never frame 3."""
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if not value.is_integer():
            raise ValueError(f"{text!r} is not a whole number") from None
        return int(value)


def _gt(
    folder: Path, root: Path, length: int, min_visibility: float, problems: list[str]
) -> list[tuple[int, int, list[float]]]:
    """(frame, MOT id, [x, y, w, h]) of the considered gt rows."""
    path = folder / "gt" / "gt.txt"
    if not path.exists() and not path.is_symlink():
        raise UsageError(f"{folder}: no gt/gt.txt")
    out = []
    for n, line in enumerate(_read_text(path, "gt.txt", "csv", root).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{folder.name}/gt/gt.txt line {n}"
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6:
            problems.append(f"{where}: expected 'frame, id, x, y, w, h, conf[, class, visibility]', got "
                            f"{len(parts)} column(s)")
            continue
        try:
            frame, tid = _whole(parts[0]), _whole(parts[1])
        except ValueError:
            problems.append(f"{where}: frame and id must be whole numbers, got {parts[0][:20]!r} and "
                            f"{parts[1][:20]!r}")
            continue
        try:
            box = [float(v) for v in parts[2:6]]
            conf = float(parts[6]) if len(parts) > 6 else 1.0
            vis = float(parts[8]) if len(parts) > 8 else 1.0
        except ValueError:
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
        if not folder.resolve().is_relative_to(root.resolve()):
            problems.append(f"{prompts.name} line {seq_rows[0].line}: sequence {seq[:40]!r} is not a folder "
                            "inside --root")
            continue
        if not folder.is_dir():
            problems.append(
                f"{prompts.name} line {seq_rows[0].line}: no sequence folder {seq!r} under {root}"
            )
            continue
        info = _seqinfo(folder, root)
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
        gt = _gt(folder, root, info["length"], min_visibility, problems)
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
    place_images(coco["images"], root, out, copy=copy, info=coco["info"])  # a linked import names --root
    path = write_dataset(coco, out)
    return ImportSummary(path, len(coco["images"]), len(coco["categories"]), len(coco["annotations"]))
