"""``probench console``: serve the operator's page next to a running grounding node.

    probench console                                  # http://127.0.0.1:8080/, /grounding_node
    probench console --node /robot1/grounding_node --port 8090
    probench console --host 0.0.0.0                   # other machines: prints an access token
    probench console --stream image --image-topic /camera/color/image_raw

This module is the composition root: it binds the socket, starts the ROS bridge
(:mod:`probench.ros.console_bridge`) and serves the app (:mod:`probench.console.app`) with
uvicorn. The app itself never imports rclpy.
"""

from __future__ import annotations

import argparse
import errno
import socket
import sys
import time
from pathlib import Path

from probench.console.bridge import STREAM_SOURCES, graph_names
from probench.console.errors import ConsoleUsageError
from probench.console.guard import is_loopback, new_token
from probench.limits import MAX_PORT, IntRange


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node", default="/grounding_node",
                        help="the grounding node to watch (default /grounding_node; its topics are "
                             "found in its namespace)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to serve on (default 127.0.0.1: this machine only); any other "
                             "address requires the access token printed at start")
    parser.add_argument("--port", type=IntRange(0, MAX_PORT),
                        default=8080, help="port (default 8080; 0 = any free port)")
    parser.add_argument("--stream", choices=STREAM_SOURCES, default="debug_image",
                        help="debug_image (default): the node's own annotated image; image: the camera "
                             "topic, annotated here from the detections (the node draws nothing)")
    parser.add_argument("--image-topic", default=None,
                        help="camera topic for --stream image (default: the one the node subscribes, "
                             "found on the graph; its /compressed twin is read too)")
    parser.add_argument("--require-token", action="store_true",
                        help="require the access token on a loopback address too (shared machines)")
    from probench.prompting.options import add_policy_arguments

    add_policy_arguments(parser, purpose="set on the node when the console starts (its live prompt_policy "
                                 "parameter; default: leave the node's policy as it is)")


def _check_policy(args: argparse.Namespace) -> None:
    """--prompt-policy / --profile checked here (one line) before anything starts."""
    if args.prompt_policy is None:
        if args.profile is not None:
            from probench.errors import UsageError

            raise UsageError("--profile needs --prompt-policy")
        return
    from probench.prompting.profile import load_profile

    load_profile(args.profile)
    if args.profile not in (None, "", "paper"):
        args.profile = str(Path(args.profile).resolve())  # the node reads it


def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConsoleUsageError(
            f"--host {host!r} is not an address of this machine ({exc.strerror})"
        ) from exc
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConsoleUsageError(f"port {port} on {host} is in use: choose another with --port "
                                    "(or --port 0 for any free one)") from exc
        raise ConsoleUsageError(f"cannot serve on {host}:{port}: {exc.strerror}") from exc
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def _url(host: str, port: int, token: str | None) -> str:
    shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    names = graph_names(args.node, args.image_topic)  # checks both names before anything starts
    _check_policy(args)
    token = new_token() if (args.require_token or not is_loopback(args.host)) else None
    sock = _bind(args.host, args.port)
    port = sock.getsockname()[1]
    try:
        import uvicorn

        from probench.console.app import create_app
        from probench.ros.console_bridge import RosConsoleBridge
        from probench.ros.dds_profile import apply_profile

        apply_profile()  # before the bridge's participant exists: camera frames arrive whole
        bridge = RosConsoleBridge(args.node, stream_source=args.stream, image_topic=args.image_topic)
        try:
            if args.prompt_policy is not None:  # set on the node; its refusal is one line
                from probench.console.errors import BridgeError

                try:
                    bridge.set_prompt_policy(args.prompt_policy, args.profile or "", 10.0)
                    print(f"probench console: prompt policy {args.prompt_policy} set on {names['node']}",
                          flush=True)
                except BridgeError as exc:
                    print(f"probench console: warning: prompt policy not set: {exc}", file=sys.stderr,
                          flush=True)
            app = create_app(bridge, host=args.host, token=token, stream_source=args.stream,
                             transition_timeout_s=60.0)
            config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                    ws_max_size=64 * 1024, ws_ping_interval=20.0, ws_ping_timeout=20.0,
                                    timeout_graceful_shutdown=2)
            if args.stream == "debug_image":
                stream_from = names["debug_image"]
            else:
                stream_from = names["image"] if args.image_topic else "the camera topic the node subscribes"
            print(f"probench console: {_url(args.host, port, token)}  (node {names['node']}, stream from "
                  f"{stream_from}; ready in {time.perf_counter() - t0:.1f} s; Ctrl-C stops)", flush=True)
            if token:
                print(f"probench console: access token {token} (needed by every request; keep it private)",
                      flush=True)
            uvicorn.Server(config).run(sockets=[sock])
        finally:
            bridge.close()
    finally:
        sock.close()
    return 0
