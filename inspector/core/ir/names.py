"""Op and tensor names as people read them: the name scopes a name carries, and a short form of a long name.

Converters fuse names (TFLite joins the names of the ops a kernel fused with ';'), litert-torch writes PyTorch module
paths (`torchvision.models.mobilenetv2.InvertedResidual_2/torch.nn.modules.conv.Conv2d_0;7`), Keras writes
`model/block_3_expand_1/convolution`, ONNX exporters `/features/features.0/Conv`.
"""
from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Iterable

_DOTTED = re.compile(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)")     # a Python module path: keep its class
_NUMBER = re.compile(r"\d+")
ELLIPSIS = "…"


def candidates(names: Iterable[str]) -> list[str]:
    """The names fused into these (';'-separated), without the pieces that name nothing (litert-torch's trailing
    op counters, empty pieces)."""
    out = []
    for name in names:
        for part in name.split(";"):
            part = part.strip()
            if part and any(c.isalpha() for c in part):
                out.append(part)
    return out


def _letters(s: str) -> str:
    return "".join(c for c in s.lower() if c.isalpha())


def scope(names: Iterable[str], opcode: str = "") -> tuple[str, ...]:
    """The name scope of a TFLite op, from its output tensors' names: of the names fused there (and having a path),
    the one whose last component reads most like the op's type (ties: the later one), split at '/'. This is the
    rule Google's Model Explorer uses (edit distance of the letters), in a cheaper measure."""
    cands = candidates(names)
    if not cands:
        return ()
    with_path = [c for c in cands if "/" in c.strip("/")] or cands
    best = with_path[-1]
    if len(with_path) > 1:
        key = _letters(opcode)
        best = max(reversed(with_path),
                   key=lambda c: SequenceMatcher(None, key, _letters(c.rsplit("/", 1)[-1])).ratio())
    return tuple(s for s in best.split("/") if s)


def node_scope(name: str, namespace: str | None = None) -> tuple[str, ...]:
    """The name scope of an ONNX node: its `namespace` metadata if set, else its name less the last component
    (what Model Explorer's ONNX adapter shows)."""
    if namespace is not None:
        return tuple(s for s in namespace.split("/") if s)
    parts = [s for s in name.split("/") if s]
    return tuple(parts[:-1])


def tokens(segment: str) -> list[str]:
    """A layer name's words at '_', each number kept with the word before it: `block_3_expand_BN_1` ->
    [block_3, expand, BN_1] (Keras names a block's layers by a shared prefix)."""
    out: list[str] = []
    for w in segment.split("_"):
        if out and (not w or _NUMBER.fullmatch(w)):
            out[-1] += "_" + w
        else:
            out.append(w)
    return [w for w in out if w]


def compact(name: str) -> str:
    """Python module paths shortened to their class (`torch.nn.modules.conv.Conv2d_0` -> `Conv2d_0`)."""
    return _DOTTED.sub(r"\1", name)


def _first(name: str) -> str:
    """A fused name as its first name, the count of the others, and its trailing counter (`a/b;;c/d;7` ->
    `a/b +1;7`)."""
    pieces = name.split(";")
    named = [p for p in pieces if "/" in p]
    if len(named) < 2:
        return name
    counter = pieces[-1].strip()
    return f"{named[0]} +{len(named) - 1}" + (f";{counter}" if counter.isdigit() else "")


def elide(name: str, width: int = 48) -> str:
    """`name` in at most `width` characters: a fused name as its first, module paths shortened to their class,
    then the middle left out,
    keeping the head (the model) and the longer tail (the module class and the op's index), cut at a separator
    where one is near."""
    if len(name) <= width:
        return name
    name = compact(_first(name))
    if len(name) <= width or width < 8:
        return name if len(name) <= width else name[:width - 1] + ELLIPSIS
    head_room = max(3, (width - 1) // 3)
    first = min((i for i in (name.find(c) for c in "/;") if i >= 0), default=-1)
    if 0 < first < width // 2:
        head = name[:first + 1]                         # the model's name whole, where it is short enough
    else:
        head = name[:head_room]
        cut = max(head.rfind(c) for c in "/;")
        if cut >= head_room // 2:
            head = head[:cut + 1]                       # the head ends at a separator
    tail_room = width - 1 - len(head)
    tail = name[-tail_room:]
    cut = min((i for i in (tail.find(c) for c in "/;") if 0 <= i <= tail_room // 2), default=-1)
    if cut > 0:
        tail = tail[cut:]                               # the tail starts at a separator
    return head + ELLIPSIS + tail
