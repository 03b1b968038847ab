#!/usr/bin/env python3
"""Build ``datasets/probench-sequences`` and its bag ``bags/probench-sequences``.

The sample sequence dataset is made from code (``probench.data.synthetic_sequences``):
4 videos of 60 frames (160x120 JPEG, 10 fps) with shapes that move, pass behind a pillar,
leave the image and come back, two queries per video, and a prompt change midway through
the first video. Usage:

    python scripts/make_sample_sequences.py --out datasets/probench-sequences --bag bags/probench-sequences

Both outputs must not exist yet (remove them to rebuild). The bag is written at the
dataset's own frame rate (10 Hz), its frames the dataset's JPEG bytes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from probench.data.synthetic_sequences import write_sequence_dataset

N_VIDEOS, N_FRAMES, FPS = 4, 60, 10.0
README = """# probench-sequences: a tiny synthetic sequence dataset

Made from code by `python scripts/make_sample_sequences.py` (`probench.data.synthetic_sequences`,
seed 0): {n_videos} videos of {n_frames} frames (160x120 JPEG, {fps:g} fps; {n_images} frames,
{n_annotations} boxes, {n_tracks} tracks). Each video has two targets and a distractor
of the same shape as its first target, moving back and forth behind a grey pillar and out
of the image; the first video's prompt changes at frame {switch} from its first target to
its second. The format is docs/FORMATS.md, "Sequences". No licence question: every pixel is
drawn by the script.
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the dataset folder to write")
    ap.add_argument("--bag", type=Path, help="also write the dataset as a probench bag here")
    args = ap.parse_args()
    if args.out.exists():
        ap.error(f"{args.out} exists already; remove it to rebuild")
    write_sequence_dataset(args.out, N_VIDEOS, N_FRAMES, fps=FPS)
    from probench.data.dataset import load_dataset

    ds = load_dataset(args.out)
    switch = ds.videos[1].prompt_changes[0].frame_index
    tracks = {a.track_id for a in ds.annotations}
    (args.out / "README.md").write_text(
        README.format(
            n_videos=N_VIDEOS,
            n_frames=N_FRAMES,
            fps=FPS,
            n_images=len(ds.images),
            n_annotations=len(ds.annotations),
            n_tracks=len(tracks),
            switch=switch,
        ),
        encoding="utf-8",
    )
    print(f"{args.out}: {len(ds.images)} frames, {len(ds.annotations)} boxes, {ds.content_hash}")
    if args.bag:
        from probench.bags.writer import write_bag

        summary = write_bag(ds, args.bag, compressed=True, rate_hz=FPS, progress=False)
        print(f"{args.bag}: {summary.n_frames} frames, {summary.size_bytes / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
