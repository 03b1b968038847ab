"""Click to select the target, in a real browser: headless Debian Chromium (Playwright), a
real grounding_node (test-instant, tracking on, depth from ``synthetic_camera --depth``) and
``probench console`` on a private ROS domain.

- ``test_click_on_a_detection_selects_its_track``: a click on a tracked box in the stream
  publishes that track's id on ``target_select``, and the Clear button -1 (seen here over
  ROS, by a subscriber of this test: it holds whether or not the node takes selections yet).
- ``test_click_gives_that_tracks_pose``: the node then names the track in its latched
  ``target`` and ``target_pose`` is that track's 3D centre; the page says the target was
  chosen and frames its box on the stream (solid); Clear returns to the best detection of
  the first prompt, which the page shows as the default (muted heading, dashed box), not as
  a choice.
"""

from __future__ import annotations

import time

import pytest

from helpers.live_console import CHROMIUM, LiveConsole, launch_chromium
from helpers.panel_prompts import prompts_on_panels

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(600)]
WAIT_MS = 90_000


class TargetWatch:
    """target_select, target, target_pose and detections_3d, seen from this process over ROS."""

    def __init__(self, domain: int) -> None:
        import rclpy
        from geometry_msgs.msg import PoseStamped
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Int64
        from vision_msgs.msg import Detection2D, Detection3DArray

        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=domain)
        self.node = rclpy.create_node("target_watch", context=self.ctx)
        rel = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.selected: list[int] = []
        self.targets: list = []
        self.poses: list = []
        self.d3: list = []
        self.node.create_subscription(Int64, "/target_select", lambda m: self.selected.append(int(m.data)),
                                      QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        self.node.create_subscription(Detection2D, "/target", self.targets.append, latched)
        self.node.create_subscription(PoseStamped, "/target_pose",
                                      lambda m: self.poses.append((time.monotonic(), m)), rel)
        self.node.create_subscription(Detection3DArray, "/detections_3d", self.d3.append, rel)
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(self.node)

    def spin_until(self, pred, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            got = pred()
            if got or time.monotonic() > deadline:
                return got
            self.executor.spin_once(timeout_sec=0.05)

    def pose_of(self, track: str, after: float) -> bool:
        """A target_pose (received after ``after``) at the centre of track ``track``'s 3D detection
        of the same frame."""
        by_stamp = {(m.header.stamp.sec, m.header.stamp.nanosec): m for m in self.d3}
        for at, pose in self.poses:
            if at < after:
                continue
            frame = by_stamp.get((pose.header.stamp.sec, pose.header.stamp.nanosec))
            det = next((d for d in frame.detections if d.id == track), None) if frame else None
            if det is not None and det.bbox.center.position == pose.pose.position:
                return True
        return False

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.ctx.try_shutdown()


PROMPTS = list(prompts_on_panels(640, 480))[:2]


@pytest.fixture(scope="module")
def live(ros_env, requires_vision_msgs):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing (scripts/setup.sh: apt-get install chromium)", pytrace=False)
    console = LiveConsole(ros_env, size="640x480", camera_rate=5.0,
                          prompts="[" + ",".join(f"'{p}'" for p in PROMPTS) + "]",
                          node_params={"tracking": "true", "depth_topic": "depth/image_raw",
                                       "depth_tolerance": "0.05"},
                          camera_args=["--depth"])
    watch = TargetWatch(console.domain)
    try:
        yield console, watch
    finally:
        watch.close()
        console.stop()


@pytest.fixture(scope="module")
def page(live, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    console, _ = live
    with sync_playwright() as pw:
        ctx = launch_chromium(pw, tmp_path_factory.mktemp("chromium-profile"),
                              viewport={"width": 1400, "height": 900})
        try:
            p = ctx.new_page()
            errors: list[str] = []
            p.on("pageerror", lambda e: errors.append(str(e)))
            response = p.goto(console.url)
            assert response is not None and response.status == 200, console.outputs()
            yield p
            assert errors == [], errors
        finally:
            ctx.close()


def _tracked_rows(page) -> dict[str, tuple[str, list[float]]]:
    """label -> (track id, box) of the detections table's tracked rows."""
    page.wait_for_function("() => document.querySelectorAll('#detections tr.tracked').length >= 2",
                           timeout=WAIT_MS)
    out = {}
    for row in page.locator("#detections tr.tracked").all():
        cells = row.locator("td").all_text_contents()
        out[cells[0]] = (cells[2].lstrip("#"), [float(v) for v in cells[4].split(",")])
    return out


def _click_box(page, box: list[float]) -> None:
    """A click on the stream at the centre of ``box`` (frame pixels)."""
    page.wait_for_function("() => document.getElementById('stream-size').textContent.includes('×')",
                           timeout=WAIT_MS)
    w, h = (int(v) for v in (page.text_content("#stream-size") or "").split("×"))
    shown = page.locator("#stream").bounding_box()
    assert shown is not None
    x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    page.locator("#stream").click(position={"x": x * shown["width"] / w, "y": y * shown["height"] / h})


def test_click_on_a_detection_selects_its_track(live, page) -> None:
    _, watch = live
    rows = _tracked_rows(page)
    track, box = rows[PROMPTS[1]]  # not the default target (the first prompt's best)
    _click_box(page, box)
    assert watch.spin_until(lambda: int(track) in watch.selected, 30), (watch.selected, rows)
    page.click("#target-clear")
    assert watch.spin_until(lambda: watch.selected and watch.selected[-1] == -1, 30), watch.selected
    other, _ = rows[PROMPTS[0]]
    page.locator(f"#detections tr[data-track='{other}']").click()  # a table row selects too
    assert watch.spin_until(lambda: watch.selected[-1] == int(other), 30), watch.selected
    page.click("#target-clear")
    assert watch.spin_until(lambda: watch.selected[-1] == -1, 30)


def test_click_gives_that_tracks_pose(live, page) -> None:
    _, watch = live
    rows = _tracked_rows(page)
    track, box = rows[PROMPTS[1]]
    clicked = time.monotonic()
    _click_box(page, box)
    assert watch.spin_until(lambda: watch.targets and watch.targets[-1].id == track, 30), "no target named"
    assert watch.targets[-1].results[0].hypothesis.class_id == PROMPTS[1]
    assert watch.spin_until(lambda: watch.pose_of(track, clicked), 30), "target_pose does not follow"
    page.wait_for_function("(t) => document.getElementById('target').textContent.startsWith('track ' + t)",
                           arg=track, timeout=WAIT_MS)
    # chosen: said in the heading and framed on the stream, over the clicked track's box
    page.wait_for_function("(t) => { const b = document.getElementById('target-box'); "
                           "return document.getElementById('target').className === 'chosen' "
                           "&& b.className === 'chosen' && b.dataset.track === t; }",
                           arg=track, timeout=WAIT_MS)
    _frames_the_box(page, box)
    page.click("#target-clear")
    first, first_box = rows[PROMPTS[0]]
    assert watch.spin_until(lambda: watch.targets[-1].id == first, 30), "clear did not return to the best"
    # the default: not shown as a choice (the heading looked the same as after a click)
    page.wait_for_function("(t) => { const e = document.getElementById('target'); "
                           "return e.className === 'muted' && e.textContent.startsWith("
                           "'the best detection of the first prompt: track ' + t) "
                           "&& document.getElementById('target-box').className === 'default'; }",
                           arg=first, timeout=WAIT_MS)
    _frames_the_box(page, first_box)


def _frames_the_box(page, box: list[float]) -> None:
    """#target-box covers ``box`` (frame pixels) on the shown stream, to within 2 px."""
    w, h = (int(v) for v in (page.text_content("#stream-size") or "").split("×"))
    shown, framed = page.locator("#stream").bounding_box(), page.locator("#target-box").bounding_box()
    assert shown is not None and framed is not None
    sx, sy = shown["width"] / w, shown["height"] / h
    want = (shown["x"] + box[0] * sx, shown["y"] + box[1] * sy,
            (box[2] - box[0]) * sx, (box[3] - box[1]) * sy)
    got = (framed["x"], framed["y"], framed["width"], framed["height"])
    assert all(abs(a - b) <= 2.0 for a, b in zip(got, want, strict=True)), (got, want)
