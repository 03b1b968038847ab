"""Synthetic sequence datasets (docs/FORMATS.md, "Sequences"), deterministic from a seed.

Each video is a small scene: a grey gradient, a static grey pillar in front of
everything, and three coloured shapes (two targets and a distractor that shares a
target's shape, so that the target's ``cat`` form names two objects: its coref set is
``[orig, tmpl]``). Every shape moves back and forth along a straight line whose range
reaches beyond the image, so it **leaves and re-enters**, and crosses the pillar, so it is
**occluded for a few frames**. A shape counts as visible, and gets a box (its whole extent,
clipped to the image), when at least ``VISIBLE_SHARE`` of it is in the image and not behind
the pillar.

The first video's prompt set changes midway (``videos[0].prompt_changes``, at the first
frame from the middle on where its second target is visible): from its first
target to its second; the other videos ask for their targets throughout. Ground truth is
given only for the queries of a frame's prompt set (a query outside it is not evaluated
there).

:func:`sequence_scene` is the scene (what a renderer or a scripted detector needs),
:func:`sequence_coco` the annotations, :func:`render_frame` one frame's pixels and
:func:`write_sequence_dataset` a dataset folder with JPEG frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "VISIBLE_SHARE",
    "SceneObject",
    "SequenceScene",
    "render_frame",
    "sequence_coco",
    "sequence_scene",
    "visible_box",
    "write_sequence_dataset",
]

VISIBLE_SHARE = 0.5  # of a shape's area, in the image and not behind the pillar
GREY = (128, 128, 128)
# saturated colours far (RGB distance > 80) from each other and from every grey of the background, so
# that a colour rule finds each shape (the example plugin's detector: examples/, docs/MODELS.md)
_COLOURS = {"red": (200, 30, 30), "green": (30, 160, 50), "blue": (30, 60, 200), "yellow": (220, 210, 40)}
_SHAPES = ("square", "disk", "triangle")


@dataclass(frozen=True)
class SceneObject:
    """A shape moving back and forth between ``start`` and ``end`` (pixels of its top-left
    corner, possibly outside the image) with ``period`` frames for a round trip."""

    key: int  # 0, 1: targets; 2: the distractor
    shape: str
    colour: str
    size: int
    start: tuple[float, float]
    end: tuple[float, float]
    period: int
    phase: float  # 0..1 of a round trip at frame 0

    def corner(self, frame: int) -> tuple[float, float]:
        u = (frame / self.period + self.phase) % 1.0
        s = 2 * u if u < 0.5 else 2 - 2 * u  # a triangle wave 0 -> 1 -> 0
        return (
            self.start[0] + s * (self.end[0] - self.start[0]),
            self.start[1] + s * (self.end[1] - self.start[1]),
        )


@dataclass(frozen=True)
class SequenceScene:
    video_id: int
    objects: tuple[SceneObject, ...]
    pillar: tuple[int, int]  # x range of the occluding pillar
    background: tuple[tuple[int, int, int], tuple[int, int, int]]  # top and bottom colours
    width: int
    height: int
    n_frames: int


def sequence_scene(
    video: int, *, width: int = 160, height: int = 120, n_frames: int = 60, seed: int = 0
) -> SequenceScene:
    """Video ``video``'s scene, deterministic from ``seed``."""
    rng = np.random.default_rng([seed, video])
    colours = list(_COLOURS)
    picks = rng.permutation(len(colours))[:3]
    shapes = rng.permutation(len(_SHAPES))[:2]
    objs = []
    lanes = rng.permutation(3)
    for k in range(3):
        shape = _SHAPES[int(shapes[0 if k == 2 else k])]  # the distractor shares target 0's shape
        size = int(rng.integers(max(12, height // 8), max(14, height // 4)))
        y = float(8 + lanes[k] * (height - size - 16) / 2)
        span = 0.35 + 0.25 * k  # how far beyond the image: each object leaves at its own time
        x0, x1 = -span * size * 2, width - size + span * size * 2
        if k % 2:
            x0, x1 = x1, x0
        objs.append(
            SceneObject(
                k,
                shape,
                colours[int(picks[k])],
                size,
                (x0, y),
                (x1, y + float(rng.uniform(-6, 6))),
                int(rng.integers(max(8, n_frames // 2), max(10, n_frames))),
                float(rng.uniform()),
            )
        )
    px = int(width * rng.uniform(0.4, 0.55))
    top = (int(rng.integers(170, 215)),) * 3  # a grey gradient
    bottom = (int(rng.integers(70, 110)),) * 3
    return SequenceScene(
        video,
        tuple(objs),
        (px, px + max(6, width // 12)),
        (top, bottom),
        width,
        height,
        n_frames,
    )


def _mask(obj: SceneObject, frame: int, width: int, height: int) -> np.ndarray:
    """The shape's pixels on an unbounded canvas, clipped to the image: a bool (H, W) mask."""
    x, y = obj.corner(frame)
    yy, xx = np.mgrid[0:height, 0:width]
    u, v = (xx + 0.5 - x) / obj.size, (yy + 0.5 - y) / obj.size  # 0..1 inside the shape's box
    inside = (u >= 0) & (u < 1) & (v >= 0) & (v < 1)
    if obj.shape == "disk":
        inside &= (u - 0.5) ** 2 + (v - 0.5) ** 2 <= 0.25
    elif obj.shape == "triangle":
        inside &= np.abs(u - 0.5) <= v / 2
    return np.asarray(inside, dtype=bool)


def _area(obj: SceneObject) -> float:
    return obj.size * obj.size * {"square": 1.0, "disk": np.pi / 4, "triangle": 0.5}[obj.shape]


def visible_box(scene: SequenceScene, obj: SceneObject, frame: int) -> list[float] | None:
    """``[x, y, w, h]`` of the shape (its whole extent, clipped to the image) when visible."""
    mask = _mask(obj, frame, scene.width, scene.height)
    mask[:, scene.pillar[0] : scene.pillar[1]] = False
    if mask.sum() < VISIBLE_SHARE * _area(obj):
        return None
    x, y = obj.corner(frame)
    x0, y0 = max(0.0, x), max(0.0, y)
    x1, y1 = min(float(scene.width), x + obj.size), min(float(scene.height), y + obj.size)
    return [round(x0, 2), round(y0, 2), round(x1 - x0, 2), round(y1 - y0, 2)]


def render_frame(scene: SequenceScene, frame: int) -> np.ndarray:
    """Frame ``frame`` of ``scene`` as RGB uint8 (H, W, 3)."""
    t = np.linspace(0.0, 1.0, scene.height)[:, None, None]
    top, bottom = np.array(scene.background[0], float), np.array(scene.background[1], float)
    img = np.broadcast_to((1 - t) * top + t * bottom, (scene.height, scene.width, 3)).astype(np.uint8)
    for obj in scene.objects:
        img[_mask(obj, frame, scene.width, scene.height)] = _COLOURS[obj.colour]
    img[:, scene.pillar[0] : scene.pillar[1]] = GREY
    return img


def _query(qid: int, obj: SceneObject, coref: bool) -> dict[str, Any]:
    q: dict[str, Any] = {
        "id": qid,
        "name": obj.shape,
        "prompts": {"orig": f"the {obj.colour} {obj.shape}", "cat": obj.shape},
        "prompt_types": ["attributive"],
    }
    if coref:
        q["coref"] = ["orig", "tmpl"]  # the distractor has the same shape: cat names two objects
    return q


def _switch_frame(scene: SequenceScene) -> int:
    """The first video's prompt change: the first frame from the middle on where its second
    target is visible (so that the latency measures the detector, not the scene)."""
    mid = scene.n_frames // 2
    return next((f for f in range(mid, scene.n_frames - 1) if visible_box(scene, scene.objects[1], f)), mid)


def sequence_coco(n_videos: int = 4, n_frames: int = 60, *, width: int = 160, height: int = 120,
                  fps: float = 10.0, seed: int = 0) -> dict[str, Any]:
    """The annotations of a sequence dataset (module doc): frames as ``images/vVV/FFFF.jpg``."""
    images: list[dict[str, Any]] = []
    categories: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    videos: list[dict[str, Any]] = []
    for v in range(n_videos):
        scene = sequence_scene(v, width=width, height=height, n_frames=n_frames, seed=seed)
        qids = {k: 10 * (v + 1) + k for k in (0, 1)}  # query of target k
        categories += [_query(qids[k], scene.objects[k], coref=k == 0) for k in (0, 1)]
        video: dict[str, Any] = {"id": v + 1, "name": f"synthetic-{v + 1}"}
        switch = _switch_frame(scene) if v == 0 else None
        if switch is not None:
            video["prompt_changes"] = [{"frame_index": switch, "query_ids": [qids[1]]}]
        videos.append(video)
        for f in range(n_frames):
            iid = 1000 * (v + 1) + f
            active = (
                [qids[0]]
                if switch is not None and f < switch
                else [qids[1]]
                if switch is not None
                else [qids[0], qids[1]]
            )
            images.append(
                {
                    "id": iid,
                    "file_name": f"images/v{v + 1:02d}/{f:04d}.jpg",
                    "width": width,
                    "height": height,
                    "domain": "indoor",
                    "query_ids": active,
                    "video_id": v + 1,
                    "frame_index": f,
                    "timestamp": round(f / fps, 6),
                }
            )
            for k in (0, 1):
                box = visible_box(scene, scene.objects[k], f)
                if qids[k] in active and box is not None:
                    annotations.append(
                        {
                            "id": len(annotations) + 1,
                            "image_id": iid,
                            "category_id": qids[k],
                            "bbox": box,
                            "area": round(box[2] * box[3], 2),
                            "iscrowd": 0,
                            "track_id": 100 * (v + 1) + k,
                        }
                    )
    info = {
        "description": "probench synthetic sequences (probench.data.synthetic_sequences)",
        "n_videos": n_videos,
        "n_frames": n_frames,
        "seed": seed,
        "fps": fps,
        "width": width,
        "height": height,
    }
    return {
        "info": info,
        "videos": videos,
        "images": images,
        "categories": categories,
        "annotations": annotations,
    }


def write_sequence_dataset(
    folder: str | Path, n_videos: int = 4, n_frames: int = 60, *, jpeg_quality: int = 85, **scene: Any
) -> Path:
    """Write ``folder/annotations.json`` and the JPEG frames; returns the folder. ``scene``:
    :func:`sequence_coco`'s keyword arguments (width, height, fps, seed)."""
    import cv2

    from probench.cache.atomic import write_bytes_atomic, write_json_atomic

    folder = Path(folder)
    coco = sequence_coco(n_videos, n_frames, **scene)
    info = coco["info"]
    by_video: dict[int, list[dict[str, Any]]] = {im["video_id"]: [] for im in coco["images"]}
    for im in coco["images"]:
        by_video[im["video_id"]].append(im)
    for vid, ims in by_video.items():
        video = sequence_scene(vid - 1, width=info["width"], height=info["height"], n_frames=n_frames,
                               seed=info["seed"])
        for im in ims:
            rgb = render_frame(video, im["frame_index"])
            ok, buf = cv2.imencode(
                ".jpg", np.ascontiguousarray(rgb[:, :, ::-1]), [cv2.IMWRITE_JPEG_QUALITY, jpeg_quality]
            )
            if not ok:
                raise OSError(f"cannot encode frame {im['id']}")
            write_bytes_atomic(folder / im["file_name"], buf.tobytes())
    write_json_atomic(folder / "annotations.json", coco, indent=None)
    return folder
