"""probench.jsonio: orjson's speed with the standard library's results."""

from __future__ import annotations

import codecs
import json
import math
import random

import pytest

from probench import jsonio
from probench.data.synthetic import synthetic_coco


def _reference(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("utf-8")


TRICKY = [
    {"s": "".join(chr(i) for i in range(128)), "b": [True, False, None],
     "n": {"z": 1, "a": {"y": 2, "b": 3}}},
    {"small": [1e-05, 2.5e-05, 1e-07, 0.0001, 9.99e-05, -3e-300, 5e-324]},
    {"big": [1e15, 1e16, 1.5e16, 1e21, 1.7976931348623157e308, 12345678901234567.0, 2**63, 2**70, -(2**64)]},
    {"unicode": "caf\u00e9 \u2603 \U0001f600", "k\u00e9y": 1},
    {"text with e-1 and 0.00001 inside": "3e-5", "x": 0.5},
    {"nan": math.nan, "inf": [math.inf, -math.inf]},
    {"neg_zero": -0.0, "ints": [0, -1, 10**18]},
]


@pytest.mark.parametrize("obj", TRICKY)
def test_canonical_bytes_equal_json_dumps(obj: object) -> None:
    assert jsonio.canonical_bytes(obj) == _reference(obj)


def test_canonical_bytes_on_random_floats_and_datasets() -> None:
    rng = random.Random(0)
    floats = [rng.random() * 10 ** rng.randint(-9, 25) * rng.choice([1, -1]) for _ in range(20000)]
    assert jsonio.canonical_bytes({"x": floats}) == _reference({"x": floats})
    coco = synthetic_coco(200, 20, seed=1)
    assert jsonio.canonical_bytes(coco, finite=True) == _reference(coco)


def test_loads_agrees_with_the_standard_library() -> None:
    for text in ['{"a": [1, 2.5, "x", null, true]}', '[NaN, Infinity, -Infinity]', '"\\ud800"', "[1e400]"]:
        got, want = jsonio.loads(text.encode()), json.loads(text)
        assert json.dumps(got) == json.dumps(want)
    value, finite = jsonio.parse(b'{"a": NaN}')
    assert math.isnan(value["a"]) and not finite
    assert jsonio.parse(b"[1.5]") == ([1.5], jsonio.orjson is not None)
    for bad in [b"[1,", b"{'a': 1}", codecs.BOM_UTF8 + b"{}"]:
        with pytest.raises(json.JSONDecodeError):
            jsonio.loads(bad)
    with pytest.raises(UnicodeDecodeError):
        jsonio.loads(b'"\xff"')
