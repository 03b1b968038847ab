"""The console's controls with a fake bridge: prompt_policy and score_threshold held to the
node's own parameter table before anything is sent, the node's refusal passed on with its
reason, what a successful set means (live / next configure), and the target selection of a
clicked detection."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from probench.console.app import create_app
from probench.console.bridge import DetectionItem, DiagnosticsView
from probench.console.errors import BridgeError
from probench.prompting.policy import POLICIES


def _client(bridge) -> TestClient:
    return TestClient(create_app(bridge, state_period_s=0.05, poll_s=0.005), base_url="http://127.0.0.1:8080")


def _post(c: TestClient, path: str, body: object):
    return c.post(path, content=json.dumps(body), headers={"content-type": "application/json"})


def test_controls_set_checked_values_and_say_when_they_apply(bridge) -> None:
    c = _client(bridge)
    r = _post(c, "/api/param", {"name": "prompt_policy", "value": "categorical"})
    assert r.status_code == 200 and r.json() == {"name": "prompt_policy", "value": "categorical",
                                                 "applies": "live", "said": "in force now"}
    r = _post(c, "/api/param", {"name": "score_threshold", "value": 0.5})
    assert r.status_code == 200 and r.json()["applies"] == "configure"
    assert r.json()["said"].startswith("stored, in force from the node's next configure")
    r = _post(c, "/api/param", {"name": "score_threshold", "value": "0.25"})  # a number typed as text
    assert r.status_code == 200 and r.json()["value"] == 0.25
    assert bridge.params == [("prompt_policy", "categorical", "string"), ("score_threshold", 0.5, "double"),
                             ("score_threshold", 0.25, "double")]
    state = c.get("/api/state").json()
    assert state["controls"]["prompt_policy"] == list(POLICIES)


@pytest.mark.parametrize(("body", "why"), [
    ({"name": "prompt_policy", "value": "loudest"}, "prompt_policy must be one of as_typed"),
    ({"name": "prompt_policy", "value": 3}, "prompt_policy must be a string"),
    ({"name": "score_threshold", "value": 1.5}, "score_threshold must be <= 1"),
    ({"name": "score_threshold", "value": -0.1}, "score_threshold must be >= 0"),
    ({"name": "score_threshold", "value": "lots"}, "score_threshold must be a number"),
    ({"name": "score_threshold", "value": None}, "score_threshold must be a double"),
    ({"name": "score_threshold", "value": True}, "score_threshold must be a double"),
    ({"name": "model", "value": "owlv2-b"}, "'name' must be one of prompt_policy, score_threshold"),
    ({"value": 1}, "'name' must be one of"),
])
def test_controls_refuse_what_the_node_would_refuse(bridge, body, why) -> None:
    r = _post(_client(bridge), "/api/param", body)
    assert r.status_code == 400 and why in r.json()["error"], r.text
    assert bridge.params == []


def test_controls_pass_on_the_node_refusal(bridge) -> None:
    why = "/grounding_node refused prompt_policy: no profile for tiny"
    bridge.refuse_param = BridgeError(why, 409)
    r = _post(_client(bridge), "/api/param", {"name": "prompt_policy", "value": "best"})
    assert r.status_code == 409 and r.json()["error"] == why


def test_target_selection(bridge) -> None:
    c = _client(bridge)
    assert _post(c, "/api/target", {"track_id": 7}).json() == {"track_id": 7}
    assert _post(c, "/api/target", {"track_id": None}).status_code == 200
    for bad in (-1, "7", 1.5, True, 1 << 63):
        r = _post(c, "/api/target", {"track_id": bad})
        assert r.status_code == 400 and "track id" in r.json()["error"], bad
    for empty in ({}, {"track": 7}):  # {} cleared the operator's target with 200
        r = _post(c, "/api/target", empty)
        assert r.status_code == 400 and "give 'track_id'" in r.json()["error"], empty
    assert bridge.targets == [7, None]
    bridge.node_listening = False
    r = _post(c, "/api/target", {"track_id": 3})
    assert r.status_code == 503 and "target_select" in r.json()["error"]


def test_state_names_the_target_and_the_threshold_in_force(bridge) -> None:
    bridge.node_view = replace(bridge.node_view, threshold=0.3, target=("7", "a red cup"),
                               detections=(DetectionItem("a red cup", 0.9, (1.0, 2.0, 30.0, 40.0), "7"),))
    state = _client(bridge).get("/api/state").json()
    assert state["threshold"] == pytest.approx(0.3)
    assert state["target"] == {"track_id": "7", "prompt": "a red cup", "chosen": False}  # no diagnostics
    # chosen or the default: the node's /diagnostics `target` says how (the heading after Clear
    # looked the same as after a click)
    for how, chosen in (("operator track 7", True), ("best (track 7)", False)):
        diag = DiagnosticsView("OK", "ok", {"target": how}, 0.1)
        bridge.node_view = replace(bridge.node_view, diagnostics=diag)
        assert _client(bridge).get("/api/state").json()["target"]["chosen"] is chosen
    assert state["detections"][0]["track_id"] == "7"
