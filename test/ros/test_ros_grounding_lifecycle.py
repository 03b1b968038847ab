"""grounding_node lifecycle through the standard services (/<node>/change_state, get_state):
detections only while active, cleanup/configure again, shutdown from every state."""

from __future__ import annotations

import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, fresh_domain, image

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]

PARAMS = {"model": "test-instant", "autostart": False, "prompts": ["x"], "score_threshold": 0.99,
          "image_reliability": "reliable"}


class Lifecycle:
    def __init__(self, peer: RosPeer) -> None:
        from lifecycle_msgs.srv import ChangeState, GetState

        self.peer = peer
        self.change = peer.node.create_client(ChangeState, "/grounding_node/change_state")
        self.get = peer.node.create_client(GetState, "/grounding_node/get_state")

    def state(self) -> str:
        from lifecycle_msgs.srv import GetState

        assert self.get.wait_for_service(timeout_sec=30)
        fut = self.get.call_async(GetState.Request())
        assert self.peer.spin_until(fut.done, 10)
        return fut.result().current_state.label

    def transition(self, label: str) -> bool:
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        assert self.change.wait_for_service(timeout_sec=30)
        fut = self.change.call_async(ChangeState.Request(transition=Transition(label=label)))
        assert self.peer.spin_until(fut.done, 60), f"{label} did not answer"
        return fut.result().success


def _start(tmp_path, ros_env):
    domain = fresh_domain()
    node = NodeProcess(ros_env, domain, tmp_path / "node.log", PARAMS)
    peer = RosPeer(domain)
    return node, peer, Lifecycle(peer)


def test_detections_only_while_active(tmp_path, ros_env, requires_vision_msgs) -> None:
    node, peer, lc = _start(tmp_path, ros_env)
    try:
        assert lc.state() == "unconfigured"
        assert lc.transition("configure") and lc.state() == "inactive"
        peer.wait_ready(node)
        peer.send_image(image(), peer.header(1))
        assert peer.answer(1, timeout=1.0) is None  # inactive: no processing
        assert not peer.labels  # LabelInfo is published once active

        assert lc.transition("activate") and lc.state() == "active"
        assert peer.label_after(0, ["x"])
        header = peer.header(2, 9)
        peer.send_image(image(), header)
        ans = peer.answer(2, 9)
        # score_threshold 0.99 filters test-instant's only box: an EMPTY array still answers
        assert ans is not None and ans.header == header and len(ans.detections) == 0

        assert lc.transition("deactivate") and lc.state() == "inactive"
        peer.send_image(image(), peer.header(3))
        assert peer.answer(3, timeout=1.0) is None

        assert lc.transition("cleanup") and lc.state() == "unconfigured"
        assert lc.transition("configure") and lc.transition("activate")
        peer.wait_ready(node)
        peer.send_image(image(), peer.header(4))
        assert peer.answer(4) is not None

        assert lc.transition("shutdown")
        assert node.proc.wait(20) == 0  # finalized: the process ends cleanly
        assert "Traceback" not in node.output()
    finally:
        peer.close()
        node.stop()


@pytest.mark.parametrize("state", ["unconfigured", "inactive"])
def test_shutdown_from_state(tmp_path, ros_env, requires_vision_msgs, state: str) -> None:
    node, peer, lc = _start(tmp_path, ros_env)
    try:
        if state == "inactive":
            assert lc.transition("configure")
        assert lc.state() == state
        assert lc.transition("shutdown")
        assert node.proc.wait(20) == 0
        assert "Traceback" not in node.output()
    finally:
        peer.close()
        node.stop()


def test_a_failed_reconfigure_keeps_the_last_configuration_that_worked(tmp_path, ros_env,
                                                                       requires_vision_msgs) -> None:
    """A model that cannot load (`os:system`: a one-off reference the node was not started
    with, refused at configure before it is imported, docs/SECURITY.md) used to leave the node
    unconfigured with the reason in its log only. Now configure fails with the reason on
    /diagnostics at once, the configure-time parameters go back to the last values that worked,
    and the next configure brings that configuration back. Values that can be judged when set
    (an unknown model, a malformed topic) are refused there."""
    from rcl_interfaces.msg import Parameter as ParamMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import GetParameters, SetParameters

    node, peer, lc = _start(tmp_path, ros_env)
    try:
        setter = peer.node.create_client(SetParameters, "/grounding_node/set_parameters")
        getter = peer.node.create_client(GetParameters, "/grounding_node/get_parameters")
        assert setter.wait_for_service(timeout_sec=30) and getter.wait_for_service(timeout_sec=30)

        def set_text(name: str, value: str) -> object:
            text = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
            fut = setter.call_async(SetParameters.Request(parameters=[ParamMsg(name=name, value=text)]))
            assert peer.spin_until(fut.done, 30)
            return fut.result().results[0]

        def model() -> str:
            fut = getter.call_async(GetParameters.Request(names=["model"]))
            assert peer.spin_until(fut.done, 30)
            return str(fut.result().values[0].string_value)

        assert lc.transition("configure") and lc.transition("activate")
        for name, value, why in (("model", "no-such-model", "unknown model 'no-such-model'"),
                                 ("depth_topic", "bad topic!", "is not a ROS topic name")):
            r = set_text(name, value)
            assert not r.successful and why in r.reason, r.reason
        assert set_text("model", "os:system").successful  # judged at configure only
        assert lc.transition("deactivate") and lc.transition("cleanup")
        assert not lc.transition("configure") and lc.state() == "unconfigured"
        failed = peer.spin_until(lambda: peer.diags and next(
            (v for v in ({kv.key: kv.value for kv in d.status[0].values} for d in reversed(peer.diags))
             if v.get("configure_failures") == "1"), None), 10)
        assert failed, "no /diagnostics with the refusal"
        assert "cannot load model 'os:system'" in failed["configure_error"]
        assert "a plugin reference (package.module:factory) is loaded only by a node started with it" in \
            failed["configure_error"]  # refused, never imported (docs/SECURITY.md)
        assert failed["state"] == "unconfigured"
        assert model() == "test-instant"  # back to the last configuration that worked ...
        assert lc.transition("configure") and lc.transition("activate")  # ... which loads again
        peer.wait_ready(node)
        peer.send_image(image(), peer.header(5))
        assert peer.answer(5) is not None
        assert peer.spin_until(lambda: peer.last_diag_values().get("configure_error") == "", 10)
        assert "Traceback" not in node.output()
    finally:
        peer.close()
        node.stop()
