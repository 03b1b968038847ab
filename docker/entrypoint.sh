#!/usr/bin/env bash
# Source ROS 2 and the probench workspace, then run the command (default: eval.launch.py).
set -eo pipefail
# shellcheck disable=SC1090
source "/opt/ros/${ROS_DISTRO}/setup.bash"
source /ws/install/setup.bash
exec "$@"
