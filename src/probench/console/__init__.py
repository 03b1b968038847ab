"""``probench console``: a web page for the operator next to a running grounding node.

- :mod:`.bridge`: the narrow protocol between the web app and the ROS graph (plain data
  types; no rclpy). :mod:`probench.ros.console_bridge` implements it with a small rclpy
  node; tests use a fake.
- :mod:`.app`: the FastAPI app (page, JSON API, one WebSocket for state and frames).
- :mod:`.guard`: access token, Host/Origin checks, security headers (pure ASGI).
- :mod:`.cli`: the command; the only module here that reaches the ROS side.

Imports nothing at package level, so that ``probench.ros.console_bridge`` can import
:mod:`.bridge` without pulling in the web stack.
"""
