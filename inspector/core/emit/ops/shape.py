"""Shape and data-movement ops. Attribute ops here remap axes, paddings and slices through the layout;
Reshape-like ops are Terminate (they need TFLite's memory order), except that a Reshape accepts a layout that
only moves size-1 axes (same memory order), so Conv -> Mean(keep) -> Reshape needs no Transpose."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from inspector.core.layout import layout as L
from inspector.core.ir.errors import ConversionError
from inspector.core.layout.propagation import choose_layout
from .fixed_point import ONNX_FLOAT
from .nn import keep_layout
from .registry import A, T, X, QUANT_INTS, op

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min
ONNX_INT64 = TensorProto.INT64


def in_perm(ctx, op, slot: int = 0):
    return ctx.plan.inputs.get((op.index, slot), L.identity(ctx.tensor(op.inputs[slot]).rank))


def const_data(sg, t):
    return None if t < 0 else sg.tensors[t].data


def const_ints(ctx, op, slot: int) -> list[int]:
    """A constant integer operand (axes, paddings, block shapes...); a readable error when it is computed."""
    t = op.inputs[slot]
    if not ctx.is_const(t):
        raise ConversionError(f"{op.opcode}#{op.index}: input {slot} ({ctx.tensor(t).name}) must be a constant")
    return [int(v) for v in np.asarray(ctx.data(t)).reshape(-1)]


def static_dims(ctx, op, t: int, batch: bool = False) -> list[int]:
    """Tensor t's TFLite shape for an emitter that bakes it into constants; with `batch`, a dynamic first dim
    is -1 (one Reshape dim may be inferred). Other dynamic dims: a readable error."""
    ten = ctx.tensor(t)
    sig = ten.shape_signature if ten.shape_signature is not None and len(ten.shape_signature) == ten.rank \
        else ten.shape
    dyn = [i for i, d in enumerate(sig) if d < 0]
    if dyn and not (batch and dyn == [0]):
        raise ConversionError(f"{op.opcode}#{op.index}: dynamic dimension(s) {dyn} of {ten.name} are not supported")
    return [-1 if d < 0 else int(s) for d, s in zip(sig, ten.shape)]


def reduced_layout(perm, axes, keep: bool):
    """The output layout after reducing `axes` (TFLite numbering) of a tensor in layout `perm`."""
    if keep:
        return tuple(perm)
    r = len(perm)
    red = {a % r for a in axes}
    remaining = [a for a in perm if a not in red]
    order = sorted(remaining)
    return tuple(order.index(a) for a in remaining)


def cast_to(ctx, op, x: str, slot: int = 0) -> None:
    """Write x to output `slot`, cast to the output's dtype when it is not int64."""
    from inspector.core.ir.dtypes import onnx_dtype
    dt = ctx.tensor(op.outputs[slot]).dtype
    if dt == "int64":
        ctx.node("Identity", [x], [ctx.output(op, slot)])
    else:
        ctx.node("Cast", [x], [ctx.output(op, slot)], to=onnx_dtype(dt))


def as_i64(ctx, op, slot: int) -> str:
    """An integer operand as int64 (ONNX shape-like inputs are int64)."""
    t = op.inputs[slot]
    if ctx.is_const(t):
        return ctx.i64(ctx.data(t))
    x = ctx.input(op, slot)
    return x if ctx.tensor(t).dtype == "int64" else ctx.node("Cast", [x], 1, to=ONNX_INT64)[0]


# --- Reshape family (Terminate) ----------------------------------------------------------------------------
def reshape_rule(op, sg, in_perms, out_pin):
    p, t = in_perms[0], sg.tensors[op.inputs[0]]
    if p is not None and L.is_trivial(t.dims, p):          # same memory order: read it as it is
        want = {0: p}
        return want, [L.identity(sg.tensors[o].rank) for o in op.outputs]
    r = L.carried_by_reshape(t.dims, sg.tensors[op.outputs[0]].dims, p) if p is not None else None
    if r is not None:                                      # whole axis groups move: the output carries them
        return {0: p}, [r]
    return None


def target_shape(ctx, op) -> str:
    out = ctx.tensor(op.outputs[0])
    sig = out.shape_signature if out.shape_signature is not None and len(out.shape_signature) == out.rank \
        else out.shape
    if sum(1 for d in sig if d < 0) <= 1:
        return ctx.i64([-1 if d < 0 else d for d in sig])
    if len(op.inputs) > 1 and op.inputs[1] >= 0:
        return as_i64(ctx, op, 1)
    raise ConversionError(f"RESHAPE#{op.index}: output has several dynamic dimensions and no shape input")


@op("RESHAPE", category=X, quantized="moves", copies_integers=QUANT_INTS, sign="keeps", complex_pairs=True,
    passes_values=True, reframes=True, onnx="Reshape", rule=reshape_rule)
def reshape(ctx, op):
    r = ctx.plan.produced.get((op.index, 0))
    shape = target_shape(ctx, op) if r is None or L.is_identity(r) else ctx.i64(ctx.onnx_shape(op.outputs[0], r))
    ctx.node("Reshape", [ctx.input(op, 0), shape], [ctx.output(op)])


@op("SQUEEZE", category=X, quantized="moves", copies_integers=QUANT_INTS, sign="keeps", complex_pairs=True,
    passes_values=True, onnx="Squeeze")
def squeeze(ctx, op):
    shape = ctx.shape(op.inputs[0])
    dims = op.options.get("squeeze_dims") or [i for i, d in enumerate(shape) if d == 1]
    ctx.node("Squeeze", [ctx.input(op, 0), ctx.i64(sorted(d % len(shape) for d in dims), "axes")], [ctx.output(op)])


@op("EXPAND_DIMS", category=X, quantized="moves", sign="keeps", complex_pairs=True, passes_values=True,
    onnx="Unsqueeze")
def expand_dims(ctx, op):
    axis = const_ints(ctx, op, 1)[0]
    ctx.node("Unsqueeze", [ctx.input(op, 0), ctx.i64([axis % ctx.tensor(op.outputs[0]).rank], "axes")],
             [ctx.output(op)])


@op("PACK", category=X, quantized="moves", onnx=("Unsqueeze", "Concat"))
def pack(ctx, op):
    axis = op.options.get("axis", 0) % ctx.tensor(op.outputs[0]).rank
    parts = [ctx.node("Unsqueeze", [ctx.input(op, s), ctx.i64([axis], "axes")], 1)[0] for s in range(len(op.inputs))]
    ctx.node("Concat", parts, [ctx.output(op)], axis=axis)


@op("UNPACK", category=X, quantized="moves", onnx=("Split", "Squeeze"))
def unpack(ctx, op):
    axis = op.options.get("axis", 0) % ctx.tensor(op.inputs[0]).rank
    parts = ctx.node("Split", [ctx.input(op, 0)], len(op.outputs), axis=axis, num_outputs=len(op.outputs))
    for s, part in enumerate(parts):
        ctx.node("Squeeze", [part, ctx.i64([axis], "axes")], [ctx.output(op, s)])


# --- layout-carrying ops (Attribute) -----------------------------------------------------------------------
def agree_rule(op, sg, in_perms, out_pin):
    """All non-constant inputs of the output's rank adopt one layout (Concat)."""
    r = sg.tensors[op.outputs[0]].rank
    perms = [p for p in in_perms if p is not None and len(p) == r]
    if len(perms) != sum(1 for p in in_perms if p is not None):
        return None
    chosen = choose_layout(perms, out_pin, r)    # the planner asks once per combination of input layouts
    return {s: chosen for s, p in enumerate(in_perms) if p is not None}, [chosen]


@op("CONCATENATION", category=A, quantized="moves", copies_integers=("int16",), sign="keeps", complex_pairs=True,
    onnx="Concat", rule=agree_rule,
    notes="int8/uint8 read by a convolution: back through QuantizeLinear (so that it fuses)")
def concatenation(ctx, op):
    p = ctx.plan.produced.get((op.index, 0), L.identity(ctx.tensor(op.outputs[0]).rank))
    names = [ctx.input(op, s, p) for s in range(len(op.inputs))]
    dst, axis = ctx.fused(op, ctx.output(op)), L.axis_to_onnx(op.options["axis"], p)
    if not (ctx.tensor(op.outputs[0]).dtype in ("int8", "uint8") and ctx.q.fences(op.outputs[0])):
        ctx.node("Concat", names, [dst], axis=axis)
        return
    # stored integers read by a convolution: handed back through QuantizeLinear (qdq.QDQ.integers_back)
    f = ctx.node("Cast", [ctx.node("Concat", names, 1, axis=axis)[0]], 1, to=ONNX_FLOAT)[0]
    ctx.q.integers_back(op.outputs[0], f, dst)


def const_operand_rule(*slots: int):
    """keep_layout, provided the named operand slots are constants (paddings, begins, multiples...)."""
    def rule(op, sg, in_perms, out_pin):
        if any(s < len(op.inputs) and const_data(sg, op.inputs[s]) is None for s in slots):
            return None
        return keep_layout(op, sg, in_perms, out_pin)
    return rule


def _pad(mode: str | None):
    def emit(ctx, op):
        p = in_perm(ctx, op)
        pads = np.asarray(const_ints(ctx, op, 1)).reshape(-1, 2)
        onnx_pads = [int(pads[a][0]) for a in p] + [int(pads[a][1]) for a in p]
        m = mode or {"REFLECT": "reflect", "SYMMETRIC": None}.get(op.options.get("mode", "REFLECT"))
        if m is None:
            _symmetric_pad(ctx, op, [(int(pads[a][0]), int(pads[a][1])) for a in p])
            return
        value = ctx.input(op, 2) if op.opcode == "PADV2" and len(op.inputs) > 2 else ""
        ins = [ctx.input(op, 0), ctx.i64(onnx_pads, "pads")] + ([value] if value else [])
        ctx.node("Pad", ins, [ctx.output(op)], mode=m)
    return emit


def _symmetric_pad(ctx, op, pads) -> None:
    """SYMMETRIC mirror padding (the edge repeats) has no ONNX Pad mode: concat reversed edge slices per axis."""
    x = ctx.input(op, 0)
    todo = [(k, b, e) for k, (b, e) in enumerate(pads) if b or e]
    if not todo:
        ctx.node("Identity", [x], [ctx.output(op)])
    for i, (k, before, after) in enumerate(todo):
        parts = []
        if before:     # x[before-1::-1]
            parts.append(ctx.node("Slice", [x, ctx.i64([before - 1], "starts"), ctx.i64([INT64_MIN], "ends"),
                                            ctx.i64([k], "axes"), ctx.i64([-1], "steps")], 1)[0])
        parts.append(x)
        if after:      # x[-1:-after-1:-1]
            parts.append(ctx.node("Slice", [x, ctx.i64([-1], "starts"), ctx.i64([-after - 1], "ends"),
                                            ctx.i64([k], "axes"), ctx.i64([-1], "steps")], 1)[0])
        x = ctx.node("Concat", parts, [ctx.output(op)] if i == len(todo) - 1 else 1, axis=k)[0]


op("PAD", category=A, sign="keeps", onnx="Pad", rule=const_operand_rule(1))(_pad("constant"))
op("PADV2", category=A, onnx="Pad", rule=const_operand_rule(1))(_pad("constant"))
op("MIRROR_PAD", category=A, onnx=("Pad", "Slice", "Concat"), rule=const_operand_rule(1),
   notes="SYMMETRIC via reversed edge slices")(_pad(None))


def _bits(mask: int, i: int) -> bool:
    return bool((mask >> i) & 1)


def strided_slice_rule(op, sg, in_perms, out_pin):
    o = op.options
    if o.get("ellipsis_mask") or o.get("new_axis_mask") or in_perms[0] is None:
        return None
    if any(const_data(sg, op.inputs[s]) is None for s in (1, 2, 3) if s < len(op.inputs)):
        return None
    p = in_perms[0]
    shrink = [i for i in range(len(p)) if _bits(o.get("shrink_axis_mask", 0), i)]
    return {0: p}, [reduced_layout(p, shrink, False) if shrink else p]


@op("STRIDED_SLICE", category=A, quantized="moves", copies_integers=QUANT_INTS, complex_pairs=True,
    onnx=("Slice", "Squeeze"), rule=strided_slice_rule)
def strided_slice(ctx, op):
    sliced(ctx, op, ctx.input(op, 0), ctx.output(op), in_perm(ctx, op))


def sliced(ctx, op, x: str, dst: str, p) -> None:
    """STRIDED_SLICE or SLICE of value `x` (in layout p) into dst; complex pairs (ops/signal.py) come this way too,
    their trailing real/imaginary axis untouched."""
    if op.opcode == "SLICE":
        return _slice(ctx, op, x, dst, p)
    o = op.options
    if o.get("ellipsis_mask") or o.get("new_axis_mask"):
        raise ConversionError(f"STRIDED_SLICE#{op.index}: ellipsis and new-axis masks are not supported")
    if not all(ctx.is_const(op.inputs[s]) for s in (1, 2, 3) if s < len(op.inputs)):
        return _strided_slice_at_run_time(ctx, op, x, dst)
    begin, end = (np.asarray(const_ints(ctx, op, s)) for s in (1, 2))
    strides = np.asarray(const_ints(ctx, op, 3)) if len(op.inputs) > 3 else np.ones_like(begin)
    starts, ends, axes, steps, squeeze = [], [], [], [], []
    for i in range(len(begin)):
        s, e, st = int(begin[i]), int(end[i]), int(strides[i])
        if o.get("offset"):
            e = s + e
        if _bits(o.get("shrink_axis_mask", 0), i):
            e, st = (s + 1 if s != -1 else INT64_MAX), 1
            squeeze.append(L.axis_to_onnx(i, p))
        else:
            if _bits(o.get("begin_mask", 0), i):
                s = 0 if st > 0 else INT64_MAX
            if _bits(o.get("end_mask", 0), i):
                e = INT64_MAX if st > 0 else INT64_MIN
        if s == 0 and e == INT64_MAX and st == 1:
            continue                                    # whole axis: nothing to slice
        starts.append(s)
        ends.append(e)
        axes.append(L.axis_to_onnx(i, p))
        steps.append(st)
    if axes:
        x = ctx.node("Slice", [x, ctx.i64(starts, "starts"), ctx.i64(ends, "ends"), ctx.i64(axes, "axes"),
                               ctx.i64(steps, "steps")], 1 if squeeze else [dst])[0]
    if squeeze:
        ctx.node("Squeeze", [x, ctx.i64(sorted(squeeze), "axes")], [dst])
    elif not axes:
        ctx.node("Identity", [x], [dst])


def _strided_slice_at_run_time(ctx, op, x: str, dst: str) -> None:
    """begin/end/strides computed in the graph (from SHAPE, say): the masks, which are static, become Where over
    the run-time vectors, as the constant path applies them (the input is in TFLite's layout: the rule left it)."""
    o = op.options
    n = ctx.tensor(op.inputs[1]).shape[0]
    bits = lambda name: np.array([_bits(o.get(name, 0), i) for i in range(n)])   # noqa: E731
    shrink = bits("shrink_axis_mask")
    i64 = lambda v: ctx.i64([v] * n)                                               # noqa: E731
    where = lambda mask, a, b: ctx.node("Where", [ctx.const(mask, "mask"), a, b], 1)[0]   # noqa: E731
    b, e = as_i64(ctx, op, 1), as_i64(ctx, op, 2)
    st = as_i64(ctx, op, 3) if len(op.inputs) > 3 else i64(1)
    up = ctx.node("Greater", [st, ctx.scalar(0, "int64")], 1)[0]
    if o.get("offset"):
        e = ctx.node("Add", [b, e], 1)[0]
    starts = where(bits("begin_mask"), ctx.node("Where", [up, i64(0), i64(INT64_MAX)], 1)[0], b)
    ends = where(bits("end_mask"), ctx.node("Where", [up, i64(INT64_MAX), i64(INT64_MIN)], 1)[0], e)
    if shrink.any():                               # one element at `begin` (-1: the last one), stride 1
        last = ctx.node("Equal", [b, ctx.scalar(-1, "int64")], 1)[0]
        one = ctx.node("Where", [last, i64(INT64_MAX), ctx.node("Add", [b, ctx.scalar(1, "int64")], 1)[0]], 1)[0]
        starts, ends, st = where(shrink, b, starts), where(shrink, one, ends), where(shrink, i64(1), st)
    x = ctx.node("Slice", [x, starts, ends, ctx.i64(list(range(n)), "axes"), st], 1 if shrink.any() else [dst])[0]
    if shrink.any():
        ctx.node("Squeeze", [x, ctx.i64([i for i in range(n) if shrink[i]], "axes")], [dst])


@op("SLICE", category=A, quantized="moves", copies_integers=QUANT_INTS, complex_pairs=True, onnx="Slice",
    rule=const_operand_rule(1, 2))
def slice_(ctx, op):
    _slice(ctx, op, ctx.input(op, 0), ctx.output(op), in_perm(ctx, op))


def _slice(ctx, op, x: str, dst: str, p) -> None:
    if not (ctx.is_const(op.inputs[1]) and ctx.is_const(op.inputs[2])):     # computed begin/size (loop bodies)
        b, n = as_i64(ctx, op, 1), as_i64(ctx, op, 2)
        ends = ctx.node("Where", [ctx.node("Less", [n, ctx.scalar(0, "int64")], 1)[0],
                                  ctx.scalar(INT64_MAX, "int64"), ctx.node("Add", [b, n], 1)[0]], 1)[0]
        ctx.node("Slice", [x, b, ends], [dst])             # the first len(begin) axes: TFLite's layout
        return
    begin, size = (np.asarray(const_ints(ctx, op, s)) for s in (1, 2))
    ends = [INT64_MAX if int(n) < 0 else int(b) + int(n) for b, n in zip(begin, size)]
    axes = [L.axis_to_onnx(i, p) for i in range(len(begin))]
    ctx.node("Slice", [x, ctx.i64(begin, "starts"), ctx.i64(ends, "ends"), ctx.i64(axes, "axes")], [dst])


def split_rule(slot: int, axis_slot: int):
    def rule(op, sg, in_perms, out_pin):
        p = in_perms[slot]
        if p is None or const_data(sg, op.inputs[axis_slot]) is None:
            return None
        return {slot: p}, [p] * len(op.outputs)
    return rule


def _emit_split(ctx, op, slot: int, axis_slot: int, sizes=None):
    p = in_perm(ctx, op, slot)
    axis = const_ints(ctx, op, axis_slot)[0]
    ins = [ctx.input(op, slot)] + ([ctx.i64(sizes, "split")] if sizes is not None else [])
    n = len(op.outputs)
    ctx.node("Split", ins, [ctx.output(op, s) for s in range(n)], axis=L.axis_to_onnx(axis, p),
             num_outputs=None if sizes is not None else n)


@op("SPLIT", category=A, quantized="moves", copies_integers=QUANT_INTS, onnx="Split", rule=split_rule(1, 0))
def split(ctx, op):
    _emit_split(ctx, op, 1, 0)


@op("SPLIT_V", category=A, quantized="moves", copies_integers=QUANT_INTS, onnx="Split", rule=split_rule(0, 2))
def split_v(ctx, op):
    sizes = const_ints(ctx, op, 1)
    if -1 in sizes:
        axis = const_ints(ctx, op, 2)[0]
        total = ctx.shape(op.inputs[0])[axis]
        sizes[sizes.index(-1)] = total - sum(s for s in sizes if s >= 0)
    _emit_split(ctx, op, 0, 2, sizes)


def transpose_rule(op, sg, in_perms, out_pin):
    if in_perms[0] is None or const_data(sg, op.inputs[1]) is None:
        return None
    return {0: in_perms[0]}, [L.identity(sg.tensors[op.outputs[0]].rank)]


@op("TRANSPOSE", category=A, quantized="moves", copies_integers=QUANT_INTS, sign="keeps", complex_pairs=True,
    passes_values=True, reframes=True, onnx="Transpose", rule=transpose_rule)
def transpose(ctx, op):
    # Input and output may both carry layouts: fold them and q into one permutation (the trap after a Conv);
    # when that only moves size-1 axes no data moves (a Reshape, or nothing at all when it is the identity).
    p = in_perm(ctx, op)
    q = tuple(const_ints(ctx, op, 1))
    r = ctx.plan.produced.get((op.index, 0), L.identity(len(q)))
    perm = L.compose(L.inverse(p), L.compose(q, r))
    ctx.rearrange(ctx.input(op, 0), L.apply(ctx.tensor(op.inputs[0]).dims, p), perm, ctx.output(op))


def gather_rule(op, sg, in_perms, out_pin):
    p = in_perms[0]
    idx = sg.tensors[op.inputs[1]]
    if p is None or op.options.get("batch_dims", 0) or idx.rank > 1:
        return None
    axis = op.options.get("axis", 0)
    return {0: p}, [p if idx.rank == 1 else reduced_layout(p, [axis], False)]


def _batched_gather(ctx, op, axis: int, b: int) -> None:
    """GATHER with batch_dims b (TFLite layout): GatherND gathers at axis b, so the axis moves there first and
    the params axes it jumped over move back in front of the indices' axes afterwards."""
    r = ctx.tensor(op.inputs[0]).rank
    k = ctx.tensor(op.inputs[1]).rank - b                 # indices' own (non-batch) axes
    m = axis - b                                          # params axes between the batch and the gathered one
    x = ctx.input(op, 0)
    if m:
        x = ctx.node("Transpose", [x], 1, perm=list(range(b)) + [axis] + list(range(b, axis)) +
                     list(range(axis + 1, r)))[0]
    idx = ctx.input(op, 1)
    if ctx.tensor(op.inputs[1]).dtype != "int64":
        idx = ctx.node("Cast", [idx], 1, to=ONNX_INT64)[0]
    idx = ctx.node("Unsqueeze", [idx, ctx.i64([-1], "axes")], 1)[0]
    out = ctx.output(op)
    y = ctx.node("GatherND", [x, idx], 1 if m else [out], batch_dims=b)[0]
    if m:                                                 # [B, I, M, R] -> [B, M, I, R]
        rest = r - 1 - axis
        ctx.node("Transpose", [y], [out], perm=list(range(b)) + [b + k + j for j in range(m)] +
                 [b + j for j in range(k)] + [b + k + m + j for j in range(rest)])


@op("GATHER", category=A, quantized="moves", copies_integers=QUANT_INTS, indexes=(1, 0, None),
    onnx=("Gather", "GatherND"), rule=gather_rule, notes="batch_dims via GatherND")
def gather(ctx, op):
    b = op.options.get("batch_dims", 0)
    if b:
        r_idx = ctx.tensor(op.inputs[1]).rank
        axis = op.options.get("axis", 0) % ctx.tensor(op.inputs[0]).rank
        _batched_gather(ctx, op, axis, b % r_idx if b < 0 else b)
        return
    p = in_perm(ctx, op)
    ctx.node("Gather", [ctx.input(op, 0), ctx.input(op, 1)], [ctx.output(op)],
             axis=L.axis_to_onnx(op.options.get("axis", 0), p))


def shape_rule(op, sg, in_perms, out_pin):
    return ({0: in_perms[0]}, [(0,)]) if in_perms[0] is not None else None


@op("SHAPE", category=A, onnx=("Shape", "Gather"), rule=shape_rule)
def shape(ctx, op):
    p = in_perm(ctx, op)
    s = ctx.node("Shape", [ctx.input(op, 0)], 1)[0]
    if not L.is_identity(p):                 # back to TFLite's axis order
        s = ctx.node("Gather", [s, ctx.i64(L.inverse(p), "order")], 1, axis=0)[0]
    cast_to(ctx, op, s)


@op("TILE", category=A, quantized="moves", copies_integers=QUANT_INTS, onnx="Tile", rule=const_operand_rule(1))
def tile(ctx, op):
    p = in_perm(ctx, op)
    mult = const_ints(ctx, op, 1)
    ctx.node("Tile", [ctx.input(op, 0), ctx.i64([mult[a] for a in p], "repeats")], [ctx.output(op)])


@op("CAST", category=T, quantized="raw", passes_values=True, onnx="Cast")
def cast(ctx, op):
    from inspector.core.ir.dtypes import onnx_dtype
    from .elementwise import operands
    ctx.node("Cast", [operands(ctx, op)[0]], [ctx.output(op)], to=onnx_dtype(ctx.tensor(op.outputs[0]).dtype))





@op("DILATE", category=A, onnx=("Unsqueeze", "Pad", "Reshape", "Slice"), rule=const_operand_rule(1),
    notes="dilations remapped through the layout")
def dilate(ctx, op):
    # Per dilated axis: [.., n, ..] -> [.., n, 1, ..] padded to [.., n, d, ..] -> [.., n*d, ..] -> first (n-1)*d+1.
    p = in_perm(ctx, op)
    dil = const_ints(ctx, op, 1)
    dims = list(L.apply(static_dims(ctx, op, op.inputs[0]), p))
    x = ctx.input(op, 0)
    value = ctx.input(op, 2, ()) if len(op.inputs) > 2 and op.inputs[2] >= 0 else ""
    todo = [(k, dil[a]) for k, a in enumerate(p) if dil[a] > 1]
    if not todo:
        ctx.node("Identity", [x], [ctx.output(op)])
    for i, (k, d) in enumerate(todo):
        r = len(dims) + 1
        up = ctx.node("Unsqueeze", [x, ctx.i64([k + 1], "axes")], 1)[0]
        pads = [0] * r + [d - 1 if j == k + 1 else 0 for j in range(r)]
        padded = ctx.node("Pad", [up, ctx.i64(pads, "pads")] + ([value] if value else []), 1, mode="constant")[0]
        merged = dims[:k] + [dims[k] * d] + dims[k + 1:]
        flat = ctx.node("Reshape", [padded, ctx.i64(merged)], 1)[0]
        dims[k] = (dims[k] - 1) * d + 1
        dst = [ctx.output(op)] if i == len(todo) - 1 else 1
        x = ctx.node("Slice", [flat, ctx.i64([0], "starts"), ctx.i64([dims[k]], "ends"), ctx.i64([k], "axes")],
                     dst)[0]


@op("BITCAST", category=T, quantized="raw",
    onnx=("Cast", "Constant"), notes="constants, or integers of one width (two's complement)")
def bitcast(ctx, op):
    from inspector.core.ir.dtypes import onnx_dtype
    src, dst = ctx.tensor(op.inputs[0]).dtype, ctx.tensor(op.outputs[0]).dtype
    if ctx.is_const(op.inputs[0]):
        data = np.ascontiguousarray(ctx.data(op.inputs[0])).view(dst).reshape(ctx.shape(op.outputs[0]))
        ctx.node("Identity", [ctx.const(data, "bitcast")], [ctx.output(op)])
        return
    ints = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
    if src not in ints or dst not in ints or np.dtype(src).itemsize != np.dtype(dst).itemsize:
        raise ConversionError(f"BITCAST#{op.index}: {src} -> {dst} reinterprets bits; ONNX has no such op "
                              "(only constants and same-width integers are supported)")
    from .elementwise import operands
    ctx.node("Cast", [operands(ctx, op)[0]], [ctx.output(op)], to=onnx_dtype(dst))   # wraps modulo 2^bits
