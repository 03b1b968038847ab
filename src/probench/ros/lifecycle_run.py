"""Running a lifecycle node from ``main``: autostart (configure + activate), the spin loop,
signals as a request to stop, and the clean-up that no signal interrupts. The node gives
``last_error``, ``finalized``, ``param(name)`` (``autostart``, ``model``) and ``release(...)``.
:func:`init_ros` starts rclpy for both nodes' mains, its arguments checked first.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from probench.errors import ProbenchError, UsageError
from probench.vocabulary import escape_for_log

_RCL_SOURCE = re.compile(r",? at /\S+:\d+")  # rcl's ", at /project/src/parse.c:776" locations


def init_ros(argv: Sequence[str] | None, *, signal_handler_options: object = None) -> None:
    """``rclpy.init`` with the ROS arguments checked first (:mod:`probench.realtime.ros_args`);
    whatever rcl still refuses in them is a one-line :class:`UsageError`, never a traceback."""
    import rclpy
    from rclpy.impl.implementation_singleton import rclpy_implementation

    from probench.realtime.ros_args import check_ros_arguments

    check_ros_arguments(sys.argv if argv is None else argv)
    try:
        rclpy.init(args=None if argv is None else list(argv), signal_handler_options=signal_handler_options)
    except rclpy_implementation.RCLError as exc:
        text = " ".join(_RCL_SOURCE.sub("", str(exc)).split())
        raise UsageError(f"bad ROS arguments: {escape_for_log(text, limit=500)}") from None


def run_lifecycle_node(make_node: Callable[[], Any], name: str, argv: list[str] | None = None, *,
                       frame_wait_s: float = 5.0) -> int:
    """Run the node ``make_node()`` builds until SIGINT/SIGTERM or a shutdown transition.

    A signal is a request to stop, answered with exit code 0: while the model loads it
    abandons the load, otherwise the loop ends at its next turn (at most 0.1 s); the frame in
    flight is finished (up to ``frame_wait_s``), and every further signal is
    ignored while the node cleans up (:mod:`probench.ros.shutdown`)."""
    import rclpy
    from rclpy.exceptions import ParameterException
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.signals import SignalHandlerOptions

    from probench.ros.dds_profile import apply_profile
    from probench.ros.shutdown import ShutdownRequested, SignalShutdown

    t_start = time.monotonic()
    shutdown = SignalShutdown.install()
    profile = apply_profile()  # before the participant exists; never over the user's choice
    rc, node, executor = 0, None, None
    try:
        init_ros(argv, signal_handler_options=SignalHandlerOptions.NO)
        executor = SingleThreadedExecutor()
        node = make_node()
        executor.add_node(node)
        log = node.get_logger()
        if profile:
            log.info(f"Fast DDS profile {profile} (set FASTDDS_DEFAULT_PROFILES_FILE to use your own)")
        if node.param("autostart"):
            t_load = time.monotonic()
            log.info(f"loading model {node.param('model')}")
            with shutdown.interruptible():  # a signal abandons the load
                configured = node.trigger_configure() == TransitionCallbackReturn.SUCCESS
            if not configured:
                print(f"{name}: {node.last_error or 'configure failed'}", file=sys.stderr)
                rc = 1
            elif node.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                print(f"{name}: activate failed", file=sys.stderr)
                rc = 1
            else:
                now = time.monotonic()
                log.info(f"active {now - t_start:.2f} s after main() began (model load {now - t_load:.2f} s)")
        while rc == 0 and not shutdown.requested and rclpy.ok() and not node.finalized.is_set():
            executor.spin_once(timeout_sec=0.1)
    except ShutdownRequested:
        pass
    except ProbenchError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        rc = exc.exit_code
    except ParameterException as exc:  # e.g. `-p max_detections:=abc` at startup
        print(f"{name}: bad parameter: {exc}", file=sys.stderr)
        rc = 2
    finally:
        # From here on every signal is ignored (the first one set `requested`, or none came).
        if node is not None:
            node.release(destroy_entities=False, frame_wait_s=frame_wait_s)
            if executor is not None:
                executor.remove_node(node)
            node.destroy_node()
        if executor is not None:
            executor.shutdown(timeout_sec=1.0)
        rclpy.try_shutdown()
        shutdown.ignore_from_now()  # the interpreter's finalization would restore the default action
    if shutdown.requested:
        print(f"{name}: stopped ({shutdown.signal_name})", file=sys.stderr)
    return rc
