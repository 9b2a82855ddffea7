"""LiteRT's integer arithmetic for quantized ops whose QDQ form rounds differently (the kernels table.py lists):

- int16 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED (16x8 models), in both modes: 64-bit accumulators requantized
  with one rounding (convolutions: the multiplier's top 15 bits, fixed_point.wide_multipliers). ONNX Runtime has no int16
  convolution to fuse, so the QDQ form saves nothing there, and it is one step off on ~4 % of elements per op.
- --exact-int: int8 RESIZE_BILINEAR (10-bit fixed-point weights on the stored integers, the sum rounded half away
  from zero), int8 SQUARED_DIFFERENCE (three fixed-point multiplies) and int8 SOFTMAX (quant_softmax.py).
"""
from __future__ import annotations

import numpy as np

from inspector.core.ir.dtypes import onnx_dtype
from inspector.core.layout import layout as L
from .conv import window
from .fixed_point import (ONNX_DOUBLE, ONNX_FLOAT, accumulator_bound, centred_range, clamp_cast, double_const,
                          fixed_point_multiply, params, per_tensor, quantize_multiplier, requantize, to_double)

SPLIT = 256.0          # int16 = 256 * high byte + low byte: each half's float32 Conv adds exactly below 2^24


def _per_tensor_zero(t) -> bool:
    p = params(t.quantization)
    return p is not None and p[1] == 0


def int16_conv(ctx, op) -> bool:
    """CONV_2D / DEPTHWISE_CONV_2D with int16 activations and int8 weights as LiteRT's reference kernel computes
    them; False (the QDQ path) for anything else or when a half's float32 sums could pass 2^24."""
    sg, qdq = ctx.sg, ctx.q
    x_t, w_t, y_t = op.inputs[0], op.inputs[1], op.outputs[0]
    b_t = op.inputs[2] if len(op.inputs) > 2 else -1
    tx, tw, ty = sg.tensors[x_t], sg.tensors[w_t], sg.tensors[y_t]
    if not (x_t in qdq.q and y_t in qdq.q and w_t in qdq.q and tx.dtype == ty.dtype == "int16" and tw.dtype == "int8"
            and ctx.is_const(w_t) and _per_tensor_zero(tx) and _per_tensor_zero(ty)
            and not np.any(tw.quantization.zero_points) and (b_t < 0 or ctx.is_const(b_t))):
        return False
    kernel, group, attrs, perm = window(ctx, op)
    w = np.asarray(ctx.data(w_t)).astype(np.int64)
    bias = np.asarray(ctx.data(b_t)).astype(np.int64).reshape(-1) if b_t >= 0 else None
    bound, per_channel = accumulator_bound(w, 3 if op.opcode == "DEPTHWISE_CONV_2D" else 0, centred_range(tx), bias)
    if per_channel * 255 >= 1 << 24 or bound * 2.0 ** 23 >= 2.0 ** 53:   # (multiplier <= 2^15, shift <= 8)
        return False
    qdq._raw[op.index] = True                     # reads and writes the stored integers
    rank = ty.rank
    out_perm = ctx.plan.produced.get((op.index, 0), ctx.perm(y_t))
    c_axis = L.axis_to_onnx(rank - 1, out_perm)
    stored = ctx.const(np.ascontiguousarray(np.transpose(w, perm)).astype(np.int8), qdq.short(w_t))
    weight = ctx.node("Cast", [stored], 1, to=ONNX_FLOAT)[0]          # int8 on disk; ONNX Runtime folds the Cast
    x = ctx.node("Cast", [ctx.input(op, 0)], 1, to=ONNX_FLOAT)[0]
    high = ctx.node("Floor", [ctx.node("Mul", [x, ctx.scalar(1 / SPLIT)], 1)[0]], 1)[0]
    low = ctx.node("Sub", [x, ctx.node("Mul", [high, ctx.scalar(SPLIT)], 1)[0]], 1)[0]
    halves = [to_double(ctx, ctx.node("Conv", [v, weight], 1, group=group, kernel_shape=kernel, **attrs)[0])
              for v in (high, low)]
    acc = ctx.node("Add", [ctx.node("Mul", [halves[0], double_const(ctx, SPLIT)], 1)[0], halves[1]], 1)[0]
    if bias is not None:
        shape = [1] * rank
        shape[c_axis] = -1
        acc = ctx.node("Add", [acc, double_const(ctx, bias.astype(np.float64).reshape(shape))], 1)[0]
    sx, sy = per_tensor(tx.quantization)[0], per_tensor(ty.quantization)[0]
    mults = np.float64(sx) * tw.quantization.scales.astype(np.float64) / np.float64(sy)
    act = op.options.get("fused_activation_function", "NONE") or "NONE"
    requantize(ctx, acc, mults, y_t, ctx.output(op), act, c_axis, rank, bound, wide=True)
    return True


def bilinear_weights(n_in: int, n_out: int, align: bool, half: bool) -> np.ndarray:
    """[n_out, n_in] integer weights (each row sums to 1024) of LiteRT's int8 bilinear resize along one axis."""
    if align and n_out > 1:
        scale = ((1 << 10) * (n_in - 1) + (n_out - 1) // 2) // (n_out - 1)
    else:
        scale = ((1 << 10) * n_in + n_out // 2) // n_out
    m = np.zeros((n_out, n_in), np.int64)
    for i in range(n_out):
        pos = i * scale + (scale // 2 - (1 << 9) if half else 0)
        lo = max(int(pos / (1 << 10)), 0)                       # C division: towards zero
        hi = min((pos + (1 << 10) - 1) // (1 << 10), n_in - 1)
        frac = pos - (1 << 10) * lo
        m[i, lo] += (1 << 10) - frac
        m[i, hi] += frac
    return m


def exact_resize_bilinear(ctx, op) -> bool:
    """--exact-int: int8 RESIZE_BILINEAR as LiteRT's integer kernel computes it, on a static [N, C, H, W] map: two
    float64 MatMuls with the per-axis weights (exact: |sums| < 2^28), then / 2^20 rounded half away from zero."""
    sg, qdq = ctx.sg, ctx.q
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = sg.tensors[x_t], sg.tensors[y_t]
    if not (qdq.exact and x_t in qdq.q and y_t in qdq.q and tx.dtype == ty.dtype == "int8" and tx.rank == 4
            and params(tx.quantization) is not None and params(tx.quantization) == params(ty.quantization)
            and ctx.is_const(op.inputs[1]) and min(tx.shape) > 0 and not tx.dynamic):
        return False
    p = ctx.plan.inputs.get((op.index, 0), ctx.perm(x_t))
    if tuple(p[2:]) != (1, 2) or tuple(ctx.plan.produced.get((op.index, 0), ctx.perm(y_t))) != tuple(p):
        return False                              # H and W must be the last two axes, in and out
    qdq._raw[op.index] = True
    o = op.options
    align, half = bool(o.get("align_corners", False)), bool(o.get("half_pixel_centers", False))
    (h_in, w_in), (h_out, w_out) = tx.shape[1:3], [int(v) for v in ctx.data(op.inputs[1])]
    rows = double_const(ctx, bilinear_weights(h_in, h_out, align, half).astype(np.float64))
    cols = double_const(ctx, bilinear_weights(w_in, w_out, align, half).T.astype(np.float64))
    x = ctx.node("Cast", [ctx.input(op, 0)], 1, to=ONNX_DOUBLE)[0]
    v = ctx.node("MatMul", [ctx.node("MatMul", [rows, x], 1)[0], cols], 1)[0]
    half_up = ctx.node("Floor", [ctx.node("Add", [ctx.node("Mul", [ctx.node("Abs", [v], 1)[0],
                                                                    double_const(ctx, 2.0 ** -20)], 1)[0],
                                                   double_const(ctx, 0.5)], 1)[0]], 1)[0]
    r = ctx.node("Mul", [ctx.node("Sign", [v], 1)[0], half_up], 1)[0]
    ctx.node("Cast", [r], [ctx.output(op)], to=onnx_dtype(ty.dtype))
    return True



def exact_squared_difference(ctx, op) -> bool:
    """--exact-int: int8 SQUARED_DIFFERENCE as LiteRT's kernel computes it: each centred input shifted left 7 bits
    and rescaled to twice the larger input scale (a fixed-point multiply each), the difference squared, then
    requantized to the output (a third one)."""
    sg, qdq = ctx.sg, ctx.q
    ts = [op.inputs[0], op.inputs[1], op.outputs[0]]
    if not (qdq.exact and all(t in qdq.q and sg.tensors[t].dtype == "int8"
                              and params(sg.tensors[t].quantization) is not None for t in ts)):
        return False
    (s1, z1), (s2, z2), (so, zo) = (per_tensor(sg.tensors[t].quantization) for t in ts)
    qdq._raw[op.index] = True                     # reads and writes the stored integers
    ty = sg.tensors[ts[2]]
    twice = 2 * np.float64(max(np.float32(s1), np.float32(s2)))
    scaled = []
    for slot, (s, z) in enumerate(((s1, z1), (s2, z2))):
        x = ctx.broadcast_input(op, slot, ty.rank, ctx.perm(ts[2]))
        centred = ctx.node("Sub", [ctx.node("Cast", [x], 1, to=ONNX_DOUBLE)[0], double_const(ctx, float(z))], 1)[0]
        shifted = ctx.node("Mul", [centred, double_const(ctx, 128.0)], 1)[0]
        q, e = quantize_multiplier(float(np.float64(np.float32(s)) / twice))
        scaled.append(fixed_point_multiply(ctx, shifted, np.array(q), np.array(e), bound=128.0 * 256))
    diff = ctx.node("Sub", scaled, 1)[0]
    square = ctx.node("Mul", [diff, diff], 1)[0]
    q, e = quantize_multiplier(float(twice * twice / (float(1 << 14) * np.float64(np.float32(so)))))
    y = fixed_point_multiply(ctx, square, np.array(q), np.array(e), zo, bound=float(1 << 32))
    clamp_cast(ctx, y, -128, 127, ctx.output(op), ty.dtype)
    return True


def int16_fully_connected(ctx, op) -> bool:
    """FULLY_CONNECTED with int16 activations and int8 weights as LiteRT's reference kernel computes it (both
    modes): the rows of the flattened input times the weights in float64 (exact: |sums| < 2^53), the bias, and one
    rounding with the full 31-bit multiplier, as its int8 kernel (measured: 0 of 1,872 outputs differ that way, 3
    the two-rounding way, ~150 the convolutions' 64-bit way). False where the input or output is read in another
    layout than TFLite's."""
    sg, qdq = ctx.sg, ctx.q
    x_t, w_t, y_t = op.inputs[0], op.inputs[1], op.outputs[0]
    b_t = op.inputs[2] if len(op.inputs) > 2 else -1
    tx, tw, ty = sg.tensors[x_t], sg.tensors[w_t], sg.tensors[y_t]
    if not (x_t in qdq.q and y_t in qdq.q and w_t in qdq.q and tx.dtype == ty.dtype == "int16" and tw.dtype == "int8"
            and ctx.is_const(w_t) and _per_tensor_zero(tx) and _per_tensor_zero(ty) and tw.rank == 2
            and not np.any(tw.quantization.zero_points) and (b_t < 0 or ctx.is_const(b_t)) and not ty.dynamic
            and L.is_identity(ctx.plan.inputs.get((op.index, 0), ctx.perm(x_t)))
            and L.is_identity(ctx.plan.produced.get((op.index, 0), ctx.perm(y_t)))):
        return False
    w = np.asarray(ctx.data(w_t)).astype(np.int64)               # [units, K]
    bias = np.asarray(ctx.data(b_t)).astype(np.int64).reshape(-1) if b_t >= 0 else None
    bound = accumulator_bound(w, 0, centred_range(tx), bias)[0]
    if bound >= 2.0 ** 36:                        # the split multiply's products stay below 2^53
        return False
    qdq._raw[op.index] = True                     # reads and writes the stored integers
    stored = ctx.const(np.ascontiguousarray(w.T).astype(np.int8), qdq.short(w_t))
    x = ctx.node("Cast", [ctx.input(op, 0)], 1, to=ONNX_DOUBLE)[0]
    x = ctx.node("Reshape", [x, ctx.i64([-1, w.shape[1]])], 1)[0]
    acc = ctx.node("MatMul", [x, ctx.node("Cast", [stored], 1, to=ONNX_DOUBLE)[0]], 1)[0]
    if bias is not None:
        acc = ctx.node("Add", [acc, double_const(ctx, bias.astype(np.float64).reshape(1, -1))], 1)[0]
    sx, sy = per_tensor(tx.quantization)[0], per_tensor(ty.quantization)[0]
    mults = np.float64(sx) * tw.quantization.scales.astype(np.float64) / np.float64(sy)
    act = op.options.get("fused_activation_function", "NONE") or "NONE"
    flat = ty.rank == 2
    dst = ctx.output(op) if flat else ctx.fresh(f"{qdq.short(y_t)}_rows")
    requantize(ctx, acc, mults, y_t, dst, act, 1, 2, bound, single=True)
    if not flat:
        ctx.node("Reshape", [dst, ctx.i64(list(ty.shape))], [ctx.output(op)])
    return True
