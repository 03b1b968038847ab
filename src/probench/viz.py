"""Drawing detections on an image (pure numpy + cv2; used by the debug image and reports)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from probench.detections import Detections

# Distinct, readable colours (RGB), indexed by prompt index.
PALETTE: tuple[tuple[int, int, int], ...] = (
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48),
    (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212),
    (0, 128, 128), (220, 190, 255), (170, 110, 40), (255, 250, 200), (128, 0, 0),
)


def color_for(index: int, bgr: bool = False) -> tuple[int, int, int]:
    r, g, b = PALETTE[index % len(PALETTE)]
    return (b, g, r) if bgr else (r, g, b)


def draw_detections(
    image: np.ndarray,
    detections: Detections,
    labels: Sequence[str],
    *,
    bgr: bool = False,
    max_label_chars: int = 40,
    extras: Sequence[str] | None = None,
    masks: np.ndarray | None = None,
) -> np.ndarray:
    """A copy of ``image`` (uint8 ``(H, W, 3)``, RGB unless ``bgr``) with each box and
    ``"<label> <score>"`` drawn; ``labels[i]`` names prompt ``i``; ``extras[j]`` (e.g. a
    track id and a distance) follows detection ``j``'s text. ``masks`` (bool ``(N, H, W)``,
    one per detection, e.g. ``detections.masks``) are filled first, translucent in their
    box's colour (:func:`fill_masks`). The input is not modified."""
    import cv2

    out = np.array(image, dtype=np.uint8, copy=True, order="C")
    h, w = out.shape[:2]
    if masks is not None:
        fill_masks(out, detections, masks, bgr=bgr)
    thick = max(1, round(min(h, w) / 320))
    font_scale = label_font_scale(h, w)
    for j, (box, score, pi) in enumerate(zip(detections.xyxy, detections.scores, detections.prompt_index,
                                             strict=True)):
        color = color_for(int(pi), bgr)
        x1, y1, x2, y2 = (round(float(v)) for v in box)
        cv2.rectangle(out, (x1, y1), (x2, y2), color, thick, cv2.LINE_8)
        label = labels[int(pi)] if 0 <= int(pi) < len(labels) else f"#{int(pi)}"
        if len(label) > max_label_chars:
            label = label[: max_label_chars - 1] + "~"
        text = f"{label} {score:.2f}"
        if extras is not None and extras[j]:
            text += f" {extras[j]}"
        text, scale, (tw, th), base = fit_label(text, font_scale, w)
        lx = max(0, min(x1, w - tw - 2))  # the whole label inside the image
        ty = y1 - 2 if y1 - th - base - 2 >= 0 else min(h - 1, y1 + th + base + 2)
        cv2.rectangle(out, (lx, ty - th - base), (lx + tw + 2, ty + 1), color, -1)
        # dark text on the coloured label background stays readable for every palette entry
        cv2.putText(out, text, (lx + 1, ty - base + 1), cv2.FONT_HERSHEY_SIMPLEX, scale,
                    (0, 0, 0), 1, cv2.LINE_AA)
    return out


MIN_FONT_SCALE = 0.25  # OpenCV's simplex font at 0.25 is about 6 px tall: the smallest still legible


def label_font_scale(h: int, w: int) -> float:
    """The labels' font scale for an ``h`` x ``w`` image: about 1/1000 of its short side, at
    least 0.35 (a 640x480 frame: 0.48), and for a small image at most 1/250 of its short
    side, so a label stays a small part of it (64x48: 0.25, not 0.35); never below
    :data:`MIN_FONT_SCALE`. :func:`fit_label` then fits each label into the width."""
    side = min(h, w)
    return max(MIN_FONT_SCALE, min(max(0.35, side / 1000), side / 250))


def fit_label(text: str, scale: float, width: int) -> tuple[str, float, tuple[int, int], int]:
    """``(text, scale, (text width, text height), baseline)`` of a label that fits an image
    ``width`` px wide (its background is 2 px wider than the text): the font shrunk down to
    :data:`MIN_FONT_SCALE`, then the text cut (ending in ``~``) when it is still too wide."""
    import cv2

    font = cv2.FONT_HERSHEY_SIMPLEX
    room = max(1, width - 2)
    (tw, th), base = cv2.getTextSize(text, font, scale, 1)
    if tw > room:
        scale = max(MIN_FONT_SCALE, scale * room / tw)
        (tw, th), base = cv2.getTextSize(text, font, scale, 1)
    while tw > room and len(text) > 1:
        text = text[:-2] + "~" if len(text) > 2 else text[:1]
        (tw, th), base = cv2.getTextSize(text, font, scale, 1)
    return text, scale, (tw, th), base


MASK_ALPHA = 0.4  # the fill's share of a masked pixel's colour


def fill_masks(out: np.ndarray, detections: Detections, masks: np.ndarray, *, bgr: bool = False,
               alpha: float = MASK_ALPHA) -> None:
    """Blend each detection's mask into ``out`` (uint8 ``(H, W, 3)``, in place) in its box's
    colour, ``alpha`` of the colour over ``1 - alpha`` of the pixel. Where masks overlap the
    highest score shows (ties: the lower index), as in the mask images. Masks of another
    size than ``out`` are not drawn (the boxes still are)."""
    import cv2

    masks = np.asarray(masks, dtype=bool)
    n = len(detections)
    if n == 0 or masks.shape != (n, *out.shape[:2]):
        return
    best_first = np.argsort(-detections.scores, kind="stable")
    dtype = np.dtype(np.uint8) if n <= 255 else np.dtype(np.uint16)
    top = np.zeros(out.shape[:2], dtype)  # r + 1 for the best-ranked r whose mask holds the pixel
    value = np.empty_like(top)
    for r in range(n - 1, -1, -1):  # worst first, each better one painted over it
        value.fill(r + 1)
        cv2.copyTo(value, np.ascontiguousarray(masks[best_first[r]]).view(np.uint8), top)
    covered = (top > 0).view(np.uint8)
    colours = np.zeros((n + 1, 3), np.uint8)  # by rank r + 1: the colour of that detection's prompt
    colours[1:] = [color_for(int(detections.prompt_index[i]), bgr) for i in best_first]
    if n <= 255:  # OpenCV's table look-up, per channel: several times numpy's gather
        table = np.zeros((256, 1, 3), np.uint8)
        table[: n + 1, 0] = colours
        overlay = cv2.LUT(cv2.cvtColor(top, cv2.COLOR_GRAY2RGB), table)
    else:
        overlay = np.take(colours, top, axis=0)
    target = out if out.flags.c_contiguous else np.ascontiguousarray(out)
    blended = cv2.addWeighted(target, 1.0 - alpha, overlay, alpha, 0.0)
    cv2.copyTo(blended, covered, target)  # in place: the masked pixels only
    if target is not out:
        out[...] = target
