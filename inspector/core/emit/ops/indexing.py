"""Indexing, scatter/gather, generators and selection ops.

Most are Terminate: their index tensors address TFLite's axis order, so they read and write the TFLite layout.
CUMSUM, REVERSE_V2, REVERSE_SEQUENCE and TOPK_V2 are Attribute (their axes are remapped); RANK does not care.
"""
from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from inspector.core.layout import layout as L
from inspector.core.ir.errors import ConversionError
from inspector.core.ir.limits import check_built
from .nn import keep_layout
from .registry import A, X, QUANT_INTS, op
from .shape import (INT64_MAX, INT64_MIN, ONNX_INT64, as_i64, cast_to, const_data, const_ints, const_operand_rule,
                    in_perm, static_dims)


def _dtype(ctx, t: int) -> str:
    return ctx.tensor(t).dtype


def _fill_value(value, dtype: str):
    return numpy_helper.from_array(np.array([value], dtype=dtype), "value")


def _lowest(dtype: str):
    return np.finfo(dtype).min if dtype.startswith("float") else np.iinfo(dtype).min


def _highest(dtype: str):
    return np.finfo(dtype).max if dtype.startswith("float") else np.iinfo(dtype).max


def indices(ctx, op, slot: int) -> str:
    """An index tensor as int64, shape kept (as_i64 flattens: it is for shape vectors)."""
    t = op.inputs[slot]
    if ctx.is_const(t):
        return ctx.const_of(t, dtype=np.int64, key="i64")
    x = ctx.input(op, slot)
    return x if _dtype(ctx, t) == "int64" else ctx.node("Cast", [x], 1, to=ONNX_INT64)[0]


# --- gather / scatter -----------------------------------------------------------------------------------------
@op("GATHER_ND", category=X, quantized="moves", copies_integers=QUANT_INTS, indexes=(1, 0, None), onnx="GatherND")
def gather_nd(ctx, op):
    ctx.node("GatherND", [ctx.input(op, 0), indices(ctx, op, 1)], [ctx.output(op)])


@op("EMBEDDING_LOOKUP", category=X, indexes=(0, 1, 0), onnx="Gather")
def embedding_lookup(ctx, op):
    ctx.node("Gather", [ctx.input(op, 1), ctx.input(op, 0)], [ctx.output(op)], axis=0)


@op("SCATTER_ND", category=X, indexes=(0, 2, None),
    onnx=("ConstantOfShape", "ScatterND"), notes="duplicate indices add up, as in TFLite")
def scatter_nd(ctx, op):
    zeros = ctx.node("ConstantOfShape", [as_i64(ctx, op, 2)], 1, value=_fill_value(0, _dtype(ctx, op.inputs[1])))[0]
    ctx.node("ScatterND", [zeros, indices(ctx, op, 0), ctx.input(op, 1)], [ctx.output(op)], reduction="add")


@op("SPARSE_TO_DENSE", category=X, onnx=("Expand", "ScatterND"))
def sparse_to_dense(ctx, op):
    idx_t = op.inputs[0]
    idx = indices(ctx, op, 0)
    if ctx.tensor(idx_t).rank < 2:                       # [N] indices into a 1-D output
        idx = ctx.node("Unsqueeze", [idx, ctx.i64([-1], "axes")], 1)[0]
    shape = as_i64(ctx, op, 1)
    dense = ctx.node("Expand", [ctx.input(op, 3), shape], 1)[0]
    n = ctx.node("Slice", [ctx.node("Shape", [idx], 1)[0], ctx.i64([0], "starts"), ctx.i64([1], "ends")], 1)[0]
    values = ctx.node("Expand", [ctx.input(op, 2), n], 1)[0]          # a scalar value repeats
    ctx.node("ScatterND", [dense, idx, values], [ctx.output(op)])


def _segments(ctx, op, reduction: str, init, num: str):
    data_t = op.inputs[0]
    dt = _dtype(ctx, data_t)
    rest = ctx.node("Slice", [ctx.node("Shape", [ctx.input(op, 0)], 1)[0], ctx.i64([ctx.tensor(op.inputs[1]).rank],
                                                                                    "starts"),
                              ctx.i64([INT64_MAX], "ends")], 1)[0]
    shape = ctx.node("Concat", [num, rest], 1, axis=0)[0]
    base = ctx.node("ConstantOfShape", [shape], 1, value=_fill_value(init, dt))[0]
    ids = ctx.node("Unsqueeze", [indices(ctx, op, 1), ctx.i64([-1], "axes")], 1)[0]
    ctx.node("ScatterND", [base, ids, ctx.input(op, 0)], [ctx.output(op)], reduction=reduction)


@op("SEGMENT_SUM", category=X, onnx=("ReduceMax", "ScatterND"), notes="segments = max(id) + 1")
def segment_sum(ctx, op):
    ids = indices(ctx, op, 1)
    top = ctx.node("ReduceMax", [ids, ctx.i64([0], "axes")], 1, keepdims=1)[0]
    num = ctx.node("Add", [top, ctx.i64([1], "one")], 1)[0]
    _segments(ctx, op, "add", 0, num)


def _unsorted(reduction: str, init):
    def emit(ctx, op):
        num = ctx.node("Reshape", [as_i64(ctx, op, 2), ctx.i64([1])], 1)[0]
        dt = _dtype(ctx, op.inputs[0])
        _segments(ctx, op, reduction, init(dt) if callable(init) else init, num)
    return emit


for _name, _red, _init in (("UNSORTED_SEGMENT_SUM", "add", 0), ("UNSORTED_SEGMENT_PROD", "mul", 1),
                           ("UNSORTED_SEGMENT_MAX", "max", _lowest), ("UNSORTED_SEGMENT_MIN", "min", _highest)):
    op(_name, category=X, onnx=("ConstantOfShape", "ScatterND"),
       notes="empty segments hold the reduction's identity")(_unsorted(_red, _init))


@op("DYNAMIC_UPDATE_SLICE", category=X, onnx=("Clip", "ScatterND"), notes="start indices clamped as TFLite does")
def dynamic_update_slice(ctx, op):
    operand, update = (static_dims(ctx, op, op.inputs[s]) for s in (0, 1))
    start = as_i64(ctx, op, 2)
    hi = ctx.i64([o - u for o, u in zip(operand, update)], "start_max")
    start = ctx.node("Max", [ctx.node("Min", [start, hi], 1)[0], ctx.i64([0] * len(update), "zeros")], 1)[0]
    check_built([*update, len(update)], 8, f"{op.opcode}#{op.index} index grid")
    grid = np.stack(np.meshgrid(*[np.arange(u) for u in update], indexing="ij"), axis=-1).astype(np.int64)
    idx = ctx.node("Add", [ctx.const(grid, "offsets"), start], 1)[0]
    ctx.node("ScatterND", [ctx.input(op, 0), idx, ctx.input(op, 1)], [ctx.output(op)])


# --- generators ---------------------------------------------------------------------------------------------
@op("FILL", category=X, onnx="Expand")
def fill(ctx, op):
    ctx.node("Expand", [ctx.input(op, 1), as_i64(ctx, op, 0)], [ctx.output(op)])


@op("BROADCAST_TO", category=X, quantized="moves", copies_integers=QUANT_INTS, onnx="Expand")
def broadcast_to(ctx, op):
    ctx.node("Expand", [ctx.input(op, 0), as_i64(ctx, op, 1)], [ctx.output(op)])


@op("BROADCAST_ARGS", category=X, onnx=("ConstantOfShape", "Add", "Shape"))
def broadcast_args(ctx, op):
    # The broadcast shape of two shapes is the shape of broadcasting two (tiny, uint8) tensors of those shapes.
    a, b = (ctx.node("ConstantOfShape", [as_i64(ctx, op, s)], 1, value=_fill_value(0, "uint8"))[0] for s in (0, 1))
    cast_to(ctx, op, ctx.node("Shape", ctx.node("Add", [a, b], 1), 1)[0])


@op("RANGE", category=X, onnx="Range")
def range_(ctx, op):
    ctx.node("Range", [ctx.input(op, s, ()) for s in range(3)], [ctx.output(op)])


@op("ONE_HOT", category=X, indexes=(0, None, None),
    onnx=("Range", "Equal", "Where"), notes="indices outside [0, depth) give off rows")
def one_hot(ctx, op):
    # Equal(index, range(depth)) rather than ONNX OneHot: that one wraps negative indices and has few typed kernels.
    r = ctx.tensor(op.outputs[0]).rank
    axis = int(op.options.get("axis", -1)) % r
    idx = ctx.node("Unsqueeze", [indices(ctx, op, 0), ctx.i64([axis], "axes")], 1)[0]
    depth = ctx.node("Cast", [ctx.input(op, 1, ())], 1, to=ONNX_INT64)[0]
    depth = ctx.node("Reshape", [depth, ctx.i64([], "scalar")], 1)[0]
    hot = ctx.node("Range", [ctx.const(np.array(0, np.int64), "zero"), depth, ctx.const(np.array(1, np.int64), "one")],
                   1)[0]
    hot = ctx.node("Reshape", [hot, ctx.i64([-1] + [1] * (r - 1 - axis))], 1)[0]
    eq = ctx.node("Equal", [idx, hot], 1)[0]
    ctx.node("Where", [eq, ctx.input(op, 2, ()), ctx.input(op, 3, ())], [ctx.output(op)])


# --- selection ----------------------------------------------------------------------------------------------
@op("WHERE", category=X, onnx=("NonZero", "Transpose"), notes="coordinates of true (non-zero) elements")
def where(ctx, op):
    nz = ctx.node("NonZero", [ctx.input(op, 0)], 1)[0]
    cast_to(ctx, op, ctx.node("Transpose", [nz], 1, perm=[1, 0])[0])


@op("UNIQUE", category=X, onnx="Unique", notes="first-occurrence order")
def unique(ctx, op):
    y, _, inverse, _ = ctx.node("Unique", [ctx.input(op, 0)], 4, sorted=0)
    ctx.node("Identity", [y], [ctx.output(op, 0)])
    cast_to(ctx, op, inverse, 1)


@op("TOPK_V2", category=A, onnx="TopK", rule=const_operand_rule(1), notes="over the last TFLite axis, remapped")
def topk(ctx, op):
    p = in_perm(ctx, op)
    k = ctx.node("Reshape", [as_i64(ctx, op, 1), ctx.i64([1])], 1)[0]
    values, idx = ctx.node("TopK", [ctx.input(op, 0), k], 2, axis=L.axis_to_onnx(-1, p), largest=1, sorted=1)
    ctx.node("Identity", [values], [ctx.output(op, 0)])
    cast_to(ctx, op, idx, 1)


def _nms(ctx, op, soft_sigma_slot: int | None):
    if soft_sigma_slot is not None:
        sigma = const_data(ctx.sg, op.inputs[soft_sigma_slot])
        if sigma is None or float(np.asarray(sigma).reshape(-1)[0]) != 0.0:
            raise ConversionError(f"{op.opcode}#{op.index}: soft-NMS (sigma != 0) has no ONNX equivalent")
    max_out = const_data(ctx.sg, op.inputs[2])
    if max_out is None:
        raise ConversionError(f"{op.opcode}#{op.index}: max_output_size must be constant")
    m = int(np.asarray(max_out).reshape(-1)[0])
    boxes = ctx.node("Unsqueeze", [ctx.input(op, 0), ctx.i64([0], "axes")], 1)[0]                 # [1, N, 4]
    scores = ctx.node("Unsqueeze", [ctx.input(op, 1), ctx.i64([0, 1], "axes")], 1)[0]             # [1, 1, N]
    thr = [ctx.node("Reshape", [ctx.input(op, s, ()), ctx.i64([1])], 1)[0] for s in (3, 4)]
    sel = ctx.node("NonMaxSuppression", [boxes, scores, ctx.i64([m], "max_out")] + thr, 1)[0]   # [K, 3]
    idx = ctx.node("Gather", [sel, ctx.const(np.array(2, np.int64), "col")], 1, axis=1)[0]                           # [K]
    k = ctx.node("Shape", [idx], 1)[0]
    pad = ctx.node("Sub", [ctx.i64([m], "max_out"), k], 1)[0]
    padded = ctx.node("Pad", [idx, ctx.node("Concat", [ctx.i64([0], "zero"), pad], 1, axis=0)[0]], 1)[0]
    cast_to(ctx, op, padded, 0)
    if soft_sigma_slot is not None:
        picked = ctx.node("Gather", [ctx.input(op, 1), idx], 1, axis=0)[0]
        zero = ctx.node("Concat", [ctx.i64([0], "zero"), pad], 1, axis=0)[0]
        ctx.node("Pad", [picked, zero], [ctx.output(op, 1)])
    cast_to(ctx, op, ctx.node("Reshape", [k, ctx.i64([], "scalar")], 1)[0], len(op.outputs) - 1)


@op("NON_MAX_SUPPRESSION_V4", category=X, onnx="NonMaxSuppression", notes="indices padded with 0 to max_output_size")
def nms_v4(ctx, op):
    _nms(ctx, op, None)


@op("NON_MAX_SUPPRESSION_V5", category=X, onnx="NonMaxSuppression", notes="hard NMS only (soft_nms_sigma 0)")
def nms_v5(ctx, op):
    _nms(ctx, op, 5)


# --- axis ops (Attribute) -----------------------------------------------------------------------------------
@op("CUMSUM", category=A, onnx="CumSum", rule=const_operand_rule(1))
def cumsum(ctx, op):
    p = in_perm(ctx, op)
    axis = const_ints(ctx, op, 1)[0]
    ctx.node("CumSum", [ctx.input(op, 0), ctx.i64(L.axis_to_onnx(axis, p), "axis")], [ctx.output(op)],
             exclusive=int(bool(op.options.get("exclusive"))), reverse=int(bool(op.options.get("reverse"))))


@op("REVERSE_V2", category=A, quantized="moves", copies_integers=QUANT_INTS, onnx="Slice", rule=const_operand_rule(1))
def reverse_v2(ctx, op):
    p = in_perm(ctx, op)
    axes = sorted({L.axis_to_onnx(int(a), p) for a in const_ints(ctx, op, 1)})
    n = len(axes)
    ctx.node("Slice", [ctx.input(op, 0), ctx.i64([-1] * n, "starts"), ctx.i64([INT64_MIN] * n, "ends"),
                       ctx.i64(axes, "axes"), ctx.i64([-1] * n, "steps")], [ctx.output(op)])


@op("REVERSE_SEQUENCE", category=A, onnx=("Transpose", "ReverseSequence"), rule=keep_layout,
    notes="batch and sequence axes moved to the front when ONNX's 0/1 restriction needs it")
def reverse_sequence(ctx, op):
    p = in_perm(ctx, op)
    r = len(p)
    b = L.axis_to_onnx(op.options.get("batch_dim", 0), p)
    s = L.axis_to_onnx(op.options.get("seq_dim", 1), p)
    x = ctx.input(op, 0)
    lens = indices(ctx, op, 1)
    if {b, s} == {0, 1}:
        ctx.node("ReverseSequence", [x, lens], [ctx.output(op)], batch_axis=b, time_axis=s)
        return
    front = [b, s] + [a for a in range(r) if a not in (b, s)]
    x = ctx.node("Transpose", [x], 1, perm=front)[0]
    y = ctx.node("ReverseSequence", [x, lens], 1, batch_axis=0, time_axis=1)[0]
    ctx.node("Transpose", [y], [ctx.output(op)], perm=list(L.inverse(front)))


def any_layout_rule(op, sg, in_perms, out_pin):
    """RANK: any input layout; the output is a scalar."""
    return ({0: in_perms[0]}, [()]) if in_perms[0] is not None else None


@op("RANK", category=A, onnx="Constant", rule=any_layout_rule, notes="a constant: the rank is static")
def rank(ctx, op):
    ctx.node("Identity", [ctx.const(np.array(ctx.tensor(op.inputs[0]).rank, _dtype(ctx, op.outputs[0])), "rank")],
             [ctx.output(op)])


# --- matrices -----------------------------------------------------------------------------------------------
@op("MATRIX_DIAG", category=X, onnx=("Unsqueeze", "Mul"))
def matrix_diag(ctx, op):
    n = static_dims(ctx, op, op.inputs[0], batch=ctx.tensor(op.inputs[0]).rank > 1)[-1]
    dt = _dtype(ctx, op.inputs[0])
    x = ctx.node("Unsqueeze", [ctx.input(op, 0), ctx.i64([-1], "axes")], 1)[0]      # [..., N, 1]
    if dt == "bool":
        ctx.node("And", [x, ctx.const(np.eye(n, dtype=bool), "eye")], [ctx.output(op)])
    else:
        ctx.node("Mul", [x, ctx.const(np.eye(n, dtype=dt), "eye")], [ctx.output(op)])


@op("MATRIX_SET_DIAG", category=X, onnx=("Pad", "Unsqueeze", "Where"))
def matrix_set_diag(ctx, op):
    m, n = static_dims(ctx, op, op.inputs[0], batch=ctx.tensor(op.inputs[0]).rank > 2)[-2:]
    k = static_dims(ctx, op, op.inputs[1], batch=ctx.tensor(op.inputs[1]).rank > 1)[-1]
    diag = ctx.input(op, 1)
    if k < n:                                           # diagonal shorter than a row: pad it to N columns
        r = ctx.tensor(op.inputs[1]).rank
        diag = ctx.node("Pad", [diag, ctx.i64([0] * r + [0] * (r - 1) + [n - k], "pads")], 1)[0]
    row = ctx.node("Unsqueeze", [diag, ctx.i64([-2], "axes")], 1)[0]                  # [..., 1, N]
    ctx.node("Where", [ctx.const(np.eye(m, n, dtype=bool), "diag_mask"), row, ctx.input(op, 0)], [ctx.output(op)])


# DENSIFY of a constant sparse tensor is folded at conversion (ops/fold.py); this emitter only runs otherwise.
@op("DENSIFY", category=X, onnx=(), notes="folded to a dense initializer at conversion")
def densify(ctx, op):
    raise ConversionError(f"DENSIFY#{op.index}: input {ctx.tensor(op.inputs[0]).name} is not a constant sparse "
                          "tensor; only constant sparse weights can be densified")


@op("EMBEDDING_LOOKUP_SPARSE", category=X, onnx=("Gather", "Mul", "ScatterND", "Div"),
    notes="combiner SUM, MEAN or SQRTN; empty rows are zero")
def embedding_lookup_sparse(ctx, op):
    # inputs: ids [N], indices [N, r], dense_shape [r], weights [N], params [V, ...]; row of entry i = indices[i, :-1].
    r = ctx.shape(op.inputs[1])[-1]
    e = ctx.tensor(op.inputs[4]).rank - 1
    dt = _dtype(ctx, op.inputs[4])
    w = ctx.input(op, 3)
    rows = ctx.node("Slice", [indices(ctx, op, 1), ctx.i64([0], "starts"), ctx.i64([r - 1], "ends"),
                              ctx.i64([1], "axes")], 1)[0]
    lead = ctx.node("Slice", [as_i64(ctx, op, 2), ctx.i64([0], "starts"), ctx.i64([r - 1], "ends")], 1)[0]
    emb = ctx.node("Slice", [ctx.node("Shape", [ctx.input(op, 4)], 1)[0], ctx.i64([1], "starts"),
                             ctx.i64([INT64_MAX], "ends")], 1)[0]
    shape = ctx.node("Concat", [lead, emb], 1, axis=0)[0]
    picked = ctx.node("Gather", [ctx.input(op, 4), indices(ctx, op, 0)], 1, axis=0)[0]
    col = ctx.node("Reshape", [w, ctx.i64([-1] + [1] * e)], 1)[0]
    zeros = ctx.node("ConstantOfShape", [shape], 1, value=_fill_value(0, dt))[0]
    combiner = {"SUM": 0, "MEAN": 1, "SQRTN": 2}.get(op.options.get("combiner", "SUM"), op.options.get("combiner"))
    total = ctx.node("ScatterND", [zeros, rows, ctx.node("Mul", [picked, col], 1)[0]],
                     1 if combiner else [ctx.output(op)], reduction="add")[0]
    if not combiner:                                     # SUM
        return
    per = w if combiner == 1 else ctx.node("Mul", [w, w], 1)[0]          # MEAN: sum w; SQRTN: sqrt(sum w^2)
    denom = ctx.node("ScatterND", [ctx.node("ConstantOfShape", [lead], 1, value=_fill_value(0, dt))[0], rows, per],
                     1, reduction="add")[0]
    if combiner == 2:
        denom = ctx.node("Sqrt", [denom], 1)[0]
    zero = ctx.scalar(0, dt)
    denom = ctx.node("Where", [ctx.node("Equal", [denom, zero], 1)[0], ctx.scalar(1, dt), denom], 1)[0]
    denom = ctx.node("Unsqueeze", [denom, ctx.i64(list(range(r - 1, r - 1 + e)), "axes")], 1)[0]
    ctx.node("Div", [total, denom], [ctx.output(op)])
