"""What every figure of the report and the sweep must satisfy before it is written: its texts
are plain (a ``$`` in a label from a file is a dollar, never mathtext) while the tick labels
that matplotlib's formatters make render as math (``10^1`` on a log axis), and no two of its
visible texts overlap nor leave the canvas (:func:`text_problems`, from the renderer's own
boxes). Any module that draws a figure calls these; matplotlib is imported inside them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names for the checker only: mypy skips matplotlib (pyproject)
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

__all__ = ["TOLERANCE_PX", "plain_text", "text_problems", "wrap_title"]

TOLERANCE_PX = 1.0  # boxes that share less than this in either direction only touch


def _tick_labels(axis: Axis) -> list[tuple[Text, bool]]:
    """Every tick label of ``axis`` (created so far) and whether its formatter makes it (True)
    or it was given as text (a FixedFormatter: ``set_xticklabels``, from a file maybe)."""
    from matplotlib.ticker import FixedFormatter

    out: list[tuple[Text, bool]] = []
    for ticks, formatter in ((axis.get_major_ticks(), axis.get_major_formatter()),
                             (axis.get_minor_ticks(), axis.get_minor_formatter())):  # fmt: skip
        made = not isinstance(formatter, FixedFormatter)
        out += [(label, made) for tick in ticks for label in (tick.label1, tick.label2)]
    return out


def plain_text(fig: Figure) -> None:
    """Every text of the figure as plain text (titles, legends, labels, prompt texts: they come
    from files, and ``cost $\\frac{1`` would otherwise be parsed as mathtext and fail), except
    the tick labels a formatter makes: those keep their mathtext (``$\\mathdefault{10^{1}}$``
    on a log axis renders as 10 to the 1)."""
    from matplotlib.text import Text

    formatted: set[int] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for label, made in _tick_labels(axis):
                label.set_parse_math(made)
                formatted.add(id(label))
    for t in fig.findobj(Text):
        if id(t) not in formatted:
            t.set_parse_math(False)


def wrap_title(text: str, width_in: float, fontsize: float) -> str:
    """``text`` wrapped into lines that fit ``width_in`` inches at ``fontsize`` points (an
    average glyph is about 0.55 em wide; :func:`text_problems` checks the result)."""
    import textwrap

    chars = max(12, int(width_in * 72.0 / (0.55 * fontsize)))
    return "\n".join(textwrap.fill(line, chars) for line in text.split("\n"))


def _visible(t: Text) -> bool:
    """Drawn: visible itself and in a visible axes (or none), with some non-blank text."""
    return bool(t.get_text().strip()) and t.get_visible() and (t.axes is None or t.axes.get_visible())


def _drawn_texts(fig: Figure) -> list[Text]:
    """The figure's texts as drawn: tick labels of the ticks in view only (matplotlib keeps
    ticks outside the view, unrendered, with stale places)."""
    from matplotlib.text import Text

    tick_labels: set[int] = set()
    drawn: list[Text] = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            tick_labels |= {id(label) for label, _ in _tick_labels(axis)}
            if not ax.get_visible():  # a hidden panel (a grid's unused cell) draws none
                continue
            lo, hi = sorted(axis.get_view_interval())
            slack = (hi - lo) * 1e-6
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:  # the ticks in view only
                if tick.get_visible() and lo - slack <= tick.get_loc() <= hi + slack:
                    drawn += [tick.label1, tick.label2]
    drawn += [t for t in fig.findobj(Text) if id(t) not in tick_labels]
    seen: set[int] = set()
    out = []
    for t in drawn:
        if id(t) not in seen and _visible(t):
            seen.add(id(t))
            out.append(t)
    return out


def _shared(a: Bbox, b: Bbox) -> tuple[float, float]:
    return min(a.x1, b.x1) - max(a.x0, b.x0), min(a.y1, b.y1) - max(a.y0, b.y0)


def _name(t: Text) -> str:
    text = " ".join(t.get_text().split())
    return repr(text if len(text) <= 40 else text[:37] + "...")


def text_problems(fig: Figure) -> list[str]:
    """Each pair of drawn texts whose rendered boxes overlap, and each text that leaves the
    canvas, in one line each ([] when the figure is fit to publish). The figure is drawn
    first, as saving draws it (layout engine included), with its texts made plain."""
    plain_text(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # the Agg canvas has one
    canvas = fig.bbox
    from matplotlib.text import Text

    # the text's own box (an Annotation's get_window_extent also holds its leader line)
    boxes = [(t, Text.get_window_extent(t, renderer)) for t in _drawn_texts(fig)]
    problems = []
    for t, box in boxes:
        if (box.x0 < canvas.x0 - TOLERANCE_PX or box.y0 < canvas.y0 - TOLERANCE_PX
                or box.x1 > canvas.x1 + TOLERANCE_PX or box.y1 > canvas.y1 + TOLERANCE_PX):  # fmt: skip
            problems.append(f"{_name(t)} leaves the canvas ({box.x0:.0f}..{box.x1:.0f} x {box.y0:.0f}.."
                            f"{box.y1:.0f} px; canvas {canvas.width:.0f} x {canvas.height:.0f})")
    order = sorted(range(len(boxes)), key=lambda k: boxes[k][1].x0)  # sweep along x: pairs that can meet
    for n, i in enumerate(order):
        a = boxes[i][1]
        for j in order[n + 1:]:
            b = boxes[j][1]
            if b.x0 >= a.x1 - TOLERANCE_PX:
                break
            w, h = _shared(a, b)
            if w > TOLERANCE_PX and h > TOLERANCE_PX:
                problems.append(f"{_name(boxes[i][0])} overlaps {_name(boxes[j][0])} ({w:.0f} x {h:.0f} px)")
    return problems
