"""The console's web app (FastAPI): one page, a small JSON API and one WebSocket.

- ``GET /``, ``GET /static/{app.js,style.css}``: the page (plain files shipped as package
  data; no build step). ``GET /api/state``: the node's state as JSON.
- ``POST /api/prompt`` ``{"text": "a red cup; the door"}``: the text is held to the node's
  own limits (:func:`probench.prompting.messages.prompts_from_message`), split on ``;`` and
  published as a ``std_msgs/String``. It is data: nothing here or in the page evaluates it
  (the page only ever sets ``textContent``).
- ``POST /api/lifecycle`` ``{"transition": "activate"}``: configure / activate / deactivate.
- ``POST /api/param`` ``{"name": "prompt_policy", "value": "categorical"}``: the console's
  controls (``prompt_policy``, ``score_threshold``), held to the node's own parameter table
  first, then set through the node's SetParameters (its refusal: 409 with its reason).
- ``POST /api/target`` ``{"track_id": 7}`` (``null``: clear): the clicked detection's track is
  made the node's target (published on ``target_select``).
- ``WS /ws``: the server pushes the state as JSON (every ``state_period_s``) and the newest
  annotated frame as JPEG (a ``frame`` JSON message, then the bytes). Frames are credited:
  at most ``MAX_IN_FLIGHT`` unacknowledged frames per client, and a client always gets the
  newest one, so a slow viewer sees fewer frames, never old ones, and nothing queues.

Every request and stream passes :class:`probench.console.guard.Guard` first. The app talks
to ROS only through a :class:`probench.console.bridge.ConsoleBridge`; it never imports rclpy.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections import deque
from collections.abc import Mapping
from importlib import resources

import numpy as np
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from probench.console.bridge import TRANSITIONS, ConsoleBridge, Frame, NodeView
from probench.console.errors import BridgeError, ConsoleUsageError
from probench.console.guard import Guard, is_loopback
from probench.console.params import CONSOLE_PARAMS, applies_text, check_console_value
from probench.errors import ProbenchError
from probench.models.base import MAX_PROMPT_CHARS, MAX_PROMPTS
from probench.prompting.messages import prompt_message_limit, prompts_from_message
from probench.prompting.policy import POLICIES

log = logging.getLogger("probench.console")

MAX_IN_FLIGHT = 2  # frames sent but not yet shown by a client
MAX_LISTED = 50  # detections listed on the page (highest scores)
MIN_TOKEN_CHARS = 16
_ASSETS = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
_TOKEN_SLOT = "__TOKEN_QUERY__"


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def encode_jpeg(rgb: np.ndarray, quality: int = 80, max_width: int = 1280) -> bytes:
    """An RGB uint8 image as JPEG bytes, scaled down to ``max_width`` when wider."""
    import cv2

    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"frame must be (H, W, 3) uint8, got {rgb.shape} {rgb.dtype}")
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    h, w = bgr.shape[:2]
    if w > max_width:
        bgr = cv2.resize(bgr, (max_width, max(1, round(h * max_width / w))), interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return buf.tobytes()


def _num(value: float | str | None) -> float | None:
    """A finite float from a diagnostics value, else None (JSON has no NaN)."""
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _target_json(view: NodeView) -> dict[str, object] | None:
    """The node's latched target, and whether the operator chose it (its /diagnostics' ``target``
    says how the target was chosen: ``operator track 7`` or ``best (track 3)``): after Clear the
    latched target is the best detection, which must not look like a choice."""
    if view.target is None:
        return None
    how = view.diagnostics.values.get("target", "") if view.diagnostics is not None else ""
    return {"track_id": view.target[0], "prompt": view.target[1], "chosen": how.startswith("operator")}


def _diagnostics_json(view: NodeView) -> dict[str, object] | None:
    d = view.diagnostics
    if d is None:
        return None
    v = d.values
    nums = ("rate_hz", "latency_p50_ms", "latency_p95_ms", "latency_max_ms", "frames_received",
            "frames_processed", "frames_skipped", "errors", "prompts_rejected")
    given = [v[k] for k in sorted((k for k in v if k.startswith("prompt_") and k[7:].isdigit()),
                                  key=lambda k: int(k[7:]))]
    return {
        "level": d.level, "message": d.message, "age_s": _num(d.age_s),
        **{k: _num(v.get(k)) for k in nums},
        **{k: v.get(k, "") for k in ("state", "model", "device", "precision", "prompt_policy")},
        "given": given,  # "you typed X -> the model gets Y", per active prompt (docs/PROMPTING.md)
    }


def _derived(prompts: tuple[str, ...]) -> list[dict[str, object]]:
    """The three formulations of each active prompt (docs/PROMPTING.md), for the page."""
    from probench.prompting.derive import derive

    out = []
    for p in prompts:
        try:
            out.append(derive(p).as_dict())
        except ProbenchError:  # not from this node's LabelInfo (it refuses such prompts)
            continue
    return out


class _Credit:
    def __init__(self) -> None:
        self.n = MAX_IN_FLIGHT


class _JpegCache:
    """The newest frame's JPEG, encoded once (in a worker thread) for all clients."""

    def __init__(self, quality: int, max_width: int) -> None:
        self.quality, self.max_width = quality, max_width
        self._seq = -1
        self._jpeg = b""
        self._lock = asyncio.Lock()

    async def get(self, frame: Frame) -> bytes:
        async with self._lock:
            if frame.seq != self._seq:
                try:
                    self._jpeg = await run_in_threadpool(encode_jpeg, frame.rgb, self.quality, self.max_width)
                except (ValueError, TypeError) as exc:
                    log.warning("frame %d not shown: %s", frame.seq, exc)
                    self._jpeg = b""
                self._seq = frame.seq
            return self._jpeg


class Console:
    """The app's state around a bridge: prompt history, stream clients, JPEG cache."""

    def __init__(self, bridge: ConsoleBridge, *, stream_source: str, state_period_s: float, poll_s: float,
                 transition_timeout_s: float, jpeg_quality: int, max_width: int, history_size: int) -> None:
        self.bridge = bridge
        self.stream_source = stream_source
        self.state_period_s = state_period_s
        self.poll_s = poll_s
        self.transition_timeout_s = transition_timeout_s
        self.history: deque[str] = deque(maxlen=history_size)
        self.jpeg = _JpegCache(jpeg_quality, max_width)
        self.clients = 0
        self.limits = {"message_chars": prompt_message_limit(), "prompt_chars": MAX_PROMPT_CHARS,
                       "prompts": MAX_PROMPTS}

    # -- state -------------------------------------------------------------------------
    def state(self) -> dict[str, object]:
        view = self.bridge.view()
        dets = sorted(view.detections, key=lambda d: -d.score)[:MAX_LISTED]
        frame = self.bridge.latest_frame()
        return {
            "type": "state", "node": view.node, "present": view.present, "lifecycle": view.lifecycle,
            "prompts": list(view.prompts), "prompts_age_s": _num(view.prompts_age_s),
            "derived": _derived(view.prompts),
            "detections": [{"label": d.label, "score": _num(d.score), "box": [_num(x) for x in d.box],
                            "track_id": d.track_id, "distance_m": _num(d.distance_m)}
                           for d in dets],
            "n_detections": len(view.detections), "detections_stamp": _num(view.detections_stamp),
            "diagnostics": _diagnostics_json(view), "history": list(self.history),
            "stream": {"source": self.stream_source, "frames": frame.seq if frame else 0},
            "topics": dict(view.topics), "limits": self.limits, "transitions": list(TRANSITIONS),
            "threshold": _num(view.threshold),  # in force: the node's LabelInfo
            "target": _target_json(view),
            "controls": {"prompt_policy": list(POLICIES)},
        }

    def state_json(self) -> str:
        return json.dumps(self.state(), allow_nan=False)

    # -- actions -----------------------------------------------------------------------
    def send_prompt(self, text: object) -> tuple[str, ...]:
        if not isinstance(text, str):
            raise _HttpError(400, "'text' must be a string of ';'-separated target descriptions")
        try:
            prompts = prompts_from_message(text)
        except ProbenchError as exc:
            raise _HttpError(400, f"prompt refused: {exc}") from exc
        self.bridge.send_prompts(prompts)
        entry = "; ".join(prompts)
        if entry in self.history:
            self.history.remove(entry)
        self.history.appendleft(entry)
        return prompts

    def set_param(self, name: object, value: object) -> dict[str, object]:
        """A console control: checked against the node's table (400), then set on the node
        (its refusal: 409 with its reason). Runs in a worker thread (it waits for the node)."""
        from probench.realtime.node_spec import GROUNDING_PARAMS

        if not isinstance(name, str) or name not in CONSOLE_PARAMS:
            raise _HttpError(400, f"'name' must be one of {', '.join(CONSOLE_PARAMS)}")
        checked = check_console_value(name, value)
        spec = GROUNDING_PARAMS[name]
        self.bridge.set_parameter(name, checked, spec.type, self.transition_timeout_s)
        return {"name": name, "value": checked, "applies": spec.applies, "said": applies_text(spec.applies)}

    def select_target(self, track_id: object) -> int | None:
        if track_id is not None and (isinstance(track_id, bool) or not isinstance(track_id, int)
                                     or not 0 <= track_id < 1 << 63):
            raise _HttpError(400, "'track_id' must be a track id (an integer >= 0) or null (clear)")
        self.bridge.select_target(track_id)
        return track_id

    # -- stream ------------------------------------------------------------------------
    async def stream(self, ws: WebSocket) -> None:
        self.clients += 1
        if self.clients == 1:
            self.bridge.want_frames(True)
        credit = _Credit()
        reader = asyncio.create_task(_read_acks(ws, credit))
        try:
            last_state = -math.inf
            last_seq = -1
            while not reader.done():
                now = time.monotonic()
                if now - last_state >= self.state_period_s:
                    await ws.send_text(self.state_json())
                    last_state = now
                frame = self.bridge.latest_frame()
                if frame is not None and frame.seq != last_seq and credit.n > 0:
                    last_seq = frame.seq
                    jpeg = await self.jpeg.get(frame)
                    if jpeg:
                        h, w = frame.rgb.shape[:2]
                        meta = {"type": "frame", "seq": frame.seq, "stamp": _num(frame.stamp),
                                "width": int(w), "height": int(h)}
                        await ws.send_text(json.dumps(meta))
                        await ws.send_bytes(jpeg)
                        credit.n -= 1
                await asyncio.sleep(self.poll_s)
        except (WebSocketDisconnect, OSError):
            pass  # the client went away
        except RuntimeError as exc:  # starlette's "send after close"; logged so another cause shows
            log.debug("console stream ended: %s", exc)
        finally:
            reader.cancel()
            self.clients -= 1
            if self.clients == 0:
                self.bridge.want_frames(False)


async def _read_acks(ws: WebSocket, credit: _Credit) -> None:
    """The client's messages: only ``{"type": "ack"}`` (a frame was shown) means anything;
    everything else is ignored (parsed as JSON, never evaluated)."""
    while True:
        msg = await ws.receive()
        if msg["type"] == "websocket.disconnect":
            return
        text = msg.get("text")
        if not text:
            continue
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(data, dict) and data.get("type") == "ack":
            credit.n = min(credit.n + 1, MAX_IN_FLIGHT)


async def _json_body(request: Request, limit: int) -> Mapping[str, object]:
    ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if ctype != "application/json":
        raise _HttpError(415, "send JSON with Content-Type: application/json")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _HttpError(413, f"request body over {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:  # the client left mid-body: nothing to answer, nothing to log but a line
        log.debug("console client disconnected before its request body was complete")
        raise _HttpError(400, "client disconnected") from None
    try:
        data = json.loads(b"".join(chunks))
    except (ValueError, RecursionError) as exc:
        raise _HttpError(400, "body is not valid JSON") from exc
    if not isinstance(data, dict):
        raise _HttpError(400, "body must be a JSON object")
    return data


def _static(name: str) -> bytes:
    return resources.files("probench.console").joinpath("static", name).read_bytes()


def create_app(
    bridge: ConsoleBridge,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    stream_source: str = "debug_image",
    state_period_s: float = 0.2,
    poll_s: float = 0.015,
    transition_timeout_s: float = 15.0,
    jpeg_quality: int = 80,
    max_width: int = 1280,
    history_size: int = 20,
) -> FastAPI:
    """The console app for ``bridge``, to be served on ``host``. A non-loopback ``host``
    needs a ``token`` (ConsoleUsageError otherwise): it is then checked on every request."""
    if token is None and not is_loopback(host):
        raise ConsoleUsageError(f"binding {host} (not loopback) needs an access token")
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConsoleUsageError(f"an access token needs at least {MIN_TOKEN_CHARS} characters")
    console = Console(bridge, stream_source=stream_source, state_period_s=state_period_s, poll_s=poll_s,
                      transition_timeout_s=transition_timeout_s, jpeg_quality=jpeg_quality,
                      max_width=max_width, history_size=history_size)
    # The largest prompt message, 4 bytes per character in UTF-8, plus the JSON around it.
    body_limit = 4 * prompt_message_limit() + 1024
    token_query = f"?token={token}" if token else ""  # URL-safe characters only (new_token)
    index = _static("index.html").decode("utf-8").replace(_TOKEN_SLOT, token_query).encode("utf-8")
    assets = {name: _static(name) for name in _ASSETS}

    app = FastAPI(title="probench console", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.console = console

    async def page() -> Response:
        return Response(index, media_type="text/html; charset=utf-8")

    async def favicon() -> Response:
        return Response(status_code=204)  # browsers ask; there is none

    async def asset(name: str) -> Response:
        if name not in assets:  # a fixed set: no path from the request reaches the file system
            return _error(404, "no such file")
        return Response(assets[name], media_type=_ASSETS[name])

    async def state() -> Response:
        return Response(console.state_json(), media_type="application/json")

    async def prompt(request: Request) -> Response:
        try:
            body = await _json_body(request, body_limit)
            prompts = console.send_prompt(body.get("text"))
        except (_HttpError, BridgeError) as exc:  # both carry the HTTP status to answer with
            return _error(exc.status, str(exc))
        from probench.prompting.derive import split_explicit

        # what the node's LabelInfo will list: the operator's prompts (ORIG of ORIG => CAT)
        return JSONResponse({"sent": list(prompts), "expect": [split_explicit(p)[0] for p in prompts]})

    async def lifecycle(request: Request) -> Response:
        try:
            body = await _json_body(request, 4096)
            transition = body.get("transition")
            if not isinstance(transition, str) or transition not in TRANSITIONS:
                raise _HttpError(400, f"'transition' must be one of {', '.join(TRANSITIONS)}")
            new_state = await run_in_threadpool(bridge.change_state, transition, transition_timeout_s)
        except (_HttpError, BridgeError) as exc:  # both carry the HTTP status to answer with
            return _error(exc.status, str(exc))
        return JSONResponse({"state": new_state})

    async def param(request: Request) -> Response:
        try:
            body = await _json_body(request, 4096)
            done = await run_in_threadpool(console.set_param, body.get("name"), body.get("value"))
        except (_HttpError, BridgeError) as exc:  # both carry the HTTP status to answer with
            return _error(exc.status, str(exc))
        return JSONResponse(done)

    async def target(request: Request) -> Response:
        try:
            body = await _json_body(request, 4096)
            if "track_id" not in body:  # an empty body is no request to clear the operator's target
                raise _HttpError(400, "give 'track_id': a track id, or null to clear the target")
            track = console.select_target(body["track_id"])
        except (_HttpError, BridgeError) as exc:
            return _error(exc.status, str(exc))
        return JSONResponse({"track_id": track})

    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        await console.stream(websocket)

    # Registered by call, not by decorator: the handlers keep their own signatures for the
    # type checker (FastAPI's decorators only register and return the function unchanged).
    app.add_api_route("/", page, methods=["GET"])
    app.add_api_route("/favicon.ico", favicon, methods=["GET"])
    app.add_api_route("/static/{name}", asset, methods=["GET"])
    app.add_api_route("/api/state", state, methods=["GET"])
    app.add_api_route("/api/prompt", prompt, methods=["POST"])
    app.add_api_route("/api/lifecycle", lifecycle, methods=["POST"])
    app.add_api_route("/api/param", param, methods=["POST"])
    app.add_api_route("/api/target", target, methods=["POST"])
    app.add_api_websocket_route("/ws", ws)

    app.add_middleware(Guard, token=token, loopback_only=is_loopback(host))
    return app
