#!/usr/bin/env python3
"""Type a prompt into a running grounding_node (for machines without `ros2 topic pub`).

    python scripts/send_prompt.py "a red backpack; a fire extinguisher"
    python scripts/send_prompt.py "a door handle" --watch 10      # then print detections for 10 s
    python scripts/send_prompt.py "a mug" --ns /robot1            # node started in a namespace

Publishes std_msgs/String on <ns>/prompt, waits for the node's LabelInfo acknowledgement on
<ns>/label_info and prints the active prompts. Exit 0 when acknowledged, 1 when no node
answered, 2 on usage errors. Needs only rclpy, std_msgs and vision_msgs (not probench).
DDS discovery range comes from the environment (e.g. ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST).
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("prompt", help="one or more target descriptions, ';'-separated")
    ap.add_argument("--ns", default="", help="namespace of the grounding node's topics")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the node")
    ap.add_argument("--watch", type=float, default=0.0, help="then print detections for N seconds")
    args = ap.parse_args()
    if not [p for p in args.prompt.split(";") if p.strip()]:
        print("send_prompt: the prompt is empty", file=sys.stderr)
        return 2

    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    from vision_msgs.msg import Detection2DArray, LabelInfo

    ns = args.ns.rstrip("/")
    rclpy.init()
    node = rclpy.create_node("send_prompt")
    try:
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        labels: list[LabelInfo] = []
        node.create_subscription(LabelInfo, f"{ns}/label_info", labels.append, latched)
        pub = node.create_publisher(String, f"{ns}/prompt", reliable)
        deadline = time.monotonic() + args.timeout
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
        if pub.get_subscription_count() == 0:
            print(f"send_prompt: no grounding_node subscribes {ns}/prompt", file=sys.stderr)
            return 1
        rclpy.spin_once(node, timeout_sec=0.3)  # take the latched LabelInfo of the old prompts
        n_before = len(labels)
        wanted = [p.strip() for p in args.prompt.split(";") if p.strip()]
        pub.publish(String(data=args.prompt))
        while time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
            for msg in labels[n_before:]:
                active = [c.class_name for c in sorted(msg.class_map, key=lambda c: c.class_id)]
                if active == wanted:
                    print("active prompts: " + " ; ".join(active))
                    break
            else:
                continue
            break
        else:
            print("send_prompt: no acknowledgement (prompt rejected? see the node's log)", file=sys.stderr)
            return 1
        if args.watch > 0:
            def show(msg: Detection2DArray) -> None:
                s = msg.header.stamp
                items = ", ".join(
                    f"{d.results[0].hypothesis.class_id} {d.results[0].hypothesis.score:.2f} "
                    f"@({d.bbox.center.position.x:.0f},{d.bbox.center.position.y:.0f})"
                    for d in msg.detections[:5] if d.results
                )
                print(f"{s.sec}.{s.nanosec:09d}: {len(msg.detections)} detections {items}")

            node.create_subscription(Detection2DArray, f"{ns}/detections", show, reliable)
            end = time.monotonic() + args.watch
            while time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
