"""Fast JSON for the big files (datasets, predictions): orjson when it is installed, the
standard library otherwise, with the standard library's results either way.

- :func:`loads` parses with orjson; a document orjson refuses but the standard library
  reads (``NaN``, ``Infinity``, lone surrogates) is parsed by ``json.loads``, so what
  parses never depends on orjson being there, and errors stay
  :class:`json.JSONDecodeError` (bytes are read as UTF-8 text, a BOM refused, as
  ``json.loads(path.read_text("utf-8"))`` does; bad UTF-8 raises ``UnicodeDecodeError``).
  One difference remains: orjson reads an integer beyond 64 bits as a float (the standard
  library keeps an int); no probench id or count can be one (validation refuses such an
  id as not an integer).
- Nesting is capped at :data:`MAX_JSON_DEPTH` levels (orjson's own limit): a deeper
  document raises :class:`json.JSONDecodeError` (``nested deeper than 1024 levels``) on
  either path, never a ``RecursionError`` (the standard library's parser is given the
  document only after a scan of its depth).
- :func:`canonical_bytes` is ``json.dumps(obj, sort_keys=True, separators=(",", ":"))``
  encoded as UTF-8 (the dataset hash's canonical form, docs/FORMATS.md), byte for byte: orjson
  writes it when its output is provably the same (no float it would spell differently, no
  NaN or infinity), the standard library otherwise. orjson writes text beyond ASCII (and
  DEL) as UTF-8 where ``json.dumps`` writes ``\\uXXXX`` escapes: such text is re-encoded
  to ASCII with ``json.dumps``'s own escapes of it (an encoding error handler).

A bottom module: it imports nothing from probench.
"""

from __future__ import annotations

import codecs
import gc
import json
import math
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - the pinned environment has it
    orjson = None  # type: ignore[assignment]

_DIGITS = frozenset(b"0123456789")
MAX_JSON_DEPTH = 1024  # levels of nested arrays/objects (orjson's limit; docs/SECURITY.md)
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_RECURSION = threading.Lock()

_ESCAPES = "probench.json-escapes"  # the codec error handler below


def _json_escapes(exc: UnicodeError) -> tuple[str, int]:
    """An encoding error handler: ``json.dumps``'s ``\\uXXXX`` escapes (surrogate pairs
    beyond the BMP) of the run of characters that ASCII cannot encode."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return json.dumps(exc.object[exc.start : exc.end])[1:-1], exc.end


codecs.register_error(_ESCAPES, _json_escapes)


def _ascii_escaped(out: bytes) -> bytes:
    """orjson's UTF-8 output with every character beyond ASCII, and DEL, escaped as
    ``json.dumps`` escapes them (outside strings the output is ASCII already)."""
    return out.replace(b"\x7f", b"\\u007f").decode("utf-8").encode("ascii", _ESCAPES)


def loads(data: bytes | str) -> Any:
    """Parse a JSON document (module doc)."""
    return parse(data)[0]


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: parsing and indexing a large document allocates
    hundreds of thousands of containers, and each collection would walk all of them again
    (most of the load time of a Pro-Bench-size dataset). Nothing made there is cyclic
    garbage."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse(data: bytes | str) -> tuple[Any, bool]:
    """``(value, finite)``: the document parsed, and whether it is known to hold no NaN or
    infinity (true when orjson read it: it refuses them; see :func:`canonical_bytes`)."""
    with gc_paused():
        if isinstance(data, bytes):  # before orjson, which sets aside ~16 bytes per input byte first
            _refuse_nul(data)
        if orjson is not None:
            try:
                return orjson.loads(data), True
            except orjson.JSONDecodeError:
                pass  # the standard library's verdict (and message), below
        text = data.decode("utf-8") if isinstance(data, bytes) else data  # as a text read would
        depth = json_depth(data if isinstance(data, bytes) else text.encode("utf-8", "surrogatepass"))
        if depth > MAX_JSON_DEPTH:
            raise json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels ({depth})", text, 0)
        return _stdlib_loads(text), False


def _refuse_nul(data: bytes) -> None:
    """A JSONDecodeError at the first NUL byte, found without copying ``data``: no JSON text
    holds one, and a file of NUL bytes (a sparse file copied whole) would otherwise cost
    orjson's buffer and the standard library's decoded copies, many times its size, only to
    be refused."""
    at = data.find(b"\x00")
    if at < 0:
        return
    line = data.count(b"\n", 0, at) + 1
    col = at - data.rfind(b"\n", 0, at)
    exc = json.JSONDecodeError("a NUL byte, which no JSON text holds", "", 0)
    exc.pos, exc.lineno, exc.colno = at, line, col
    exc.args = (f"a NUL byte, which no JSON text holds: line {line} column {col} (char {at})",)
    raise exc


def json_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text (brackets inside strings
    not counted): a linear scan, no recursion."""
    import numpy as np

    brackets = _STRING.sub(b"", data).translate(None, delete=bytes(set(range(256)) - set(b"[]{}")))
    if not brackets:
        return 0
    arr = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((arr == ord("[")) | (arr == ord("{")), 1, -1).astype(np.int64)
    return int(np.cumsum(steps).max())


def _stdlib_loads(text: str) -> Any:
    """``json.loads`` with room for :data:`MAX_JSON_DEPTH` levels above the caller's stack
    (its parser recurses once per level, counted against the recursion limit)."""
    with _RECURSION:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, _stack_depth() + MAX_JSON_DEPTH + 64))
        try:
            return json.loads(text)
        except RecursionError:
            raise json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels", text, 0) from None
        finally:
            sys.setrecursionlimit(old)


def _stack_depth() -> int:
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1  # type: ignore[assignment]
    return n


def _small_float_spelling(out: bytes) -> bool:
    """Whether orjson may have spelled a float differently from Python's repr: below 1e-4
    it writes "0.00001" / "1e-7" where repr writes "1e-05" / "1e-07". Also true for such
    text inside a string (harmless: the standard library then writes the object)."""
    if b"0.0000" in out:
        return True
    i = out.find(b"e-")
    while i != -1:
        if i > 0 and out[i - 1] in _DIGITS:
            return True
        i = out.find(b"e-", i + 2)
    return False


def _finite(obj: Any) -> bool:
    """No NaN or infinity anywhere (orjson writes them as null, json.dumps as NaN)."""
    stack = [obj]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is dict:
            stack.extend(v.values())
        elif t is list:
            stack.extend(v)
        elif t is float and not math.isfinite(v):
            return False
    return True


def canonical_bytes(obj: Any, *, finite: bool = False) -> bytes:
    """``json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()``, fast (module
    doc). ``finite=True`` asserts that ``obj`` holds no NaN or infinity (true of anything
    :func:`loads` gave through orjson), sparing the walk that checks it."""
    if orjson is not None and (finite or _finite(obj)):
        try:
            out = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
        except (TypeError, orjson.JSONEncodeError):
            out = None  # e.g. an integer beyond 64 bits, a non-string key
        if out is not None and not _small_float_spelling(out):
            if out.isascii() and b"\x7f" not in out:
                return out
            return _ascii_escaped(out)
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("utf-8")
