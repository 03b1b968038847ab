"""Track ids and distances in the console's detections table (the page's state JSON)."""

from __future__ import annotations

from dataclasses import replace

from fastapi.testclient import TestClient

from probench.console.app import create_app
from probench.console.bridge import DetectionItem


def test_state_lists_track_ids_and_distances(bridge) -> None:
    dets = (DetectionItem("a cup", 0.9, (1.0, 2.0, 3.0, 4.0), "7", 2.345),
            DetectionItem("a door", 0.5, (1.0, 2.0, 3.0, 4.0)))
    bridge.node_view = replace(bridge.node_view, detections=dets)
    c = TestClient(create_app(bridge, state_period_s=0.05, poll_s=0.005), base_url="http://127.0.0.1")
    s = c.get("/api/state").json()
    assert [(d["track_id"], d["distance_m"]) for d in s["detections"]] == [("7", 2.345), ("", None)]
    assert dets[0].extra() == "#7 2.35 m" and dets[1].extra() == ""
