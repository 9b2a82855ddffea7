"""Which layouts a tensor can be in, judged from its shape alone: for models that do not say (another converter's
ONNX, or one of ours without its I/O record)."""
from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Sequence

from . import layout as L
from .layout import Perm


def fitting_perms(shape: Sequence[int], dims: Sequence[int] | None) -> list[Perm]:
    """Every layout (perm of the TFLite axes) in which `shape` reads as `dims` (-1 = any); identity and
    channels-first first. Empty when none fits."""
    if dims is None or len(dims) != len(shape):
        return []
    return list(_fitting(tuple(shape), tuple(dims)))


@lru_cache(maxsize=4096)
def _fitting(shape: tuple[int, ...], dims: tuple[int, ...]) -> tuple[Perm, ...]:
    known = sorted(d for d in dims if d >= 0)
    if any(d not in shape for d in known) or (-1 not in dims and known != sorted(shape)):
        return ()                                   # quick refusal: the sizes differ whatever the order
    rank = len(shape)
    first = [L.identity(rank), L.channels_first(rank)]
    rest = itertools.permutations(range(rank)) if rank <= 6 else ()
    out: list[Perm] = []
    for p in itertools.chain(first, rest):
        p = tuple(p)
        if p not in out and all(d in (-1, s) for d, s in zip(dims, L.apply(shape, p))):
            out.append(p)
    return tuple(out)
