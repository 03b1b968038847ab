"""A publisher or a subscriber process for test/infra/test_infra_dds_exchange.py (run as a script).

    python dds_peer.py pub TOPIC_PREFIX        publishes both messages at 20 Hz until killed
    python dds_peer.py sub TOPIC_PREFIX SECS   prints one JSON line with what arrived, exits

The messages carry fixed, distinctive values (built by ``make_*``) so the test can check
that every field survived serialization, DDS and deserialization in another process.
"""

from __future__ import annotations

import json
import sys
import time

IMAGE_W, IMAGE_H = 5, 3


def image_bytes() -> bytes:
    # rgb8, row-major, a value per byte that differs across rows, columns and channels
    return bytes((7 * i + 3) % 256 for i in range(IMAGE_W * IMAGE_H * 3))


def make_image():  # -> sensor_msgs.msg.Image
    from sensor_msgs.msg import Image

    msg = Image()
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_700_000_123, 456_789_012
    msg.header.frame_id = "camera_optical"
    msg.height, msg.width = IMAGE_H, IMAGE_W
    msg.encoding = "rgb8"
    msg.is_bigendian = 0
    msg.step = IMAGE_W * 3
    msg.data = image_bytes()
    return msg


def make_detections():  # -> vision_msgs.msg.Detection2DArray
    from vision_msgs.msg import Detection2D, Detection2DArray, ObjectHypothesisWithPose

    arr = Detection2DArray()
    arr.header.stamp.sec, arr.header.stamp.nanosec = 1_700_000_123, 456_789_012
    arr.header.frame_id = "camera_optical"
    hypotheses = [("the red valve on the left", 0.875), ("a pipe you could hold", 0.25)]
    for k, (text, score) in enumerate(hypotheses):
        det = Detection2D()
        det.header = arr.header
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id = text
        hyp.hypothesis.score = score
        hyp.pose.pose.position.x = 1.5 + k
        hyp.pose.pose.orientation.w = 1.0
        hyp.pose.covariance[0] = 0.125 * (k + 1)
        hyp.pose.covariance[35] = 9.0
        det.results.append(hyp)
        det.bbox.center.position.x = 320.25 + k
        det.bbox.center.position.y = 240.5
        det.bbox.center.theta = 0.0625
        det.bbox.size_x = 64.0 + k
        det.bbox.size_y = 32.5
        det.id = f"det-{k}"
        arr.detections.append(det)
    return arr


def describe_image(msg) -> dict:
    return {
        "stamp": [msg.header.stamp.sec, msg.header.stamp.nanosec],
        "frame_id": msg.header.frame_id,
        "height": msg.height, "width": msg.width, "encoding": msg.encoding,
        "is_bigendian": msg.is_bigendian, "step": msg.step,
        "data": bytes(msg.data).hex(),
    }


def describe_detections(arr) -> dict:
    return {
        "stamp": [arr.header.stamp.sec, arr.header.stamp.nanosec],
        "frame_id": arr.header.frame_id,
        "detections": [
            {
                "stamp": [d.header.stamp.sec, d.header.stamp.nanosec],
                "frame_id": d.header.frame_id,
                "results": [
                    {
                        "class_id": r.hypothesis.class_id, "score": r.hypothesis.score,
                        "position_x": r.pose.pose.position.x, "orientation_w": r.pose.pose.orientation.w,
                        "cov0": float(r.pose.covariance[0]), "cov35": float(r.pose.covariance[35]),
                    }
                    for r in d.results
                ],
                "center": [d.bbox.center.position.x, d.bbox.center.position.y, d.bbox.center.theta],
                "size": [d.bbox.size_x, d.bbox.size_y],
                "id": d.id,
            }
            for d in arr.detections
        ],
    }


def main(argv: list[str]) -> int:
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection2DArray

    mode, prefix = argv[0], argv[1]
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    rclpy.init()
    node = rclpy.create_node(f"probench_test_{mode}")
    try:
        if mode == "pub":
            pubs = [
                (node.create_publisher(Image, f"{prefix}/image", qos), make_image()),
                (node.create_publisher(Detection2DArray, f"{prefix}/detections", qos), make_detections()),
            ]
            print("ready", flush=True)
            while rclpy.ok():  # until the test kills this process
                for pub, msg in pubs:
                    pub.publish(msg)
                rclpy.spin_once(node, timeout_sec=0.05)
            return 0
        got: dict[str, dict] = {}
        node.create_subscription(Image, f"{prefix}/image",
                                 lambda m: got.setdefault("image", describe_image(m)), qos)
        node.create_subscription(Detection2DArray, f"{prefix}/detections",
                                 lambda m: got.setdefault("detections", describe_detections(m)), qos)
        print("ready", flush=True)
        deadline = time.monotonic() + float(argv[2])
        while len(got) < 2 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
        print(json.dumps(got), flush=True)
        return 0 if len(got) == 2 else 3
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
