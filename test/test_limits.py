"""Every integer the CLI takes has a range (limits.IntRange, or a node parameter's own row):
a test walks every command's parser, so a new `type=int` flag fails here. A value out of
range, or too large for its type (`--bootstrap-seed -5`, a 30-digit TRACK_ID or parameter
value), is one usage line, exit 2, never an internal error further in."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from probench.cli import COMMANDS, build_parser, main
from probench.limits import INT64_MAX, IntRange
from probench.realtime.node_spec import EVALUATOR_PARAMS, GROUNDING_PARAMS

HUGE = "9" * 30


def _walk(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _walk(sub)
        else:
            yield parser.prog, action


def _every_action() -> list[tuple[str, argparse.Action]]:
    from probench.ros.synthetic_camera import build_parser as camera_parser

    found = [a for name in COMMANDS for a in _walk(build_parser(name)[0])]
    return found + list(_walk(camera_parser()))


def test_no_integer_flag_lacks_a_range() -> None:
    actions = _every_action()
    bounded = [(prog, a) for prog, a in actions if isinstance(a.type, IntRange)]
    unbounded = [f"{prog} {'/'.join(a.option_strings) or a.dest}" for prog, a in actions
                 if a.type is int or (a.type is None and a.nargs != 0 and type(a.default) is int)]
    assert not unbounded, f"integer flags without an IntRange: {unbounded}"
    assert len(bounded) >= 20  # the walk reaches every command's flags (subcommands too)
    for prog, a in bounded:  # a default the flag itself would refuse is a bug too
        r = a.type
        assert a.default is None or a.default == r.off or r.low <= a.default <= r.high, (prog, a)
        with pytest.raises(argparse.ArgumentTypeError):
            a.type(HUGE)


def test_the_node_tables_bound_every_integer_parameter() -> None:
    for table in (GROUNDING_PARAMS, EVALUATOR_PARAMS):
        for row in table:
            if row.type == "integer":
                flag = row.int_flag()  # raises for a row without a closed range
                assert flag.high <= INT64_MAX and flag(str(row.default)) == row.default


def test_int_range_words() -> None:
    r = IntRange(40, 100, off=0)
    assert r("0") == 0 and r(" 40 ") == 40 and r.text() == "0 (off) or 40..100"
    for text, why in (("1", "must be 0 (off) or 40..100, got 1"), ("1.5", "is not a whole number"),
                      ("9" * 5000, "is not a whole number"), ("-5", "got -5")):
        with pytest.raises(argparse.ArgumentTypeError, match=why.replace("(", r"\(").replace(")", r"\)")):
            r(text)


@pytest.mark.parametrize(("argv", "why"), [
    (["score", "--dataset", "d", "--run", "r", "--bootstrap-seed", "-5"],
     "argument --bootstrap-seed: must be 0..4294967295, got -5"),
    (["compare", "a", "b", "--bootstrap-seed", HUGE], "argument --bootstrap-seed: must be"),
    (["compare", "a", "b", "--bootstrap", "1"], "argument --bootstrap: must be 0 (off) or 40..100000"),
    (["node", "target", HUGE], "argument TRACK_ID: must be 0..9223372036854775807"),
    (["node", "target", "-3"], "argument TRACK_ID: must be 0..9223372036854775807, got -3"),
    (["ground", "--bag", "b", "--out", "o", "--model", "m", "--max-detections", HUGE],
     "argument --max-detections: must be 1..10000"),
    (["eval", "--model", "m", "--bag", "b", "--out", "o", "--domain-id", "233"], "must be 0..232, got 233"),
    (["console", "--port", "70000"], "argument --port: must be 0..65535"),
    (["sweep", "--models", "m", "--dataset", "d", "--out", "o", "--workers", HUGE], "argument --workers"),
])  # fmt: skip
def test_out_of_range_integers_are_one_usage_line(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                 why: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and why in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_a_parameter_value_beyond_int64_is_a_usage_error() -> None:
    """`node param set max_detections <30 digits>` raised inside rclpy's message building;
    a value a ROS integer can carry goes to the node, which refuses it by its row's range."""
    from probench.console.errors import ConsoleUsageError
    from probench.console.params import parse_value

    assert parse_value("integer", str(INT64_MAX), "max_detections") == INT64_MAX
    with pytest.raises(ConsoleUsageError, match="max_detections is an integer: must be"):
        parse_value("integer", HUGE, "max_detections")
    with pytest.raises(ValueError, match="max_detections must be <= 10000"):
        GROUNDING_PARAMS.check("max_detections", INT64_MAX)
