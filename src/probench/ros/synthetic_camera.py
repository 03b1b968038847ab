"""A synthetic camera: publishes ``sensor_msgs/Image`` (rgb8) at a fixed rate, for trying
the grounding node and ``probench console`` without a camera, and for their tests.

    python -m probench.ros.synthetic_camera --topic /camera/image_raw --rate 15 --size 640x480
    python -m probench.ros.synthetic_camera --picture datasets/probench-sample/images/coffee.jpg

Each frame is the picture (or a colour gradient) slowly panning, with a bar that moves
across and the frame number in a corner, so a viewer can see that the stream is live.
Stamps are the ROS clock's time of publication. Runs until Ctrl-C (or ``--frames N``).

It uses probench's Fast DDS profile (``config/fastdds.xml``), as the grounding node does,
unless you chose your own; ``--no-fastdds-profile`` publishes as a camera driver started
without it would, whose 640x480 frames mostly never arrive (the node's /diagnostics then
warns about transport loss).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from probench.limits import MAX_RATE_HZ, MIN_RATE_HZ


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"size must be WIDTHxHEIGHT, got {text!r}") from exc
    if not (16 <= w <= 8192 and 16 <= h <= 8192):
        raise argparse.ArgumentTypeError(f"size {w}x{h} outside 16..8192 px")
    return w, h


def _background(width: int, height: int, picture: Path | None) -> np.ndarray:
    """The scene, 25% wider than the frame so that it can pan."""
    import cv2

    wide = int(width * 1.25)
    if picture is not None:
        bgr = cv2.imread(str(picture), cv2.IMREAD_COLOR)
        if bgr is None:
            raise SystemExit(f"synthetic_camera: cannot read picture {picture}")
        scene: np.ndarray = cv2.resize(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), (wide, height),
                                       interpolation=cv2.INTER_AREA)
        return scene
    y, x = np.mgrid[0:height, 0:wide]
    return np.stack([x * 255 // wide, y * 255 // height, 255 - x * 255 // wide], axis=-1).astype(np.uint8)


def frame_at(scene: np.ndarray, width: int, i: int) -> np.ndarray:
    """Frame ``i``: a window panning over the scene, a moving bar, the frame number."""
    import cv2

    wide = scene.shape[1]
    span = wide - width
    x0 = abs((i * 2) % (2 * span) - span) if span else 0
    out = np.ascontiguousarray(scene[:, x0 : x0 + width])
    bar = (i * 8) % width
    out[-12:, max(0, bar - 40) : bar] = (255, 255, 255)
    cv2.putText(out, f"frame {i}", (8, 22), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 255), 2, cv2.LINE_AA)
    return out


def main(argv: list[str] | None = None) -> int:
    first_paragraph = (__doc__ or "").split("\n\n")[0]
    ap = argparse.ArgumentParser(prog="python -m probench.ros.synthetic_camera",
                                 description=" ".join(first_paragraph.replace("``", "").split()))
    ap.add_argument("--topic", default="image", help="image topic (default: image)")
    ap.add_argument("--rate", type=float, default=15.0, help="frames per second (default 15)")
    ap.add_argument("--size", type=_size, default=(640, 480), help="WIDTHxHEIGHT (default 640x480)")
    ap.add_argument("--picture", type=Path, default=None, help="image file to pan over (default: gradient)")
    ap.add_argument("--frames", type=int, default=0, help="stop after N frames (default: run until Ctrl-C)")
    ap.add_argument("--reliable", action="store_true", help="reliable QoS (default: best effort, as cameras)")
    ap.add_argument("--no-fastdds-profile", action="store_true",
                    help="do not apply probench's Fast DDS profile: publish as a camera driver started "
                         "without it (large best-effort frames are then mostly lost on the way)")
    args = ap.parse_args(argv)
    if not MIN_RATE_HZ <= args.rate <= MAX_RATE_HZ:  # (nan fails too)
        ap.error(f"--rate must be in {MIN_RATE_HZ:g}..{MAX_RATE_HZ:g} Hz")
    if not args.no_fastdds_profile:
        from probench.ros.dds_profile import apply_profile

        apply_profile()  # before the participant exists

    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header

    from probench.ros import convert

    width, height = args.size
    scene = _background(width, height, args.picture)
    rclpy.init()
    node = rclpy.create_node("synthetic_camera")
    rel = ReliabilityPolicy.RELIABLE if args.reliable else ReliabilityPolicy.BEST_EFFORT
    pub = node.create_publisher(Image, args.topic, QoSProfile(depth=5, reliability=rel))
    period = 1.0 / args.rate
    i = 0
    next_t = time.monotonic()
    try:
        while rclpy.ok() and (args.frames <= 0 or i < args.frames):
            header = Header(stamp=node.get_clock().now().to_msg(), frame_id="synthetic_camera")
            pub.publish(convert.rgb_to_image_msg(frame_at(scene, width, i), header))
            i += 1
            next_t += period
            time.sleep(max(0.0, next_t - time.monotonic()))
    except KeyboardInterrupt:
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
