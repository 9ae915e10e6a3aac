"""The simulated provider's images: valid PNGs made offline, deterministically.

Each image is the asked size (1024x1024 for `auto`) in two colours picked by a hash of
the prompt, the input images and the image's index: a band of one across the other.
A transparent background makes the area outside the band transparent (RGBA). Every
image says it is simulated in its tEXt chunk and in `revised_prompt`; other output
formats are answered as PNG (the answer's `output_format` says so).
"""

from __future__ import annotations

import hashlib
import struct
import zlib

from server.base.images import ImageRequest, Images, MadeImage

SOFTWARE = b"gateway simulated provider"
DEFAULT_SIZE = (1024, 1024)


def images(request: ImageRequest) -> Images:
    width, height = dimensions(request.size)
    seed = hashlib.sha256(request.prompt.encode())
    for given in request.images:
        seed.update(hashlib.sha256(given.data).digest())
    transparent = request.background == "transparent"
    made = tuple(
        MadeImage(
            data=png(
                width, height, hashlib.sha256(seed.digest() + bytes([i])).digest(), transparent
            ),
            revised_prompt=f"(simulated) {request.prompt}",
        )
        for i in range(request.n)
    )
    return Images(
        made,
        size=f"{width}x{height}",
        quality=request.quality if request.quality not in ("", "auto") else "medium",
        output_format="png",
        background="transparent" if transparent else "opaque",
    )


def dimensions(size: str) -> tuple[int, int]:
    if "x" not in size:
        return DEFAULT_SIZE
    width, _, height = size.partition("x")
    return int(width), int(height)


def png(width: int, height: int, digest: bytes, transparent: bool) -> bytes:
    """A PNG of a band of one colour from `digest` across another (RGBA when transparent)."""
    alpha = transparent
    back, band = digest[:3] + (b"\x00" if alpha else b""), digest[3:6] + (b"\xff" if alpha else b"")
    back_row = b"\x00" + back * width
    band_row = b"\x00" + band * width
    third = height // 3
    packer = zlib.compressobj(6)
    rows = [packer.compress(back_row * third), packer.compress(band_row * (height - 2 * third)),
            packer.compress(back_row * third), packer.flush()]  # fmt: skip
    header = struct.pack(">IIBBBBB", width, height, 8, 6 if alpha else 2, 0, 0, 0)
    return b"".join((
        b"\x89PNG\r\n\x1a\n",
        _chunk(b"IHDR", header),
        _chunk(b"tEXt", b"Software\x00" + SOFTWARE),
        _chunk(b"IDAT", b"".join(rows)),
        _chunk(b"IEND", b""),
    ))  # fmt: skip


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
