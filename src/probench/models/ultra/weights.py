"""Where an ultralytics model comes from: the library imported offline (no downloads, no
auto-install), the model class of a family, and the search for a checkpoint and its text
encoder in local folders (never downloaded)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from probench.models.errors import BackendUnavailableError, ModelError, WeightsNotFoundError
from probench.models.spec import ModelSpec
from probench.models.ultra_text import ClipTextEncoder, MobileClipTextEncoder

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and ultralytics (pyproject)
    from types import ModuleType

    from torch import device as TorchDevice
    from ultralytics import YOLOE, YOLOWorld

    from probench.models.ultra_text import TextEncoder

Kind = Literal["world", "yoloe"]  # UltraArch's kind: YOLOWorld or YOLOE


def import_ultralytics() -> ModuleType:
    """Import ultralytics with downloads and auto-install switched off (also if it was
    imported before with other settings)."""
    os.environ["YOLO_OFFLINE"] = "1"
    os.environ["YOLO_AUTOINSTALL"] = "false"
    os.environ.setdefault("YOLO_VERBOSE", "false")
    # Checkpoints are pickles: restricted (weights_only + allow-list) loading unless the user opts out.
    os.environ.setdefault("ULTRALYTICS_SAFE_LOAD", "1")
    try:
        import ultralytics
        import ultralytics.nn.tasks as tasks
        import ultralytics.utils as uutils
        from ultralytics.utils import checks
    except ImportError as exc:
        raise BackendUnavailableError(
            f"ultralytics is not importable ({exc}); pip install ultralytics"
        ) from exc
    uutils.ONLINE = checks.ONLINE = False
    checks.AUTOINSTALL = uutils.AUTOINSTALL = False
    tasks.SAFE_LOAD = os.environ["ULTRALYTICS_SAFE_LOAD"].lower() in ("1", "true")
    module: ModuleType = ultralytics
    return module


def model_class(kind: Kind) -> type[YOLOWorld] | type[YOLOE]:
    """The ultralytics class of a family (``world``: YOLOWorld, ``yoloe``: YOLOE)."""
    import_ultralytics()
    from ultralytics import YOLOE, YOLOWorld

    cls: type[YOLOWorld] | type[YOLOE] = YOLOWorld if kind == "world" else YOLOE
    return cls


def _search_dirs(weights: str | None) -> list[Path]:
    dirs = []
    if weights and Path(weights).is_dir():
        dirs.append(Path(weights))
    elif weights:
        dirs.append(Path(weights).parent)
    dirs.append(Path.cwd())
    try:
        from ultralytics.utils import SETTINGS  # where ultralytics keeps downloaded weights

        dirs.append(Path(SETTINGS["weights_dir"]))
    except (ImportError, KeyError):
        pass
    return list(dict.fromkeys(d.resolve() for d in dirs))


def find_checkpoint(checkpoint: str, weights: str | None) -> Path:
    """The local checkpoint file, or :class:`WeightsNotFoundError` saying where it was sought."""
    import_ultralytics()
    if weights and Path(weights).is_file():
        return Path(weights).resolve()
    if weights and not Path(weights).exists():
        raise WeightsNotFoundError(f"--weights {weights}: no such file or folder")
    dirs = _search_dirs(weights)
    for d in dirs:
        if (d / checkpoint).is_file():
            return (d / checkpoint).resolve()
    raise WeightsNotFoundError(
        f"{checkpoint} not found in {', '.join(map(str, dirs))}; on a networked machine download it "
        f"from https://github.com/ultralytics/assets/releases and pass --weights FILE_OR_DIR"
    )


def real_text_encoder(
    model: YOLOWorld | YOLOE, kind: Kind, ckpt_dir: Path, weights: str | None, dev: TorchDevice
) -> TextEncoder:
    from probench.models.specs_ultralytics import TEXT_ENCODERS

    variant = "clip:ViT-B/32" if kind == "world" else getattr(model.model, "text_model", "mobileclip:blt")
    fname = TEXT_ENCODERS.get(variant)
    if fname is None:
        raise ModelError(f"unknown text encoder {variant!r} in the checkpoint's config")
    dirs = list(dict.fromkeys([ckpt_dir, *_search_dirs(weights)]))
    if kind == "world":
        dirs += [d / "clip" for d in dirs]  # ultralytics keeps CLIP under weights_dir/clip
    for d in dirs:
        if (d / fname).is_file():
            path = d / fname
            return ClipTextEncoder(path, dev) if kind == "world" else MobileClipTextEncoder(path, dev)
    raise WeightsNotFoundError(
        f"text encoder {fname} ({variant}) not found in {', '.join(map(str, dirs))}; put it next to "
        "the checkpoint (ultralytics assets release, or openaipublic CLIP for ViT-B-32.pt)"
    )


def weights_present(spec: ModelSpec) -> bool:
    """Whether the checkpoint is in the working folder or ultralytics' weights folder. Light
    on purpose (``probench models`` calls it for every row): reads ultralytics' settings
    file instead of importing ultralytics (and torch)."""
    dirs = [Path.cwd()]
    cfg = os.environ.get("YOLO_CONFIG_DIR")
    settings = (Path(cfg) if cfg else Path.home() / ".config" / "Ultralytics") / "settings.json"
    try:
        weights_dir = json.loads(settings.read_text()).get("weights_dir")
    except (OSError, ValueError, AttributeError):
        weights_dir = None
    if isinstance(weights_dir, str):
        dirs.append(Path(weights_dir))
    return any((d / spec.checkpoint).is_file() for d in dirs)
