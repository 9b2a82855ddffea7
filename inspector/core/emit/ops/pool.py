"""Pools and resizes (Implicit): windowed ops over H and W."""
from __future__ import annotations

import numpy as np

from inspector.core.ir.dtypes import onnx_dtype
from inspector.core.ir.errors import ConversionError
from .conv import spatial_attrs
from .fixed_point import ONNX_FLOAT, activation_range, params, per_tensor
from .registry import I, QUANT_INTS, op

INT_TYPES = ("int8", "uint8", "int16")   # raw stored integers (int16 only where LiteRT copies them between scales)


def _pool(onnx_type: str):
    def emit(ctx, op):
        o = op.options
        kernel = (o["filter_height"], o["filter_width"])
        attrs = spatial_attrs(ctx, op, op.inputs[0], kernel, (o.get("stride_h", 1), o.get("stride_w", 1)), None)
        x = ctx.input(op, 0)
        if ctx.tensor(op.inputs[0]).dtype not in INT_TYPES:
            ctx.node(onnx_type, [x], [ctx.fused(op, ctx.output(op))], kernel_shape=list(kernel), **attrs)
            return
        # A pool on stored integers runs on them as floats: ONNX Runtime's int8 and uint8 MaxPool is a generic
        # loop ~10x slower than its float one (it has no int16 one), and every stored integer is exact in float32.
        # (A DequantizeLinear before a float pool would let ONNX Runtime drop the Q/DQ around it and run its int8
        # pool again.)
        f = ctx.node("Cast", [x], 1, to=ONNX_FLOAT)[0]
        f = ctx.node(onnx_type, [f], 1, kernel_shape=list(kernel), **attrs)[0]
        act = o.get("fused_activation_function", "NONE") or "NONE"
        if act != "NONE":           # LiteRT's clamp on the integers, at the output's zero point and scale
            t = ctx.tensor(op.outputs[0])
            lo, hi = activation_range(act, *per_tensor(t.quantization), t.dtype)
            f = ctx.node("Clip", [f, ctx.scalar(float(lo), "float32"), ctx.scalar(float(hi), "float32")], 1)[0]
        ctx.q.integers_back(op.outputs[0], f, ctx.output(op))
    return emit


@op("AVERAGE_POOL_2D", category=I, sign="keeps", onnx="AveragePool")
def average_pool(ctx, op):
    # TFLite's average pool divides by the in-bounds count: ONNX's default count_include_pad=0 does the same.
    o = op.options
    kernel = (o["filter_height"], o["filter_width"])
    attrs = spatial_attrs(ctx, op, op.inputs[0], kernel, (o.get("stride_h", 1), o.get("stride_w", 1)), None)
    dst = ctx.fused(op, ctx.output(op))
    quantized = all(ctx.q.active(t) and ctx.sg.tensors[t].dtype in ("int8", "uint8")
                    and params(ctx.sg.tensors[t].quantization) is not None for t in (op.inputs[0], op.outputs[0]))
    m = ctx.node("AveragePool", [ctx.input(op, 0)], 1 if quantized else [dst], kernel_shape=list(kernel), **attrs)[0]
    if quantized:
        ties_away(ctx, op, m, kernel[0] * kernel[1], dst)


op("MAX_POOL_2D", category=I, quantized="moves", copies_integers=QUANT_INTS, int16_kernel=False, sign="keeps",
   onnx="MaxPool",
   notes="int8/uint8: pools the integers as floats (Cast), back by Cast or QuantizeLinear")(_pool("MaxPool"))


@op("L2_POOL_2D", category=I, onnx="LpPool")
def l2_pool(ctx, op):
    # TFLite: sqrt(mean(x^2)) over the window; LpPool gives sqrt(sum), so scale by 1/sqrt(count) via AveragePool.
    o = op.options
    kernel = (o["filter_height"], o["filter_width"])
    attrs = spatial_attrs(ctx, op, op.inputs[0], kernel, (o.get("stride_h", 1), o.get("stride_w", 1)), None)
    x = ctx.input(op, 0)
    sq = ctx.node("Mul", [x, x], 1)[0]
    avg = ctx.node("AveragePool", [sq], 1, kernel_shape=list(kernel), **attrs)[0]
    ctx.node("Sqrt", [avg], [ctx.fused(op, ctx.output(op))])


def _resize(mode: str):
    def emit(ctx, op):
        o = op.options
        size = op.inputs[1]
        if not ctx.is_const(size):
            raise ConversionError(f"{op.opcode}#{op.index}: the output size must be a constant")
        align, half = o.get("align_corners", False), o.get("half_pixel_centers", False)
        if align:
            coord = "align_corners"
        elif half:
            coord = "half_pixel" if mode == "linear" else "tf_half_pixel_for_nn"
        else:
            coord = "asymmetric"
        nearest = None
        if mode == "nearest":
            nearest = "round_prefer_ceil" if align else "floor"
            if half:   # TF: floor((i + 0.5) * scale); ONNX half_pixel then round-half-up is the same index
                coord, nearest = "half_pixel", "round_prefer_ceil"
        # Full NCHW sizes when static: ONNX Runtime keeps such a Resize in its blocked NCHWc layout, while one
        # with `axes` costs a reorder on each side.
        n, h, w, c = ctx.tensor(op.outputs[0]).dims
        axes = None if min(n, c) > 0 else [2, 3]
        hw = [int(v) for v in ctx.data(size)]
        sizes = ctx.i64(hw if axes else [n, c, *hw], "sizes")
        x, y = ctx.input(op, 0), ctx.output(op)
        cast = ctx.tensor(op.inputs[0]).dtype == "int16"   # raw where LiteRT copies; ORT has no int16 Resize
        if cast:
            x = ctx.node("Cast", [x], 1, to=ONNX_FLOAT)[0]
        r = ctx.node("Resize", [x, "", "", sizes], 1 if cast else [y], mode=mode,
                     coordinate_transformation_mode=coord, nearest_mode=nearest, axes=axes)[0]
        if cast:
            ctx.node("Cast", [r], [y], to=onnx_dtype("int16"))
    return emit


op("RESIZE_BILINEAR", category=I, sign="keeps", onnx="Resize")(_resize("linear"))
op("RESIZE_NEAREST_NEIGHBOR", category=I, quantized="moves", copies_integers=QUANT_INTS, int16_kernel=False,
   sign="keeps", onnx="Resize")(_resize("nearest"))


def ties_away(ctx, op, m: str, count: int, dst: str) -> None:
    """Default QDQ mode: the real-valued window mean `m` of a quantized AVERAGE_POOL_2D moved by a quarter of the
    smallest step between two means (1 / (4 count) of a step), away from zero in the stored integers, into `dst`.
    QuantizeLinear then rounds a tie as TFLite's (sum +- count / 2) / count does, where it would round half to
    even and the float pool's last bit would put it either side; no other mean is moved across a boundary."""
    t = op.outputs[0]
    s, zp = per_tensor(ctx.sg.tensors[t].quantization)
    nudge = ctx.const(np.array(s / (4 * count), np.float32), "k")
    if ctx.sg.tensors[t].dtype == "uint8":     # stored means are never negative
        ctx.node("Add", [m, nudge], [dst])
        return
    stored = ctx.node("Add", [m, ctx.const(np.array(s * zp, np.float32), "k")], 1)[0]
    away = ctx.node("Mul", [ctx.node("Sign", [stored], 1)[0], nudge], 1)[0]
    ctx.node("Add", [m, away], [dst])
