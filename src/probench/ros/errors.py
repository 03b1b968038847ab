"""Errors of the ROS room (node setup, transport). Message conversion errors live in
:mod:`probench.msgs.errors`, parameter value errors in :mod:`probench.realtime.errors`."""

from probench.errors import CheckFailed


class RosError(CheckFailed):
    """Something in the ROS layer failed (node setup, transport...)."""
