"""The real-time core: everything the two nodes and ``probench ground`` share, without rclpy.

- the grounding side: the one-slot frame mailbox and its worker (:mod:`.grounding_worker`),
  stamped prompt sets, the node's counters (:mod:`.grounding_stats`);
- the parameter tables and typed configs of both nodes (:mod:`.params`, :mod:`.node_spec`);
- the evaluator's steps: plan (:mod:`.eval_plan`), stream and collect over the ``Link``
  protocol (:mod:`.eval_stream`), the real-time figures (:mod:`.eval_realtime`), recording
  and finishing (:mod:`.eval_run`).

:mod:`probench.ros` wraps these in rclpy nodes; tests drive them with in-process fakes.
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
