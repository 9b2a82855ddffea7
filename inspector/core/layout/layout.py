"""Layouts as permutations.

A tensor's layout in the converted model is a permutation `perm` of its TFLite axes:
onnx_tensor = numpy.transpose(tflite_tensor, perm). Identity means "as in TFLite"; channels_first(4) = (0, 3, 1, 2)
is NHWC -> NCHW.
"""
from __future__ import annotations

from typing import Sequence

Perm = tuple[int, ...]


def identity(rank: int) -> Perm:
    return tuple(range(rank))


def channels_first(rank: int) -> Perm:
    """(0, r-1, 1, ..., r-2): channels-last TFLite to channels-first ONNX."""
    if rank < 3:
        return identity(rank)
    return (0, rank - 1, *range(1, rank - 1))


def is_identity(perm: Sequence[int] | None) -> bool:
    return perm is None or all(i == p for i, p in enumerate(perm))


def inverse(perm: Sequence[int]) -> Perm:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def compose(first: Sequence[int], then: Sequence[int]) -> Perm:
    """The single perm equal to transposing by `first`, then by `then`."""
    return tuple(first[t] for t in then)


def apply(shape: Sequence, perm: Sequence[int] | None) -> tuple:
    """Shape (or any per-axis sequence) as seen after the transposition."""
    if perm is None:
        return tuple(shape)
    return tuple(shape[p] for p in perm)


def axis_to_onnx(axis: int, perm: Sequence[int]) -> int:
    """Where TFLite axis `axis` (may be negative) sits in the transposed tensor."""
    return list(perm).index(axis % len(perm))


def is_trivial(shape: Sequence[int], perm: Sequence[int]) -> bool:
    """True when the transposition only moves size-1 axes: then it is a reshape, no data moves.
    Dynamic dims (-1) count as not size-1, so the answer holds for every size they take."""
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)


def name(perm: Sequence[int] | None, rank: int | None = None) -> str:
    """A short human name: 'NHWC' for identity on 4-D, 'NCHW' for channels-first, else the numbers."""
    if perm is None:
        return "as TFLite"
    r = len(perm)
    letters = {3: "NWC", 4: "NHWC", 5: "NDHWC"}.get(r)
    if letters:
        return "".join(letters[p] for p in perm)
    return "identity" if is_identity(perm) else "(" + ",".join(map(str, perm)) + ")"


def parse(text: str, rank: int) -> Perm:
    """A user pin: 'NHWC' (convert to channels-first), 'keep' (leave as is), 'NCHW'-style letters, or '0,3,1,2'."""
    t = text.strip()
    low = t.lower()
    if low in ("keep", "as-is", "identity", "none"):
        return identity(rank)
    if low in ("nhwc", "nwc", "ndhwc", "channels-last", "to-nchw", "nchw-convert"):
        if rank < 3:
            raise ValueError(f"pin '{text}' needs a tensor of rank 3 or more, this one has rank {rank}")
        return channels_first(rank)
    if "," in t or t.isdigit():
        try:
            perm = tuple(int(x) for x in t.split(","))
        except ValueError:
            raise ValueError(f"pin '{text}' is not a permutation like 0,3,1,2") from None
        if sorted(perm) != list(range(rank)):
            raise ValueError(f"pin '{text}' is not a permutation of {rank} axes")
        return perm
    letters = {4: "NHWC", 3: "NWC", 5: "NDHWC"}.get(rank)
    if letters and sorted(t.upper()) == sorted(letters):
        return tuple(letters.index(c) for c in t.upper())
    raise ValueError(f"pin '{text}' not understood: use NHWC, keep, a letter order such as NCHW, or 0,3,1,2")


def reshapable(dims: Sequence[int], perm: Sequence[int]) -> bool:
    """A trivial transposition a Reshape can do: at most one dynamic dim (Reshape infers one -1)."""
    return is_trivial(dims, perm) and sum(1 for d in dims if d < 0) <= 1
