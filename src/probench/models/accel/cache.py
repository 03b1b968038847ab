"""A folder of exported artefacts (ONNX files, TensorRT engines) keyed by what they depend on.

The key is a SHA-256 over a JSON description (model fingerprint, prompts when they are
baked in, input size, precision, runtime versions), so a changed prompt set, weight file
or TensorRT version means a new file and a stale one is never reused. Files are written
atomically (a crash never leaves a half-written engine under its final name).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from probench.cache.atomic import write_json_atomic

ENV_DIR = "PROBENCH_ENGINE_CACHE"


def default_dir() -> Path:
    """``$PROBENCH_ENGINE_CACHE`` or ``~/.cache/probench/engines``."""
    env = os.environ.get(ENV_DIR)
    return Path(env) if env else Path.home() / ".cache" / "probench" / "engines"


def cache_key(parts: Mapping[str, object]) -> str:
    """Stable hex key of a JSON-serialisable description (key order does not matter)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


class ArtifactCache:
    """``path(kind, parts)`` names the artefact; ``get_or_build`` builds it once."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_dir()
        self.builds = 0  # how many artefacts this cache object built (tests, logs)

    def path(self, kind: str, parts: Mapping[str, object], suffix: str) -> Path:
        return self.root / f"{kind}-{cache_key(parts)}{suffix}"

    def get_or_build(
        self, kind: str, parts: Mapping[str, object], suffix: str, build: Callable[[Path], object]
    ) -> Path:
        """The cached file, or ``build(tmp_path)`` (what it returns is not used) then an atomic
        rename into place. The description is stored beside it (``.json``) so a cache folder
        can be inspected."""
        final = self.path(kind, parts, suffix)
        if final.is_file() and final.stat().st_size > 0:
            return final
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        try:
            build(tmp)
            if not tmp.is_file() or tmp.stat().st_size == 0:
                from probench.models.accel.errors import ExportError

                raise ExportError(f"building {final.name} produced no file")
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        write_json_atomic(final.with_suffix(final.suffix + ".json"), parts)
        self.builds += 1
        return final
