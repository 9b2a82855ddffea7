"""IF and WHILE planned with their parent graph: a mode of the op fixes the layouts its subgraphs' inputs and outputs
take — the same for both branches of an IF, the same before and after every iteration for a WHILE's carried values
(its cond runs on them too) — and costs the Transposes its subgraphs need at those boundaries, from their own plans
(`Subplans.cost`, which the emitter's plans come from too). So a branch never converts a layout in and back out
when its parent can hand it the layout it works in."""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Protocol, TypeVar

from inspector.core.ir.graph import Op, Subgraph
from . import layout as L
from .layout import Perm

MAX_BOUNDARIES = 16         # boundary layout combinations an IF/WHILE is priced at; beyond, uniform ones only


class Subplans(Protocol):
    def cost(self, index: int, ins: tuple[Perm, ...], outs: tuple[Perm, ...] | None) -> tuple[int, str] | None:
        """(Transposes subgraph `index` needs with its inputs in `ins` and its outputs presented in `outs` (None:
        as TFLite), what its own plan's proof leaves out ("" nothing)), or None when it cannot be planned so."""


class Planned(Protocol):
    """What pricing an IF/WHILE reads of the parent's problem (assign.Problem, which imports this module)."""
    graph: Any
    subplans: Subplans | None
    constants: set[int]

    def rank(self, t: int) -> int: ...

    def candidates(self, t: int) -> list[Perm]: ...


M = TypeVar("M")
Reads = tuple[tuple[int, Perm], ...]
Make = Callable[[Reads, tuple[Perm, ...], int, str], M]     # (reads, writes, cost, why) -> a mode


def modes(pb: Planned, op: Op, make: Make[M]) -> tuple[list[M], str] | None:
    """(op's modes, what they leave out: "" none) when op is an IF or a WHILE whose subgraphs fit it, else None.
    `make(reads, writes, cost, why)` builds one Mode."""
    subs = pb.subplans
    if subs is None:
        return None
    if op.opcode == "IF":
        return _if(pb, op, subs, make)
    if op.opcode == "WHILE":
        return _while(pb, op, subs, make)
    return None


def _index(op: Op, key: str) -> int:
    """The subgraph index option `key` of op, -1 when it has none."""
    index = op.options.get(key)
    return index if isinstance(index, int) else -1


def _subgraph(pb: Planned, index: int) -> Subgraph | None:
    graph = pb.graph
    return graph.subgraphs[index] if graph is not None and 0 < index < len(graph.subgraphs) else None


def _fits(pb: Planned, tensors: list[int], inner: Subgraph, inner_ts: list[int]) -> bool:
    """The parent's tensors and the subgraph's line up one to one with the same ranks."""
    return len(tensors) == len(inner_ts) and all(
        t >= 0 and pb.rank(t) == inner.tensors[u].rank for t, u in zip(tensors, inner_ts))


def _options(pb: Planned, t: int | None, rank: int, fixed: bool) -> list[Perm]:
    """Layouts one boundary slot may take: its parent tensor's candidates, then as TFLite, and channels-first for an
    image-like rank (4 or more: a 3-D tensor is channels-first only where its writer makes it so)."""
    ident = L.identity(rank)
    if rank < 3 or fixed:
        return [ident]
    cand = pb.candidates(t) if t is not None and t not in pb.constants else []
    return list(dict.fromkeys([*cand, ident] + ([L.channels_first(rank)] if rank >= 4 else [])))


def _combos(options: list[list[Perm]]) -> tuple[list[tuple[Perm, ...]], str]:
    """Every combination of the slots' options, or when more than MAX_BOUNDARIES, the uniform ones: every slot as
    TFLite, every slot channels-first, every slot its first option (and a note of what is left out)."""
    total = math.prod(len(o) for o in options)
    if total <= MAX_BOUNDARIES:
        return list(itertools.product(*options)), ""
    uniform = [tuple(o[0] for o in options),
               tuple(L.identity(len(o[0])) for o in options),
               tuple(L.channels_first(len(o[0])) if L.channels_first(len(o[0])) in o else o[0] for o in options)]
    return list(dict.fromkeys(uniform)), f"{len(set(uniform))} of {total} boundary layout combinations"


def _if(pb: Planned, op: Op, subs: Subplans, make: Make[M]) -> tuple[list[M], str] | None:
    branches = [_index(op, "then_subgraph_index"), _index(op, "else_subgraph_index")]
    inner = [_subgraph(pb, i) for i in branches]
    args, outs = list(op.inputs[1:]), list(op.outputs)
    subgraphs = [sg for sg in inner if sg is not None]
    if len(subgraphs) < len(inner) or any(not _fits(pb, args, sg, sg.inputs) or not _fits(pb, outs, sg, sg.outputs)
                                          for sg in subgraphs):
        return None
    const_out = [any(sg.tensors[sg.outputs[k]].data is not None for sg in subgraphs) for k in range(len(outs))]
    ins_opts = [_options(pb, t, pb.rank(t), t in pb.constants) for t in args]   # (a constant: as in TFLite)
    out_opts = [_options(pb, None, pb.rank(t), const_out[k]) for k, t in enumerate(outs)]
    combos, left = _combos(ins_opts + out_opts)
    found: list[M] = []
    notes: set[str] = set()
    for combo in combos:
        ins, wr = combo[:len(args)], combo[len(args):]
        costs = [subs.cost(i, ins, wr) for i in branches]
        got = [g for g in costs if g is not None]
        if len(got) < len(costs):
            continue
        notes.update(g[1] for g in got if g[1])
        reads = tuple((s, p) for s, p in zip(range(1, len(op.inputs)), ins) if op.inputs[s] not in pb.constants)
        reads = ((0, L.identity(pb.rank(op.inputs[0]))),) + reads if op.inputs[0] not in pb.constants else reads
        found.append(make(reads, wr, sum(g[0] for g in got),
                          f"written by {op.opcode}#{op.index} (its branches planned with it): {{layout}}"))
    return _result(op, found, left, notes)


def _while(pb: Planned, op: Op, subs: Subplans, make: Make[M]) -> tuple[list[M], str] | None:
    cond_i, body_i = _index(op, "cond_subgraph_index"), _index(op, "body_subgraph_index")
    cond, body = _subgraph(pb, cond_i), _subgraph(pb, body_i)
    carried = list(op.inputs)
    if cond is None or body is None or len(op.outputs) != len(carried) or \
            not _fits(pb, carried, body, body.inputs) or not _fits(pb, carried, body, body.outputs) or \
            not _fits(pb, carried, cond, cond.inputs):
        return None
    opts = [_options(pb, t, pb.rank(t), body.tensors[body.outputs[k]].data is not None)
            for k, t in enumerate(carried)]
    combos, left = _combos(opts)
    found: list[M] = []
    notes: set[str] = set()
    for lay in combos:
        costs = [subs.cost(body_i, lay, lay), subs.cost(cond_i, lay, None)]
        got = [g for g in costs if g is not None]
        if len(got) < len(costs):
            continue
        notes.update(g[1] for g in got if g[1])
        reads = tuple((s, p) for s, p in enumerate(lay) if carried[s] not in pb.constants)
        # the cond runs twice: on the initial values before the Loop, and in its body on each iteration's results
        found.append(make(reads, lay, got[0][0] + 2 * got[1][0],
                          f"carried by {op.opcode}#{op.index} (its body planned with it): {{layout}}"))
    return _result(op, found, left, notes)


def _result(op: Op, found: list[M], left: str, notes: set[str]) -> tuple[list[M], str] | None:
    if not found:
        return None
    said = [f"{op.opcode}#{op.index}: {left}"] if left else []
    return found, "; ".join(said + sorted(notes))
