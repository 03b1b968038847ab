"""Benchmark of same-host image delivery at the grounding node's default QoS (best effort).

A publisher process sends raw ``sensor_msgs/Image`` frames (rgb8) at ``--rate`` Hz for
``--seconds`` seconds; a subscriber process subscribes with the grounding node's own image
QoS (:func:`probench.ros.grounding_node.image_qos`, best effort, keep last 5) and a raw
callback that only counts, as the node's does. Each case runs twice in this invocation:

- ``default``: Fast DDS's built-in settings (no XML profile in either process);
- ``profile``: both processes with the package's profile (``config/fastdds.xml`` through
  ``FASTDDS_DEFAULT_PROFILES_FILE``, what the launch files and ``probench`` commands set);

and optionally (``--variants``) ``node-only``: only the subscriber has the profile (a camera
driver started without it), ``camera-only``: only the publisher has it. Printed per case:
frames sent, received, delivered share and the ratio profile / default, plus the
stamp-to-callback latency of the received frames.
Both processes get ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a private random
``ROS_DOMAIN_ID``, and run in an empty folder (so no ``DEFAULT_FASTDDS_PROFILES.xml`` of the
current folder is read).

    python bench/bench_transport.py                      # 640x480 and 1280x720, 30 Hz, 10 s each
    python bench/bench_transport.py --seconds 5 --sizes 640x480
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "/probench_bench/image"
# Cleared in both processes, so each case runs with exactly the profile it names.
PROFILE_VARS = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE",
                "FASTDDS_BUILTIN_TRANSPORTS", "RMW_FASTRTPS_USE_QOS_FROM_XML")


# -- the two processes ---------------------------------------------------------------------
def run_subscriber() -> int:
    """Count frames until stdin closes; print one JSON line (count, latencies)."""
    import struct

    import rclpy
    from sensor_msgs.msg import Image

    from probench.ros.grounding_node import image_qos

    rclpy.init()
    node = rclpy.create_node("bench_transport_sub")
    latencies_ms: list[float] = []

    def on_image(data: bytes) -> None:
        sec, nsec = struct.unpack_from("<iI", data, 4)  # CDR: encapsulation, then header.stamp
        latencies_ms.append((time.time_ns() - (sec * 10**9 + nsec)) / 1e6)

    node.create_subscription(Image, TOPIC, on_image, image_qos("best_effort"), raw=True)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    print("ready", flush=True)
    while not done.is_set():
        rclpy.spin_once(node, timeout_sec=0.05)
    lat = sorted(latencies_ms)
    p50 = lat[len(lat) // 2] if lat else None
    p95 = lat[int(0.95 * (len(lat) - 1))] if lat else None
    print(json.dumps({"received": len(lat), "latency_p50_ms": p50, "latency_p95_ms": p95}), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def run_publisher(width: int, height: int, rate: float, seconds: float) -> int:
    """Wait for the subscriber, then publish ``rate * seconds`` frames on a fixed grid."""
    import struct

    import numpy as np
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Image

    rclpy.init()
    node = rclpy.create_node("bench_transport_pub")
    pub = node.create_publisher(Image, TOPIC, QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT))
    deadline = time.monotonic() + 30.0
    while pub.get_subscription_count() == 0:
        if time.monotonic() > deadline:
            print(json.dumps({"error": "no subscriber within 30 s"}), flush=True)
            return 1
        rclpy.spin_once(node, timeout_sec=0.05)
    time.sleep(1.0)  # let the reader match this writer too (data from an unknown writer is dropped)
    msg = Image(height=height, width=width, encoding="rgb8", step=width * 3)
    pixels = np.random.default_rng(0).integers(0, 256, size=height * width * 3, dtype=np.uint8)
    msg.data = pixels.tobytes()
    wire = bytearray(serialize_message(msg))  # published as bytes: no per-frame conversion in Python
    n = round(rate * seconds)
    t0 = time.perf_counter()
    for i in range(n):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        now = time.time_ns()
        wire[4:12] = struct.pack("<iI", now // 10**9, now % 10**9)  # header.stamp, after the encapsulation
        pub.publish(bytes(wire))
    span = time.perf_counter() - t0
    print(json.dumps({"sent": n, "send_rate_hz": (n - 1) / span if n > 1 else None}), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


# -- the driver ----------------------------------------------------------------------------
def _env(profile: Path | None, domain: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PROFILE_VARS}
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["ROS_DOMAIN_ID"] = str(domain)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    if profile is not None:
        env["FASTDDS_DEFAULT_PROFILES_FILE"] = str(profile)
    return env


def one_case(width: int, height: int, rate: float, seconds: float, pub_profile: Path | None,
             sub_profile: Path | None, workdir: Path) -> dict:
    domain = random.SystemRandom().randint(150, 230)
    me = [sys.executable, str(Path(__file__).resolve())]
    sub = subprocess.Popen([*me, "--role", "sub"], env=_env(sub_profile, domain), cwd=workdir,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if sub.stdout is None or sub.stdout.readline().strip() != "ready":
            raise RuntimeError("subscriber did not start")
        pub = subprocess.run([*me, "--role", "pub", "--width", str(width), "--height", str(height),
                              "--rate", str(rate), "--seconds", str(seconds)],
                             env=_env(pub_profile, domain), cwd=workdir, capture_output=True, text=True,
                             timeout=seconds + 120)
        sent = json.loads(pub.stdout.strip().splitlines()[-1]) if pub.stdout.strip() else {}
        if pub.returncode != 0 or "sent" not in sent:
            raise RuntimeError(f"publisher failed: {pub.stdout[-500:]} {pub.stderr[-1500:]}")
        time.sleep(1.0)  # frames still in flight
        out, _ = sub.communicate(input="", timeout=60)
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.wait()
    got = json.loads(out.strip().splitlines()[-1])
    return {**sent, **got, "delivered": got["received"] / sent["sent"]}


def _size(text: str) -> tuple[int, int]:
    w, _, h = text.partition("x")
    return int(w), int(h)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role", choices=("driver", "pub", "sub"), default="driver", help=argparse.SUPPRESS)
    ap.add_argument("--width", type=int, default=640, help=argparse.SUPPRESS)
    ap.add_argument("--height", type=int, default=480, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="640x480,1280x720", help="WxH,... (default 640x480,1280x720)")
    ap.add_argument("--rate", type=float, default=30.0, help="frames per second (default 30)")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds of stream per case (default 10)")
    ap.add_argument("--profile", type=Path, default=ROOT / "config" / "fastdds.xml",
                    help="Fast DDS XML profile (default: config/fastdds.xml)")
    ap.add_argument("--variants", default="default,profile",
                    help="comma-separated of: default, profile, node-only, camera-only "
                         "(default: default,profile)")
    args = ap.parse_args(argv)
    if args.role == "sub":
        return run_subscriber()
    if args.role == "pub":
        return run_publisher(args.width, args.height, args.rate, args.seconds)

    profile = args.profile.resolve()
    if not profile.is_file():
        sys.exit(f"bench_transport: no profile at {profile}")
    # variant -> (publisher's profile, subscriber's profile)
    setups = {"default": (None, None), "profile": (profile, profile), "node-only": (None, profile),
              "camera-only": (profile, None)}
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in setups]
    if unknown:
        sys.exit(f"bench_transport: unknown variant(s) {', '.join(unknown)} (known: {', '.join(setups)})")
    print(f"same-host delivery, best effort (the grounding node's default image QoS), {args.rate:g} Hz, "
          f"{args.seconds:g} s per case; profile {profile}")
    print("| size | setup | sent | received | delivered | latency p50 / p95 ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="bench_transport_") as tmp:
        for size in args.sizes.split(","):
            width, height = _size(size.strip())
            results = {}
            for v in variants:
                r = one_case(width, height, args.rate, args.seconds, *setups[v], Path(tmp))
                results[v] = r
                lat = (f"{r['latency_p50_ms']:.1f} / {r['latency_p95_ms']:.1f}" if r["received"] else "-")
                print(f"| {width}x{height} | {v} | {r['sent']} | {r['received']} | "
                      f"{100 * r['delivered']:.1f}% | {lat} |", flush=True)
            if "default" in results and "profile" in results and results["default"]["delivered"] > 0:
                ratio = results["profile"]["delivered"] / results["default"]["delivered"]
                print(f"| {width}x{height} | ratio profile / default | | | {ratio:.2f} | |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
