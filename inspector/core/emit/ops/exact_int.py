"""--exact-int (convert(exact_int=True)): int8 ops computed as TFLite's integer kernels compute them.

TFLite's integer kernels requantize with a fixed-point multiply and a rounding shift: two roundings, where
QuantizeLinear rounds once, so a QDQ model lands one step off on ~0.1-1 % of elements per op. Deep models
(EfficientNet's squeeze-excite gates) amplify those steps. With `exact_int`, Conv, depthwise, transposed Conv,
FullyConnected, BatchMatMul and Mul (`Exact`, the side of the QDQ service that centres their operands and
requantizes their results) and Mean, AveragePool and PRelu (kernels table.py lists) run as TFLite runs them:
integer-valued float operands (x - zero point; exact below 2^24), the accumulator requantized in float64 with
TFLite's multiplier and shift (fixed_point.py), clamped to the fused activation's range.
ONNX Runtime cannot fuse that into its integer kernels: the default stays QDQ.
"""
from __future__ import annotations

import weakref

import numpy as np

from inspector.core.layout import layout as L
from .fixed_point import (ONNX_DOUBLE, ONNX_FLOAT, accumulator_bound, activation_range, centred_range, clamp_cast,
                          double_const, fixed_point_multiply, params, per_tensor, quantize_multiplier, requantize,
                          to_double)
from .registry import OPS

# Where each op reads its data, its weights (an activation for MUL and BATCH_MATMUL) and its bias.
EXACT_SLOTS = {"TRANSPOSE_CONV": (2, 1, 3)}
TWO_ACTIVATIONS = frozenset({"MUL", "BATCH_MATMUL"})


def exact_slots(op) -> tuple[int, int, int]:
    return EXACT_SLOTS.get(op.opcode, (0, 1, 2))


class Exact:
    """The exact_int side of QDQ: which ops qualify, their centred operands and their requantization."""

    def __init__(self, qdq):                     # the emitter's qdq.QDQ
        self._qdq = weakref.ref(qdq)             # owned by qdq: no reference cycle back to it
        self._ok: dict[int, bool] = {}

    @property
    def qdq(self):
        return self._qdq()

    def applies(self, op) -> bool:
        if op is None or not self.qdq.exact or op.opcode not in OPS or not OPS[op.opcode].exact_int:
            return False
        if op.index not in self._ok:
            self._ok[op.index] = self._check(op)
        return self._ok[op.index]

    def _check(self, op) -> bool:
        sg, q = self.qdq.em.sg, self.qdq.q
        eight = ("int8", "uint8")
        data, weights, bias = exact_slots(op)
        two = op.opcode in TWO_ACTIVATIONS
        acts = [op.inputs[data], op.outputs[0]] + ([op.inputs[weights]] if two else [])
        for t in acts:
            ten = sg.tensors[t]
            if t not in q or ten.dtype not in eight or params(ten.quantization) is None:
                return False
        if not two:
            w = sg.tensors[op.inputs[weights]]
            if op.inputs[weights] not in q or w.dtype not in eight or w.data is None:
                return False
            b = op.inputs[bias] if len(op.inputs) > bias else -1
            if b >= 0 and (b not in q or sg.tensors[b].dtype != "int32"):
                return False
        return True

    def centred(self, t: int, x: str, axis: int | None) -> str:
        """Integers minus their zero point, as float32 (exactly representable)."""
        em = self.qdq.em
        ten = em.sg.tensors[t]
        q = ten.quantization
        f = em.node("Cast", [x], 1, to=ONNX_FLOAT)[0]
        if not np.any(q.zero_points):
            return f
        zp = q.zero_points.astype(np.float32)
        if q.per_channel:
            assert axis is not None, "a per-channel tensor is read with its channel axis"
            shape = [1] * ten.rank
            shape[axis] = -1
            zp = zp.reshape(shape)
        else:
            zp = zp.reshape(())
        return em.node("Sub", [f, em.const(zp, f"{self.qdq.short(t)}_zp")], 1)[0]

    def requantize(self, op, src: str, dst: str, t: int) -> None:
        em = self.qdq.em
        sg = em.sg
        data, weights, _ = exact_slots(op)
        scale = lambda i: np.float64(per_tensor(sg.tensors[op.inputs[i]].quantization)[0])   # noqa: E731
        so = np.float64(per_tensor(sg.tensors[t].quantization)[0])
        rank = sg.tensors[t].rank
        if op.opcode == "MUL":
            # LiteRT's MUL computes its multiplier in float32 (float scales multiplied, then divided, then widened),
            # where convolutions compute it in double: the 31-bit multipliers differ in their last ~6 bits, enough
            # to move a product that lands near a rounding tie by one step.
            f32 = lambda i: np.float32(per_tensor(sg.tensors[i].quantization)[0])   # noqa: E731
            mults, axis = np.array([np.float64(f32(op.inputs[0]) * f32(op.inputs[1]) / f32(t))]), None
        elif op.opcode == "BATCH_MATMUL":
            mults, axis = np.array([scale(0) * scale(1) / so]), None
        else:
            mults = scale(data) * sg.tensors[op.inputs[weights]].quantization.scales.astype(np.float64) / so
            perm = em.plan.produced.get((op.index, 0), em.perm(t))
            axis = L.axis_to_onnx(rank - 1, perm)                 # output channels are TFLite's last axis
        requantize(em, to_double(em, src), mults, t, dst, op.options.get("fused_activation_function", "NONE") or "NONE",
                   axis, rank, self.bound(op), single=op.opcode == "FULLY_CONNECTED")

    def bound(self, op) -> float:
        """A bound on |accumulator|: the centred input range times the largest per-channel sum of |weights|
        (BATCH_MATMUL: times the inner dimension)."""
        sg = self.qdq.em.sg
        data, weights, bias_slot = exact_slots(op)
        bx = centred_range(sg.tensors[op.inputs[data]])
        if op.opcode in TWO_ACTIVATIONS:
            by = centred_range(sg.tensors[op.inputs[weights]])
            if op.opcode == "MUL":
                return float(bx * by)
            x = sg.tensors[op.inputs[0]]
            inner = x.shape[-2] if op.options.get("adj_x") else x.shape[-1]
            return float(bx * by * max(int(inner), 1))
        w = sg.tensors[op.inputs[weights]]
        b = op.inputs[bias_slot] if len(op.inputs) > bias_slot else -1
        bias = sg.tensors[b].data if b >= 0 else None
        return accumulator_bound(w.data, 3 if op.opcode == "DEPTHWISE_CONV_2D" else 0, bx, bias,
                                 int(np.abs(w.quantization.zero_points).max()))[0]


def exact_mean(ctx, op) -> bool:
    """MEAN of int8/uint8 as TFLite's kernel computes it; False when it does not apply (the float path runs)."""
    sg, qdq = ctx.sg, ctx.q
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = sg.tensors[x_t], sg.tensors[y_t]
    if not (qdq.exact and qdq.quantized_tensor(x_t) and qdq.quantized_tensor(y_t) and tx.dtype == ty.dtype
            and tx.dtype in ("int8", "uint8") and not ctx.is_const(x_t) and ctx.is_const(op.inputs[1])):
        return False
    pin, pout = params(tx.quantization), params(ty.quantization)
    if pin is None or pout is None:
        return False
    qdq._raw[op.index] = True                     # reads and writes the stored integers
    rank = tx.rank
    axes = sorted({int(a) % rank for a in np.asarray(ctx.data(op.inputs[1])).reshape(-1)})
    n = int(np.prod([tx.shape[a] for a in axes]))
    p = ctx.plan.inputs.get((op.index, 0), L.identity(rank))
    onnx_axes = sorted(L.axis_to_onnx(a, p) for a in axes)
    # Sums of stored integers: exact in float32 below 2^24, else summed in float64.
    wide = n * 256 >= 1 << 24
    x = ctx.node("Cast", [ctx.input(op, 0)], 1, to=ONNX_DOUBLE if wide else ONNX_FLOAT)[0]
    s = ctx.node("ReduceSum", [x, ctx.i64(onnx_axes, "axes")], 1, keepdims=1 if op.options.get("keep_dims") else 0)[0]
    s = ctx.node("Sub", [s if wide else to_double(ctx, s), double_const(ctx, float(n * pin[1]))], 1)[0]
    # TFLite folds 1/n into the multiplier with `shift` extra bits (integer division, truncated).
    q, e = quantize_multiplier(pin[0] / pout[0])
    shift = min(n.bit_length() - 1, 32, 31 + e)
    y = fixed_point_multiply(ctx, s, np.array((q << shift) // n), np.array(e - shift), pout[1],
                             bound=float(n * centred_range(tx)))
    clamp_cast(ctx, y, *activation_range("NONE", pout[0], pout[1], ty.dtype), ctx.output(op), ty.dtype)
    return True


def exact_average_pool(ctx, op) -> bool:
    """AVERAGE_POOL_2D on int8/uint8 as TFLite computes it: the window's sum of stored integers divided by the
    in-bounds count, rounded half away from zero (exact in float: a tie k + 1/2 is representable)."""
    sg, qdq = ctx.sg, ctx.q
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = sg.tensors[x_t], sg.tensors[y_t]
    if not (qdq.exact and x_t in qdq.q and y_t in qdq.q and tx.dtype == ty.dtype and tx.dtype in ("int8", "uint8")
            and params(tx.quantization) is not None and params(tx.quantization) == params(ty.quantization)):
        return False
    from .conv import spatial_attrs
    from inspector.core.ir.dtypes import onnx_dtype
    qdq._raw[op.index] = True
    o = op.options
    kernel = (o["filter_height"], o["filter_width"])
    attrs = spatial_attrs(ctx, op, x_t, kernel, (o.get("stride_h", 1), o.get("stride_w", 1)), None)
    f = "float32"
    x = ctx.node("Cast", [ctx.input(op, 0)], 1, to=ONNX_FLOAT)[0]
    m = ctx.node("AveragePool", [x], 1, kernel_shape=list(kernel), **attrs)[0]
    half = ctx.node("Floor", [ctx.node("Add", [ctx.node("Abs", [m], 1)[0], ctx.scalar(0.5, f)], 1)[0]], 1)[0]
    r = ctx.node("Mul", [ctx.node("Sign", [m], 1)[0], half], 1)[0]
    so, zo = per_tensor(ty.quantization)
    lo, hi = activation_range(o.get("fused_activation_function", "NONE") or "NONE", so, zo, ty.dtype)
    r = ctx.node("Clip", [r, ctx.scalar(float(lo), f), ctx.scalar(float(hi), f)], 1)[0]
    ctx.node("Cast", [r], [ctx.output(op)], to=onnx_dtype(ty.dtype))
    return True


def exact_prelu(ctx, op) -> bool:
    """PRELU on int8/uint8 as TFLite's kernel computes it: the centred input requantized by in/out scale where it
    is >= 0, else its product with the centred alpha requantized by in*alpha/out, each with TFLite's fixed-point
    multiply. (QDQ rounds x * alpha once in float: one step off at some ties.)"""
    sg, qdq = ctx.sg, ctx.q
    ts = [op.inputs[0], op.inputs[1], op.outputs[0]]
    if not (qdq.exact and all(t in qdq.q and sg.tensors[t].dtype in ("int8", "uint8")
                              and params(sg.tensors[t].quantization) is not None for t in ts)):
        return False
    (sx, zx), (sa, za), (so, zo) = (per_tensor(sg.tensors[t].quantization) for t in ts)
    qdq._raw[op.index] = True                     # reads and writes the stored integers
    ty = sg.tensors[ts[2]]
    x = ctx.node("Sub", [ctx.node("Cast", [ctx.input(op, 0)], 1, to=ONNX_FLOAT)[0], ctx.scalar(float(zx))], 1)[0]
    alpha = ctx.broadcast_input(op, 1, ty.rank, ctx.perm(ts[2]))
    a = ctx.node("Sub", [ctx.node("Cast", [alpha], 1, to=ONNX_FLOAT)[0], ctx.scalar(float(za))], 1)[0]
    q1, e1 = quantize_multiplier(np.float64(sx) / np.float64(so))
    q2, e2 = quantize_multiplier(np.float64(sx) * np.float64(sa) / np.float64(so))
    pos = fixed_point_multiply(ctx, to_double(ctx, x), np.array(q1), np.array(e1), zo, bound=255.0)
    neg = fixed_point_multiply(ctx, to_double(ctx, ctx.node("Mul", [x, a], 1)[0]), np.array(q2), np.array(e2), zo,
                               bound=255.0 * 255.0)
    y = ctx.node("Where", [ctx.node("Less", [x, ctx.scalar(0.0)], 1)[0], neg, pos], 1)[0]
    clamp_cast(ctx, y, *activation_range("NONE", so, zo, ty.dtype), ctx.output(op), ty.dtype)
    return True
