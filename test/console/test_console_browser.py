"""probench console in a real browser: headless Debian Chromium (Playwright), a real
grounding_node (test-instant) and a synthetic camera on a private ROS domain.

The console binds 0.0.0.0 here, so it must print an access token, and the page is opened
through this machine's outward address: a non-local request, as from another machine.
Checked: the page shows the node's state and a live stream; a typed prompt is acknowledged
by the node (its LabelInfo, watched here over ROS) and shown; the history and lifecycle
buttons work; markup in a prompt stays text; a wrong or missing token is refused.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

import pytest

from helpers.live_console import CHROMIUM, LiveConsole, launch_chromium, wait_until

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(600)]
WAIT_MS = 90_000  # generous: 2 loaded cores


class LabelWatch:
    """The node's LabelInfo, seen from this process over ROS (not through the console)."""

    def __init__(self, domain: int) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from vision_msgs.msg import LabelInfo

        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=domain)
        self.node = rclpy.create_node("label_watch", context=self.ctx)
        self.seen: list[list[str]] = []
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.node.create_subscription(LabelInfo, "/label_info", self._on, latched)
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(self.node)

    def _on(self, msg) -> None:
        self.seen.append([c.class_name for c in sorted(msg.class_map, key=lambda c: c.class_id)])

    def wait_for(self, prompts: list[str], after: int = 0, timeout: float = 60.0) -> bool:
        """Whether a LabelInfo with ``prompts`` arrives (as the ``after``-th or a later one)."""
        deadline = time.monotonic() + timeout
        while prompts not in self.seen[after:] and time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.1)
        return prompts in self.seen[after:]

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.ctx.try_shutdown()


@pytest.fixture(scope="module")
def live(ros_env, requires_vision_msgs):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the README's test command installs it (scripts/setup.sh: "
                    "apt-get install chromium)", pytrace=False)
    console = LiveConsole(ros_env)
    try:
        yield console
    finally:
        console.stop()


@pytest.fixture(scope="module")
def browser(live, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        ctx = launch_chromium(pw, tmp_path_factory.mktemp("chromium-profile"),
                              viewport={"width": 1280, "height": 760})
        try:
            yield ctx
        finally:
            ctx.close()


@pytest.fixture(scope="module")
def page(live, browser):
    p = browser.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    response = p.goto(live.url)
    assert response is not None and response.status == 200, live.outputs()
    yield p
    assert errors == [], errors  # no script error in the page during the whole module


def text(page, selector: str) -> str:
    return page.text_content(selector) or ""


def frames_at_least(page, n: int) -> None:
    """Wait until the page has shown ``n`` frames. (A function, not an expression string: the
    console's CSP forbids the eval Playwright would use for a string.)"""
    page.wait_for_function("(n) => Number(document.getElementById('stream-frames').textContent) >= n",
                           arg=n, timeout=WAIT_MS)


def chips(page) -> list[str]:
    return [t.strip() for t in page.locator("#active-prompts li").all_text_contents()]


def test_console_prints_a_token_for_a_non_local_bind(live) -> None:
    assert live.token and len(live.token) >= 32, live.console.output()
    assert any(live.token in line and "access token" in line for line in live.console.lines)


def test_page_shows_the_node_and_a_live_stream(live, page) -> None:
    from playwright.sync_api import expect

    expect(page.locator("#lifecycle")).to_have_text("active", timeout=WAIT_MS)
    expect(page.locator("#node-name")).to_have_text("/grounding_node")
    expect(page.locator("#active-prompts li")).to_have_text(["a red cup"], timeout=WAIT_MS)
    # the stream updates: the shown frame changes, several times
    frames_at_least(page, 3)
    seq = page.get_attribute("#stream", "data-seq")
    page.wait_for_function("(seq) => document.getElementById('stream').dataset.seq !== seq", arg=seq,
                           timeout=WAIT_MS)
    frames_at_least(page, int(text(page, "#stream-frames")) + 3)
    assert page.evaluate("document.getElementById('stream').naturalWidth") == 320
    assert text(page, "#stream-size") == "320×240"
    # frames per second and latency come from the node's /diagnostics
    page.wait_for_function("() => parseFloat(document.getElementById('fps').textContent) > 0",
                           timeout=WAIT_MS)
    assert re.fullmatch(r"\d+\.\d / \d+\.\d ms", text(page, "#latency")), text(page, "#latency")
    assert "test-instant" in text(page, "#model")
    # the current detections with scores (test-instant answers each prompt with one box)
    expect(page.locator("#detections tbody tr td.label")).to_have_text(["a red cup"], timeout=WAIT_MS)
    score = float(page.locator("#detections tbody tr td").nth(1).text_content() or "nan")
    assert 0.0 <= score <= 1.0


def test_typed_prompt_is_acknowledged_by_the_node_and_shown(live, page, tmp_path) -> None:
    from playwright.sync_api import expect

    watch = LabelWatch(live.domain)
    try:
        box = page.locator("#prompt-input")
        box.fill("a blue door;  a red cup ")
        box.press("Enter")
        assert watch.wait_for(["a blue door", "a red cup"]), live.outputs()  # the node's LabelInfo
        expect(page.locator("#prompt-feedback")).to_contain_text("acknowledged by the node", timeout=WAIT_MS)
        expect(page.locator("#active-prompts li")).to_have_text(["a blue door", "a red cup"], timeout=WAIT_MS)
        labels = page.locator("#detections tbody tr td.label")
        assert wait_until(lambda: sorted(labels.all_text_contents()) == ["a blue door", "a red cup"],
                          WAIT_MS / 1000), labels.all_text_contents()

        box.fill("a chair")
        box.press("Enter")
        assert watch.wait_for(["a chair"]), live.outputs()
        expect(page.locator("#active-prompts li")).to_have_text(["a chair"], timeout=WAIT_MS)
        expect(page.locator("#history li button")).to_have_text(["a chair", "a blue door; a red cup"])
        # the history: one click sends an earlier set again
        n_before = len(watch.seen)
        page.locator("#history li button", has_text="a blue door; a red cup").click()
        expect(page.locator("#active-prompts li")).to_have_text(["a blue door", "a red cup"], timeout=WAIT_MS)
        assert watch.wait_for(["a blue door", "a red cup"], after=n_before)
        page.screenshot(path=str(tmp_path / "console.png"))

        # held to the node's limits: refused by the console, the node's set stays
        box.fill("x" * 600)
        box.press("Enter")
        expect(page.locator("#prompt-feedback")).to_contain_text("limit 512", timeout=WAIT_MS)
        assert chips(page) == ["a blue door", "a red cup"]
    finally:
        watch.close()


def test_markup_in_a_prompt_stays_text(live, page) -> None:
    from playwright.sync_api import expect

    payload = "<img src=x onerror=\"window.__pwned=1\"> <b>bold</b>"
    page.locator("#prompt-input").fill(payload)
    page.locator("#prompt-input").press("Enter")
    expect(page.locator("#active-prompts li")).to_have_text([payload], timeout=WAIT_MS)
    expect(page.locator("#history li button").first).to_have_text(payload)
    assert page.locator("#active-prompts img, #active-prompts b, #history img, #detections img").count() == 0
    assert page.evaluate("() => window.__pwned === undefined")
    # and the page's CSP stops inline script even if markup got through
    blocked = page.evaluate("""() => {
        const s = document.createElement('script');
        s.textContent = 'window.__inline = 1';
        document.body.append(s);
        return window.__inline === undefined; }""")
    assert blocked


def test_lifecycle_buttons(live, page) -> None:
    from playwright.sync_api import expect

    expect(page.locator("#btn-deactivate")).to_be_enabled(timeout=WAIT_MS)
    expect(page.locator("#btn-activate")).to_be_disabled()
    page.click("#btn-deactivate")
    expect(page.locator("#lifecycle")).to_have_text("inactive", timeout=WAIT_MS)
    expect(page.locator("#prompt-feedback")).to_contain_text("now inactive", timeout=WAIT_MS)
    expect(page.locator("#btn-activate")).to_be_enabled(timeout=WAIT_MS)
    page.click("#btn-activate")
    expect(page.locator("#lifecycle")).to_have_text("active", timeout=WAIT_MS)
    frames_at_least(page, int(text(page, "#stream-frames")) + 1)  # frames flow again


def test_wrong_or_missing_token_is_refused(live, browser, page) -> None:
    other = browser.new_page()
    try:
        for url in (live.base + "?token=wrong", live.base, live.base + "?token=" + live.token[:-1]):
            r = other.goto(url)
            assert r is not None and r.status == 401, url
            assert "access token" in (other.text_content("body") or "")
        assert other.locator("#prompt-input").count() == 0  # no page, no script
    finally:
        other.close()
    # from inside the loaded page: the API and the stream refuse a wrong token too
    status = page.evaluate("""async () => (await fetch('/api/prompt', {method: 'POST',
        headers: {'Content-Type': 'application/json', 'X-Probench-Token': 'wrong'},
        body: JSON.stringify({text: 'a cup'})})).status""")
    assert status == 401
    outcome = page.evaluate("""() => new Promise((resolve) => {
        const ws = new WebSocket(`ws://${location.host}/ws?token=wrong`);
        ws.onopen = () => resolve('open');
        ws.onclose = () => resolve('closed');
        setTimeout(() => resolve('timeout'), 20000);
    })""")
    assert outcome == "closed"
    # a plain non-local client (not a browser) without the token
    for path in ("", "api/state", "static/app.js"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(live.base + path, timeout=30)
        assert refused.value.code == 401
    req = urllib.request.Request(live.base + "api/state", headers={"X-Probench-Token": live.token})
    with urllib.request.urlopen(req, timeout=30) as ok:
        assert json.loads(ok.read())["node"] == "/grounding_node"
