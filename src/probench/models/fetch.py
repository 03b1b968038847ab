"""``probench fetch``: put a model's published weights where probench looks for them.

probench never downloads while it runs (a robot or a CI machine must not reach out to a
hub mid-run); this is the one command that does, once, on a machine with internet:

- transformers models: the checkpoint's snapshot into the Hugging Face cache
  (``HF_HUB_CACHE``, default ``~/.cache/huggingface/hub``), as ``hf download`` would;
- ultralytics models: the checkpoint file and its text encoder (``mobileclip*.ts``, or
  OpenAI CLIP's ``ViT-B-32.pt`` under ``clip/``) into ultralytics' weights folder
  (``yolo settings`` ``weights_dir``).

What can be known without a download is checked first and fails at once with one line: an
offline switch (``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE``, ``YOLO_OFFLINE``), and a hub
that does not answer a TCP connection within ``timeout_s`` (no DNS, nothing listening, a
firewall). Copy the caches to an offline machine afterwards (docs/MODELS.md).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from probench.models.errors import ModelError
from probench.models.spec import ModelSpec

CONNECT_TIMEOUT_S = 10.0
HF_IGNORE = ["*.msgpack", "*.h5", "*.ot", "flax_model*", "tf_model*", "*.onnx", "*.tflite", "rust_model*"]
ULTRALYTICS_HOST = "https://github.com"  # ultralytics' assets releases
CLIP_HOST = "https://openaipublic.azureedge.net"  # OpenAI CLIP's weights
OFFLINE_SWITCHES = {
    "transformers": ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"),
    "ultralytics": ("YOLO_OFFLINE",),
}


class FetchError(ModelError):
    """Weights cannot be fetched here (offline, hub unreachable, gated, not on the hub)."""


def _switched_on(var: str) -> bool:
    return os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on")


def hf_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


def check_online(backend: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """One-line :class:`FetchError` when ``backend``'s weights cannot be downloaded from
    here: an offline switch is on, or the host does not accept a connection in time."""
    on = [v for v in OFFLINE_SWITCHES.get(backend, ()) if _switched_on(v)]
    if on:
        switches = ", ".join(f"{v}={os.environ[v]}" for v in on)
        raise FetchError(
            f"offline ({switches}): nothing can be downloaded here; on a machine with internet unset "
            f"{' and '.join(on)} and rerun, then copy the cache here (docs/MODELS.md)"
        )
    for url in (hf_endpoint(),) if backend == "transformers" else (ULTRALYTICS_HOST,):
        reachable(url, timeout_s)


def reachable(url: str, timeout_s: float) -> None:
    """A TCP connection to ``url``'s host and port within ``timeout_s``, or a one-line
    :class:`FetchError` saying why not."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except TimeoutError:
        why = f"no answer within {timeout_s:g} s"
    except socket.gaierror as exc:
        why = f"cannot resolve {host}: {exc.strerror}"
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
    raise FetchError(f"cannot reach {url} ({why}): download on a machine with internet and copy the cache "
                     "here (docs/MODELS.md)")


def fetch_spec(spec: ModelSpec, *, tiny: bool, timeout_s: float = CONNECT_TIMEOUT_S) -> str:
    """Download ``spec``'s weights into the cache probench reads (module doc); one line
    saying where they now are (or that a tiny variant needs nothing)."""
    if tiny:
        return "nothing to fetch: random weights, built in"
    if spec.backend not in _FETCHERS:
        hint = f" ({spec.install_hint})" if spec.install_hint else ""
        raise FetchError(f"{spec.name}: probench cannot fetch {spec.backend} weights{hint}")
    check_online(spec.backend, timeout_s)
    return _FETCHERS[spec.backend](spec)


def _fetch_hf(spec: ModelSpec) -> str:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    try:
        path = snapshot_download(spec.checkpoint, cache_dir=os.environ.get("HF_HUB_CACHE") or None,
                                 ignore_patterns=HF_IGNORE)
    except GatedRepoError as exc:
        raise FetchError(
            f"{spec.name}: {spec.checkpoint} is gated: accept its licence at "
            f"{hf_endpoint()}/{spec.checkpoint} and log in (`hf auth login`), then rerun"
        ) from exc
    except RepositoryNotFoundError as exc:
        raise FetchError(f"{spec.name}: {spec.checkpoint} is not on {hf_endpoint()}") from exc
    except (HfHubHTTPError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FetchError(f"{spec.name}: downloading {spec.checkpoint} failed: {first}") from exc
    return f"{spec.checkpoint} in the Hugging Face cache ({path})"


def _fetch_ultralytics(spec: ModelSpec) -> str:
    from ultralytics.utils import SETTINGS
    from ultralytics.utils.downloads import attempt_download_asset

    from probench.models.specs_ultralytics import TEXT_ENCODERS

    weights_dir = Path(SETTINGS["weights_dir"])
    weights_dir.mkdir(parents=True, exist_ok=True)
    got = [Path(attempt_download_asset(str(weights_dir / spec.checkpoint)))]
    if spec.family == "yolo-world":
        got.append(_fetch_clip(weights_dir / "clip"))
    else:
        encoder = TEXT_ENCODERS["mobileclip2:b"]  # the zoo's YOLOE rows are YOLOE-26 (specs_ultralytics)
        got.append(Path(attempt_download_asset(str(weights_dir / encoder))))
    missing = [p for p in got if not p.is_file()]
    if missing:
        raise FetchError(f"{spec.name}: download did not produce {', '.join(map(str, missing))}")
    return ", ".join(str(p) for p in got)


def _fetch_clip(folder: Path) -> Path:
    """OpenAI CLIP ViT-B/32 (``ViT-B-32.pt``), which YOLO-World's text side needs."""
    reachable(CLIP_HOST, CONNECT_TIMEOUT_S)
    from probench.models.ultra_text import _import_clip

    clip = _import_clip()
    folder.mkdir(parents=True, exist_ok=True)
    return Path(clip.clip._download(clip.clip._MODELS["ViT-B/32"], str(folder)))


_FETCHERS: dict[str, Callable[[ModelSpec], str]] = {
    "transformers": _fetch_hf,
    "ultralytics": _fetch_ultralytics,
}
