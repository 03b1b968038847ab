"""The ROS 2 layer: the only part of probench that imports rclpy.

The nodes (:mod:`.grounding_node`, :mod:`.evaluator_node`, the synthetic camera), the DDS
link of the evaluator, rclpy message conversion (:mod:`.convert`), the console's ROS bridge,
the eval graph (:mod:`.graph`) with the launch files' substitutions (:mod:`.launch_graph`)
and ``probench eval``. What they run is the rclpy-free core in :mod:`probench.realtime`;
pure message data (image decoding, CDR) is :mod:`probench.msgs`. Importing this package is
cheap: the nodes import rclpy themselves.
"""
