"""Layouts as permutations.

A tensor's layout in the converted model is a permutation `perm` of its TFLite axes:
onnx_tensor = numpy.transpose(tflite_tensor, perm). Identity means "as in TFLite"; channels_first(4) = (0, 3, 1, 2)
is NHWC -> NCHW. `Layout` is the value type that converts between that permutation and text: its name spells the
ONNX axis order in TFLite's letters ("NCHW" for channels-first, "NHWC" for as-TFLite on 4-D), and `Layout.parse`
reads exactly what `name` writes, plus the words `channels-first` and `keep`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

Perm = tuple[int, ...]

LETTERS = {3: "NWC", 4: "NHWC", 5: "NDHWC"}           # TFLite's axis letters by rank
AS_TFLITE_WORDS = ("keep", "as-tflite", "as-is", "identity")
CHANNELS_FIRST_WORDS = ("channels-first", "channels_first", "cf")


@dataclass(frozen=True)
class Layout:
    """An immutable layout: the permutation from TFLite axes to ONNX axes."""
    perm: Perm

    def __post_init__(self) -> None:
        object.__setattr__(self, "perm", _checked(self.perm))

    @classmethod
    def as_tflite(cls, rank: int) -> Layout:
        return cls(identity(rank))

    @classmethod
    def channels_first(cls, rank: int) -> Layout:
        return cls(channels_first(rank))

    @classmethod
    def parse(cls, text: str, rank: int) -> Layout:
        """'keep' (as in TFLite), 'channels-first', a letter order ('NCHW', 'NWHC': the ONNX axes in TFLite's
        letters) or numbers ('0,3,1,2'). ValueError with a one-line reason otherwise."""
        t = text.strip().strip("()")
        low = t.lower()
        if low in AS_TFLITE_WORDS:
            return cls.as_tflite(rank)
        if low in CHANNELS_FIRST_WORDS:
            if rank < 3:
                raise ValueError(f"'{text}' needs a tensor of rank 3 or more, this one has rank {rank}")
            return cls.channels_first(rank)
        if "," in t or t.isdigit():
            try:
                perm = tuple(int(x) for x in t.split(","))
            except ValueError:
                raise ValueError(f"'{text}' is not a permutation like 0,3,1,2") from None
            if sorted(perm) != list(range(rank)):
                raise ValueError(f"'{text}' is not a permutation of {rank} axes")
            return cls(perm)
        letters = LETTERS.get(rank)
        if letters and sorted(t.upper()) == sorted(letters):
            return cls(tuple(letters.index(c) for c in t.upper()))
        raise ValueError(f"'{text}' not understood: use keep, channels-first, a letter order such as NCHW, "
                         "or 0,3,1,2")

    @property
    def rank(self) -> int:
        return len(self.perm)

    @property
    def name(self) -> str:
        """The ONNX axis order in TFLite's letters (ranks 3-5), else 'identity' or the numbers."""
        return _spelled(self.perm)

    def __str__(self) -> str:
        return self.name

    @property
    def is_as_tflite(self) -> bool:
        return is_identity(self.perm)

    def inverse(self) -> Layout:
        return Layout(inverse(self.perm))

    def then(self, other: Layout) -> Layout:
        """Transposing by self, then by other, as one layout."""
        return Layout(compose(self.perm, other.perm))

    def apply(self, shape: Sequence[Any]) -> tuple[Any, ...]:
        return apply(shape, self.perm)

    def only_moves_size1(self, shape: Sequence[int]) -> bool:
        return is_trivial(shape, self.perm)


def identity(rank: int) -> Perm:
    return tuple(range(rank))


def channels_first(rank: int) -> Perm:
    """(0, r-1, 1, ..., r-2): channels-last TFLite to channels-first ONNX."""
    if rank < 3:
        return identity(rank)
    return (0, rank - 1, *range(1, rank - 1))


def is_identity(perm: Sequence[int] | None) -> bool:
    # (compared whole: a generator over the axes cost more than the rest of a small model's checks)
    return perm is None or list(perm) == list(range(len(perm)))


def inverse(perm: Sequence[int]) -> Perm:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def compose(first: Sequence[int], then: Sequence[int]) -> Perm:
    """The single perm equal to transposing by `first`, then by `then`."""
    return tuple(first[t] for t in then)


def apply(shape: Sequence[Any], perm: Sequence[int] | None) -> tuple[Any, ...]:
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


def reads_free(shape: Sequence[int], have: Sequence[int], want: Sequence[int]) -> bool:
    """is_trivial(apply(shape, have), compose(inverse(have), want)): a tensor of TFLite shape `shape` held in
    layout `have` is read in layout `want` with no data moved. Written out over lists (the planner asks this for
    every pair of layouts it prices)."""
    seen = [shape[p] for p in have]
    inv = [0] * len(have)
    for i, p in enumerate(have):
        inv[p] = i
    moved = [a for a in [inv[t] for t in want] if seen[a] != 1]
    return moved == sorted(moved)


def name(perm: Sequence[int] | None, rank: int | None = None) -> str:
    """Layout(perm).name, checked as Layout checks it, without building one; 'as TFLite' for None. Not memoised:
    a process-wide table of names made every conversion after a process's first cheaper than the first."""
    return "as TFLite" if perm is None else _spelled(_checked(perm))


def _checked(perm: Sequence[int]) -> Perm:
    """perm as a tuple of ints; ValueError when it is not a permutation."""
    out = tuple(map(int, perm))
    if sorted(out) != list(range(len(out))):
        raise ValueError(f"{list(perm)} is not a permutation of {len(out)} axes")
    return out


def _spelled(perm: Perm) -> str:
    letters = LETTERS.get(len(perm))
    if letters:
        return "".join([letters[p] for p in perm])
    return "identity" if is_identity(perm) else "(" + ",".join(map(str, perm)) + ")"


def parse(text: str, rank: int) -> Perm:
    """Layout.parse(text, rank).perm: a user pin's permutation."""
    return Layout.parse(text, rank).perm


def carried_by_reshape(src: Sequence[int], dst: Sequence[int], perm: Sequence[int]) -> Perm | None:
    """The layout a Reshape from `src` to `dst` (TFLite shapes) writes when it reads layout `perm`, or None.
    Both shapes split into the smallest groups of consecutive axes with equal sizes ([1,H,W,C] -> [1,H*W,C]:
    {H,W}->{H*W}, {C}->{C}); when `perm` moves whole groups, keeping each group's own order, the Reshape works on
    the transposed tensor too and its output moves the same groups. Size-1 axes stay where they are."""
    if any(d < 0 for d in src) or any(d < 0 for d in dst):
        return None
    a = [i for i, d in enumerate(src) if d != 1]
    b = [i for i, d in enumerate(dst) if d != 1]
    groups, i, j = [], 0, 0                     # [(src axes, dst axes)]
    while i < len(a) or j < len(b):
        ga: list[int] = []
        gb: list[int] = []
        pa, pb = 1, 1
        while True:
            if pa <= pb and i < len(a) and (not ga or pa < pb):
                ga.append(a[i]); pa *= src[a[i]]; i += 1
            elif j < len(b) and (not gb or pb < pa):
                gb.append(b[j]); pb *= dst[b[j]]; j += 1
            else:
                break
            if pa == pb and ga and gb:
                break
        if pa != pb or not ga or not gb:
            return None
        groups.append((ga, gb))
    order = [p for p in perm if src[p] != 1]    # non-size-1 source axes in the transposed tensor's order
    owner = {ax: k for k, (ga, _) in enumerate(groups) for ax in ga}
    seq, pos = [], 0
    while pos < len(order):
        k = owner[order[pos]]
        ga = groups[k][0]
        if order[pos:pos + len(ga)] != ga:
            return None
        seq.append(k)
        pos += len(ga)
    moved = iter(ax for k in seq for ax in groups[k][1])
    return tuple(i if d == 1 else next(moved) for i, d in enumerate(dst))


def reshapable(dims: Sequence[int], perm: Sequence[int]) -> bool:
    """A trivial transposition a Reshape can do: at most one dynamic dim (Reshape infers one -1)."""
    return is_trivial(dims, perm) and sum(1 for d in dims if d < 0) <= 1
