"""Dynamic-range (hybrid) ops: float activations, int8 weights, computed as LiteRT computes them.

TFLite's CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED quantize their float input to int8 per batch row on the
fly, accumulate integers, and scale the accumulator back to float. The emission here repeats that arithmetic
operation for operation, so the ONNX result is LiteRT's bit for bit:

- Input quantization as x86 LiteRT runs it (its NEON code through the SSE translation): the row's min and max
  (with 0), for the asymmetric form the scale `float(max - min) / 255.0` and the zero point in double, the
  inverse scale `float(1.0 / scale)`, then `y = x * inv` rounded by adding +-0.5 in float and truncating (the
  last `size % 8` elements of a row, which LiteRT quantizes one by one, by std::round instead). The symmetric
  form (per-tensor CONV_2D, FULLY_CONNECTED without asymmetric_quantize_inputs) uses `range / 127` and
  `127 / range` in float.
- The accumulator: a float Conv/MatMul of the centred integers (q - zero point) with the integer weights. While
  every partial sum stays below 2^24 float arithmetic is exact in any summation order; the bound is checked per
  output channel from the weights (255 * sum |w|), a FULLY_CONNECTED beyond it sums two halves, and anything else
  beyond it gets a warning.
- The scaling in each kernel's order: per-channel CONV_2D `(acc * channel_scale) * input_scale + bias`,
  DEPTHWISE_CONV_2D `acc * (channel_scale * input_scale) + bias`, per-tensor CONV_2D and FULLY_CONNECTED
  `acc * (input_scale * weight_scale) + bias`.

ONNX Runtime's optimiser keeps the arithmetic: it folds a Mul into a Conv's weights only when the Conv feeds the
Mul's first input and the constant is the second, so the per-channel scale is written as the first input.
An input known to be non-negative (a fused or separate ReLU/ReLU6 upstream, through padding and pooling) skips
the min, the sign and the clamp: its zero point is always -128 and its centred values are the rounded ones.

All of this is `--exact-int` (ctx.q.exact), and the default for inputs of several rows. By default a one-row input
(batch 1, or FULLY_CONNECTED's one row of K) takes requantized(): ONNX Runtime's fused DynamicQuantizeLinear gives
LiteRT's integers but on rounding ties, and the float Conv / MatMul on the weights dequantized once sums them in
its own order, at about half the exact form's run time (docs/quantization.md has the figures).

`dynamic_as_float` (opt-in, `convert --dynamic-as-float`) trades all of this for speed: the int8 weights times
their scales (a Cast and a Mul of initializers, which ONNX Runtime folds once when it loads the model: the file
keeps the int8 weights), then the plain float Conv / MatMul on the float input. That is a float model's run time;
its outputs differ from LiteRT's by the activation quantization LiteRT does and it does not.

Bit-exact hybrid ops are not enough: a 1-ulp difference in a hybrid op's float input flips a rounding now and then,
and later layers amplify the flip. So the float CONV_2D / DEPTHWISE_CONV_2D / MEAN upstream of hybrid ops (TFLite
keeps weights under 1024 elements in float) are computed in the reference kernels' order too (see below).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from inspector.core.layout import layout as L
from .registry import OPS, X, OpSpec

ONNX_FLOAT, ONNX_DOUBLE = TensorProto.FLOAT, TensorProto.DOUBLE
UINT8, INT8, INT16 = TensorProto.UINT8, TensorProto.INT8, TensorProto.INT16
EXACT_LIMIT = 1 << 24                  # float32 holds every integer up to here
LANES = 8                              # LiteRT's vector loop quantizes 8 values a step; the rest one at a time
HALF_EXACT = np.float32(0.5) - np.float32(2.0 ** -25)     # floor(v + this) is std::round for v >= 0


def _spec(name: str) -> OpSpec:
    return OPS.get(name) or _UNKNOWN


_UNKNOWN = OpSpec("", X, lambda ctx, op: None)      # a custom op: no fact known


def is_hybrid(qdq, op) -> bool:
    sg = qdq.em.sg
    if op is None or not _spec(op.opcode).hybrid or len(op.inputs) < 2 or op.inputs[1] < 0:
        return False
    w = sg.tensors[op.inputs[1]]
    return (sg.tensors[op.inputs[0]].dtype == "float32" and w.dtype == "int8" and op.inputs[1] in qdq.q
            and w.data is not None)


def applies(ctx, op) -> bool:
    return is_hybrid(ctx.q, op)


# --- the input, quantized per batch row ---------------------------------------------------------------------
def nonnegative(sg, t: int, seen=None) -> bool:
    """Is activation t >= 0 by construction (a ReLU/ReLU6 upstream, through ops that keep the sign)? The ops' specs
    say which (OpSpec.sign)."""
    seen = set() if seen is None else seen
    if t in seen:
        return False
    seen.add(t)
    producer = next((o for o in sg.ops if t in o.outputs), None)
    if producer is None:
        return False
    fused = str(producer.options.get("fused_activation_function"))
    if "nonnegative" in (_spec(producer.opcode).sign, _spec(fused).sign):
        return True
    if _spec(producer.opcode).sign != "keeps":
        return False
    ins = [i for i in producer.inputs[:1 if producer.opcode != "CONCATENATION" else None] if i >= 0]
    acts = [i for i in ins if sg.tensors[i].data is None]
    consts_ok = all(sg.tensors[i].data.min(initial=0) >= 0 for i in ins if sg.tensors[i].data is not None)
    return bool(acts) and consts_ok and all(nonnegative(sg, i, seen) for i in acts)


def _tail(row_shape, perm) -> np.ndarray | None:
    """1, with 1 - 2^-24 on the row's last size % 8 elements (TFLite's order: row_shape is the row in TFLite layout,
    perm its layout in ONNX), None when there is no tail: 0.5 times it is LiteRT's rounding offset per element."""
    size = int(np.prod(row_shape))
    if size % LANES == 0 or any(d < 0 for d in row_shape):
        return None
    tail = np.ones(size, np.float32)
    tail[size - size % LANES:] = 2 * HALF_EXACT
    return np.ascontiguousarray(np.transpose(tail.reshape((1, *row_shape)), perm))


def _d(ctx, x: str) -> str:
    return ctx.node("Cast", [x], 1, to=ONNX_DOUBLE)[0]


def _f(ctx, x: str) -> str:
    return ctx.node("Cast", [x], 1, to=ONNX_FLOAT)[0]


def _round_half_away(ctx, v: str, dtype: str, half: str) -> str:
    """sign(v) * floor(|v| + half); with half just below 1/2 that is std::round (for the zero point)."""
    mag = ctx.node("Floor", [ctx.node("Add", [ctx.node("Abs", [v], 1)[0], half], 1)[0]], 1)[0]
    return ctx.node("Mul", [mag, ctx.node("Sign", [v], 1)[0]], 1)[0]


def _truncated(ctx, v: str, onnx_int: int) -> str:
    """trunc(v) as float: a Cast to an integer type truncates (faster than Floor, and Sign is slow)."""
    return _f(ctx, ctx.node("Cast", [v], 1, to=onnx_int)[0])


def _offset(ctx, y: str, tail, signed: bool) -> str:
    """y + 0.5 * sign(y) in float, as LiteRT's vector loop adds it (the tail's offset exact-rounding). The sign
    comes from clip(2y, -1/2, 1/2): below |y| = 1/4 the offset is smaller, and so is the result's truncation, 0."""
    if not signed:
        h = ctx.scalar(0.5) if tail is None else ctx.const(0.5 * tail, "hybrid_half")
        return ctx.node("Add", [y, h], 1)[0]
    h = ctx.node("Clip", [ctx.node("Mul", [y, ctx.scalar(2.0)], 1)[0], ctx.scalar(-0.5), ctx.scalar(0.5)], 1)[0]
    if tail is not None:
        h = ctx.node("Mul", [h, ctx.const(tail, "hybrid_tail")], 1)[0]
    return ctx.node("Add", [y, h], 1)[0]


def quantize_rows(ctx, x: str, x_t: int, axes, row_shape, perm, asym: bool, batch: int | None):
    """(centred, scale): x's row-wise int8 values minus their zero point, as integer-valued floats, and each
    row's float scale (reduced axes kept as 1)."""
    f, d = "float32", "double"
    ax = ctx.i64(axes, "axes")
    tail = _tail(row_shape, perm)
    nonneg = nonnegative(ctx.sg, x_t)
    hi = ctx.node("ReduceMax", [x, ax], 1, keepdims=1)[0]
    lo = None if nonneg else ctx.node("ReduceMin", [x, ax], 1, keepdims=1)[0]
    if not asym:
        rng = hi if nonneg else ctx.node("Max", [ctx.node("Abs", [lo], 1)[0], ctx.node("Abs", [hi], 1)[0]], 1)[0]
        k = ctx.scalar(127.0, f)
        rng = ctx.node("Where", [ctx.node("Equal", [rng, ctx.scalar(0.0, f)], 1)[0], k, rng], 1)[0]   # all zero: 1
        scale = ctx.node("Div", [rng, k], 1)[0]
        y = ctx.node("Mul", [x, ctx.node("Div", [k, rng], 1)[0]], 1)[0]
        # |y| <= 127 (to rounding): no clamp needed, and the truncation fits int8 (uint8 when y >= 0).
        return _truncated(ctx, _offset(ctx, y, tail, not nonneg), UINT8 if nonneg else INT8), scale
    zero = ctx.scalar(0.0, f)
    rmax = hi if nonneg else ctx.node("Max", [hi, zero], 1)[0]
    width = rmax if nonneg else ctx.node("Sub", [rmax, ctx.node("Min", [lo, zero], 1)[0]], 1)[0]
    c255 = ctx.scalar(255.0, f)
    width = ctx.node("Where", [ctx.node("Equal", [width, zero], 1)[0], c255, width], 1)[0]   # all zero: scale 1
    scale_d = ctx.node("Div", [_d(ctx, width), ctx.scalar(255.0, d)], 1)[0]
    scale = _f(ctx, scale_d)
    inv = _f(ctx, ctx.node("Div", [ctx.scalar(1.0, d), _d(ctx, scale)], 1)[0])
    y = ctx.node("Mul", [x, inv], 1)[0]
    if nonneg:
        # zero point -128 (from the min, 0): q - zp is the rounded value itself, within [0, 255].
        return _truncated(ctx, _offset(ctx, y, tail, False), UINT8), scale
    zp = _zero_point(ctx, ctx.node("Min", [lo, zero], 1)[0], rmax, scale_d)
    lower = ctx.node("Sub", [ctx.scalar(-128.0, f), zp], 1)[0]
    upper = ctx.node("Sub", [ctx.scalar(127.0, f), zp], 1)[0]
    v = _offset(ctx, y, tail, True)
    # q - zp = clamp(trunc(v), -128 - zp, 127 - zp); clamping before truncating is the same (integer bounds).
    if batch == 1:                       # Clip takes scalar bounds
        lower = ctx.node("Reshape", [lower, ctx.i64([], "scalar")], 1)[0]
        upper = ctx.node("Reshape", [upper, ctx.i64([], "scalar")], 1)[0]
        v = ctx.node("Clip", [v, lower, upper], 1)[0]
    else:
        v = ctx.node("Min", [ctx.node("Max", [v, lower], 1)[0], upper], 1)[0]
    return _truncated(ctx, v, INT16), scale


def _zero_point(ctx, rmin: str, rmax: str, scale_d: str) -> str:
    """TFLite's nudged zero point (double arithmetic, the end with the smaller error), as a float."""
    d = "double"
    a = ctx.node("Div", [_d(ctx, rmin), scale_d], 1)[0]
    b = ctx.node("Div", [_d(ctx, rmax), scale_d], 1)[0]
    from_min = ctx.node("Sub", [ctx.scalar(-128.0, d), a], 1)[0]
    from_max = ctx.node("Sub", [ctx.scalar(127.0, d), b], 1)[0]
    err_min = ctx.node("Add", [ctx.scalar(128.0, d), ctx.node("Abs", [a], 1)[0]], 1)[0]
    err_max = ctx.node("Add", [ctx.scalar(127.0, d), ctx.node("Abs", [b], 1)[0]], 1)[0]
    z = ctx.node("Where", [ctx.node("Less", [err_min, err_max], 1)[0], from_min, from_max], 1)[0]
    z = _round_half_away(ctx, z, d, ctx.scalar(float(np.nextafter(0.5, 0.0)), d))
    return _f(ctx, ctx.node("Clip", [z, ctx.scalar(-128.0, d), ctx.scalar(127.0, d)], 1)[0])


# --- the default for one-row inputs: LiteRT's quantized values, float arithmetic ------------------------------
def _rows(ctx, op) -> int | None:
    """How many rows LiteRT quantizes op's input in (the batch; FULLY_CONNECTED's rows of K), None if dynamic."""
    shape = ctx.shape(op.inputs[0])
    if ctx.tensor(op.inputs[0]).dynamic:
        return None
    if op.opcode != "FULLY_CONNECTED":
        return shape[0] if shape[0] > 0 else None
    total = int(np.prod(shape))
    return total // ctx.shape(op.inputs[1])[1] if total > 0 else None


def exact_rows(ctx, op) -> bool:
    """Does op take the bit-exact path (above)? With --exact-int, and for inputs of several rows (one
    DynamicQuantizeLinear covers one range only); a one-row input takes requantized()."""
    return ctx.q.exact or _rows(ctx, op) != 1


def requantized(ctx, x: str, asym: bool) -> str:
    """x through LiteRT's int8 input quantization and back to float, for a one-row input. The asymmetric form is
    ONNX Runtime's fused DynamicQuantizeLinear: the same range (with 0), scale (width / 255) and zero point (up to
    LiteRT's offset of 128), rounding x / scale where LiteRT rounds x * (1 / scale), halves to even where LiteRT's go
    away from zero: the integers differ only on such ties. The symmetric form: max |x| / 127 and a QuantizeLinear
    to int8. The float Conv / MatMul on the dequantized weights then sums in its own order (not bit for bit)."""
    if asym:
        q, scale, zp = ctx.node("DynamicQuantizeLinear", [x], 3)
        return ctx.node("DequantizeLinear", [q, scale, zp], 1)[0]
    f = "float32"
    rng = ctx.node("ReduceMax", [ctx.node("Abs", [x], 1)[0]], 1, keepdims=0)[0]
    k = ctx.scalar(127.0, f)
    rng = ctx.node("Where", [ctx.node("Equal", [rng, ctx.scalar(0.0, f)], 1)[0], k, rng], 1)[0]   # all zero: 1
    scale = ctx.node("Div", [rng, k], 1)[0]
    zero = ctx.scalar(0, "int8", "zero_i8")
    return ctx.node("DequantizeLinear", [ctx.node("QuantizeLinear", [x, scale, zero], 1)[0], scale, zero], 1)[0]


# --- weights and scaling -------------------------------------------------------------------------------------
def _per_channel(q) -> bool:
    """LiteRT's per-channel hybrid path: more than one weight scale, not all equal."""
    return q.scales.size > 1 and bool(np.any(q.scales != q.scales[0]))


def _weights(ctx, op, perm, centred_max: int, halves_axis: int | None = None) -> list[str]:
    """The int8 weights in ONNX layout as float integers (int8 initializers and a Cast ONNX Runtime folds). One
    part, or two halves along halves_axis (the reduced axis) when only halves keep every partial sum of an output
    channel below 2^24: their sums are then exact and one Add rounds the total as LiteRT's int-to-float does."""
    w_t = op.inputs[1]
    w = np.asarray(ctx.data(w_t))
    arr = np.ascontiguousarray(np.transpose(w, perm))
    out_axis = L.axis_to_onnx(w.ndim - 1 if op.opcode == "DEPTHWISE_CONV_2D" else 0, perm)
    ctx.q.const_axes[w_t] = out_axis

    def exact(a) -> bool:
        mag = np.abs(a.astype(np.int16))                  # int16: |-128| fits, and half the work of int64
        bound = mag.sum(axis=tuple(i for i in range(a.ndim) if i != out_axis), dtype=np.int64)
        return not bound.size or int(bound.max()) * centred_max < EXACT_LIMIT
    parts = [arr]
    if not exact(arr) and halves_axis is not None and arr.shape[halves_axis] > 1:
        parts = np.array_split(arr, 2, axis=halves_axis)
    if not all(exact(a) for a in parts):
        ctx.warnings.append(f"{op.opcode}#{op.index}: accumulator may exceed 2^24, where float sums of the "
                            f"integers can round (LiteRT's int32 cannot)")
        parts = [arr]
    names = []
    for a in parts:
        stored = ctx.const(np.ascontiguousarray(a), ctx.q.short(w_t) + "_int8")
        ctx.note_value(w_t, stored)
        names.append(_f(ctx, stored))
    return names


def _float_weights(ctx, op, perm) -> str:
    """dynamic_as_float: the int8 weights in ONNX layout times their scales, as a Cast and a Mul of initializers
    (folded by ONNX Runtime at load; the file keeps int8)."""
    w_t = op.inputs[1]
    w = np.ascontiguousarray(np.transpose(np.asarray(ctx.data(w_t)), perm))
    q = ctx.tensor(w_t).quantization
    stored = ctx.const(w, ctx.q.short(w_t) + "_int8")
    ctx.note_value(w_t, stored)
    if q.scales.size == 1:
        return ctx.node("Mul", [_f(ctx, stored), ctx.scalar(float(q.scales[0]))], 1)[0]
    shape = [1] * w.ndim
    shape[L.axis_to_onnx(w.ndim - 1 if op.opcode == "DEPTHWISE_CONV_2D" else 0, perm)] = -1
    return ctx.node("Mul", [_f(ctx, stored), _channel_scales(ctx, op, shape)], 1)[0]


def _channel_scales(ctx, op, shape) -> str:
    q = ctx.tensor(op.inputs[1]).quantization
    return ctx.const(q.scales.astype(np.float32).reshape(shape), ctx.q.short(op.inputs[1]) + "_scale")


def _scale(ctx, op, a: str, b: str, dst: str, bias_shape=None) -> None:
    """a * b, + bias (if any; shaped to broadcast over the output), into dst (a fused activation follows through
    ctx.fused)."""
    b_t = op.inputs[2] if len(op.inputs) > 2 else -1
    bias = ""
    if b_t >= 0 and bias_shape is not None:
        bias = ctx.const_of(b_t, shape=bias_shape) if ctx.is_const(b_t) else \
            ctx.node("Reshape", [ctx.input(op, 2), ctx.i64(bias_shape)], 1)[0]
    elif b_t >= 0:
        bias = ctx.input(op, 2)
    if bias:
        ctx.node("Add", [ctx.node("Mul", [a, b], 1)[0] if b else a, bias], [dst])
    else:
        ctx.node("Mul", [a, b], [dst])


# --- the ops -------------------------------------------------------------------------------------------------
def conv(ctx, op, w_perm, **attrs) -> None:
    """CONV_2D (w_perm OHWI -> OIHW) or DEPTHWISE_CONV_2D as LiteRT's hybrid kernels compute them."""
    x_t = op.inputs[0]
    q = ctx.tensor(op.inputs[1]).quantization
    depthwise = op.opcode == "DEPTHWISE_CONV_2D"
    asym = bool(depthwise or _per_channel(q) or attrs.get("group"))
    if ctx.q.dynamic_as_float or not exact_rows(ctx, op):
        bias = [ctx.input(op, 2)] if len(op.inputs) > 2 and op.inputs[2] >= 0 else []
        x = ctx.input(op, 0)
        if not ctx.q.dynamic_as_float:
            x = requantized(ctx, x, asym)
        ctx.node("Conv", [x, _float_weights(ctx, op, w_perm)] + bias, [ctx.fused(op, ctx.output(op))], **attrs)
        return
    x = ctx.input(op, 0)
    perm = ctx.plan.inputs.get((op.index, 0), ctx.perm(x_t))
    shape = ctx.shape(x_t)
    batch_axis = L.axis_to_onnx(0, perm)
    axes = [a for a in range(len(shape)) if a != batch_axis]
    batch = _rows(ctx, op)
    centred, in_scale = quantize_rows(ctx, x, x_t, axes, shape[1:], perm, asym, batch)
    weight, = _weights(ctx, op, w_perm, 255 if asym else 127)
    acc = ctx.node("Conv", [centred, weight], 1, **attrs)[0]
    dst = ctx.fused(op, ctx.output(op))
    per_channel = [1, -1, 1, 1]                      # ONNX Conv output: channels on axis 1
    bias_shape = (ctx.shape(op.outputs[0])[-1], 1, 1)
    if depthwise:
        _scale(ctx, op, acc, ctx.node("Mul", [_channel_scales(ctx, op, per_channel), in_scale], 1)[0], dst,
               bias_shape)
    elif asym:
        _scale(ctx, op, ctx.node("Mul", [_channel_scales(ctx, op, per_channel), acc], 1)[0], in_scale, dst,
               bias_shape)
    else:
        _scale(ctx, op, acc, ctx.node("Mul", [in_scale, ctx.scalar(float(q.scales[0]))], 1)[0], dst, bias_shape)


def fully_connected(ctx, op) -> None:
    """FULLY_CONNECTED: rows of K inputs, quantized asymmetrically when the op asks for it."""
    x_t, w_t = op.inputs[0], op.inputs[1]
    q = ctx.tensor(w_t).quantization
    k = ctx.shape(w_t)[1]
    asym = bool(op.options.get("asymmetric_quantize_inputs"))
    x = ctx.input(op, 0)
    if ctx.tensor(x_t).rank != 2:
        x = ctx.node("Reshape", [x, ctx.i64([-1, k])], 1)[0]
    if ctx.q.dynamic_as_float or not exact_rows(ctx, op):
        w = _float_weights(ctx, op, (1, 0))
        xf = x if ctx.q.dynamic_as_float else requantized(ctx, x, asym)
        if len(op.inputs) > 2 and op.inputs[2] >= 0:
            _fc_out(ctx, op, lambda dst: _scale(ctx, op, ctx.node("MatMul", [xf, w], 1)[0], "", dst))
        else:
            _fc_out(ctx, op, lambda dst: ctx.node("MatMul", [xf, w], [dst]))
        return
    batch = _rows(ctx, op)
    centred, in_scale = quantize_rows(ctx, x, x_t, [1], [k], (0, 1), asym, batch)
    parts = _weights(ctx, op, (1, 0), 255 if asym else 127, halves_axis=0)
    if len(parts) == 1:
        dot = ctx.node("MatMul", [centred, parts[0]], 1)[0]
    else:
        h = -(-k // 2)                           # np.array_split's first half
        lo = ctx.node("Slice", [centred, ctx.i64([0]), ctx.i64([h]), ctx.i64([1])], 1)[0]
        hi = ctx.node("Slice", [centred, ctx.i64([h]), ctx.i64([k]), ctx.i64([1])], 1)[0]
        # Sum, not Add: ONNX Runtime would fuse MatMul + Add into a Gemm that accumulates onto the other half.
        dot = ctx.node("Sum", [ctx.node("MatMul", [lo, parts[0]], 1)[0], ctx.node("MatMul", [hi, parts[1]], 1)[0]],
                       1)[0]
    if q.scales.size > 1:
        s = ctx.node("Mul", [in_scale, _channel_scales(ctx, op, [1, -1])], 1)[0]
    else:
        s = ctx.node("Mul", [in_scale, ctx.scalar(float(q.scales[0]))], 1)[0]
    _fc_out(ctx, op, lambda dst: _scale(ctx, op, dot, s, dst))


def _fc_out(ctx, op, emit) -> None:
    """emit(dst) writes FULLY_CONNECTED's [rows, units] result: into its output (a fused activation follows), or
    through a Reshape to the output's rank when that is not 2."""
    out_t = op.outputs[0]
    dst = ctx.fused(op, ctx.output(op))
    if ctx.tensor(out_t).rank == 2:
        emit(dst)
        return
    flat = ctx.fresh("fc_out")
    emit(flat)
    sig = ctx.tensor(out_t).shape_signature or ctx.shape(out_t)
    ctx.node("Reshape", [flat, ctx.i64([-1 if dd < 0 else dd for dd in sig])], [dst])


# --- float convolutions feeding hybrid ops ------------------------------------------------------------------
# A hybrid op's row quantization turns a 1-ulp difference in its input into a whole quantization step when the
# value sits at a rounding boundary, and later layers amplify that. So in a dynamic-range model the float
# convolutions upstream of hybrid ops (TFLite leaves weights under 1024 elements in float) are computed in the
# reference kernel's order: products rounded to float, added one by one over (filter y, filter x, in channel),
# then the bias. ONNX Runtime's Conv sums in other orders (and with fused multiply-adds).
def feeds_hybrid(ctx, op) -> bool:
    """Does an output of op reach a hybrid op's quantized input (through any ops)? One backward pass a subgraph
    (TFLite lists ops in execution order)."""
    if ctx.q.dynamic_as_float:               # the hybrid ops are float ops: nothing to match
        return False
    key = ("feeds_hybrid",)
    if key not in ctx.memo:
        tensors: set[int] = set()
        for o in reversed(ctx.sg.ops):
            if is_hybrid(ctx.q, o) and exact_rows(ctx, o):
                tensors.add(o.inputs[0])
            elif any(t in tensors for t in o.outputs):
                tensors.update(i for i in o.inputs if i >= 0)
        ctx.memo[key] = tensors
    return any(t in ctx.memo[key] for t in op.outputs)


def _taps(ctx, x: str, channels: int, size, out, pads, strides, dilations):
    """fn(fy, fx) -> the input window each output pixel reads at filter tap (fy, fx), as [N, C, OH, OW]. Equal
    strides read the phases of one SpaceToDepth (ONNX Runtime's strided Slice is several times slower)."""
    s = strides[0]
    phased = s > 1 and strides[1] == s and all(d == 1 for d in dilations)
    pads = list(pads)
    if phased:                                   # pad the ends up to whole blocks
        for i in (0, 1):
            pads[2 + i] += (-(size[i] + pads[i] + pads[2 + i])) % s
    if any(pads):
        x = ctx.node("Pad", [x, ctx.i64([0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]])], 1)[0]
    if not phased:
        def tap(fy, fx):
            y0, x0 = fy * dilations[0], fx * dilations[1]
            ends = [y0 + strides[0] * (out[0] - 1) + 1, x0 + strides[1] * (out[1] - 1) + 1]
            return ctx.node("Slice", [x, ctx.i64([y0, x0]), ctx.i64(ends), ctx.i64([2, 3]), ctx.i64(strides)], 1)[0]
        return tap
    blocks = ctx.node("SpaceToDepth", [x], 1, blocksize=s)[0]          # channel (py * s + px) * C + c

    def phase_tap(fy, fx):
        phase, y0, x0 = (fy % s) * s + fx % s, fy // s, fx // s
        return ctx.node("Slice", [blocks, ctx.i64([phase * channels, y0, x0]),
                                  ctx.i64([(phase + 1) * channels, y0 + out[0], x0 + out[1]]),
                                  ctx.i64([1, 2, 3])], 1)[0]
    return phase_tap


def sequential_conv(ctx, op, attrs) -> bool:
    """Float CONV_2D / DEPTHWISE_CONV_2D as TFLite's reference kernel sums it, when a hybrid op depends on it
    (see above); False: the plain Conv applies."""
    if "pads" not in attrs or not ctx.is_const(op.inputs[1]) or not feeds_hybrid(ctx, op):
        return False
    depthwise, pads, strides = op.opcode == "DEPTHWISE_CONV_2D", attrs["pads"], attrs["strides"]
    dilations = attrs.get("dilations", [1, 1])
    x = ctx.input(op, 0)
    w = np.asarray(ctx.data(op.inputs[1]), np.float32)
    n, h, w_in, c = ctx.shape(op.inputs[0])
    _, oh, ow, oc = ctx.shape(op.outputs[0])
    kh, kw = w.shape[1:3]
    taps = _taps(ctx, x, c, (h, w_in), (oh, ow), pads, strides, dilations)
    total = None
    for fy in range(kh):
        for fx in range(kw):
            tap = taps(fy, fx)
            if depthwise:
                mult = oc // c
                if mult > 1:
                    tap = ctx.node("Gather", [tap, ctx.i64(np.repeat(np.arange(c), mult))], 1, axis=1)[0]
                terms = [(tap, w[0, fy, fx, :])]
            else:
                split = ctx.node("Split", [tap], c, axis=1, num_outputs=c) if c > 1 else [tap]
                terms = [(split[ci], w[:, fy, fx, ci]) for ci in range(c)]
            for value, weights in terms:
                # Products as 1x1 Convs of depth 1 (exact: one product each; faster than a broadcasting Mul):
                # per channel for depthwise, one input channel times every filter otherwise.
                p = ctx.node("Conv", [value, ctx.const(weights.reshape(-1, 1, 1, 1), "tap_w")], 1,
                             group=oc if depthwise else None)[0]
                total = p if total is None else ctx.node("Add", [total, p], 1)[0]
    dst = ctx.fused(op, ctx.output(op))
    b_t = op.inputs[2] if len(op.inputs) > 2 else -1
    if b_t >= 0:
        bias = ctx.const_of(b_t, shape=(oc, 1, 1)) if ctx.is_const(b_t) else \
            ctx.node("Reshape", [ctx.input(op, 2), ctx.i64([oc, 1, 1])], 1)[0]
        ctx.node("Add", [total, bias], [dst])
    else:
        ctx.node("Identity", [total], [dst])
    return True


def sequential_mean(ctx, op) -> bool:
    """Float MEAN feeding a hybrid op as TFLite's reference kernel computes it: a sum in the input's TFLite order,
    one element at a time, then a division by the count. ReduceSum over a leading axis adds rows in order."""
    x_t, y_t = op.inputs[0], op.outputs[0]
    if not (ctx.tensor(x_t).dtype == "float32" and ctx.is_const(op.inputs[1])
            and not ctx.tensor(x_t).dynamic and feeds_hybrid(ctx, op)):
        return False
    shape = ctx.shape(x_t)
    rank = len(shape)
    reduced = sorted({int(a) % rank for a in np.asarray(ctx.data(op.inputs[1])).reshape(-1)})
    kept = [a for a in range(rank) if a not in reduced]
    p = ctx.plan.inputs.get((op.index, 0), ctx.perm(x_t))
    out_perm = ctx.plan.produced.get((op.index, 0), ctx.perm(y_t))
    out_shape = ctx.onnx_shape(y_t, out_perm)
    if [d for d in out_shape if d != 1] != [shape[a] for a in kept if shape[a] != 1]:
        return False                         # the kept axes change order in ONNX: the plain ReduceMean
    order = [L.axis_to_onnx(a, p) for a in reduced + kept]
    x = ctx.node("Transpose", [ctx.input(op, 0)], 1, perm=order)[0]
    count = int(np.prod([shape[a] for a in reduced]))
    x = ctx.node("Reshape", [x, ctx.i64([count, -1])], 1)[0]
    s = ctx.node("ReduceSum", [x, ctx.i64([0], "axes")], 1, keepdims=0)[0]
    m = ctx.node("Div", [s, ctx.scalar(float(count))], 1)[0]
    ctx.node("Reshape", [m, ctx.i64(out_shape)], [ctx.output(op)])
    return True
