"""The ROS 2 layer: the only part of probench that imports rclpy.

Importing this package is cheap and rclpy-free: ``convert`` (image conversion) works on
any duck-typed message so the bag code and fast unit tests can use it without ROS; the
nodes import rclpy themselves.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = "probench"  # the ROS package (package.xml)


def package_config(name: str) -> Path:
    """``config/<name>`` of the source tree, else of the installed ROS package; the source
    tree's path when neither is found (the caller reports the missing file with its path)."""
    here = Path(__file__).resolve().parents[3] / "config" / name
    if here.is_file():
        return here
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE)) / "config" / name
    except (ImportError, LookupError, ValueError):
        return here
