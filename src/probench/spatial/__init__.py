"""3D grounding from an aligned depth image and stable track ids (no rclpy).

- :mod:`probench.spatial.depth`: depth images (16UC1 mm, 32FC1 m), camera intrinsics from a
  CameraInfo's K, and one 3D estimate per 2D detection (:class:`Detections3D`);
- :mod:`probench.spatial.tracking`: ByteTrack (``edgefirst-tracker``), one tracker per
  prompt, so two prompts never share a track, ids unique across prompts;
- :mod:`probench.spatial.messages`: Detection3DArray / PoseStamped built from rclpy's or a
  rosbags typestore's message classes (the node and ``probench ground`` share it);
- :mod:`probench.spatial.synthetic`: a pinhole RGB-D scene with known 3D objects, for tests
  and the cost benchmark.
"""
