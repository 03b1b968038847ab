"""package.xml declares what the code needs; setup.py/setup.cfg agree with it (colcon reads both)."""

from __future__ import annotations

import ast
import configparser
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

# ROS packages that are not in this venv's ament index (not on PyPI) but may be imported.
ROS_PACKAGES_NOT_IN_VENV = {"launch", "launch_ros", "launch_testing", "rosbag2_py", "cv_bridge",
                            "message_filters", "tf2_ros", "image_transport", "rosidl_runtime_py"}
# Third-party imports that have a rosdep key, and the key.
ROSDEP_KEYS = {"numpy": "python3-numpy", "cv2": "python3-opencv", "yaml": "python3-yaml",
               "tqdm": "python3-tqdm", "matplotlib": "python3-matplotlib", "ruamel": "python3-ruamel.yaml"}


def _package(repo_root: Path) -> ET.Element:
    return ET.parse(repo_root / "package.xml").getroot()


def _declared(root: ET.Element) -> set[str]:
    tags = ("depend", "exec_depend", "build_export_depend")
    return {el.text.strip() for tag in tags for el in root.iter(tag) if el.text}


def _imported_top_level(files: list[Path]) -> dict[str, str]:
    """top-level module name -> first file importing it (absolute imports only)."""
    found: dict[str, str] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path))
    return found


def _ros_packages_known() -> set[str]:
    index = Path(sys.prefix) / "share" / "ament_index" / "resource_index" / "packages"
    in_venv = {p.name for p in index.iterdir()} if index.is_dir() else set()
    return in_venv | ROS_PACKAGES_NOT_IN_VENV


def test_package_xml_format_and_identity(repo_root):
    root = _package(repo_root)
    assert root.tag == "package" and root.get("format") == "3"
    assert root.findtext("name") == "probench"
    assert root.findtext("export/build_type") == "ament_python"
    assert root.find("maintainer") is not None and root.find("maintainer").get("email")
    assert root.findtext("license")
    setup_py = (repo_root / "setup.py").read_text()
    assert f'version="{root.findtext("version")}"' in setup_py, "setup.py and package.xml versions differ"


def test_every_imported_ros_package_is_declared(repo_root):
    files = sorted((repo_root / "src" / "probench").rglob("*.py"))
    files += sorted((repo_root / "launch").glob("*.py"))
    imported = _imported_top_level(files)
    ros_known = _ros_packages_known()
    assert {"rclpy", "std_msgs", "vision_msgs"} <= ros_known, "the venv's ament index is incomplete"
    declared = _declared(_package(repo_root))
    missing = {name: where for name, where in imported.items() if name in ros_known and name not in declared}
    assert not missing, f"ROS packages imported but not declared in package.xml: {missing}"
    # the ROS room itself must at least use these, and they must be declared
    for must in ("rclpy", "sensor_msgs", "vision_msgs", "std_msgs", "lifecycle_msgs", "launch", "launch_ros",
                 "diagnostic_msgs"):
        assert must in declared, must
    # only real package names: e.g. "rclpy_lifecycle" does not exist (rclpy has rclpy.lifecycle)
    unknown = {d for d in declared if not d.startswith("python3-") and d not in ros_known}
    assert not unknown, f"package.xml declares packages unknown to ROS 2: {unknown}"


def test_python_libraries_with_rosdep_keys_are_declared(repo_root):
    imported = _imported_top_level(sorted((repo_root / "src" / "probench").rglob("*.py")))
    declared = _declared(_package(repo_root))
    missing = {ROSDEP_KEYS[m] for m in imported if m in ROSDEP_KEYS and ROSDEP_KEYS[m] not in declared}
    assert not missing, f"declare these rosdep keys in package.xml: {sorted(missing)}"


def test_setup_installs_what_ros_tools_look_for(repo_root):
    setup_py = (repo_root / "setup.py").read_text()
    # ament index marker, package.xml, launch and config files (ros2 run/launch find them there)
    assert (repo_root / "resource" / "probench").is_file()
    for needle in ("share/ament_index/resource_index/packages", '"package.xml"', "launch/*.launch.py",
                   "config/*.yaml"):
        assert needle in setup_py, needle
    scripts = set(re.findall(r'"(\w+) = probench[\w.]*:main"', setup_py))
    assert {"probench", "grounding_node", "evaluator_node"} <= scripts
    # console scripts go to lib/<package>, where `ros2 run probench <name>` looks
    cfg = configparser.ConfigParser()
    cfg.read(repo_root / "setup.cfg")
    assert cfg["develop"]["script_dir"] == "$base/lib/probench"
    assert cfg["install"]["install_scripts"] == "$base/lib/probench"
