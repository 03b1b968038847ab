"""``probench node param list | get | set`` against a running grounding node (a private ROS
domain): every parameter with the table's description, a live value in force at once, a
configure-time value honestly reported (and in force after ``--reconfigure``), the node's
reason for a refused value or a refused configure (then the node is back to the configuration
that worked), usage errors as exit 2."""

from __future__ import annotations

import json

import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, fresh_domain
from helpers.node_cli import node_cli as _cli
from helpers.node_cli import one_line_error as _refused

pytestmark = [pytest.mark.ros, pytest.mark.timeout(240)]


def test_param_list_get_set(tmp_path, ros_env, requires_vision_msgs) -> None:
    from probench.console.params import table_description
    from probench.realtime.node_spec import GROUNDING_PARAMS

    domain = fresh_domain()
    env = {**ros_env, "ROS_DOMAIN_ID": str(domain)}
    node = NodeProcess(ros_env, domain, tmp_path / "node.log",
                       {"model": "test-instant", "diagnostics_period": 0.3, "prompts": ["a cup"]})
    peer = RosPeer(domain)
    try:
        # up and active: its parameter services answer from its first moment, while it still
        # declares its parameters (a list taken then would be short)
        peer.wait_ready(node)
        listed = _cli(env, "param", "list", "--json", "--timeout", "30")
        assert listed.returncode == 0, listed
        by_name = {p["name"]: p for p in json.loads(listed.stdout)}
        for spec in GROUNDING_PARAMS:  # every parameter of the table, with its description
            got = by_name[spec.name]
            assert got["type"] == spec.type and got["applies"] == spec.applies, got
            assert got["description"] == table_description(spec.name), got
        assert by_name["prompts"]["value"] == ["a cup"] and by_name["score_threshold"]["value"] == 0.3
        assert "use_sim_time" in by_name  # rclpy's own parameters are listed too
        text = _cli(env, "param", "list").stdout
        line = next(v for v in text.splitlines() if v.startswith("prompt_policy "))
        assert line.split() == ["prompt_policy", "string", "as_typed", "(live)"], line
        assert "    " + table_description("prompt_policy") in text

        # live: in force at once (the node's /diagnostics reports the policy it applies)
        out = _cli(env, "param", "set", "prompt_policy", "categorical")
        assert out.returncode == 0 and out.stdout.strip() == "prompt_policy = categorical: in force now", out
        assert peer.spin_until(lambda: peer.diags and peer.last_diag_values().get("prompt_policy")
                               == "categorical", timeout=10)
        got = json.loads(_cli(env, "param", "get", "prompt_policy", "--json").stdout)
        assert got["value"] == "categorical" and got["applies"] == "live"
        out = _cli(env, "param", "set", "prompts", "['a mug', 'a kettle']")
        assert out.returncode == 0, out
        assert peer.label_after(0, ["a mug", "a kettle"], timeout=10)

        # refused: exit 1, the node's reason word for word; the old value stays
        _refused(_cli(env, "param", "set", "prompt_policy", "loudest"), "refused prompt_policy",
                 "prompt_policy must be one of as_typed, categorical")
        _refused(_cli(env, "param", "set", "score_threshold", "1.5"), "refused score_threshold")
        _refused(_cli(env, "param", "set", "autostart", "false"), "refused autostart")  # read-only
        _refused(_cli(env, "param", "get", "no_such"), "has no parameter 'no_such'")
        kept = json.loads(_cli(env, "param", "get", "prompt_policy", "--json").stdout)
        assert kept["value"] == "categorical"
        # a value that is not of the parameter's type: a usage error, nothing sent
        bad = _cli(env, "param", "set", "max_detections", "many")
        assert bad.returncode == 2 and "max_detections is an integer" in bad.stderr, bad

        # configure-time: stored, honestly reported as not in force until the next configure ...
        out = _cli(env, "param", "set", "score_threshold", "0.55")
        assert out.returncode == 0 and out.stdout.startswith(
            "score_threshold = 0.55: stored, in force from the node's next configure"), out
        # ... and in force after --reconfigure (the threshold the node's LabelInfo carries)
        out = _cli(env, "param", "set", "score_threshold", "0.6", "--reconfigure")
        assert out.returncode == 0, out
        assert out.stdout.strip().splitlines()[-1] == \
            "score_threshold = 0.6: in force now (the node was reconfigured)", out
        assert "/grounding_node: cleanup -> unconfigured" in out.stdout
        assert _cli(env, "prompt", "a door").returncode == 0
        assert peer.spin_until(lambda: peer.labels and abs(peer.labels[-1].threshold - 0.6) < 1e-6, 10)

        # a refused reconfigure names its reason here (it said only "refused 'configure'") ...
        _refused(_cli(env, "param", "set", "model", "no-such-model", "--reconfigure"), "refused model",
                 "unknown model 'no-such-model'")
        _refused(_cli(env, "param", "set", "depth_topic", "bad topic!", "--reconfigure"),
                 "refused depth_topic", "is not a ROS topic name")
        out = _cli(env, "param", "set", "model", "os:system", "--reconfigure")
        _refused(out, "refused configure: cannot load model 'os:system'",
                 "loaded only by a node started with it",
                 "the node is active again with the last configuration that worked")
        # ... and the node runs on as before: the model it had, active (not left unconfigured)
        assert out.stdout.strip().splitlines()[-1] == "/grounding_node: activate -> active", out.stdout
        got = json.loads(_cli(env, "param", "get", "model", "--json").stdout)
        assert got["value"] == "test-instant"
        assert _cli(env, "prompt", "a kettle").returncode == 0
        # `node configure` on its own names the reason too, and the next one loads what worked
        assert _cli(env, "param", "set", "model", "os:system").returncode == 0
        assert _cli(env, "deactivate").returncode == 0 and _cli(env, "cleanup").returncode == 0
        _refused(_cli(env, "configure"), "refused configure: cannot load model 'os:system'",
                 "back to the last configuration that worked")
        again = _cli(env, "configure")
        assert again.returncode == 0, again
        assert again.stdout.strip() == "/grounding_node: unconfigured -> inactive", again
        assert _cli(env, "activate").returncode == 0
        assert "Traceback" not in node.output()
    finally:
        peer.close()
        assert node.stop() == 0


def test_param_value_parsing() -> None:
    from probench.console.errors import ConsoleUsageError
    from probench.console.params import format_value, parse_value

    assert parse_value("bool", "True") is True and parse_value("integer", " 7 ") == 7
    assert parse_value("double", "0.25") == 0.25 and parse_value("string", " a b ") == " a b "
    assert parse_value("string_array", "['a mug', 'a kettle']") == ["a mug", "a kettle"]
    for kind, text in (("bool", "yes"), ("integer", "1.5"), ("double", "nan"), ("double", "x"),
                       ("string_array", "a mug"), ("string_array", "[1, 2]"), ("byte_array", "1")):
        with pytest.raises(ConsoleUsageError):
            parse_value(kind, text)
    assert format_value(["a", "b"]) == "['a', 'b']" and format_value(True) == "true"
    assert format_value(None) == "(unset)" and format_value(0.3) == "0.3" and format_value("") == '""'
