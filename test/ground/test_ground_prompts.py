"""Prompts that change over time: a recorded prompt topic, honoured as recorded, and a
--prompt-schedule file; both checked as the node checks prompt messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.camera_bags import PERIOD, T0, read_output, write_camera_bag
from probench.ground.errors import GroundUsageError
from probench.ground.prompts import read_schedule, recorded_event


def _run(ground, bag: Path, out: Path, *extra: object) -> tuple[str, str]:
    rc, stdout, err = ground("--bag", bag, "--model", "test-instant", "--out", out,
                             "--score-threshold", "0", *extra)
    assert rc == 0, err
    return stdout, err


def test_recorded_prompt_topic_is_honoured_as_recorded(tmp_path: Path, ground) -> None:
    # prompts just before frame 2 and between frames 4 and 5; an empty message in between
    # is rejected (the node keeps its prompts) and counted
    prompts = [(2 * PERIOD - 10, "a door; a cup"), (3 * PERIOD + 5, "  ;  "), (4 * PERIOD + 10, "a person")]
    bag = write_camera_bag(tmp_path / "bag", n=7, prompts=prompts)
    _, err = _run(ground, bag, tmp_path / "o", "--prompt", "a chair")
    res = read_output(tmp_path / "o")
    ids = [sorted(f) for f in res.class_ids()]
    assert ids == [["a chair"]] * 2 + [["a cup", "a door"]] * 3 + [["a person"]] * 2
    labels = res.topics["/ground/label_info"]
    assert [[vc.class_name for vc in m.class_map] for _, m in labels] == [
        ["a chair"], ["a door", "a cup"], ["a person"]]
    assert [t for t, _ in labels] == [T0, T0 + 2 * PERIOD - 10, T0 + 4 * PERIOD + 10]
    assert "prompt rejected" in err and "empty or whitespace-only" in err
    summary = json.loads(res.custom_data["probench.ground.summary"])
    assert summary["prompts_rejected"] == 1 and summary["prompt_sets"] == 3


def test_prompt_topic_alone_and_frames_before_it(tmp_path: Path, ground) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=4, prompts=[(2 * PERIOD - 10, "a cup")],
                           prompt_topic="/prompt")
    stdout, _ = _run(ground, bag, tmp_path / "o")
    assert read_output(tmp_path / "o").class_ids() == [[], [], ["a cup"], ["a cup"]]
    assert "without prompts 2" in stdout  # answered empty, as the node answers without prompts
    stdout, _ = _run(ground, bag, tmp_path / "o2", "--prompt", "a door", "--prompt-topic", "none")
    assert read_output(tmp_path / "o2").class_ids() == [["a door"]] * 4


def test_schedule_file(tmp_path: Path, ground) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=6)
    schedule = tmp_path / "prompts.txt"
    schedule.write_text("# seconds  prompts\n\n0      a cup; a door\n0.09\ta person\n0.15   a cup\n")
    _run(ground, bag, tmp_path / "o", "--prompt-schedule", schedule)
    ids = [sorted(f) for f in read_output(tmp_path / "o").class_ids()]
    # frames at 0, 33, 67 ms | 100, 133 ms | 167 ms
    assert ids == [["a cup", "a door"]] * 3 + [["a person"]] * 2 + [["a cup"]]


@pytest.mark.parametrize(("text", "words"), [
    ("0 a cup\n0 a door\n", "s.txt:2: time 0 is not after"),
    ("-1 a cup\n", "s.txt:1: time -1 must be finite and >= 0"),
    ("nan a cup\n", "s.txt:1: time nan must be finite"),
    ("soon a cup\n", "s.txt:1: 'soon' is not a time in seconds"),
    ("1.5\n", "s.txt:1: empty or whitespace-only prompt message"),
    ("# nothing\n", "no prompt lines"),
    ("__import__('os').system('x') a\n", "is not a time in seconds"),
])
def test_schedule_errors_name_the_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "s.txt"
    path.write_text(text)
    with pytest.raises(GroundUsageError, match="--prompt-schedule") as err:
        read_schedule(path, T0)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_schedule_not_utf8_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "s.txt"
    path.write_bytes(b"0 caf\xe9\n")
    with pytest.raises(GroundUsageError, match="not UTF-8"):
        read_schedule(path, T0)
    with pytest.raises(GroundUsageError, match="no such file"):
        read_schedule(tmp_path / "missing.txt", T0)


def test_recorded_message_that_is_not_utf8_is_rejected() -> None:
    raw = b"\x00\x01\x00\x00" + (4).to_bytes(4, "little") + b"a\xffb\x00"  # std_msgs/String CDR
    event = recorded_event(5, raw, "/prompt")
    assert event.prompts is None and "undecodable" in event.problem
