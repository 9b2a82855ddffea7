"""Spatial rearrangements and normalisations: SPACE_TO_DEPTH / DEPTH_TO_SPACE and LRN (Implicit: ONNX's are NCHW),
SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND (Attribute: any layout with the batch axis first), L2_NORMALIZATION
(Attribute: the last TFLite axis, wherever it sits), CONV_3D / CONV_3D_TRANSPOSE (Implicit: NDHWC -> NCDHW)."""
from __future__ import annotations

import numpy as np

from inspector.core.layout import layout as L
from inspector.core.ir.errors import ConversionError
from .conv import spatial_attrs, transpose_conv_pads
from .nn import keep_layout
from .registry import A, I, op
from .shape import const_data, const_ints, in_perm, static_dims


# TFLite's DEPTH_TO_SPACE reads channel (i*bs + j)*C + c for pixel offset (i, j): ONNX's DCR order.
@op("DEPTH_TO_SPACE", category=I, quantized="moves", copies_integers=("int8", "uint8"), int16_kernel=False,
    onnx="DepthToSpace", notes="mode DCR")
def depth_to_space(ctx, op):
    ctx.node("DepthToSpace", [ctx.input(op, 0)], [ctx.output(op)], blocksize=int(op.options["block_size"]),
             mode="DCR")


@op("SPACE_TO_DEPTH", category=I, quantized="moves", copies_integers=("int8", "uint8"), int16_kernel=False,
    onnx="SpaceToDepth")
def space_to_depth(ctx, op):
    ctx.node("SpaceToDepth", [ctx.input(op, 0)], [ctx.output(op)], blocksize=int(op.options["block_size"]))


@op("LOCAL_RESPONSE_NORMALIZATION", category=I, onnx="LRN",
    notes="window [c-r, c+r] as TF and LiteRT's default kernel (its reference kernel stops at c+r-1)")
def lrn(ctx, op):
    # TFLite: x / (bias + alpha * sum over [c-r, c+r] of x^2)^beta; ONNX LRN divides alpha by its window size.
    o = op.options
    size = 2 * int(o.get("radius", 5)) + 1
    ctx.node("LRN", [ctx.input(op, 0)], [ctx.output(op)], size=size, alpha=float(o.get("alpha", 1.0)) * size,
             beta=float(o.get("beta", 0.5)), bias=float(o.get("bias", 1.0)))


@op("L2_NORMALIZATION", category=A, onnx=("ReduceL2", "Max", "Div"), rule=keep_layout,
    notes="over the last TFLite axis, remapped")
def l2_normalization(ctx, op):
    p = in_perm(ctx, op)
    x = ctx.input(op, 0)
    dt = ctx.tensor(op.inputs[0]).dtype
    axis = L.axis_to_onnx(-1, p)
    norm = ctx.node("ReduceL2", [x, ctx.i64([axis], "axes")], 1, keepdims=1)[0]
    norm = ctx.node("Max", [norm, ctx.scalar(1e-6, dt)], 1)[0]     # TFLite's epsilon on the norm
    ctx.node("Div", [x, norm], [ctx.fused(op, ctx.output(op))])


# --- space <-> batch (blocked axes are TFLite axes 1..M) ----------------------------------------------------
def batch_first_rule(op, sg, in_perms, out_pin):
    p = in_perms[0]
    if p is None or p[0] != 0 or any(const_data(sg, op.inputs[s]) is None for s in (1, 2)):
        return None
    return {0: p}, [p]


def _blocks(ctx, op):
    """(input layout, block shape, paddings or crops [M, 2], TFLite input shape)."""
    block = const_ints(ctx, op, 1)
    pads = np.asarray(const_ints(ctx, op, 2)).reshape(-1, 2).astype(int)
    return in_perm(ctx, op), block, pads, static_dims(ctx, op, op.inputs[0], batch=True)


@op("SPACE_TO_BATCH_ND", category=A, quantized="moves", onnx=("Pad", "Reshape", "Transpose"), rule=batch_first_rule)
def space_to_batch(ctx, op):
    p, block, pads, shape = _blocks(ctx, op)
    r, m = len(shape), len(block)
    x = ctx.input(op, 0)
    tfl_pads = [(0, 0)] + [tuple(pads[i]) for i in range(m)] + [(0, 0)] * (r - 1 - m)
    if any(any(pp) for pp in tfl_pads):
        onnx_pads = [tfl_pads[a][0] for a in p] + [tfl_pads[a][1] for a in p]
        x = ctx.node("Pad", [x, ctx.i64(onnx_pads, "pads")], 1, mode="constant")[0]
    padded = [shape[a] + sum(tfl_pads[a]) for a in range(r)]
    # Split each blocked axis into (outer, block); batch becomes block offsets (TFLite axis order) then N.
    split, pos, factor_at = [], {}, {}
    for a in p:
        pos[a] = len(split)
        if 1 <= a <= m:
            split += [padded[a] // block[a - 1], block[a - 1]]
            factor_at[a] = len(split) - 1
        else:
            split.append(padded[a])
    order = [factor_at[a] for a in range(1, m + 1)] + [pos[a] for a in p]
    x = ctx.node("Reshape", [x, ctx.i64(split)], 1)[0]
    x = ctx.node("Transpose", [x], 1, perm=order)[0]
    out = L.apply(static_dims(ctx, op, op.outputs[0], batch=True), p)
    ctx.node("Reshape", [x, ctx.i64(out)], [ctx.output(op)])


@op("BATCH_TO_SPACE_ND", category=A, quantized="moves", onnx=("Reshape", "Transpose", "Slice"), rule=batch_first_rule)
def batch_to_space(ctx, op):
    p, block, crops, shape = _blocks(ctx, op)
    m = len(block)
    n = shape[0] // int(np.prod(block)) if shape[0] > 0 else -1
    x = ctx.node("Reshape", [ctx.input(op, 0), ctx.i64(block + [n] + [shape[a] for a in p[1:]])], 1)[0]
    # Axes now: block factors 0..m-1, N at m, then the input's axes 1.. in layout order.
    order, merged = [m], [n]
    for k, a in enumerate(p[1:]):
        order.append(m + 1 + k)
        if 1 <= a <= m:
            order.append(a - 1)
            merged.append(shape[a] * block[a - 1])
        else:
            merged.append(shape[a])
    x = ctx.node("Transpose", [x], 1, perm=order)[0]
    out = ctx.output(op)
    if not crops.any():
        ctx.node("Reshape", [x, ctx.i64(merged)], [out])
        return
    x = ctx.node("Reshape", [x, ctx.i64(merged)], 1)[0]
    axes = [L.axis_to_onnx(a, p) for a in range(1, m + 1)]
    starts = [int(crops[a - 1][0]) for a in range(1, m + 1)]
    ends = [merged[L.axis_to_onnx(a, p)] - int(crops[a - 1][1]) for a in range(1, m + 1)]
    ctx.node("Slice", [x, ctx.i64(starts, "starts"), ctx.i64(ends, "ends"), ctx.i64(axes, "axes")], [out])


# --- 3-D convolutions ---------------------------------------------------------------------------------------
DHWIO_TO_OIDHW = (4, 3, 0, 1, 2)      # CONV_3D filter [D, H, W, I, O]; CONV_3D_TRANSPOSE's [D, H, W, O, I] -> [I, O, ...]


def _strides3(o):
    return o.get("stride_d", 1), o.get("stride_h", 1), o.get("stride_w", 1)


@op("CONV_3D", category=I, onnx="Conv")
def conv3d(ctx, op):
    o = op.options
    w = op.inputs[1]
    kd, kh, kw, w_in, _ = ctx.shape(w)
    in_c = ctx.shape(op.inputs[0])[4]
    if in_c % w_in:
        raise ConversionError(f"CONV_3D#{op.index}: input channels {in_c} not a multiple of filter's {w_in}")
    dil = (o.get("dilation_d_factor", 1), o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1))
    attrs = spatial_attrs(ctx, op, op.inputs[0], (kd, kh, kw), _strides3(o), dil)
    bias = [ctx.input(op, 2)] if len(op.inputs) > 2 and op.inputs[2] >= 0 else []
    ctx.node("Conv", [ctx.input(op, 0), ctx.input(op, 1, DHWIO_TO_OIDHW)] + bias, [ctx.fused(op, ctx.output(op))],
             group=in_c // w_in if in_c != w_in else None, kernel_shape=[kd, kh, kw], **attrs)


@op("CONV_3D_TRANSPOSE", category=I, onnx="ConvTranspose", layout_inputs=(2,))
def conv3d_transpose(ctx, op):
    o = op.options
    if any(o.get(f"dilation_{a}_factor", 1) != 1 for a in "dhw"):
        raise ConversionError(f"CONV_3D_TRANSPOSE#{op.index}: dilation is not supported")
    x, w = op.inputs[2], op.inputs[1]
    kd, kh, kw = ctx.shape(w)[:3]
    out_shape = ctx.shape(op.outputs[0])
    strides = _strides3(o)
    if o.get("padding", "SAME") == "VALID":
        pads, extra = [0] * 6, [out - ((n - 1) * s + k) for n, out, k, s in
                                 zip(ctx.shape(x)[1:4], out_shape[1:4], (kd, kh, kw), strides)]
    else:
        pads, extra = transpose_conv_pads(ctx.shape(x)[1:4], out_shape[1:4], (kd, kh, kw), strides)
    bias = [ctx.input(op, 3)] if len(op.inputs) > 3 and op.inputs[3] >= 0 else []
    ctx.node("ConvTranspose", [ctx.input(op, 2), ctx.input(op, 1, DHWIO_TO_OIDHW)] + bias,
             [ctx.fused(op, ctx.output(op))], kernel_shape=[kd, kh, kw], strides=list(strides), pads=pads,
             output_padding=extra if any(extra) else None)
