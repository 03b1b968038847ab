"""The grounding node's pure parts: parameter table vs config/grounding.yaml, prompt splitting,
node description for launch, the compressed-topic rule, statistics window and stages, the
/diagnostics level rules."""

from __future__ import annotations

import pytest
import yaml

from probench.realtime import node_spec
from probench.realtime.errors import ParameterValueError
from probench.realtime.grounding_stats import GroundingStats, Health, diagnostic_level


def test_yaml_defaults_match_the_node_declarations(repo_root) -> None:
    doc = yaml.safe_load((repo_root / "config" / "grounding.yaml").read_text())
    params = doc["/**"]["ros__parameters"]
    assert params == node_spec.PARAMETER_DEFAULTS
    assert node_spec.default_params_file() == repo_root / "config" / "grounding.yaml"


def _eval_yaml(repo_root) -> dict:
    return yaml.safe_load((repo_root / "config" / "eval.yaml").read_text())


def test_eval_yaml_evaluator_section_is_the_declared_defaults(repo_root) -> None:
    params = _eval_yaml(repo_root)["/**/evaluator_node"]["ros__parameters"]
    table = node_spec.EVALUATOR_PARAMS
    assert set(params) <= set(table.names())
    assert params == {name: table.defaults()[name] for name in params}
    # what the file leaves out comes from the launch arguments (probench.ros.graph.eval_graph)
    assert set(table.names()) - set(params) == {"bag", "out", "grounding_node", "overwrite", "find_max_rate",
                                                "result_file"}


def test_the_budget_follows_the_rate_unless_given() -> None:
    assert node_spec.budget_ms(0.0, 30.0) == 33.3 and node_spec.budget_ms(0.0, 15.0) == 66.7
    assert node_spec.budget_ms(50.0, 15.0) == 50.0
    assert node_spec.EVALUATOR_PARAMS.defaults()["budget_ms"] == 0.0


def test_identity_parameters_are_marked_in_the_table() -> None:
    """The evaluator asks the grounding node for these (run.json's identity): read from the table."""
    names = node_spec.GROUNDING_PARAMS.identity_names()
    assert names == ["model", "device", "precision", "weights", "preprocess", "runtime", "score_threshold",
                     "image_reliability", "max_detections"]
    assert "prompts" not in names and "autostart" not in names


def test_eval_yaml_grounding_section_is_valid_and_keeps_every_box(repo_root) -> None:
    params = _eval_yaml(repo_root)["/**/grounding_node"]["ros__parameters"]
    table = node_spec.GROUNDING_PARAMS
    assert table.check_all(params) == params  # declared names, accepted values, exact types
    # the benchmark's detector contract: everything the model's own post-processing keeps
    assert params["score_threshold"] == 0.0
    assert params["max_detections"] == table["max_detections"].high


def test_split_prompts() -> None:
    assert node_spec.split_prompts(" a red cup ;the door;; ") == ["a red cup", "the door"]
    assert node_spec.split_prompts(" ; ") == []


def test_prompts_from_message_holds_the_node_limits() -> None:
    from probench.models.base import MAX_PROMPT_CHARS, MAX_PROMPTS
    from probench.msgs.errors import PromptMessageError

    assert node_spec.prompts_from_message(" a red cup ;the door; ") == ("a red cup", "the door")
    limit = node_spec.prompt_message_limit()
    assert limit == MAX_PROMPTS * (MAX_PROMPT_CHARS + 1)
    assert len(";".join(["x" * MAX_PROMPT_CHARS] * MAX_PROMPTS)) < limit  # the largest valid set fits
    for bad, why in ((" ; ", "empty"), ("x" * (MAX_PROMPT_CHARS + 1), "characters long"),
                     ("a;" * (MAX_PROMPTS + 1), "prompts given"), (" " * (limit + 1), f"limit {limit}"),
                     (["a"], "not list")):
        with pytest.raises(PromptMessageError, match=why):
            node_spec.prompts_from_message(bad)


@pytest.mark.parametrize(("text", "why"), [
    ("a\ud800b", "lone surrogate U\\+D800 at character 1"),
    ("a cup\u0000; a door", "control character U\\+0000 at character 5"),
    ("\x07bell", "control character U\\+0007 at character 0"),
    ("del\x7f", "control character U\\+007F"),
    ("c1\x85", "control character U\\+0085"),
])
def test_prompt_parser_refuses_text_that_is_not_valid_text(text: str, why: str) -> None:
    from probench.msgs.errors import PromptMessageError

    with pytest.raises(PromptMessageError, match=why):
        node_spec.prompts_from_message(text)


def test_prompt_parser_keeps_whitespace_controls_and_any_language() -> None:
    assert node_spec.prompts_from_message("a red cup\t;\r\n la porte ; 赤いカップ 😀") == (
        "a red cup", "la porte", "赤いカップ 😀")


def test_node_description() -> None:
    d = node_spec.grounding_node_description(params_file="/p.yaml", overrides={"model": "m"},
                                             image_topic="/cam/image")
    assert d["executable"] == "grounding_node" and d["package"] == "probench"
    assert d["parameters"] == ["/p.yaml", {"model": "m"}]
    assert d["remappings"] == [("image", "/cam/image"), ("image/compressed", "/cam/image/compressed")]
    with pytest.raises(ParameterValueError, match="unknown grounding_node parameter"):
        node_spec.grounding_node_description(overrides={"modle": "m"})


def test_stats_window() -> None:
    s = GroundingStats(window=4)
    for i, lat in enumerate([10.0, 20.0, 30.0, 40.0, 1000.0]):
        s.record_frame(lat, now=100.0 + 0.1 * i)
    s.count("skipped", 3)
    snap = s.snapshot(now=100.5)
    assert snap["frames_processed"] == 5 and snap["frames_skipped"] == 3
    assert snap["latency_max_ms"] == 1000.0  # window holds the last 4: 20, 30, 40, 1000
    assert snap["latency_p50_ms"] == pytest.approx(35.0)
    assert snap["rate_hz"] == pytest.approx(10.0)
    assert s.snapshot(now=200.0)["rate_hz"] == 0.0  # stale: nothing finished recently


def test_stats_stages_decode_first() -> None:
    s = GroundingStats(window=3)
    for i in range(4):
        s.record_frame(10.0, now=1.0 + i, stages_ms={"forward": 5.0 + i, "decode": 1.0 + i, "text": 0.0})
    snap = s.snapshot(now=4.0)
    stage_keys = [k for k in snap if k.startswith("stage_")]
    assert stage_keys[:2] == ["stage_decode_p50_ms", "stage_decode_p95_ms"]
    expected = {f"stage_{n}_{p}_ms" for n in ("decode", "forward", "text") for p in ("p50", "p95")}
    assert set(stage_keys) == expected
    assert snap["stage_decode_p50_ms"] == pytest.approx(3.0)  # window: the last 3 (2, 3, 4)
    assert snap["stage_forward_p50_ms"] == pytest.approx(7.0)
    assert GroundingStats().snapshot().keys().isdisjoint(stage_keys)  # nothing measured, nothing said


def test_compressed_topic_follows_image_unless_remapped_itself() -> None:
    rule = node_spec.compressed_topic
    cam, plain = "/camera/color/image_raw", "/image/compressed"
    assert rule("/image", plain, plain) == plain  # nothing remapped
    assert rule(cam, plain, plain) == cam + "/compressed"  # -r image:=/camera/color/image_raw
    assert rule(cam, "/camera/jpeg", plain) == "/camera/jpeg"  # ... -r image/compressed:=/camera/jpeg wins
    ns_plain = "/robot1/image/compressed"
    assert rule("/robot1/cam", ns_plain, ns_plain) == "/robot1/cam/compressed"  # a namespaced node


def test_diagnostic_status_name_is_the_fully_qualified_node_name() -> None:
    assert node_spec.diagnostic_status_name("/robot1/grounding_node") == "/robot1/grounding_node: grounding"
    assert (node_spec.diagnostic_status_name("/robot1/grounding_node")
            != node_spec.diagnostic_status_name("/robot2/grounding_node"))


def _health(**kw) -> Health:
    base = {"state": "active", "n_prompts": 1, "new_processed": 10, "new_errors": 0, "rate_hz": 10.0,
            "silent_s": 0.1, "camera_timeout": 3.0, "topics": "/cam", "last_error": ""}
    return Health(**{**base, **kw})


@pytest.mark.parametrize(("kw", "level", "words"), [
    ({}, "OK", "10.0 Hz"),
    ({"state": "inactive"}, "WARN", "not processing"),
    ({"silent_s": 3.0, "new_processed": 0}, "WARN", "no image for 3.0 s on /cam"),
    ({"new_processed": 0, "new_errors": 7, "last_error": "image dropped: bad jpeg"}, "ERROR",
     "every frame fails (7 since last report): image dropped: bad jpeg"),
    ({"new_processed": 3, "new_errors": 2}, "WARN", "2 frame errors"),  # some fail: degraded, not dead
    ({"n_prompts": 0}, "WARN", "no prompts"),
    # a silent camera outranks old failures: no frame arrives, so none can be failing
    ({"silent_s": 5.0, "new_processed": 0, "new_errors": 1}, "WARN", "no image"),
    ({"state": "unconfigured", "silent_s": 99.0}, "WARN", "not processing"),
])
def test_diagnostic_levels(kw: dict, level: str, words: str) -> None:
    got_level, message = diagnostic_level(_health(**kw))
    assert got_level == level and words in message


def test_a_running_node_loads_only_the_plugin_and_weights_it_was_started_with() -> None:
    """Anyone on the ROS domain may set `model` and `weights`: a configure refuses a
    package.module:factory reference or weights other than the start-up ones (foreign code,
    pickles), before anything is imported; zoo models may still be swapped."""
    refusal = node_spec.start_time_refusal
    started = {"model": "test-instant", "weights": ""}
    assert refusal({"model": "test-instant", "weights": ""}, started) == ""
    assert refusal({"model": "tiny-owlv2", "weights": ""}, started) == ""  # a zoo model: no foreign code
    why = refusal({"model": "os:system", "weights": ""}, started)
    assert why.startswith("cannot load model 'os:system': a plugin reference") and "'test-instant'" in why
    assert "\n" not in why and "docs/SECURITY.md" in why
    plugin = {"model": "my_pkg.models:factory", "weights": ""}
    assert refusal(plugin, plugin) == ""  # the plugin the node was started with
    assert refusal({"model": " my_pkg.models:factory ", "weights": ""}, plugin) == ""
    other = {"model": "my_pkg.models:other", "weights": ""}
    assert "cannot load model 'my_pkg.models:other'" in refusal(other, plugin)
    why = refusal({"model": "test-instant", "weights": "/tmp/evil.pt"}, started)
    assert why.startswith("cannot load weights '/tmp/evil.pt': a running node loads only the weights")
    own = {"model": "yolo-world-s", "weights": "/models/yolo"}
    assert refusal(own, own) == ""
    assert "cannot load weights ''" in refusal({"model": "yolo-world-s", "weights": ""}, own)


def test_runtime_and_warmup_size_parameters() -> None:
    """``runtime`` takes the zoo's runtimes; ``warmup_size`` WIDTHxHEIGHT or empty, else one line."""
    from probench.models.head import parse_warmup_size

    table = node_spec.GROUNDING_PARAMS
    assert table["runtime"].check("compiled") == "compiled"
    with pytest.raises(ValueError, match="runtime must be one of torch, compiled"):
        table["runtime"].check("jit")
    assert table["warmup_size"].check("1280x720") == "1280x720" and table["warmup_size"].check("") == ""
    assert parse_warmup_size("1280x720") == (720, 1280) and parse_warmup_size(" ") is None
    for bad in ("1280", "0x720", "1280x720x3", "axb", "99999x1"):
        with pytest.raises(ValueError, match="warmup_size must be WIDTHxHEIGHT") as info:
            table["warmup_size"].check(bad)
        assert "\n" not in str(info.value)
