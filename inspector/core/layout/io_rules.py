"""Graph I/O layouts decided by rule, from the graph: an input is channels-first when its data reaches an Implicit
op (a TFLite image is NHWC), as in TFLite when a TRANSPOSE on the way makes it channels-last (PyTorch-origin models
are channels-first already); an output may stay channels-first only when an Implicit op writes it."""
from __future__ import annotations

import numpy as np

from typing import AbstractSet, Mapping, Sequence

from inspector.core.ir.graph import Op, Subgraph
from . import layout as L
from .layout import Perm
from .plan import Category, OpTable

Consumers = Mapping[int, Sequence[int]]

I, T, A = Category.IMPLICIT, Category.TRANSPARENT, Category.ATTRIBUTE


def _label(op: Op) -> str:
    return f"{op.opcode}#{op.index}"


def reaches_implicit(sg: Subgraph, t: int, table: OpTable, consumers: Consumers,
                     skip: AbstractSet[int] = frozenset()) -> tuple[Op | None, Op | None]:
    """(the first Implicit op tensor t reaches through layout-carrying ops, the TRANSPOSE making it channels-last
    met on the way): the walk stops at such a TRANSPOSE, beyond it t's data is channels-first already."""
    rank = sg.tensors[t].rank
    seen, stack, via = set(), [t], None
    while stack:
        cur = stack.pop()
        if cur in seen:
            continue
        seen.add(cur)
        for oi in consumers.get(cur, []):
            op, rule = sg.ops[oi], table.get(sg.ops[oi].opcode)
            if oi in skip or rule is None:
                continue
            if rule.category is I and any(op.inputs[s] == cur for s in rule.layout_inputs if s < len(op.inputs)):
                return op, via
            if op.opcode == "TRANSPOSE" and op.inputs[0] == cur and _makes_channels_last(sg, op):
                via = via or op
                continue
            if rule.category in (T, A):
                stack.extend(o for o in op.outputs if o >= 0 and sg.tensors[o].rank == rank)
    return None, via


def input_layout(sg: Subgraph, t: int, table: OpTable, consumers: Consumers | None, skip: AbstractSet[int],
                 keep_io_layout: bool) -> tuple[Perm, str]:
    """A graph input's layout and the rule that decided it: channels-first when its data reaches an Implicit op
    through layout-carrying ops (a TFLite image is NHWC); as in TFLite when a TRANSPOSE on the way makes it NHWC
    (it is channels-first already, as in PyTorch-origin models) or nothing layout-sensitive reads it."""
    rank = sg.tensors[t].rank
    ident = L.identity(rank)
    if rank < 3:
        return ident, "graph input of rank < 3: as in TFLite"
    reach, via = reaches_implicit(sg, t, table, consumers, skip) if consumers else (None, None)   # nothing to walk
    if reach is not None:
        if keep_io_layout:
            return ident, "graph input kept in the TFLite layout (--keep-io-layout)"
        return L.channels_first(rank), f"graph input, image-like (reaches {_label(reach)}): channels-first"
    if via is not None:
        return ident, f"graph input already channels-first ({_label(via)} makes it channels-last): as in TFLite"
    return ident, "graph input, no layout-sensitive op reaches it: as in TFLite"


def image_output(sg: Subgraph, t: int, table: OpTable, skip: AbstractSet[int],
                 producers: dict[int, int] | None = None) -> bool:
    """A graph output is image-like (may stay channels-first) when an Implicit op writes it, directly or through
    layout-carrying ops; an op that reframes its data on the way (OpSpec.reframes: a RESHAPE or TRANSPOSE) gives
    it a meaning of its own ([1, anchors, values]).
    `producers`: sg.producers(), when the caller has it."""
    producers, rank = producers if producers is not None else sg.producers(), sg.tensors[t].rank
    seen, stack = set(), [t]
    while stack:
        cur = stack.pop()
        if cur in seen or cur not in producers or producers[cur] in skip:
            continue
        seen.add(cur)
        op = sg.ops[producers[cur]]
        rule = table.get(op.opcode)
        if rule is None or rule.reframes:
            continue
        if rule.category is I:
            return True
        if rule.category in (T, A):
            stack.extend(i for i in op.inputs if i >= 0 and sg.tensors[i].rank == rank and sg.tensors[i].data is None)
    return False


def _makes_channels_last(sg: Subgraph, op: Op) -> bool:
    data = sg.tensors[op.inputs[1]].data if len(op.inputs) > 1 and op.inputs[1] >= 0 else None
    if data is None:
        return False
    q = tuple(np.asarray(data).reshape(-1).tolist())
    return len(q) >= 3 and L.compose(q, L.channels_first(len(q))) == L.identity(len(q))
