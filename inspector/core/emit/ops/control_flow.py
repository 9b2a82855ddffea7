"""Control flow: WHILE -> ONNX Loop, IF -> If. Their subgraphs are planned with the enclosing graph
(layout/nested.py): the plan gives each IF input and result, and each WHILE carried value, one layout, which both
branches, or the body before and after every iteration and the cond, take at their boundaries.

ONNX Loop tests its condition before each iteration from a value the body produced, while TFLite's WHILE runs a
separate cond subgraph: the cond is emitted once on the initial values (outside the Loop) and once more inside the
body, on the body's results.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from inspector.core.layout import layout as L
from inspector.core.ir.errors import ConversionError
from . import gemm_fold
from .registry import X, op
from .row_writes import row_writes, trip_count


def _emit_subgraph(ctx, index, inputs, inline=False, ins=None, outs=None, skip=frozenset()):
    if not 0 < index < len(ctx.graph.subgraphs):
        raise ConversionError(f"{ctx.op.opcode}#{ctx.op.index}: subgraph {index} does not exist")
    return ctx.emit_subgraph(index, inputs, inline, ins, outs, skip)


def _written(ctx, op) -> tuple:
    """The layout the plan gives each of op's results (its subgraphs' boundary)."""
    return tuple(ctx.plan.produced.get((op.index, s), L.identity(ctx.tensor(t).rank)) if t >= 0 else ()
                 for s, t in enumerate(op.outputs))


def scalar_bool(ctx, name: str, shape) -> str:
    """A condition as the bool scalar Loop and If expect (TFLite allows [1] or a numeric scalar)."""
    if len(shape):
        name = ctx.node("Reshape", [name, ctx.i64([])], 1)[0]
    return name


def _cond_tensor(ctx, index):
    sg = ctx.graph.subgraphs[index]
    if len(sg.outputs) != 1:
        raise ConversionError(f"WHILE cond subgraph {index} ({sg.name}) has {len(sg.outputs)} outputs, not 1")
    t = sg.tensors[sg.outputs[0]]
    return t


def _as_bool(ctx, name, tensor):
    name = scalar_bool(ctx, name, tensor.shape)
    if tensor.dtype != "bool":
        name = ctx.node("Cast", [name], 1, to=TensorProto.BOOL)[0]
    return name


def _outputs_of(em, names: list[str]) -> list[str]:
    """Fresh names for a branch's results: a branch output may not be one of its inputs or an outer value."""
    return [em.node("Identity", [n], [em.fresh(f"{n}_out")])[0] for n in names]


def _body_outputs(em, names: list[str]) -> list[str]:
    """A Loop body's results: a value a body node makes is its own output; an Identity only for a carried input,
    an outer value or a name already given (an output may be none of these)."""
    made = {o for n in em.nodes for o in n.output}
    seen: set[str] = set()
    results = []
    for n in names:
        results.append(n if n in made and n not in seen else _outputs_of(em, [n])[0])
        seen.add(results[-1])
    return results


@op("WHILE", category=X, quantized="raw",
    onnx="Loop", notes="cond subgraph runs before the Loop and at the end of its body; "
                                            "row-by-row accumulator writes become scan outputs")
def while_(ctx, op):
    cond_i, body_i = op.options["cond_subgraph_index"], op.options["body_subgraph_index"]
    n = len(op.inputs)
    body_sg, cond_sg = ctx.graph.subgraphs[body_i], ctx.graph.subgraphs[cond_i]
    if len(body_sg.inputs) != n or len(body_sg.outputs) != n:
        raise ConversionError(f"WHILE#{op.index}: body subgraph {body_i} has {len(body_sg.inputs)} inputs and "
                              f"{len(body_sg.outputs)} outputs for {n} loop-carried values")
    lay = _written(ctx, op) if len(op.outputs) == n else tuple(L.identity(ctx.tensor(t).rank) for t in op.inputs)
    writes = _scanned(ctx, op, body_sg, cond_sg, lay)
    whole = _filled(ctx, op, writes, body_sg, cond_sg)
    # an accumulator the rows fill whole is not read at all (the cond does not read it: row_writes checks)
    init = [ctx.fresh(f"while{op.index}_unread") if s in whole else ctx.input(op, s, lay[s]) for s in range(n)]
    cond_t = _cond_tensor(ctx, cond_i)
    (c0,), _ = _emit_subgraph(ctx, cond_i, init, inline=True, ins=lay)
    c0 = _as_bool(ctx, c0, cond_t)

    # a value the body passes through unchanged is read from outside, not carried (its body output would need an
    # Identity each iteration: a Loop body's output may not be its input)
    fixed = {s for s in range(n) if len(op.outputs) == n and body_sg.outputs[s] == body_sg.inputs[s]}
    kept = [s for s in range(n) if s not in {w.slot for w in writes} and s not in fixed]
    it, c_in = ctx.fresh(f"while{op.index}_iter"), ctx.fresh(f"while{op.index}_cond_in")
    carried = [_copied_from(ctx, init[s]) if s in fixed else ctx.fresh(f"{body_sg.tensors[t].name or 'v'}")
               for s, t in enumerate(body_sg.inputs)]
    skip = frozenset().union(*(w.ops for w in writes))
    outs, body = _emit_subgraph(ctx, body_i, carried, ins=lay, outs=lay, skip=skip)
    rows = [body.present(w.row, L.identity(body.tensor(w.row).rank)) for w in writes]
    for w in writes:
        outs[w.slot] = init[w.slot]
    (c1,), _ = _emit_subgraph(body, cond_i, outs, inline=True, ins=lay)
    c1 = _as_bool(body, c1, cond_t)
    results = _body_outputs(body, [c1] + [outs[s] for s in kept] + rows)
    gemm_fold.fold(body, results)
    ins = [helper.make_tensor_value_info(it, TensorProto.INT64, []),
           helper.make_tensor_value_info(c_in, TensorProto.BOOL, [])]
    ins += [body.value_info_for(body_sg.inputs[s], carried[s], lay[s]) for s in kept]
    outs_vi = [helper.make_tensor_value_info(results[0], TensorProto.BOOL, [])]
    outs_vi += [body.value_info_for(body_sg.outputs[s], name, lay[s]) for s, name in zip(kept, results[1:])]
    outs_vi += [body.value_info_for(w.row, name, L.identity(body.tensor(w.row).rank))
                for w, name in zip(writes, results[1 + len(kept):])]
    graph = helper.make_graph(body.nodes, f"{body_sg.name or 'while_body'}", ins, outs_vi)
    scans = [ctx.fresh(f"while{op.index}_rows") for _ in writes]
    ctx.node("Loop", ["", c0] + [init[s] for s in kept], [_result(ctx, op, s) for s in kept if s < len(op.outputs)]
             + scans, body=graph)
    for w, scan in zip(writes, scans):
        _place_rows(ctx, op, w, init, scan, w.slot in whole)
    for s in sorted(fixed):
        if _read(ctx, op, s):
            ctx.node("Identity", [init[s]], [ctx.output(op, s)])


def _scanned(ctx, op, body_sg, cond_sg, lay) -> list:
    """The body's row writes that become scan outputs: each accumulator also a WHILE result, in its TFLite layout."""
    if len(op.outputs) != len(op.inputs):
        return []
    return [w for w in row_writes(body_sg, cond_sg) if L.is_identity(lay[w.slot]) and L.is_identity(lay[w.index_slot])]


def _filled(ctx, op, writes, body_sg, cond_sg) -> set[int]:
    """The slots of `writes` whose accumulator the loop writes every row of: its counter starts at 0 and the cond
    stops the loop after as many iterations as the accumulator has rows (the trip count told once for all of
    them: it walked both subgraphs for each write)."""
    def initial(slot):
        t = op.inputs[slot]
        if not ctx.is_const(t) or ctx.tensor(t).dtype not in ("int32", "int64") or ctx.data(t).size != 1:
            return None
        return int(ctx.data(t).reshape(-1)[0])

    starting = [w for w in writes if initial(w.index_slot) == 0]
    count = trip_count(body_sg, cond_sg, initial) if starting else None
    return {w.slot for w in starting if count == ctx.tensor(op.inputs[w.slot]).shape[0]}


def _place_rows(ctx, op, w, init, scan, whole: bool) -> None:
    """The accumulator after the loop: its initial rows before the counter's start, the rows the iterations wrote,
    its initial rows after them (only the rows when they fill it)."""
    acc = ctx.tensor(op.inputs[w.slot])
    out = _result(ctx, op, w.slot)
    if whole:
        ctx.node("Reshape", [scan, ctx.i64(acc.shape)], [out])
        return
    rows = ctx.node("Reshape", [scan, ctx.i64((-1,) + tuple(acc.shape[1:]))], 1)[0]
    first = ctx.node("Reshape", [ctx.node("Cast", [init[w.index_slot]], 1, to=TensorProto.INT64)[0], ctx.i64([1])],
                     1)[0]
    after = ctx.node("Add", [first, ctx.node("Shape", [rows], 1, start=0, end=1)[0]], 1)[0]
    zero = ctx.i64([0])
    head = ctx.node("Slice", [init[w.slot], zero, first, zero], 1)[0]
    tail = ctx.node("Slice", [init[w.slot], after, ctx.i64([np.iinfo(np.int64).max]), zero], 1)[0]
    ctx.node("Concat", [head, rows, tail], [out], axis=0)


def _copied_from(ctx, name: str) -> str:
    """The value an Identity already emitted here copies into `name` (through a chain of them), else `name`: a body
    reads it at its source, since the peephole pass drops such an Identity (a TRANSPOSE the layouts absorbed) but
    keeps one a body reads."""
    copies = {n.output[0]: n.input[0] for n in ctx.nodes if n.op_type == "Identity" and not n.domain}
    while name in copies:
        name = copies[name]
    return name


def _read(ctx, op, slot: int) -> bool:
    t = op.outputs[slot]
    return t in ctx.sg.outputs or any(t in o.inputs for o in ctx.sg.ops)


def _result(ctx, op, slot: int) -> str:
    """Where a WHILE result goes. One nobody reads gets an untraced name: LiteRT does not keep such a result
    (a passed-through value reads back as zeros), so it is not compared with the interpreter's."""
    if not _read(ctx, op, slot):
        return ctx.fresh(f"{ctx.tensor(op.outputs[slot]).name}_unused")
    return ctx.output(op, slot)


@op("IF", category=X, quantized="raw", onnx="If")
def if_(ctx, op):
    cond = _as_bool(ctx, ctx.input(op, 0), ctx.tensor(op.inputs[0]))
    ins = tuple(ctx.plan.inputs.get((op.index, s), L.identity(ctx.tensor(t).rank)) for s, t in enumerate(op.inputs)
                if s > 0)
    args = [ctx.input(op, s, p) for s, p in enumerate(ins, 1)]
    written = _written(ctx, op)
    branches = {}
    for key, attr in (("then_subgraph_index", "then_branch"), ("else_subgraph_index", "else_branch")):
        index = op.options[key]
        sg = ctx.graph.subgraphs[index] if 0 < index < len(ctx.graph.subgraphs) else None
        fits = sg is not None and len(sg.outputs) == len(op.outputs)
        outs, em = _emit_subgraph(ctx, index, args, ins=ins, outs=written if fits else None)
        if len(outs) != len(op.outputs):
            raise ConversionError(f"IF#{op.index}: subgraph {index} has {len(outs)} outputs, the IF has "
                                  f"{len(op.outputs)}")
        results = _outputs_of(em, outs)
        vis = [em.value_info_for(t, name, em.plan.outputs[t]) for t, name in zip(em.sg.outputs, results)]
        branches[attr] = helper.make_graph(em.nodes, em.sg.name or attr, [], vis)
    ctx.node("If", [cond], [ctx.output(op, s) for s in range(len(op.outputs))], **branches)
