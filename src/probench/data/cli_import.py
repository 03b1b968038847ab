"""``probench import FORMAT ... --out DATASET``: another benchmark's annotations as a
probench dataset (docs/FORMATS.md, "Importing other datasets").

    probench import coco --annotations instances_val2017.json --images val2017 --out datasets/coco-val
    probench import refcoco --refs 'refs(unc).p' --instances instances.json --images train2014 \
        --split val --out datasets/refcoco-val
    probench import mot --root MOT17/train --prompts prompts.csv --out datasets/mot17-prompts

Exit 0 with a one-line summary; 1 with every problem named by its record (the dataset is
not written); 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from probench.errors import UsageError


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--images", required=True, type=Path, help="folder the file names are relative to")
    _output(p)


def _output(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, type=Path, help="dataset folder to write")
    p.add_argument("--copy", action="store_true", help="copy the images (default: symbolic links to them)")
    p.add_argument("--domain", default=None, help="the 'domain' of every image (default: none)")
    p.add_argument("--overwrite", action="store_true", help="replace a dataset already in --out")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="format", metavar="FORMAT", required=True, parser_class=type(parser))
    coco = sub.add_parser("coco", help="plain COCO detection: one query per category")
    coco.add_argument("--annotations", required=True, type=Path, help="the COCO annotations JSON")
    coco.add_argument("--prompts", type=Path, default=None, metavar="TABLE",
                      help="CSV or JSON: per category, orig / cat / tmpl / prompt_types / coref")
    coco.add_argument("--label-space", choices=("all", "gt"), default="all",
                      help="every category on every image (default, COCO's and pycocotools' reading) "
                           "or the categories with ground truth there")
    coco.add_argument("--clip-boxes", action="store_true", help="clip boxes that overhang their image")
    _common(coco)
    ref = sub.add_parser("refcoco", help="refer-toolkit refs: one query per sentence of each referred object")
    ref.add_argument("--refs", required=True, type=Path,
                     help="refs(unc).p (the toolkit's pickle) or the refs as JSON")
    ref.add_argument("--instances", required=True, type=Path, help="the instances.json the refs point into")
    ref.add_argument("--split", default=None, help="only the refs of this split (train, val, testA, ...)")
    _common(ref)
    mot = sub.add_parser("mot", help="MOT Challenge sequences + a prompts table: a sequence dataset")
    mot.add_argument("--root", required=True, type=Path,
                     help="the split folder holding the sequence folders (seqinfo.ini, gt/gt.txt, img1/)")
    mot.add_argument("--prompts", required=True, type=Path, metavar="TABLE",
                     help="CSV: sequence, track_id, orig[, cat, tmpl, prompt_types, coref, start_frame]")
    mot.add_argument("--min-visibility", type=float, default=0.0,
                     help="leave out gt boxes less visible than this (MOT's visibility column; default 0)")
    _output(mot)


def run(args: argparse.Namespace) -> int:
    from probench.data.errors import DatasetError

    try:
        return _run(args)
    except OSError as exc:  # the output cannot be written (a read-only folder, a full disk, /proc)
        where = exc.filename or args.out
        why = exc.strerror or type(exc).__name__
        raise DatasetError(f"--out {args.out}: cannot write {where}: {why}") from None
    except DatasetError as exc:
        if not exc.problems:
            raise
        for line in exc.problems:  # as `probench validate` prints them
            print(line)
        print(f"probench import: {exc.args[0]}; nothing written", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.format == "coco":
        from probench.data.importers.coco import import_coco

        summary = import_coco(args.annotations, args.images, args.out, prompts=args.prompts,
                              label_space=args.label_space, copy=args.copy, clip_boxes=args.clip_boxes,
                              domain=args.domain, overwrite=args.overwrite)
    elif args.format == "refcoco":
        from probench.data.importers.refcoco import import_refcoco

        summary = import_refcoco(args.refs, args.instances, args.images, args.out, split=args.split,
                                 copy=args.copy, domain=args.domain, overwrite=args.overwrite)
    elif args.format == "mot":
        from probench.data.importers.mot import import_mot

        summary = import_mot(args.root, args.prompts, args.out, copy=args.copy,
                             min_visibility=args.min_visibility, domain=args.domain, overwrite=args.overwrite)
    else:  # pragma: no cover - argparse allows only the formats above
        raise UsageError(f"unknown format {args.format!r}")
    print(summary.line(), file=sys.stdout)
    return 0
