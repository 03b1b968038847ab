"""The ROS 2 layer: the only part of probench that imports rclpy.

Importing this package is cheap and rclpy-free: ``convert`` (image conversion) works on
any duck-typed message so the bag code and fast unit tests can use it without ROS; the
nodes import rclpy themselves.
"""
