"""vision_msgs (in-repo copy, or the system's on a ROS 2 install) is upstream 4.x, field-exact.

The RIHS01 type hash is what ROS 2 (Iron and later) compares between peers, so equal
hashes mean this copy interoperates with a robot's apt-installed vision_msgs.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.ros

# Hashes of upstream vision_msgs 4.x. Cross-checked against an independent colcon build of
# upstream ros-perception/vision_msgs (its generated type descriptions): all but the four
# marked "same fields", whose hashes follow from upstream's field lists and the checked
# nested types (they guard against accidental edits).
UPSTREAM_RIHS01 = {
    "BoundingBox2D": "008eacbb0cf8f26e83795547bed013eec3675485ef386ec056d80eaaf1c1ce2f",
    "BoundingBox2DArray": "2464e82838009386d371b523211c21c91d74d313fcdd6788223c531d621cf691",
    "BoundingBox3D": "bbb73a65c163d7f9bb29009c7bde9f7faa576bd2d23299c4511d19230dab4698",
    "BoundingBox3DArray": "a81938db9576b10c2eecd7c5a5da3eac496efd00221b25ed051dfbc81fb56da6",  # same fields
    "Classification": "f74db28d0eaef3afb78f48bf2161cd709a1383a0309d3454383b25be11345143",
    "Detection2D": "0d12b69df5c593b3455b7346fac8205437a7d4bcb09b9e0e0b2dde787ded38ea",  # in Detection2DArray
    "Detection2DArray": "214274120007f4a683866481336b70310268cfa107aebe9d594a6acf75bda968",
    "Detection3D": "ddd703be132ab0b69d33121f1bb034132bfbb3b0ac5f9fb1516005ba1c8a265b",
    "Detection3DArray": "793f5eab9595ac1c0da07873cc859db42eae51f0ee76056db8562515d830e018",  # same fields
    "LabelInfo": "3d37df4015cdf660cc851c51897f2acd957e1ca6205ba0a99aebffb9406b0783",
    "ObjectHypothesis": "51da43cec11c01957a64d1e05a24acd18aae7745ec30b74348ad5f6d634f7f90",
    "ObjectHypothesisWithPose": "41c12344c0396c48b81df12467c192d99b2a0eb1463c5c37194e4223251c80bc",
    "Point2D": "eab0e83f44ab4de92ceaf76dd7d0e7638f2bdd1d16ffbe16c7a136c48e407247",
    "Pose2D": "b0b5d1d7b4c20dd4fcde3ed1d4b289a919290572007d67a97043814db25d3648",
    "VisionClass": "1e4a11f0fed50b5623cb8ff26ca0e37952a48a9c074d16f804b44e9164c2037a",
    "VisionInfo": "95d3116a17484ad91c9a2686e1d54890bbfc3ff6c6a2de137738c4950d45d284",  # same fields
}

# Upstream 4.x field lists (name -> rosidl type) of the messages probench relies on.
UPSTREAM_FIELDS = {
    "Point2D": {"x": "double", "y": "double"},
    "Pose2D": {"position": "vision_msgs/Point2D", "theta": "double"},
    "BoundingBox2D": {"center": "vision_msgs/Pose2D", "size_x": "double", "size_y": "double"},
    "ObjectHypothesis": {"class_id": "string", "score": "double"},
    "ObjectHypothesisWithPose": {
        "hypothesis": "vision_msgs/ObjectHypothesis", "pose": "geometry_msgs/PoseWithCovariance",
    },
    "Detection2D": {
        "header": "std_msgs/Header", "results": "sequence<vision_msgs/ObjectHypothesisWithPose>",
        "bbox": "vision_msgs/BoundingBox2D", "id": "string",
    },
    "Detection2DArray": {"header": "std_msgs/Header", "detections": "sequence<vision_msgs/Detection2D>"},
    "VisionClass": {"class_id": "uint16", "class_name": "string"},
    "LabelInfo": {
        "header": "std_msgs/Header", "class_map": "sequence<vision_msgs/VisionClass>", "threshold": "float",
    },
}


def test_fields_match_upstream(requires_vision_msgs):
    import vision_msgs.msg as vm

    for name, fields in UPSTREAM_FIELDS.items():
        assert getattr(vm, name).get_fields_and_field_types() == fields, name


def test_type_hashes_match_upstream(ros_env, requires_vision_msgs):
    # The hash as the middleware advertises it (what a remote peer compares), read from
    # a publisher's endpoint info in a fresh process.
    script = textwrap.dedent(
        """
        import json, sys, rclpy, vision_msgs.msg as vm
        rclpy.init()
        node = rclpy.create_node("probench_hash_probe")
        out = {}
        for name in sys.argv[1:]:
            topic = "/probench_hash_probe/" + name.lower()
            node.create_publisher(getattr(vm, name), topic, 1)
            info = node.get_publishers_info_by_topic(topic)[0]
            out[name] = str(info.topic_type_hash)
        print(json.dumps(out))
        node.destroy_node()
        rclpy.try_shutdown()
        """
    )
    env = dict(ros_env, ROS_DOMAIN_ID=str(random.Random(os.getpid() + 1).randint(1, 100)))
    proc = subprocess.run(
        [sys.executable, "-c", script, *UPSTREAM_RIHS01], env=env, capture_output=True, text=True,
        timeout=60, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {name: f"RIHS01_{h}" for name, h in UPSTREAM_RIHS01.items()}


def test_in_repo_copy_is_colcon_ignored(repo_root):
    # On a ROS 2 install the system's vision_msgs is used; the copy must not shadow it.
    assert (repo_root / "interfaces" / "COLCON_IGNORE").is_file()
    msgs = sorted(p.stem for p in (repo_root / "interfaces/vision_msgs/msg").glob("*.msg"))
    assert msgs == sorted(UPSTREAM_RIHS01)
    cmake = (repo_root / "interfaces/vision_msgs/CMakeLists.txt").read_text()
    for name in msgs:
        assert f'"msg/{name}.msg"' in cmake, f"{name}.msg is not built"
