"""Sequence datasets (docs/FORMATS.md, "Sequences"): videos made of frames, tracks, prompt changes.

A dataset's images may carry ``video_id`` and ``frame_index`` (0-based, consecutive within
the video) and optionally ``timestamp`` (seconds); its annotations may carry ``track_id``
(one object over the frames of one video, under one query). An optional top-level
``videos`` list names videos and their prompt changes: ``{"id", "name",
"prompt_changes": [{"frame_index", "query_ids"}]}``, from which frame on the operator's
prompt set is another. A dataset without any of these is a plain image dataset, and its
content hash is what it always was (nothing is added to it).

:func:`check_sequences` is what ``probench validate`` reports about these fields (one line
per problem, records named as everywhere else); :func:`build_videos` turns a valid
dataset's records into :class:`Video` objects. No import of the rest of ``probench.data``
(``dataset`` and ``validate`` import this module).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, TypeGuard

__all__ = ["PromptChange", "Video", "build_videos", "check_sequences", "is_sequence_dataset"]

SEQUENCE_IMAGE_KEYS = ("video_id", "frame_index", "timestamp")


@dataclass(frozen=True)
class PromptChange:
    """From ``frame_index`` on, the operator's prompt set is ``query_ids``."""

    frame_index: int
    query_ids: tuple[int, ...]


@dataclass(frozen=True)
class Video:
    """One video: its frames' image ids in frame order, and its prompt changes."""

    id: int
    name: str
    image_ids: tuple[int, ...]  # image_ids[k] is frame k
    prompt_changes: tuple[PromptChange, ...] = ()
    timestamps: tuple[float, ...] | None = None  # seconds, when every frame has one

    def __len__(self) -> int:
        return len(self.image_ids)


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def is_sequence_dataset(coco: Mapping[str, Any]) -> bool:
    """Whether any image names a video (or a ``videos`` list is given): the checks run only then."""
    if "videos" in coco:
        return True
    images = coco.get("images")
    if not isinstance(images, list):
        return False
    return any(isinstance(im, dict) and ("video_id" in im or "frame_index" in im) for im in images)


def _image_name(im: Mapping[str, Any], k: int) -> str:
    rid = im.get("id")
    return f"image {rid}" if _is_int(rid) else f"images[{k}]"


def check_sequences(coco: Mapping[str, Any]) -> list[str]:
    """Every problem of the sequence fields (module doc), one line each; [] for a plain dataset."""
    if not isinstance(coco, dict) or not is_sequence_dataset(coco):
        return []
    problems: list[str] = []
    images = (
        [im for im in coco.get("images") or [] if isinstance(im, dict)]
        if isinstance(coco.get("images"), list)
        else []
    )
    frames = _check_image_fields(images, problems)
    _check_frames(frames, problems)
    _check_tracks(coco, images, problems)
    changes = _check_videos(coco, frames, problems)
    _check_label_spaces(frames, changes, problems)
    return problems


# video id -> [(frame_index, image name, image record)]
_Frames = dict[int, list[tuple[int, str, dict[str, Any]]]]


def _check_image_fields(images: Sequence[dict[str, Any]], problems: list[str]) -> _Frames:
    frames: _Frames = {}
    for k, im in enumerate(images):
        name = _image_name(im, k)
        vid, fi, ts = im.get("video_id"), im.get("frame_index"), im.get("timestamp")
        if vid is None and fi is None:
            continue  # not a frame (a 'timestamp' key alone is ignored, as any unknown key)
        ok = True
        if vid is None or fi is None:
            missing = "video_id" if vid is None else "frame_index"
            problems.append(
                f"{name}: a frame of a video needs both 'video_id' and 'frame_index' ('{missing}' is missing)"
            )
            ok = False
        if vid is not None and not _is_int(vid):
            problems.append(f"{name}: 'video_id' must be an integer, not {vid!r}")
            ok = False
        if fi is not None and (not _is_int(fi) or fi < 0):
            problems.append(f"{name}: 'frame_index' must be a non-negative integer, not {fi!r}")
            ok = False
        if ts is not None and (
            not isinstance(ts, (int, float)) or isinstance(ts, bool) or not math.isfinite(ts) or ts < 0
        ):
            problems.append(f"{name}: 'timestamp' must be a non-negative number of seconds, not {ts!r}")
            ok = False
        if ok:
            frames.setdefault(int(vid), []).append((int(fi), name, im))  # type: ignore[arg-type]
    return frames


def _check_frames(frames: _Frames, problems: list[str]) -> None:
    for vid, entries in sorted(frames.items()):
        entries.sort(key=lambda e: e[0])
        seen: dict[int, str] = {}
        for fi, name, _ in entries:
            if fi in seen:
                problems.append(f"video {vid}: frame_index {fi} is given twice ({seen[fi]} and {name})")
            seen.setdefault(fi, name)
        missing = sorted(set(range(len(seen))) - set(seen))
        if missing:
            problems.append(
                f"video {vid}: frame indices must be 0, 1, ... without gaps; frame "
                f"{missing[0]} is missing ({len(seen)} distinct frames, the last {max(seen)})"
            )
        stamps = [(fi, im.get("timestamp")) for fi, _, im in entries]
        given = [(fi, t) for fi, t in stamps if isinstance(t, (int, float)) and not isinstance(t, bool)]
        if given and len(given) != len(stamps):
            problems.append(
                f"video {vid}: 'timestamp' is given on some frames only ({len(given)} of {len(stamps)})"
            )
        for (f0, t0), (f1, t1) in pairwise(given):
            if f1 > f0 and not t1 > t0:
                problems.append(
                    f"video {vid}: timestamps must increase with frame_index (frame {f1} "
                    f"at {t1} s is not after frame {f0} at {t0} s)"
                )
                break
        for fi, name, im in entries:
            if not isinstance(im.get("query_ids"), list):
                problems.append(
                    f"{name}: a frame of video {vid} (frame {fi}) needs an explicit "
                    "'query_ids' (a video's prompt set is given, not derived from its ground truth)"
                )


def _check_tracks(coco: Mapping[str, Any], images: Sequence[dict[str, Any]], problems: list[str]) -> None:
    anns = coco.get("annotations")
    if not isinstance(anns, list):
        return
    by_id = {im.get("id"): im for im in images if _is_int(im.get("id"))}
    track_video: dict[int, tuple[int, str]] = {}
    track_query: dict[int, tuple[Any, str]] = {}
    per_frame: set[tuple[int, Any]] = set()
    reported: set[tuple[int, str, Any]] = set()  # each conflict once, at its first annotation
    for k, a in enumerate(anns):
        if not isinstance(a, dict) or "track_id" not in a:
            continue
        rid = a.get("id")
        name = f"annotation {rid}" if _is_int(rid) else f"annotations[{k}]"
        tid = a["track_id"]
        if not _is_int(tid):
            problems.append(f"{name}: 'track_id' must be an integer, not {tid!r}")
            continue
        im = by_id.get(a.get("image_id"))
        if im is None:
            continue  # an unknown image is named by the annotation checks
        vid = im.get("video_id")
        if not _is_int(vid) and (vid is not None or im.get("frame_index") is not None):
            continue  # the image's own video fields are wrong: named there
        if not _is_int(vid):
            problems.append(
                f"{name}: 'track_id' {tid} on image {a.get('image_id')}, which is not a frame of a video"
            )
            continue
        first = track_video.setdefault(tid, (vid, name))
        if first[0] != vid and (tid, "video", vid) not in reported:
            reported.add((tid, "video", vid))
            problems.append(
                f"{name}: track {tid} is in video {vid} and in video {first[0]} ({first[1]}); "
                "a track belongs to one video"
            )
        q = track_query.setdefault(tid, (a.get("category_id"), name))
        if q[0] != a.get("category_id") and (tid, "query", a.get("category_id")) not in reported:
            reported.add((tid, "query", a.get("category_id")))
            problems.append(
                f"{name}: track {tid} is under query {a.get('category_id')} here and under "
                f"query {q[0]} in {q[1]}; a track belongs to one query"
            )
        key = (tid, a.get("image_id"))
        if key in per_frame:
            problems.append(f"{name}: track {tid} has two boxes on image {a.get('image_id')}")
        per_frame.add(key)


def _check_videos(
    coco: Mapping[str, Any], frames: _Frames, problems: list[str]
) -> dict[int, list[tuple[int, tuple[int, ...]]]]:
    """The ``videos`` list; returns each video's valid prompt changes (frame, query ids)."""
    out: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    videos = coco.get("videos")
    if videos is None:
        return out
    if not isinstance(videos, list):
        problems.append(f"annotations.json: 'videos' must be a list, not {type(videos).__name__}")
        return out
    cats = coco.get("categories")
    qids = {c.get("id") for c in cats if isinstance(c, dict)} if isinstance(cats, list) else set()
    seen: set[int] = set()
    for k, v in enumerate(videos):
        if not isinstance(v, dict) or not _is_int(v.get("id")):
            problems.append(f"videos[{k}]: must be an object with an integer 'id'")
            continue
        vid = int(v["id"])
        name = f"video {vid}"
        if vid in seen:
            problems.append(f"{name}: listed twice in 'videos'")
            continue
        seen.add(vid)
        if vid not in frames:
            problems.append(f"{name}: no image has 'video_id' {vid}")
        if "name" in v and not isinstance(v["name"], str):
            problems.append(f"{name}: 'name' must be a string, not {v['name']!r}")
        changes = v.get("prompt_changes", [])
        if not isinstance(changes, list):
            problems.append(f"{name}: 'prompt_changes' must be a list of {{frame_index, query_ids}}")
            continue
        n = len(frames.get(vid, []))
        last = 0
        good: list[tuple[int, tuple[int, ...]]] = []
        for j, ch in enumerate(changes):
            where = f"{name} prompt_changes[{j}]"
            if not isinstance(ch, dict):
                problems.append(f"{where}: must be an object {{frame_index, query_ids}}")
                continue
            fi, q = ch.get("frame_index"), ch.get("query_ids")
            if not _is_int(fi) or not 0 < fi < max(n, 1):
                problems.append(
                    f"{where}: 'frame_index' must be an integer from 1 to the video's last frame "
                    f"({n - 1}), not {fi!r}"
                )
                continue
            if fi <= last:
                problems.append(f"{where}: frame_index {fi} is not after the previous change's ({last})")
                continue
            if not isinstance(q, list) or not q or not all(_is_int(x) for x in q):
                problems.append(f"{where}: 'query_ids' must be a non-empty list of query ids, not {q!r}")
                continue
            unknown = [x for x in q if x not in qids]
            if unknown:
                problems.append(f"{where}: 'query_ids' names unknown query {unknown[0]}")
                continue
            last = fi
            good.append((fi, tuple(sorted(set(q)))))
        out[vid] = good
    return out


def _check_label_spaces(
    frames: _Frames, changes: Mapping[int, list[tuple[int, tuple[int, ...]]]], problems: list[str]
) -> None:
    """A video's frames share one prompt set, which changes only where a prompt change says."""
    for vid, entries in sorted(frames.items()):
        lists = [(fi, name, im.get("query_ids")) for fi, name, im in entries]
        if not lists or not all(isinstance(q, list) and all(_is_int(x) for x in q) for _, _, q in lists):
            continue  # missing or malformed query_ids are named elsewhere
        switch = dict(changes.get(vid, []))
        active: tuple[int, ...] | None = None
        for fi, name, q in lists:
            mine = tuple(sorted(set(q)))  # type: ignore[arg-type]
            expected = switch.get(fi, active)
            if expected is None:
                active = mine  # frame 0 sets the video's first prompt set
                continue
            if mine != expected:
                why = (
                    f"the prompt change at frame {fi} sets {list(expected)}"
                    if fi in switch
                    else f"the video's prompt set is {list(expected)} and no prompt change is at this frame"
                )
                problems.append(
                    f"{name}: 'query_ids' {list(mine)} of video {vid} frame {fi} differ from its "
                    f"video's: {why}"
                )
                break
            active = expected


def build_videos(images: Mapping[int, Any], raw: Mapping[str, Any]) -> dict[int, Video]:
    """The videos of a valid dataset: ``images`` are its image records (with ``video_id``,
    ``frame_index``, ``timestamp`` attributes), ``raw`` its annotations dict (``videos``)."""
    frames: dict[int, list[tuple[int, int, float | None]]] = {}
    for iid, rec in images.items():
        if rec.video_id is not None:
            frames.setdefault(rec.video_id, []).append((rec.frame_index, iid, rec.timestamp))
    listed = {int(v["id"]): v for v in raw.get("videos") or [] if isinstance(v, dict)}
    out: dict[int, Video] = {}
    for vid in sorted(frames):
        entries = sorted(frames[vid])
        meta = listed.get(vid, {})
        stamps = [t for _, _, t in entries]
        changes = tuple(
            PromptChange(int(c["frame_index"]), tuple(sorted({int(q) for q in c["query_ids"]})))
            for c in meta.get("prompt_changes", [])
        )
        out[vid] = Video(
            vid,
            str(meta.get("name", f"video {vid}")),
            tuple(i for _, i, _ in entries),
            changes,
            None if any(t is None for t in stamps) else tuple(float(t or 0.0) for t in stamps),
        )
    return out
