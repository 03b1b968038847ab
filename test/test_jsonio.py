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


def _random_text(rng: random.Random, n: int) -> str:
    """Characters from every plane that json.dumps writes specially: controls, DEL, Latin-1,
    the BMP (line separators, the top of the BMP) and beyond it (surrogate pairs)."""
    pools = [(0, 0x20), (0x20, 0x7F), (0x7F, 0x100), (0x100, 0xD800), (0xE000, 0x10000), (0x10000, 0x110000)]
    out = []
    for _ in range(n):
        lo, hi = rng.choice(pools)
        out.append(chr(rng.randrange(lo, hi)))
    return "".join(out)


def test_canonical_bytes_beyond_ascii_equal_json_dumps_without_the_slow_path(monkeypatch) -> None:
    rng = random.Random(3)
    obj = {_random_text(rng, rng.randint(1, 6)): [_random_text(rng, rng.randint(0, 12)), rng.random()]
           for _ in range(3000)}
    obj["\u00e9"] = {"\U0001f600": 1, "\uffff": 2, "\U00010000": 3, "z": "\x7f\u2028"}
    want = _reference(obj)
    real = json.dumps

    def no_whole_document(value: object, **kw: object) -> str:  # the escapes of one run are fine
        assert not kw.get("sort_keys"), "canonical_bytes fell back to json.dumps for the whole document"
        return real(value, **kw)

    monkeypatch.setattr(jsonio.json, "dumps", no_whole_document)
    assert jsonio.canonical_bytes(obj) == want


def test_the_committed_sample_dataset_keeps_its_hash() -> None:
    """Existing runs and the sample bag record this hash (bags/probench-sample/metadata.yaml)."""
    from pathlib import Path

    from probench.data.dataset import load_dataset

    root = Path(__file__).resolve().parents[1]
    want = "sha256:04e44ad35e71eb9f421190d04581aff515320fec41b9ef6b24414c55ebc964f1"
    assert want in (root / "bags/probench-sample/metadata.yaml").read_text()
    assert load_dataset(root / "datasets/probench-sample", check_files=False).content_hash == want
