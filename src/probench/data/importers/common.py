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
from probench.data.validate import IMAGES_SOURCE_KEY, image_file_problems
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
    wrong = image_file_problems(source_dir, [_ImageFile(im) for im in images], None)
    if wrong:  # what `probench validate` would say of the result: a not regular file, a wrong size
        raise DatasetError(f"{source_dir}: {len(wrong)} image file(s) not as declared", problems=wrong)
    images_dir = out / IMAGES_DIR
    if images_dir.is_symlink():  # the writer rule: never through a link the import did not make
        raise DatasetError(f"--out {out}: {IMAGES_DIR} is a symbolic link; probench does not write through "
                           "a link it did not make")
    top_out = images_dir.resolve()
    for im in images:
        rel = PurePosixPath(str(im["file_name"]))
        target = out / IMAGES_DIR / rel
        if not target.parent.resolve().is_relative_to(top_out):
            raise DatasetError(f"--out {out}: {target.parent} leads out of {images_dir} through a link; "
                               "probench does not write through a link it did not make")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() or target.is_symlink():
            target.unlink()
        src = (source_dir / rel).resolve()
        if copy:
            copy_no_wider(src, target)
        else:
            os.symlink(src, target)
        im["file_name"] = str(PurePosixPath(IMAGES_DIR) / rel)


class _ImageFile:
    """An image record of an import as :func:`image_file_problems` reads one."""

    def __init__(self, im: Mapping[str, Any]) -> None:
        self.id, self.file_name = im["id"], str(im["file_name"])
        self.width, self.height = im.get("width"), im.get("height")


def copy_no_wider(src: Path, target: Path) -> None:
    """Copy ``src`` to ``target`` with no wider permissions than ``src`` has: the copy's mode
    is the source's, less the umask (a 0640 file never becomes a 0644 copy)."""
    mode = stat.S_IMODE(os.stat(src).st_mode)
    shutil.copyfile(src, target)
    umask = os.umask(0o022)
    os.umask(umask)
    os.chmod(target, mode & 0o666 & ~umask)


def is_dataset_folder(path: Path) -> bool:
    """A folder holding a dataset (its annotations.json): what ``--overwrite`` may replace."""
    return (path / "annotations.json").is_file() and not (path / "annotations.json").is_symlink()


def check_out(out: Path, overwrite: bool) -> None:
    """The writer rule (:func:`probench.cache.output.check_output_folder`) for an import's
    ``--out``: not a link, not in a run folder; a folder already holding something is
    written only if it holds a dataset, and then only with ``overwrite``."""
    from probench.cache.output import check_output_folder

    check_output_folder(out, what="dataset", is_previous=is_dataset_folder, overwrite=overwrite)


def write_dataset(coco: Mapping[str, Any], out: Path) -> Path:
    """``out/annotations.json``, atomically, keys sorted."""
    from probench.cache.atomic import write_json_atomic

    out.mkdir(parents=True, exist_ok=True)
    path = out / "annotations.json"
    write_json_atomic(path, coco, indent=None)
    return path
