"""A live console for browser tests and the console benchmark: a grounding_node
(test-instant), the synthetic camera and ``probench console`` as subprocesses on a private
ROS domain, and headless Debian Chromium driven by Playwright.

Not a test module (imported by test/console/test_console_browser.py and bench/bench_console.py).
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
# No network, no GPU, nothing phoning home; Playwright's own browser download is never used.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
_URL = re.compile(r"probench console: (http://\S+)")
_TOKEN = re.compile(r"access token (\S+)")


def outward_address() -> str:
    """This machine's address on its default route (no packet is sent), else 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: connect() on UDP only picks a route
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"


class Proc:
    """A subprocess whose output lines are collected (and kept for failure messages)."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.args = args
        self.lines: list[str] = []
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self, last: int = 60) -> str:
        return f"$ {' '.join(self.args)}\n" + "\n".join(self.lines[-last:])

    def wait_line(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str] | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                m = pattern.search(line)
                if m:
                    return m
            if self.proc.poll() is not None:
                time.sleep(0.2)  # the reader may still hold the last lines
                return next((m for line in self.lines if (m := pattern.search(line))), None)
            time.sleep(0.05)
        return None

    def stop(self) -> None:
        for sig, grace in ((signal.SIGINT, 15.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if self.proc.poll() is not None:
                break
            self.proc.send_signal(sig)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                continue
        self._reader.join(timeout=5.0)


class LiveConsole:
    """Node + camera + console. ``url``: the page with the token, on ``address``."""

    def __init__(self, env: dict[str, str], *, host: str = "0.0.0.0", camera_rate: float = 10.0,
                 size: str = "320x240", picture: Path | None = None, prompts: str = "['a red cup']",
                 stream: str = "debug_image", model: str = "test-instant",
                 startup_timeout: float = 120.0, node_params: dict[str, str] | None = None,
                 camera_args: list[str] | None = None) -> None:
        self.domain = random.SystemRandom().randrange(120, 230)
        self.env = {**env, "ROS_DOMAIN_ID": str(self.domain), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
                    "PYTHONUNBUFFERED": "1"}
        self.procs: list[Proc] = []
        self.node = self._start(["grounding_node", "--ros-args", "-p", f"model:={model}", "-p",
                                 "score_threshold:=0.0", "-p", f"prompts:={prompts}",
                                 "-p", "image_reliability:=reliable", "-p", "diagnostics_period:=0.5",
                                 *[a for k, v in (node_params or {}).items() for a in ("-p", f"{k}:={v}")]])
        cam = [sys.executable, "-m", "probench.ros.synthetic_camera", "--rate", str(camera_rate),
               "--size", size, "--reliable", *(camera_args or [])]
        self.camera = self._start(cam + (["--picture", str(picture)] if picture else []))
        self.t_console = time.monotonic()
        self.console = self._start(["probench", "console", "--host", host, "--port", "0", "--stream", stream])
        m = self.console.wait_line(_URL, startup_timeout)
        if m is None:
            self.stop()
            raise RuntimeError(f"the console did not start:\n{self.console.output()}")
        port = int(m.group(1).split(":")[2].split("/")[0])
        token = self.console.wait_line(_TOKEN, 5.0)
        self.token = token.group(1) if token else None
        self.address = outward_address() if host == "0.0.0.0" else host
        self.base = f"http://{self.address}:{port}/"
        self.url = self.base + (f"?token={self.token}" if self.token else "")

    def _start(self, args: list[str]) -> Proc:
        p = Proc(args, self.env)
        self.procs.append(p)
        return p

    def first_answer_s(self, timeout: float = 60.0) -> float:
        """Seconds from the console's start until its page answers (200)."""
        import urllib.request

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    if r.status == 200:
                        return time.monotonic() - self.t_console
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"the console never answered:\n{self.console.output()}")

    def outputs(self) -> str:
        return "\n\n".join(p.output() for p in self.procs)

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.stop()


def launch_chromium(playwright: Any, profile_dir: Path | None = None, **kwargs: Any) -> Any:
    """A persistent Chromium context on a fresh profile (Debian's /usr/bin/chromium)."""
    profile = profile_dir or Path(tempfile.mkdtemp(prefix="probench-chromium-"))
    return playwright.chromium.launch_persistent_context(
        str(profile), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, **kwargs)


def wait_until(pred: Callable[[], Any], timeout: float, step: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(step)


def ros_env() -> dict[str, str]:
    """The environment of the subprocesses: this Python's bin first on PATH, offline."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "YOLO_OFFLINE"):
        env[var] = "1"
    return env
