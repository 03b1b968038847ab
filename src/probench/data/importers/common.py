"""What the importers share: the derived prompt forms, reading an input file, placing
images, and writing a checked dataset folder."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from probench.data.errors import DatasetError
from probench.data.validate import IMAGES_SOURCE_KEY
from probench.errors import UsageError
from probench.files import UserFileError, read_user_json
from probench.vocabulary import TEMPLATE_PREFIX

IMAGES_DIR = "images"  # where the images go inside the dataset folder


def _derive_forms(orig: str, name: str) -> dict[str, str]:
    """The ``cat`` and ``tmpl`` forms of a query whose source gives only ``orig`` (and a
    category ``name``): the name and the CLIP-style template, as docs/FORMATS.md derives
    them for a dataset that leaves them out. The one place to switch to another derivation."""
    return {"cat": name, "tmpl": TEMPLATE_PREFIX + orig}


def read_json_file(path: Path, what: str) -> Any:
    """A JSON input file, or a one-line error naming it."""
    if not path.exists():
        raise UsageError(f"{path}: no such {what} file")
    try:  # bounded: a regular file, the size and nesting caps (docs/SECURITY.md)
        return read_user_json(path, what=what, kind="annotations")
    except UserFileError as exc:
        raise DatasetError(f"{path}: cannot read the {what} file as JSON: {exc.reason}") from None


def check_problems(source: Path, problems: list[str]) -> None:
    """Raise the problems found in ``source`` (one line each), if any."""
    if problems:
        raise DatasetError(f"{source}: {len(problems)} problem(s)", problems=problems)


def place_images(images: list[dict[str, Any]], source_dir: Path, out: Path, *, copy: bool,
                 info: dict[str, Any] | None = None) -> None:
    """Link (or copy) each image's file from ``source_dir`` to ``out/images/``, and point
    its ``file_name`` there. Every missing file, and every link leaving ``source_dir``, is
    named before anything is written. ``info`` (the dataset's): links record the folder
    they point into (``images_source``: where ``probench validate`` lets them lead)."""
    if info is not None:
        info.pop(IMAGES_SOURCE_KEY, None)
        if not copy:
            info[IMAGES_SOURCE_KEY] = str(source_dir.resolve())
    missing = []
    top = source_dir.resolve()
    for im in images:
        rel = PurePosixPath(str(im["file_name"]))
        if rel.is_absolute() or ".." in rel.parts:
            missing.append(f"image {im['id']}: 'file_name' {str(rel)!r} must be relative to --images")
        elif not (source_dir / rel).is_file():
            missing.append(f"image {im['id']}: image file {str(rel)!r} not found under {source_dir}")
        elif not (source_dir / rel).resolve().is_relative_to(top):  # a link out of --images
            missing.append(f"image {im['id']}: image file {str(rel)!r} is a link that leaves {source_dir} "
                           f"(to {(source_dir / rel).resolve()}): refused")
    if missing:
        raise DatasetError(f"{source_dir}: {len(missing)} image file(s) missing or outside it",
                           problems=missing)
    for im in images:
        rel = PurePosixPath(str(im["file_name"]))
        target = out / IMAGES_DIR / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() or target.is_symlink():
            target.unlink()
        src = (source_dir / rel).resolve()
        if copy:
            copy_no_wider(src, target)
        else:
            os.symlink(src, target)
        im["file_name"] = str(PurePosixPath(IMAGES_DIR) / rel)


def copy_no_wider(src: Path, target: Path) -> None:
    """Copy ``src`` to ``target`` with no wider permissions than ``src`` has: the copy's mode
    is the source's, less the umask (a 0640 file never becomes a 0644 copy)."""
    mode = stat.S_IMODE(os.stat(src).st_mode)
    shutil.copyfile(src, target)
    umask = os.umask(0o022)
    os.umask(umask)
    os.chmod(target, mode & 0o666 & ~umask)


def check_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a folder")
    if (out / "annotations.json").exists() and not overwrite:
        raise UsageError(f"--out {out}: already holds a dataset (annotations.json); --overwrite replaces it")


def write_dataset(coco: Mapping[str, Any], out: Path) -> Path:
    """``out/annotations.json``, atomically, keys sorted."""
    from probench.cache.atomic import write_json_atomic

    out.mkdir(parents=True, exist_ok=True)
    path = out / "annotations.json"
    write_json_atomic(path, coco, indent=None)
    return path
