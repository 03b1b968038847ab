"""probench console: start-up time and the frame rate of the stream a browser shows.

A grounding_node (test-instant: the model costs ~nothing, so the numbers are the console's),
the synthetic camera (reliable QoS, so that DDS frame loss does not count against the
console) and ``probench console`` start as subprocesses on a private ROS domain; headless
Debian Chromium opens the page. Per stream source (``debug_image``: drawn by the node;
``image``: drawn by the console from the camera and the detections):

- start-up: seconds from spawning ``probench console`` until the page answers (HTTP 200),
  with no node running and next to a running node and camera (fresh console processes,
  median of 3 each), and until the page's state shows that node (lifecycle, LabelInfo);
  baseline: the same machine's ``probench --version`` (interpreter + CLI start), this run;
- stream: frames shown by the page per second over ``--seconds``, next to the node's own
  processing rate from /diagnostics in the same interval (ratio = stream / node).

    python bench/bench_console.py                          # 640x480 at 30 Hz, 10 s per source
    python bench/bench_console.py --screenshot docs/console.png
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"  # DDS stays on loopback
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "test"))

from helpers.live_console import LiveConsole, launch_chromium, ros_env, wait_until  # noqa: E402

PICTURE = REPO / "datasets" / "probench-sample" / "images" / "coffee.jpg"
PROMPTS = "['a cup']"
SHOT_PROMPTS = ("a cup; a spoon", "a coffee cup; a spoon; the saucer")  # typed in the page


def state(live: LiveConsole) -> dict:
    req = urllib.request.Request(live.base + "api/state",
                                 headers={"X-Probench-Token": live.token} if live.token else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def shown_frames(page) -> int:
    return int(page.text_content("#stream-frames") or 0)


def run_source(pw, source: str, args: argparse.Namespace, screenshot: Path | None) -> dict:
    live = LiveConsole(ros_env(), host="127.0.0.1", camera_rate=args.rate, size=args.size,
                       picture=PICTURE, prompts=PROMPTS, stream=source)
    try:
        live.first_answer_s()
        if not wait_until(lambda: _shows_node(live.base + "api/state"), 120.0):
            raise RuntimeError(f"the console never showed the node:\n{live.outputs()}")
        answer_s, node_s = console_start_s(live.env, with_node=True)  # fresh consoles next to it
        ctx = launch_chromium(pw, viewport={"width": 1280, "height": 720})
        try:
            page = ctx.new_page()
            t_load = time.monotonic()
            page.goto(live.url)
            page.wait_for_function("() => Number(document.getElementById('stream-frames').textContent) >= 1",
                                   timeout=120_000)
            first_frame_s = time.monotonic() - t_load
            if screenshot is not None:  # the operator's view: prompts typed, acknowledged, in the history
                for text in SHOT_PROMPTS:
                    page.fill("#prompt-input", text)
                    page.press("#prompt-input", "Enter")
                    page.wait_for_function("() => document.getElementById('prompt-feedback').textContent"
                                           ".includes('acknowledged')", timeout=60_000)
            time.sleep(2.0)  # settle
            n0, d0, t0 = shown_frames(page), state(live)["diagnostics"]["frames_processed"], time.monotonic()
            time.sleep(args.seconds)
            n1, d1, t1 = shown_frames(page), state(live)["diagnostics"]["frames_processed"], time.monotonic()
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot))
        finally:
            ctx.close()
    finally:
        live.stop()
    stream_fps = (n1 - n0) / (t1 - t0)
    node_fps = (d1 - d0) / (t1 - t0)
    return {"source": source, "answer_s": answer_s, "node_s": node_s, "first_frame_s": first_frame_s,
            "stream_fps": stream_fps, "node_fps": node_fps}


def console_start_s(env: dict[str, str], runs: int = 3,
                    with_node: bool = False) -> tuple[float, float | None]:
    """Medians over ``runs`` fresh ``probench console`` processes: seconds from spawning until
    the page answers (HTTP 200), and (``with_node``) until its state shows the running node
    (present, active, its LabelInfo)."""
    from helpers.live_console import Proc

    answer, node = [], []
    for _ in range(runs):
        t = time.monotonic()
        proc = Proc(["probench", "console", "--port", "0"], env)
        try:
            m = proc.wait_line(re.compile(r"(http://\S+)"), 60.0)
            if m is None or not wait_until(functools.partial(_answers, m.group(1)), 60.0, step=0.01):
                raise RuntimeError(proc.output())
            answer.append(time.monotonic() - t)
            if with_node:
                url = m.group(1) + "api/state"
                if not wait_until(functools.partial(_shows_node, url), 60.0, step=0.01):
                    raise RuntimeError(proc.output())
                node.append(time.monotonic() - t)
        finally:
            proc.stop()
    return statistics.median(answer), (statistics.median(node) if node else None)


def _shows_node(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as r:
        s = json.loads(r.read())
    return bool(s["present"] and s["lifecycle"] == "active" and s["prompts"])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def baseline_cli_s(runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t = time.monotonic()
        subprocess.run(["probench", "--version"], env=ros_env(), check=True, capture_output=True)
        times.append(time.monotonic() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measurement window per source (s)")
    ap.add_argument("--rate", type=float, default=30.0, help="camera rate (Hz)")
    ap.add_argument("--size", default="640x480", help="camera WIDTHxHEIGHT")
    ap.add_argument("--sources", default="debug_image,image", help="stream sources to measure")
    ap.add_argument("--screenshot", type=Path, default=None, help="save the page (debug_image run) here")
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    base = baseline_cli_s()
    print(f"baseline: `probench --version` takes {base:.2f} s here")
    env = {**ros_env(), "ROS_DOMAIN_ID": str(random.SystemRandom().randrange(120, 230))}
    alone, _ = console_start_s(env)
    print(f"start-up, no node running: the page answers {alone:.2f} s after `probench console` starts "
          f"({alone / base:.1f}x baseline; median of 3)")
    print(f"camera {args.size} at {args.rate:g} Hz, test-instant, {args.seconds:g} s window, "
          f"{os.cpu_count()} cores")
    with sync_playwright() as pw:
        for i, source in enumerate(args.sources.split(",")):
            r = run_source(pw, source, args, args.screenshot if i == 0 else None)
            print(f"[{source:11s}] start-up next to the running node (median of 3): page answers "
                  f"{r['answer_s']:.2f} s after start ({r['answer_s'] / base:.1f}x baseline), shows the node "
                  f"at {r['node_s']:.2f} s; "
                  f"first frame {r['first_frame_s']:.2f} s after page load; stream {r['stream_fps']:.1f} "
                  f"frames/s vs node {r['node_fps']:.1f} frames/s "
                  f"(ratio {r['stream_fps'] / max(r['node_fps'], 1e-9):.2f})")
    if args.screenshot:
        print(f"screenshot: {args.screenshot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
