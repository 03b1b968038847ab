"""ROS message data without rclpy: image messages to RGB arrays (:mod:`.images`), the
serialized (CDR) form of the messages probench reads and writes by hand (:mod:`.wire`),
and the duck-typed shapes they accept (:mod:`.shapes`). Used by the nodes, ``probench
ground`` and the bag code alike."""
