"""The latency timeline of runs replayed through the ROS graph (issue 9): drawn from the
run's realtime_frames.jsonl, one panel per formulation, missed frames marked, the budget
line; only runs that came through ROS; the document embeds it."""

from __future__ import annotations

import json
import math
from pathlib import Path

from probench.cache.trace import frame_record
from probench.cli import main
from probench.report.figures import fig_latency_timeline, timeline_points
from probench.report.load import load_run


def _frame(
    f: str, image_id: int, sent_ms: float, latency: float | None, *, session: int = 0, warmup: bool = False
) -> dict:
    return frame_record(
        f,
        image_id,
        sent_ns=int(sent_ms * 1e6),
        received_ns=None if latency is None else int((sent_ms + latency) * 1e6),
        status="missed" if latency is None else "answered",
        session=session,
        warmup=warmup,
    )


def _ros_run(make_run, name: str = "ros") -> Path:
    run = make_run(name)
    m = json.loads((run / "metrics.json").read_text())
    m["realtime"] = {
        "budget_ms": 33.3,
        "rate_hz": 30.0,
        "frames_sent": 7,
        "frames_received": 5,
        "frames_missed": 2,
        "within_budget": 0.5,
        "latency_ms": {"p50": 20.0, "p95": 40.0},
    }
    (run / "metrics.json").write_text(json.dumps(m))
    trace = [
        _frame("orig", 1, 0.0, 150.0, warmup=True),
        _frame("orig", 2, 200.0, 20.0),
        _frame("orig", 3, 233.3, None),
        _frame("orig", 4, 266.7, 45.0),
        _frame("cat", 1, 900.0, 10.0),
        _frame("cat", 2, 933.3, None),
        _frame("cat", 2, 99_000.0, 12.0, session=1),  # resumed an hour later: its last record counts
        {"kind": "stray", "session": 0, "stamp_ns": 1, "received_ns": 5},
    ]
    (run / "realtime_frames.jsonl").write_text("".join(json.dumps(r) + "\n" for r in trace) + '{"torn')
    return run


def test_points_per_formulation_with_sessions_following_each_other(make_run) -> None:
    entry = load_run(_ros_run(make_run))
    orig = timeline_points(entry.trace, "orig", 1 / 30)
    assert orig["warmup"] == [(0.0, 150.0)] and [v for _, v in orig["answered"]] == [20.0, 45.0]
    assert len(orig["missed"]) == 1 and math.isclose(orig["missed"][0][0], 0.2333, abs_tol=1e-3)
    cat = timeline_points(entry.trace, "cat", 1 / 30)
    # the frame resent in session 1 replaces its miss, a period after session 0's last frame
    assert [round(t, 4) for t, _ in cat["answered"]] == [0.0, round(1 / 30, 4)]
    assert cat["missed"] == []


def test_one_panel_per_formulation_with_missed_frames_and_the_budget(make_run) -> None:
    entry = load_run(_ros_run(make_run))
    plot = fig_latency_timeline([entry])
    axes = [ax for ax in plot.figure.axes if ax.get_visible()]
    assert len(axes) == 2 and axes[0].get_title().endswith("orig (1 of 3 measured missed, + 1 warm-up)")
    gids = {a.get_gid() for ax in axes for a in ax.get_children() if a.get_gid()}
    label = entry.label
    assert {
        f"answered:{label}:orig",
        f"warmup:{label}:orig",
        f"missed:{label}:orig",
        f"budget:{label}:orig",
        f"budget:{label}:cat",
    } <= gids
    budget = next(a for a in axes[0].get_children() if a.get_gid() == f"budget:{label}:orig")
    assert budget.get_ydata()[0] == 33.3


def test_report_embeds_the_timeline_only_for_ros_runs(make_run, tmp_path: Path) -> None:
    ros = _ros_run(make_run)
    out = tmp_path / "o"
    assert main(["report", str(ros), "--out", str(out)]) == 0
    doc = (out / "report.md").read_text(encoding="utf-8")
    assert "(fig_latency_timeline.png)" in doc and (out / "fig_latency_timeline.png").is_file()
    assert "warm-up" in doc.lower()
    offline = make_run("offline")
    out2 = tmp_path / "o2"
    assert main(["report", str(offline), "--out", str(out2)]) == 0
    doc = (out2 / "report.md").read_text(encoding="utf-8")
    assert "timeline" not in doc.lower() and not (out2 / "fig_latency_timeline.png").exists()


def test_a_folder_without_run_json_is_named_as_such(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "not-a-run"
    folder.mkdir()
    (folder / "metrics.json").write_text("{}")
    rc = main(["report", str(folder), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "no run.json" in err and "--out" in err and "\n" not in err
    assert "names none" not in err


def test_every_answered_frame_is_inside_the_axes_and_titles_count_measured_frames(make_run) -> None:
    """Issue 26: a panel drawn after another of the shared row must not clip its frames (the
    axis once ended near 105 ms, hiding frames answered at 159, 639 and 755 ms)."""
    run = _ros_run(make_run, "spread")
    trace = [_frame("orig", i, 33.3 * i, v) for i, v in enumerate([20.0, 25.0, 30.0, 21.0, 22.0])]
    trace += [_frame("cat", 0, 0.0, 90.0, warmup=True), _frame("cat", 0, 0.0, 90.0, warmup=True)]
    trace += [_frame("cat", i, 33.3 * i, v) for i, v in enumerate([20.0, 159.0, 639.0, 755.0, 30.0], start=1)]
    trace += [_frame("cat", 9, 400.0, None)]
    (run / "realtime_frames.jsonl").write_text("".join(json.dumps(r) + "\n" for r in trace))
    plot = fig_latency_timeline([load_run(run)])
    axes = [ax for ax in plot.figure.axes if ax.get_visible()]
    drawn = 0
    for ax in axes:
        lo, hi = ax.get_ylim()
        x_lo, x_hi = ax.get_xlim()
        for line in ax.get_lines():
            if (line.get_gid() or "").startswith(("answered:", "warmup:")):
                for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True):
                    assert lo <= y <= hi and x_lo <= x <= x_hi, (line.get_gid(), x, y, (lo, hi))
                    drawn += 1
    assert drawn == 12  # 5 + 5 answered, 2 warm-up
    titles = sorted(ax.get_title() for ax in axes)
    assert titles[0].endswith("cat (1 of 6 measured missed, + 2 warm-up)"), titles
    assert titles[1].endswith("orig (0 of 5 measured missed)"), titles
