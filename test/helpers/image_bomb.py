"""A decompression bomb: a small PNG whose header says 30000x30000 (decoded to RGB: 2.7 GB).

Built in well under a second: the zlib stream of the all-zero rows is one compressed block
repeated (each ends in a full flush, so the blocks are independent), with the true Adler-32
of the whole image, so the file is a valid PNG that OpenCV would decode (measured: 0.9 MB
file, 5.3 GB peak RSS and 30 s in cv2.imread on a 2-core x86-64 CPU).

Not a test module (imported as helpers.image_bomb).
"""

from __future__ import annotations

import struct
import zlib


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png_bomb(side: int = 30000, rows_per_block: int = 1000) -> bytes:
    """A valid 8-bit grayscale PNG of ``side`` x ``side`` black pixels (``side`` a multiple
    of ``rows_per_block``)."""
    assert side % rows_per_block == 0
    block = bytes((side + 1) * rows_per_block)  # each row: filter byte 0, then the pixels
    comp = zlib.compressobj(9)
    first = comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH)
    again = comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH)
    end = comp.flush()[:-4]  # the final empty block, without the Adler-32 of only two blocks
    adler = 1
    for _ in range(side // rows_per_block):
        adler = zlib.adler32(block, adler)
    idat = first + again * (side // rows_per_block - 1) + end + struct.pack(">I", adler)
    ihdr = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)  # 8-bit grayscale
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")
