"""Size limits for arrays the converter builds from shapes rather than from the file's bytes.

A tensor's shape is a few bytes in the file, so a 500-byte model can claim a [1, 4096, 4096, 16] update: an
emitter that bakes index grids, state zeros or window kernels from such a shape would allocate gigabytes the file
cannot justify. Each such emitter asks `check_built` first; constants read from the file are bounded by the
readers (their bytes are there).
"""
from __future__ import annotations

from math import prod
from typing import Iterable

from .errors import ConversionError

MAX_BUILT_BYTES = 128 << 20     # 128 MiB: far above any index grid or state a real model needs


def check_built(shape: Iterable[int], itemsize: int, what: str) -> None:
    """ConversionError when an array of `shape` x `itemsize` bytes would exceed MAX_BUILT_BYTES (or is negative)."""
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ConversionError(f"{what}: negative dimension in {dims}")
    size = prod(dims) * itemsize
    if size > MAX_BUILT_BYTES:
        raise ConversionError(f"{what}: would build a {_human(size)} constant from shape {dims} "
                              f"(the limit is {_human(MAX_BUILT_BYTES)}; the file's shapes are implausible)")


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"
