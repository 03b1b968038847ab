"""Start-up time of the grounding node: process start -> active -> first detections.

For each model, ``--runs`` times: start ``grounding_node`` (its console script, autostart,
one prompt) on a private ROS domain while this process already publishes 640x480 rgb8
frames at 30 Hz on its ``image`` topic, and time

- process start -> the node's "active" log line (stamped when it arrives here);
- the node's own figures in that line: main() began -> active, and the model load
  (``configure``: for the torch models this includes importing torch and transformers);
- process start -> the first Detection2DArray here (adds DDS discovery of the camera and the
  detections topic, and the first frame's inference). This process publishes with
  probench's Fast DDS profile, as a camera should (docs/GROUNDING_NODE.md).

Baselines in the same invocation: a bare interpreter (``python -c pass``), importing the
node's module (what comes before ``main()``: interpreter start, the ROS wheels' bootstrap,
rclpy and the messages), and importing torch, transformers and OWLv2's classes (the larger
part of tiny-owlv2's "model load").

    python bench/bench_startup.py                     # test-instant and tiny-owlv2, 3 runs each
    python bench/bench_startup.py --models test-instant --runs 5
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ACTIVE = re.compile(r"active (\d+\.\d+) s after main\(\) began \(model load (\d+\.\d+) s\)")


def _env(domain: int) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env["ROS_DOMAIN_ID"] = str(domain)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", YOLO_OFFLINE="1")
    return env


def _seconds(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - t0


def one_start(model: str, node_exe: str) -> dict[str, float]:
    import numpy as np
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header
    from vision_msgs.msg import Detection2DArray

    from probench.ros.convert import rgb_to_image_msg

    domain = random.SystemRandom().randint(150, 230)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    node = rclpy.create_node("bench_startup_camera", context=ctx)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    best_effort = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
    pub = node.create_publisher(Image, "image", best_effort)
    got: list[float] = []
    node.create_subscription(Detection2DArray, "detections", lambda _m: got.append(time.perf_counter()),
                             QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
    frame = rgb_to_image_msg(np.zeros((480, 640, 3), np.uint8), Header(frame_id="camera"))
    lines: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    proc = subprocess.Popen([node_exe, "--ros-args", "-p", f"model:={model}", "-p", "prompts:=['a red cup']"],
                            env=_env(domain), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.perf_counter(), line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out: dict[str, float] = {}
    try:
        next_frame = 0.0
        deadline = t0 + 300
        while not got and time.perf_counter() < deadline and proc.poll() is None:
            if time.perf_counter() >= next_frame:
                frame.header.stamp = node.get_clock().now().to_msg()
                pub.publish(frame)
                next_frame = time.perf_counter() + 1 / 30
            executor.spin_once(timeout_sec=0.005)
        if not got:
            raise RuntimeError(f"{model}: no detections; node said:\n{''.join(s for _, s in lines)[-2000:]}")
        out["first_detection_s"] = got[0] - t0
        for t, line in list(lines):
            m = ACTIVE.search(line)
            if m:
                out.update(active_s=t - t0, main_to_active_s=float(m.group(1)),
                           model_load_s=float(m.group(2)))
    finally:
        proc.send_signal(2)
        proc.wait(30)
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        ctx.try_shutdown()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="test-instant,tiny-owlv2")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    from probench.ros.dds_profile import apply_profile

    apply_profile()  # this process is the camera: its frames arrive whole (config/fastdds.xml)
    node_exe = str(Path(sys.executable).parent / "grounding_node")
    env = _env(0)
    baselines = {
        "interpreter alone": "pass",
        "interpreter + the node's module": "import probench.ros.grounding_node",
        "interpreter + torch, transformers and OWLv2's modules (tiny-owlv2's imports)":
            "import torch, transformers\n"
            "from transformers import Owlv2ForObjectDetection, Owlv2ImageProcessor",
    }
    for what, code in baselines.items():
        times = [_seconds([sys.executable, "-c", code], env) for _ in range(args.runs)]
        print(f"{what}: median {statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f})")
    print("| model | process start -> active | main() -> active | model load | start -> first detections |")
    print("| --- | --- | --- | --- | --- |")
    for model in args.models.split(","):
        runs = [one_start(model.strip(), node_exe) for _ in range(args.runs)]

        def cell(key: str, runs: list[dict[str, float]] = runs) -> str:
            values = [r[key] for r in runs if key in r]
            if not values:
                return "-"
            return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"

        print(f"| {model} | {cell('active_s')} | {cell('main_to_active_s')} | {cell('model_load_s')} | "
              f"{cell('first_detection_s')} |", flush=True)
    print("(median, with the range over the runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
