"""One validity rule for prompt text everywhere (probench.vocabulary.prompt_text_problem and
check_prompt_text through prompting.messages.check_prompt_specs): the `prompts` parameter,
`probench prompt`, `validate` and the importers refuse what the node's topic refuses
(control characters, over-long prompts, `=>` in a dataset's query); terminal output and
logs escape control characters (escape_for_log)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.hostile import one_line
from helpers.infer_dataset import make_dataset
from probench.cli import main
from probench.errors import UsageError
from probench.realtime.node_spec import GROUNDING_PARAMS
from probench.vocabulary import MAX_PROMPT_CHARS, PromptTextError, escape_for_log, prompt_text_problem

ESC = "\x1b[2J\x1b[31mcup"


def test_the_prompts_parameter_refuses_what_the_topic_refuses() -> None:
    from probench.msgs.errors import PromptMessageError
    from probench.realtime.node_spec import prompts_from_message

    with pytest.raises(PromptMessageError, match="U\\+001B"):
        prompts_from_message(ESC)  # the topic (as before)
    with pytest.raises(PromptTextError, match="prompt 1: not valid text: control character U\\+001B"):
        GROUNDING_PARAMS.check("prompts", ["a mug", ESC])  # the parameter: the same rule now
    with pytest.raises(PromptTextError, match="U\\+0000"):
        GROUNDING_PARAMS.check("prompts", ["a\x00mug"])
    assert GROUNDING_PARAMS.check("prompts", ["a mug => mug"]) == ("a mug => mug",)  # explicit: the node's


def test_probench_prompt_refuses_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prompt", ESC]) == 2
    line = one_line(capsys.readouterr().err)
    assert "control character U+001B" in line and "\x1b" not in line
    assert main(["prompt", "x" * (MAX_PROMPT_CHARS + 1)]) == 2
    assert f"limit {MAX_PROMPT_CHARS}" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize(("prompts", "name", "message"), [
    ({"orig": "the cup => mug"}, "cup", "prompt 'orig' holds '=>'"),
    ({"orig": "the red" + ESC}, "cup", "prompt 'orig' not valid text: control character U+001B"),
    ({"orig": "x" * 600}, "cup", "prompt 'orig' is 600 characters long (limit 512)"),
    ({"orig": "x" * 505}, "cup", "derived prompt 'tmpl' (the template) is 516 characters long"),
    ({"orig": "a cup"}, "cup\x07", "derived prompt 'cat' (the name) not valid text"),
    ({"orig": "a cup", "cat": "\ud800"}, "cup", "lone surrogate U+D800"),
])
def test_validate_refuses_prompts_the_node_would_refuse_or_rewrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], prompts: dict, name: str, message: str
) -> None:
    data = make_dataset(tmp_path / "data")
    coco = json.loads((data / "annotations.json").read_text())
    coco["categories"][0].update(prompts=prompts, name=name)
    (data / "annotations.json").write_text(json.dumps(coco))
    assert main(["validate", str(data)]) == 1
    out = capsys.readouterr().out
    assert any(message in line and line.startswith("query 1:") for line in out.splitlines()), out


def test_an_importer_refuses_a_category_the_node_would_refuse(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A new case: a COCO category name with an ESC becomes the `cat` prompt: refused at import."""
    src = Path(__file__).resolve().parents[1] / "data" / "importers" / "coco_small.json"
    coco = json.loads(src.read_text())
    coco["categories"][0]["name"] = "cup" + ESC
    bad = tmp_path / "coco.json"
    bad.write_text(json.dumps(coco))
    images = tmp_path / "imgs"
    for im in coco["images"]:
        (images / im["file_name"]).parent.mkdir(parents=True, exist_ok=True)
        (images / im["file_name"]).write_bytes(b"x")
    assert main(["import", "coco", "--annotations", str(bad), "--images", str(images),
                 "--out", str(tmp_path / "ds")]) == 1
    out = capsys.readouterr()
    assert "control character U+001B" in out.out + out.err
    assert not (tmp_path / "ds" / "annotations.json").exists()


def test_prompt_text_problem_is_the_one_rule() -> None:
    assert prompt_text_problem("a red cup") is None
    assert prompt_text_problem("tab\tand\nnewline") is None  # whitespace a pasted prompt may hold
    for bad in ("", "  ", 5, "a\x7fb", "a\x9bb", "a => b", "y" * 513):
        assert prompt_text_problem(bad) is not None, bad
    assert issubclass(PromptTextError, UsageError)


def test_escape_for_log_leaves_one_inert_line() -> None:
    text = escape_for_log("a\x1b[31mred\nsecond line\r\u2028\x00\ud800")
    assert text == "a\\x1b[31mred\\x0asecond line\\x0d\\u2028\\x00\\ud800"
    assert text.isprintable()
    assert escape_for_log("x" * 500, limit=10) == "x" * 10 + "..."


def test_node_status_escapes_what_came_over_the_graph() -> None:
    from probench.console.bridge import DiagnosticsView, NodeView
    from probench.ros.cli_node import status_text

    diag = DiagnosticsView("OK", "ok\x1b]0;owned\x07", {"prompt_0": "you typed " + ESC, "k\n": "v"}, 0.1)
    view = NodeView(node="/grounding_node", present=True, lifecycle="active", prompts=(ESC, "a\nb"),
                    diagnostics=diag)
    text = status_text(view)
    assert "\x1b" not in text and "\x07" not in text
    assert "prompts      \\x1b[2J\\x1b[31mcup ; a\\x0ab" in text.splitlines()
    assert all(line.isprintable() for line in text.splitlines())
