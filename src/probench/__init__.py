"""probench: prompt-robust open-vocabulary grounding for ROS 2, and the Pro-Bench benchmark.

The core (data, cache, models, scoring, report, bags) never imports rclpy; the ROS 2 nodes
in :mod:`probench.ros` are thin shells over it.
"""

__version__ = "0.1.0"
