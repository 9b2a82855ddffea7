"""Control flow: WHILE -> ONNX Loop, IF -> If. Their subgraphs are planned with the enclosing graph
(layout/nested.py): the plan gives each IF input and result, and each WHILE carried value, one layout, which both
branches, or the body before and after every iteration and the cond, take at their boundaries.

ONNX Loop tests its condition before each iteration from a value the body produced, while TFLite's WHILE runs a
separate cond subgraph: the cond is emitted once on the initial values (outside the Loop) and once more inside the
body, on the body's results.
"""
from __future__ import annotations

from onnx import TensorProto, helper

from inspector.core.layout import layout as L
from inspector.core.ir.errors import ConversionError
from .registry import X, op


def _emit_subgraph(ctx, index, inputs, inline=False, ins=None, outs=None):
    if not 0 < index < len(ctx.graph.subgraphs):
        raise ConversionError(f"{ctx.op.opcode}#{ctx.op.index}: subgraph {index} does not exist")
    return ctx.emit_subgraph(index, inputs, inline, ins, outs)


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
    """Fresh names for a body's results: a body output may not be one of its inputs or an outer value."""
    return [em.node("Identity", [n], [em.fresh(f"{n}_out")])[0] for n in names]


@op("WHILE", category=X, onnx="Loop", notes="cond subgraph runs before the Loop and at the end of its body")
def while_(ctx, op):
    cond_i, body_i = op.options["cond_subgraph_index"], op.options["body_subgraph_index"]
    n = len(op.inputs)
    lay = _written(ctx, op) if len(op.outputs) == n else tuple(L.identity(ctx.tensor(t).rank) for t in op.inputs)
    init = [ctx.input(op, s, lay[s]) for s in range(n)]
    cond_t = _cond_tensor(ctx, cond_i)
    (c0,), _ = _emit_subgraph(ctx, cond_i, init, inline=True, ins=lay)
    c0 = _as_bool(ctx, c0, cond_t)

    body_sg = ctx.graph.subgraphs[body_i]
    if len(body_sg.inputs) != n or len(body_sg.outputs) != n:
        raise ConversionError(f"WHILE#{op.index}: body subgraph {body_i} has {len(body_sg.inputs)} inputs and "
                              f"{len(body_sg.outputs)} outputs for {n} loop-carried values")
    it, c_in = ctx.fresh(f"while{op.index}_iter"), ctx.fresh(f"while{op.index}_cond_in")
    carried = [ctx.fresh(f"{body_sg.tensors[t].name or 'v'}") for t in body_sg.inputs]
    outs, body = _emit_subgraph(ctx, body_i, carried, ins=lay, outs=lay)
    (c1,), _ = _emit_subgraph(body, cond_i, outs, inline=True, ins=lay)
    c1 = _as_bool(body, c1, cond_t)
    results = _outputs_of(body, [c1] + outs)
    ins = [helper.make_tensor_value_info(it, TensorProto.INT64, []),
           helper.make_tensor_value_info(c_in, TensorProto.BOOL, [])]
    ins += [body.value_info_for(t, name, p) for t, name, p in zip(body_sg.inputs, carried, lay)]
    outs_vi = [helper.make_tensor_value_info(results[0], TensorProto.BOOL, [])]
    outs_vi += [body.value_info_for(t, name, p) for t, name, p in zip(body_sg.outputs, results[1:], lay)]
    graph = helper.make_graph(body.nodes, f"{body_sg.name or 'while_body'}", ins, outs_vi)
    ctx.node("Loop", ["", c0] + init, [_result(ctx, op, s) for s in range(len(op.outputs))], body=graph)


def _result(ctx, op, slot: int) -> str:
    """Where a WHILE result goes. One nobody reads gets an untraced name: LiteRT does not keep such a result
    (a passed-through value reads back as zeros), so it is not compared with the interpreter's."""
    t = op.outputs[slot]
    if t not in ctx.sg.outputs and not any(t in o.inputs for o in ctx.sg.ops):
        return ctx.fresh(f"{ctx.tensor(t).name}_unused")
    return ctx.output(op, slot)


@op("IF", category=X, onnx="If")
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
