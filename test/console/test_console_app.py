"""The console web app with a fake bridge: token, Host/Origin checks, prompt limits, the
stream's flow control, and that nothing the page sends is evaluated."""

from __future__ import annotations

import json
import subprocess
import sys

import cv2
import numpy as np
import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from probench.console.app import MAX_IN_FLIGHT, MAX_LISTED, create_app
from probench.console.bridge import DetectionItem, DiagnosticsView, graph_names, split_node_name
from probench.console.errors import BridgeError, ConsoleUsageError
from probench.console.guard import host_name, is_loopback, new_token, token_matches
from probench.models.base import MAX_PROMPT_CHARS, MAX_PROMPTS
from probench.realtime.node_spec import prompt_message_limit

LOCAL = "http://127.0.0.1:8080"
WS = "ws://127.0.0.1:8080"  # the test client's WebSocket ignores base_url
TOKEN = "t0k3n-" + "x" * 26


def client(bridge, **kwargs) -> TestClient:
    kwargs.setdefault("state_period_s", 0.05)
    kwargs.setdefault("poll_s", 0.005)
    return TestClient(create_app(bridge, **kwargs), base_url=LOCAL)


def post(c: TestClient, path: str, body: object, **headers: str):
    return c.post(path, content=json.dumps(body), headers={"content-type": "application/json", **headers})


# -- binding and token -----------------------------------------------------------------------
def test_non_loopback_bind_refuses_to_start_without_a_token(bridge) -> None:
    for host in ("0.0.0.0", "192.168.1.20", "::", "robot.local"):
        with pytest.raises(ConsoleUsageError, match="needs an access token"):
            create_app(bridge, host=host)
    with pytest.raises(ConsoleUsageError, match="at least"):
        create_app(bridge, host="0.0.0.0", token="short")
    create_app(bridge, host="0.0.0.0", token=new_token())  # fine with one
    for host in ("127.0.0.1", "127.0.0.5", "localhost", "::1", "[::1]"):
        assert is_loopback(host), host
        create_app(bridge, host=host)


def test_token_refused_or_accepted_on_every_request_and_stream(bridge) -> None:
    c = TestClient(create_app(bridge, host="0.0.0.0", token=TOKEN), base_url="http://robot.local:8080")
    for path in ("/", "/static/app.js", "/static/style.css", "/api/state", "/favicon.ico"):
        assert c.get(path).status_code == 401, path
        assert c.get(path + "?token=wrong").status_code == 401, path
        assert c.get(path, headers={"x-probench-token": TOKEN[:-1] + "y"}).status_code == 401, path
    r = c.get("/")
    assert "token" in r.text and TOKEN not in r.text  # the refusal names the way out, not the token
    assert post(c, "/api/prompt", {"text": "a cup"}).status_code == 401
    assert post(c, "/api/prompt", {"text": "a cup"}, authorization="Bearer nope").status_code == 401
    assert post(c, "/api/lifecycle", {"transition": "deactivate"}).status_code == 401
    assert bridge.sent == [] and bridge.transitions == []
    for url in ("/ws", "/ws?token=wrong", "/ws?token="):
        with pytest.raises(WebSocketDisconnect) as info, c.websocket_connect("ws://robot.local:8080" + url):
            pass
        assert info.value.code == 1008
    assert bridge.wanted == []  # a refused stream never reached the app

    page = c.get(f"/?token={TOKEN}")
    assert page.status_code == 200
    assert f'src="/static/app.js?token={TOKEN}"' in page.text  # assets load with the token
    assert c.get(f"/static/app.js?token={TOKEN}").status_code == 200
    assert c.get("/api/state", headers={"x-probench-token": TOKEN}).status_code == 200
    assert c.get("/api/state", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert post(c, "/api/prompt", {"text": "a cup"}, **{"x-probench-token": TOKEN}).status_code == 200
    assert bridge.sent == [("a cup",)]
    with c.websocket_connect(f"ws://robot.local:8080/ws?token={TOKEN}") as ws:
        assert ws.receive_json()["type"] == "state"


def test_token_comparison() -> None:
    assert token_matches(TOKEN, TOKEN)
    assert not token_matches(None, TOKEN)
    assert not token_matches("", TOKEN)
    assert not token_matches(TOKEN + "x", TOKEN)
    assert not token_matches("ü" * 32, TOKEN)  # non-ASCII input: a refusal, not an exception
    a, b = new_token(), new_token()
    assert a != b and len(a) >= 32


def test_loopback_console_answers_only_loopback_host_names(bridge) -> None:
    c = client(bridge)
    assert c.get("/").status_code == 200
    for host in ("localhost:8080", "[::1]:8080", "127.0.0.1", "LOCALHOST:1"):
        assert c.get("/api/state", headers={"host": host}).status_code == 200, host
    for host in ("evil.example:8080", "evil.example", "127.0.0.1.evil.example:8080", "0.0.0.0:8080", ""):
        r = c.get("/api/state", headers={"host": host})
        assert r.status_code == 403, host  # DNS rebinding: the attacker's name arrives in Host
    with pytest.raises(WebSocketDisconnect) as info, c.websocket_connect("ws://evil.example:8080/ws"):
        pass
    assert info.value.code == 1008 and bridge.wanted == []
    assert host_name("[::1]:8080") == "::1" and host_name("Example.org:80") == "example.org"


def test_console_bound_to_any_127_address_answers_there_without_a_token(bridge) -> None:
    # 127.0.0.0/8 is loopback both for deciding that no token is needed and for the Host check:
    # a console started on 127.0.0.2 must answer requests addressed to 127.0.0.2.
    c = TestClient(create_app(bridge, host="127.0.0.2"), base_url="http://127.0.0.2:8080")
    assert c.get("/").status_code == 200
    assert c.get("/api/state").status_code == 200
    assert post(c, "/api/prompt", {"text": "a cup"}, origin="http://127.0.0.2:8080").status_code == 200
    assert bridge.sent == [("a cup",)]
    with c.websocket_connect("ws://127.0.0.2:8080/ws", headers={"origin": "http://127.0.0.2:8080"}) as ws:
        assert ws.receive_json()["type"] == "state"
    for host in ("127.0.0.2.evil.example:8080", "0.0.0.0:8080", "evil.example"):
        assert c.get("/api/state", headers={"host": host}).status_code == 403, host


# -- cross-origin ----------------------------------------------------------------------------
def test_no_cross_origin_access(bridge) -> None:
    c = client(bridge)
    evil = {"origin": "http://evil.example"}
    assert post(c, "/api/prompt", {"text": "a cup"}, **evil).status_code == 403
    assert post(c, "/api/prompt", {"text": "a cup"}, origin="null").status_code == 403
    assert post(c, "/api/prompt", {"text": "a cup"}, **{"sec-fetch-site": "cross-site"}).status_code == 403
    assert c.get("/api/state", headers={"sec-fetch-site": "same-site"}).status_code == 403
    assert bridge.sent == []
    pre = c.options("/api/prompt", headers={**evil, "access-control-request-method": "POST"})
    for r in (pre, c.get("/api/state", headers=evil), c.get("/")):
        assert not any(k.lower().startswith("access-control-") for k in r.headers), r.headers
    with pytest.raises(WebSocketDisconnect) as info, c.websocket_connect(WS + "/ws", headers=evil):
        pass
    assert info.value.code == 1008
    with pytest.raises(WebSocketDisconnect), c.websocket_connect(WS + "/ws", headers={"origin": "http://127.0.0.1:9999"}):
        pass
    # the console's own origin, as a browser sends it
    same = {"origin": LOCAL, "sec-fetch-site": "same-origin"}
    assert post(c, "/api/prompt", {"text": "a cup"}, **same).status_code == 200
    with c.websocket_connect(WS + "/ws", headers={"origin": LOCAL}) as ws:
        assert ws.receive_json()["type"] == "state"


def test_security_headers_on_every_answer(bridge) -> None:
    c = client(bridge)
    for r in (c.get("/"), c.get("/static/app.js"), c.get("/api/state"), c.get("/static/nope.js"),
              c.get("/", headers={"host": "evil.example"})):
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
    assert c.get("/static/app.js").headers["content-type"].startswith("text/javascript")
    assert c.get("/static/../app.py").status_code == 404
    assert c.get("/static/index.html").status_code == 404  # only the two assets


# -- prompts -------------------------------------------------------------------------------
def test_prompt_is_split_checked_sent_and_remembered(bridge) -> None:
    c = client(bridge)
    r = post(c, "/api/prompt", {"text": " a red cup ; the door;"})
    assert r.status_code == 200 and r.json() == {"sent": ["a red cup", "the door"],
                                                  "expect": ["a red cup", "the door"]}
    assert bridge.sent == [("a red cup", "the door")]
    post(c, "/api/prompt", {"text": "a chair"})
    post(c, "/api/prompt", {"text": "a red cup;the door"})
    state = c.get("/api/state").json()
    assert state["history"] == ["a red cup; the door", "a chair"]  # newest first, no repeats
    assert state["prompts"] == ["a red cup", "the door"]


@pytest.mark.parametrize(("text", "why"), [
    ("", "empty"),
    ("  ;  ; ", "empty"),
    ("x" * (MAX_PROMPT_CHARS + 1), f"limit {MAX_PROMPT_CHARS}"),
    ("a;" * (MAX_PROMPTS + 1), f"limit {MAX_PROMPTS}"),
    ("a" * (prompt_message_limit() + 1), f"limit {prompt_message_limit()}"),
    (["a cup"], "must be a string"),
    (None, "must be a string"),
    (42, "must be a string"),
    ("a\ud800b", "lone surrogate U+D800"),  # was a 500 and a traceback in the log
    ("a\u0000b", "control character U+0000"),  # was sent as "a": the page waited for an ack
    ("a cup;\x1b[31m", "control character U+001B"),
])
def test_prompt_held_to_the_node_limits(bridge, text, why) -> None:
    c = client(bridge)
    r = post(c, "/api/prompt", {"text": text})
    assert r.status_code == 400 and why in r.json()["error"], r.text
    assert bridge.sent == [] and c.get("/api/state").json()["history"] == []


def test_prompt_at_the_limits_is_accepted(bridge) -> None:
    c = client(bridge)
    longest = "x" * MAX_PROMPT_CHARS
    assert post(c, "/api/prompt", {"text": longest}).status_code == 200
    many = ";".join(f"p{i}" for i in range(MAX_PROMPTS))
    assert post(c, "/api/prompt", {"text": many}).status_code == 200
    assert bridge.sent[0] == (longest,) and len(bridge.sent[1]) == MAX_PROMPTS


def test_bad_request_bodies(bridge) -> None:
    c = client(bridge)
    def raw(body: str | bytes, ctype: str = "application/json") -> int:
        return c.post("/api/prompt", content=body, headers={"content-type": ctype}).status_code

    assert raw("text=a cup", "application/x-www-form-urlencoded") == 415
    assert raw('{"text": "a"}', "text/plain") == 415  # no CORS-free "simple request" reaches a route
    assert raw("{nope") == 400
    assert raw(b"\xff\xfe") == 400
    assert raw('["a cup"]') == 400
    assert raw("[" * 100000 + "]" * 100000) == 400  # too deep for the parser: refused, no crash
    assert raw(json.dumps({"text": "a" * (4 * prompt_message_limit() + 2048)})) == 413
    assert bridge.sent == []


def test_nothing_the_page_sends_is_evaluated(bridge, tmp_path) -> None:
    marker = tmp_path / "evaluated"
    payloads = [
        f"__import__('os').system('touch {marker}')",
        f"{{{{ cycler.__init__.__globals__.os.system('touch {marker}') }}}}",
        "<img src=x onerror=alert(1)>",
        "${7*7} {7*7} `id` $(id)",
    ]
    c = client(bridge)
    for p in payloads:
        assert post(c, "/api/prompt", {"text": p}).status_code == 200
    assert not marker.exists()
    assert bridge.sent == [(p,) for p in payloads]  # verbatim: data in, data out
    state = c.get("/api/state").json()
    assert state["history"] == payloads[::-1]
    # The page shows text with textContent only: no HTML or code injection sinks.
    js = c.get("/static/app.js").text
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                 "setTimeout(\"", "setInterval(\""):
        assert sink not in js, sink
    assert js.count("textContent") >= 10


def test_prompt_when_no_node_listens(bridge) -> None:
    bridge.node_listening = False
    c = client(bridge)
    r = post(c, "/api/prompt", {"text": "a cup"})
    assert r.status_code == 503 and "no grounding node" in r.json()["error"]
    assert c.get("/api/state").json()["history"] == []


# -- lifecycle -----------------------------------------------------------------------------
def test_lifecycle_transitions(bridge) -> None:
    c = client(bridge)
    r = post(c, "/api/lifecycle", {"transition": "deactivate"})
    assert r.status_code == 200 and r.json() == {"state": "inactive"}
    assert post(c, "/api/lifecycle", {"transition": "activate"}).json() == {"state": "active"}
    for bad in ("cleanup", "shutdown", "", None, ["activate"], "activate; cleanup"):
        r = post(c, "/api/lifecycle", {"transition": bad})
        assert r.status_code == 400 and "must be one of" in r.json()["error"], bad
    assert bridge.transitions == ["deactivate", "activate"]
    bridge.refuse_transition = BridgeError("/grounding_node refused 'activate' (it is unconfigured)", 409)
    r = post(c, "/api/lifecycle", {"transition": "activate"})
    assert r.status_code == 409 and "refused" in r.json()["error"]


# -- state and stream ----------------------------------------------------------------------
def test_state_json_is_clean(bridge) -> None:
    from dataclasses import replace

    dets = tuple(DetectionItem(f"p{i}", i / 100, (0.0, 0.0, 1.0, 1.0)) for i in range(80))
    bridge.node_view = replace(
        bridge.node_view, detections=dets,
        diagnostics=DiagnosticsView("WARN", "x", {"rate_hz": "nan", "latency_p50_ms": "inf", "errors": "3"},
                                    1.0),
    )
    s = client(bridge).get("/api/state").json()
    assert len(s["detections"]) == MAX_LISTED and s["n_detections"] == 80
    assert [d["score"] for d in s["detections"]][:2] == [0.79, 0.78]  # highest first
    d = s["diagnostics"]
    assert d["rate_hz"] is None and d["latency_p50_ms"] is None and d["errors"] == 3.0
    assert s["limits"] == {"message_chars": prompt_message_limit(), "prompt_chars": MAX_PROMPT_CHARS,
                           "prompts": MAX_PROMPTS}


def _next_frame(ws) -> tuple[dict, bytes]:
    while True:
        m = ws.receive_json()
        if m["type"] == "frame":
            return m, ws.receive_bytes()


def test_stream_sends_the_newest_frame_with_credits(bridge) -> None:
    c = client(bridge)
    bridge.set_frame(1, h=48, w=64)
    with c.websocket_connect(WS + "/ws") as ws:
        meta, jpeg = _next_frame(ws)
        assert meta == {"type": "frame", "seq": 1, "stamp": 1.0, "width": 64, "height": 48}
        img = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
        assert img.shape == (48, 64, 3) and abs(int(img.mean()) - 1) <= 2
        for seq in range(2, MAX_IN_FLIGHT + 1):
            bridge.set_frame(seq)
            assert _next_frame(ws)[0]["seq"] == seq
        # every credit is spent: newer frames wait for the client to show one
        bridge.set_frame(50)
        bridge.set_frame(51)
        for _ in range(6):  # six state pushes (each loop turn would have sent a frame first)
            assert ws.receive_json()["type"] == "state"
        ws.send_text("not json")  # ignored
        ws.send_json({"type": "eval", "code": "1+1"})  # ignored
        ws.send_json({"type": "ack"})
        assert _next_frame(ws)[0]["seq"] == 51  # the newest, not the one in between
        assert bridge.wanted == [True]
    deadline = 100
    while bridge.wanted[-1] and deadline:  # the server notices the close on its own thread
        c.get("/api/state")
        deadline -= 1
    assert bridge.wanted == [True, False]


def test_stream_skips_a_frame_that_cannot_be_encoded(bridge) -> None:
    from probench.console.bridge import Frame

    c = client(bridge)
    bridge.frame = Frame(1, np.zeros((4, 4), np.uint8), 0.0)  # not RGB
    with c.websocket_connect(WS + "/ws") as ws:
        for _ in range(3):
            assert ws.receive_json()["type"] == "state"
        bridge.set_frame(2)
        assert _next_frame(ws)[0]["seq"] == 2


# -- names, CLI, layering ----------------------------------------------------------------------
def test_graph_names() -> None:
    n = graph_names("/robot1/grounding_node")
    assert n["prompt"] == "/robot1/prompt" and n["label_info"] == "/robot1/label_info"
    assert n["change_state"] == "/robot1/grounding_node/change_state"
    assert n["image"] == "/robot1/image" and n["image/compressed"] == "/robot1/image/compressed"
    n = graph_names("grounding_node", "camera/color/image_raw")
    assert n["node"] == "/grounding_node" and n["detections"] == "/detections"
    assert n["image/compressed"] == "/camera/color/image_raw/compressed"
    assert split_node_name("/a/b/c") == ("/a/b", "c")
    for bad in ("", "/", "/9node", "/a b", "/a/../b", "node;rm"):
        with pytest.raises(ConsoleUsageError):
            split_node_name(bad)
    with pytest.raises(ConsoleUsageError, match="image-topic"):
        graph_names("/n", "/camera/$(id)")


def test_cli_usage_errors_are_one_line(capsys) -> None:
    import socket

    from helpers.cli_exit import exit_code
    from probench.cli import main

    assert main(["console", "--node", "/bad name"]) == 2
    assert "not a ROS node name" in capsys.readouterr().err
    assert exit_code(["console", "--port", "70000"]) == 2  # (its IntRange: argparse's usage line)
    assert "argument --port: must be 0..65535, got 70000" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        assert main(["console", "--port", str(taken.getsockname()[1])]) == 2
        err = capsys.readouterr().err
        assert "is in use" in err and err.count("\n") == 1


def test_the_web_app_does_not_import_rclpy() -> None:
    code = ("import sys, probench.console.app, probench.console.cli, probench.console.guard; "
            "sys.exit(1 if 'rclpy' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


def test_page_state_shows_the_policy_and_what_the_model_gets(bridge) -> None:
    """docs/PROMPTING.md: the node's policy and "you typed X -> the model gets Y" from its
    /diagnostics, the derived forms of each active prompt, and an explicit form's ack."""
    from dataclasses import replace

    c = client(bridge)
    r = post(c, "/api/prompt", {"text": "the red cup by the sink => mug; a chair without armrests"})
    assert r.json()["expect"] == ["the red cup by the sink", "a chair without armrests"]
    assert post(c, "/api/prompt", {"text": "a cup =>"}).status_code == 400
    bridge.node_view = replace(
        bridge.node_view, prompts=("a chair without armrests",),
        diagnostics=DiagnosticsView("OK", "ok", {"prompt_policy": "categorical", "prompt_1": "second",
                                                 "prompt_0": "you typed 'a' -> the model gets 'b'"}, 0.1))
    s = c.get("/api/state").json()
    assert s["diagnostics"]["prompt_policy"] == "categorical"
    assert s["diagnostics"]["given"] == ["you typed 'a' -> the model gets 'b'", "second"]
    assert s["derived"] == [{"orig": "a chair without armrests", "cat": "chair", "explicit": False,
                             "tmpl": "a photo of a chair without armrests", "fallback": False}]


# -- hostile clients -------------------------------------------------------------------------
def test_a_client_that_disconnects_mid_body_costs_no_traceback(bridge, caplog) -> None:
    """The ASGI app driven directly: a POST whose body stops half way with http.disconnect
    (what 1,000 clients hanging up do). No exception leaves the app, nothing is logged above
    DEBUG, and the console still answers the next request."""
    import asyncio
    import logging

    app = create_app(bridge)
    sent: list[dict] = []

    async def one_disconnect() -> None:
        messages = [{"type": "http.request", "body": b'{"text": "a c', "more_body": True},
                    {"type": "http.disconnect"}]

        async def receive() -> dict:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/api/prompt", "raw_path": b"/api/prompt", "query_string": b"",
                 "root_path": "", "headers": [(b"host", b"127.0.0.1:8080"), (b"content-length", b"100"),
                                              (b"content-type", b"application/json")],
                 "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8080)}
        await app(scope, receive, send)

    with caplog.at_level(logging.DEBUG):
        for _ in range(20):
            asyncio.run(one_disconnect())
    assert not [r for r in caplog.records if r.levelno > logging.DEBUG or r.exc_info], caplog.text
    assert "Traceback" not in caplog.text and "ClientDisconnect" not in caplog.text
    assert bridge.sent == []  # a half-sent prompt is never sent on
    assert post(client(bridge), "/api/prompt", {"text": "a cup"}).status_code == 200
