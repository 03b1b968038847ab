"""A synthetic camera: publishes ``sensor_msgs/Image`` (rgb8) at a fixed rate, for trying
the grounding node and ``probench console`` without a camera, and for their tests.

    python -m probench.ros.synthetic_camera --topic /camera/image_raw --rate 15 --size 640x480
    python -m probench.ros.synthetic_camera --picture datasets/probench-sample/images/coffee.jpg
    python -m probench.ros.synthetic_camera --depth       # + aligned 16UC1 depth and CameraInfo
    python -m probench.ros.synthetic_camera --depth --record rgbd_bag --frames 90   # a bag instead

Each frame is the picture (or a colour gradient) slowly panning, with a bar that moves
across and the frame number in a corner, so a viewer can see that the stream is live.
Stamps are the ROS clock's time of publication. Runs until Ctrl-C (or ``--frames N``).

With ``--depth`` the frames are an RGB-D camera's instead: the known scene of
:mod:`probench.spatial.rgbd_scene` (three coloured panels at 1.5, 2.5 and 3.2 m before a
wall at 4 m), still, with the frame number drawn; each colour frame comes with a depth
image registered to it (same size, K and header; ``16UC1`` millimetres) on
``--depth-topic`` and the camera's ``CameraInfo`` on ``camera_info`` beside it, where the
grounding node's ``depth_topic`` finds them. ``--record DIR`` writes the same frames
(``--frames``, default 90, at ``--rate``) into a new rosbag2 folder instead of publishing:
no ROS graph is needed, and ``probench ground --bag DIR`` reads it.

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
from typing import TYPE_CHECKING

import numpy as np

from probench.limits import MAX_COUNT, MAX_RATE_HZ, MIN_RATE_HZ, IntRange
from probench.spatial.rgbd_scene import FRAME_ID, RgbdCamera, RgbdFrame, k_row_major

if TYPE_CHECKING:
    from rclpy.node import Node
    from rclpy.qos import QoSProfile
    from std_msgs.msg import Header


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


class _DepthOut:
    """The depth image and CameraInfo publishers of ``--depth`` (same QoS as the colour topic)."""

    def __init__(self, node: Node, depth_topic: str, qos: QoSProfile, camera: RgbdCamera) -> None:
        from sensor_msgs.msg import CameraInfo, Image

        from probench.realtime.node_spec import camera_info_beside

        self.camera = camera
        self._Image, self._CameraInfo = Image, CameraInfo
        self.depth = node.create_publisher(Image, depth_topic, qos)
        self.info = node.create_publisher(CameraInfo, camera_info_beside(depth_topic), qos)

    def publish(self, frame: RgbdFrame, header: Header) -> None:
        k = frame.k
        h, w = frame.depth_mm.shape
        msg = self._Image(header=header, height=h, width=w, encoding="16UC1", is_bigendian=0, step=w * 2)
        msg.data = frame.depth_mm.tobytes()
        self.depth.publish(msg)
        info = self._CameraInfo(header=header, height=k.height, width=k.width, distortion_model="plumb_bob")
        info.d = [0.0] * 5
        info.k = k_row_major(k)
        info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        info.p = [k.fx, 0.0, k.cx, 0.0, 0.0, k.fy, k.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
        self.info.publish(info)


def _label(rgb: np.ndarray, i: int) -> np.ndarray:
    """The frame number in the corner of a colour frame (what shows the stream is live)."""
    import cv2

    out = np.ascontiguousarray(rgb)
    cv2.putText(out, f"frame {i}", (8, 22), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 255), 2, cv2.LINE_AA)
    return out


def _record(args: argparse.Namespace, camera: RgbdCamera) -> int:
    from probench.errors import ProbenchError
    from probench.realtime.node_spec import camera_info_beside
    from probench.spatial.rgbd_scene import write_rgbd_bag

    n = args.frames or 90
    colour = "/" + args.topic.strip("/")
    depth = "/" + args.depth_topic.strip("/")
    try:
        write_rgbd_bag(args.record, camera, n, args.rate, colour_topic=colour, depth_topic=depth,
                       info_topic=camera_info_beside(depth), label=_label)
    except ProbenchError as exc:
        print(f"synthetic_camera: error: {exc}", file=sys.stderr)
        return 1
    print(f"synthetic_camera: wrote {n} RGB-D frames ({camera.scene.k.width}x{camera.scene.k.height}, "
          f"{args.rate:g} Hz) to {args.record}: {colour}, {depth}, {camera_info_beside(depth)}", flush=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    first_paragraph = (__doc__ or "").split("\n\n")[0]
    ap = argparse.ArgumentParser(prog="python -m probench.ros.synthetic_camera",
                                 description=" ".join(first_paragraph.replace("``", "").split()))
    ap.add_argument("--topic", default="image", help="image topic (default: image)")
    ap.add_argument("--rate", type=float, default=15.0, help="frames per second (default 15)")
    ap.add_argument("--size", type=_size, default=(640, 480), help="WIDTHxHEIGHT (default 640x480)")
    ap.add_argument("--picture", type=Path, default=None, help="image file to pan over (default: gradient)")
    ap.add_argument("--frames", type=IntRange(0, MAX_COUNT), default=0,
                    help="stop after N frames (default: run until Ctrl-C)")
    ap.add_argument("--reliable", action="store_true", help="reliable QoS (default: best effort, as cameras)")
    ap.add_argument("--no-fastdds-profile", action="store_true",
                    help="do not apply probench's Fast DDS profile: publish as a camera driver started "
                         "without it (large best-effort frames are then mostly lost on the way)")
    ap.add_argument("--depth", action="store_true",
                    help="an RGB-D camera: the known scene of probench.spatial.rgbd_scene, with an aligned "
                         "16UC1 depth image and a CameraInfo per frame")
    ap.add_argument("--depth-topic", default="depth/image_raw",
                    help="depth image topic with --depth (default depth/image_raw; the CameraInfo goes to "
                         "camera_info beside it)")
    ap.add_argument("--depth-noise", type=float, default=0.0, metavar="REL",
                    help="Gaussian depth noise, a share of the depth (default 0; 0.01 = 1%%)")
    ap.add_argument("--depth-invalid", type=float, default=0.0, metavar="SHARE",
                    help="share of depth pixels set invalid (0), as a real sensor's holes (default 0)")
    ap.add_argument("--record", type=Path, default=None, metavar="DIR",
                    help="with --depth: write the frames into a new rosbag2 folder DIR instead of publishing "
                         "(--frames, default 90)")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if not MIN_RATE_HZ <= args.rate <= MAX_RATE_HZ:  # (nan fails too)
        ap.error(f"--rate must be in {MIN_RATE_HZ:g}..{MAX_RATE_HZ:g} Hz")
    if (args.record is not None or args.depth_noise or args.depth_invalid) and not args.depth:
        ap.error("--record, --depth-noise and --depth-invalid need --depth")
    if args.depth and args.picture is not None:
        ap.error("--picture cannot be used with --depth (the depth is of the synthetic scene)")
    camera = None
    if args.depth:
        from probench.errors import ProbenchError
        from probench.spatial.rgbd_scene import RgbdCamera, camera_scene

        try:
            camera = RgbdCamera(camera_scene(*args.size), noise_rel=args.depth_noise,
                                invalid_share=args.depth_invalid)
        except ProbenchError as exc:
            ap.error(str(exc))
        if args.record is not None:
            return _record(args, camera)
    if not args.no_fastdds_profile:
        from probench.ros.dds_profile import apply_profile

        apply_profile()  # before the participant exists

    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header

    from probench.ros import convert

    width, height = args.size
    scene = _background(width, height, args.picture) if camera is None else None
    rclpy.init()
    node = rclpy.create_node("synthetic_camera")
    rel = ReliabilityPolicy.RELIABLE if args.reliable else ReliabilityPolicy.BEST_EFFORT
    qos = QoSProfile(depth=5, reliability=rel)
    pub = node.create_publisher(Image, args.topic, qos)
    depth_out = None if camera is None else _DepthOut(node, args.depth_topic, qos, camera)
    period = 1.0 / args.rate
    i = 0
    next_t = time.monotonic()
    try:
        while rclpy.ok() and (args.frames <= 0 or i < args.frames):
            frame_id = "synthetic_camera" if camera is None else FRAME_ID
            header = Header(stamp=node.get_clock().now().to_msg(), frame_id=frame_id)
            if depth_out is None:
                assert scene is not None
                pub.publish(convert.rgb_to_image_msg(frame_at(scene, width, i), header))
            else:
                rgbd = depth_out.camera.frame(i)
                depth_out.publish(rgbd, header)  # depth and CameraInfo first: the frame never waits
                pub.publish(convert.rgb_to_image_msg(_label(rgbd.rgb, i), header))
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
