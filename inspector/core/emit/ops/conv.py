"""Convolutions: CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV (Implicit: NHWC activations become NCHW)."""
from __future__ import annotations

from typing import Any

import numpy as np

from inspector.core.ir.errors import ConversionError
from . import hybrid
from .registry import I, op

OHWI_TO_OIHW = (0, 3, 1, 2)


def same_pads(in_sizes, kernel, strides, dilations) -> list[int]:
    """TFLite SAME padding as explicit ONNX pads (begins then ends): the odd pixel goes at the end."""
    begins, ends = [], []
    for n, k, s, d in zip(in_sizes, kernel, strides, dilations):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        begins.append(total // 2)
        ends.append(total - total // 2)
    return begins + ends


def spatial_attrs(ctx, op, x_tensor: int, kernel, strides, dilations) -> dict[str, Any]:
    """pads (or auto_pad when spatial dims are dynamic), strides, dilations for a 2-D window op."""
    attrs: dict[str, Any] = {"strides": list(strides)}
    if dilations is not None:
        attrs["dilations"] = list(dilations)
    if op.options.get("padding", "SAME") == "VALID":
        attrs["pads"] = [0] * (2 * len(kernel))
        return attrs
    t = ctx.tensor(x_tensor)
    sig = t.shape_signature or t.shape
    spatial = t.shape[1:-1]
    if any(d < 0 for d in sig[1:-1]):
        attrs["auto_pad"] = "SAME_UPPER"            # same rule as TFLite's SAME, decided at run time
    else:
        attrs["pads"] = same_pads(spatial, kernel, strides, dilations or [1] * len(kernel))
    return attrs


def _bias(ctx, op, slot: int) -> list[str]:
    b = bias_1d(ctx, op, slot)
    return [b] if b else []


def bias_1d(ctx, op, slot: int) -> str:
    """A bias as ONNX takes it, 1-D, whatever rank the file gave it (onnx2tf writes [1, 1, 1, C]: ONNX Runtime
    refuses that in ConvTranspose, and an Add would broadcast it to the wrong rank); '' when absent."""
    if slot >= len(op.inputs) or op.inputs[slot] < 0:
        return ""
    t = op.inputs[slot]
    shape = ctx.shape(t)
    if len(shape) == 1:
        return ctx.input(op, slot)
    if ctx.is_const(t):
        return ctx.const_of(t, shape=(int(np.prod(shape)),))
    return ctx.node("Reshape", [ctx.input(op, slot), ctx.i64([-1])], 1)[0]


def window(ctx, op) -> tuple[list[int], int | None, dict, tuple]:
    """CONV_2D / DEPTHWISE_CONV_2D as an ONNX Conv: kernel shape, group (None: 1), pads / strides / dilations, and
    the transposition of TFLite's filter into ONNX's [O, I/group, KH, KW]."""
    o = op.options
    w = op.inputs[1]
    in_c = ctx.shape(op.inputs[0])[3]
    if op.opcode == "DEPTHWISE_CONV_2D":
        _, kh, kw, out_c = ctx.shape(w)
        if out_c % in_c:
            raise ConversionError(f"DEPTHWISE_CONV_2D#{op.index}: {out_c} output channels for {in_c} inputs")
        # [1, KH, KW, C*M] -> [C*M, 1, KH, KW]; TFLite's output channel c*M+m reads input c, as a grouped Conv does.
        group, perm = in_c, (3, 0, 1, 2)
    else:
        kh, kw = ctx.shape(w)[1:3]
        w_in = ctx.shape(w)[3]
        if in_c % w_in:
            raise ConversionError(f"CONV_2D#{op.index}: input channels {in_c} not a multiple of filter's {w_in}")
        group, perm = (in_c // w_in if in_c != w_in else None), OHWI_TO_OIHW
    attrs = spatial_attrs(ctx, op, op.inputs[0], (kh, kw), (o.get("stride_h", 1), o.get("stride_w", 1)),
                          (o.get("dilation_h_factor", o.get("dilation_hfactor", 1)),
                           o.get("dilation_w_factor", o.get("dilation_wfactor", 1))))
    return [kh, kw], group, attrs, perm


@op("CONV_2D", "DEPTHWISE_CONV_2D", category=I, hybrid=True, exact_int=True, onnx="Conv")
def conv2d(ctx, op):
    kernel, group, attrs, perm = window(ctx, op)
    if hybrid.applies(ctx, op):
        return hybrid.conv(ctx, op, perm, group=group, kernel_shape=kernel, **attrs)
    if (group is None or op.opcode == "DEPTHWISE_CONV_2D") and hybrid.sequential_conv(ctx, op, attrs):
        return
    weight = ctx.input(op, 1, perm)
    ctx.node("Conv", [ctx.input(op, 0), weight] + _bias(ctx, op, 2), [ctx.fused(op, ctx.output(op))],
             group=group, kernel_shape=kernel, **attrs)


def transpose_conv_pads(in_sizes, out_sizes, kernel, strides) -> tuple[list[int], list[int]]:
    """TFLite places the odd padding pixel at the end; ONNX's explicit pads say so directly."""
    begins, ends, extra = [], [], []
    for n, out, k, s in zip(in_sizes, out_sizes, kernel, strides):
        total = (n - 1) * s + k - out
        if total >= 0:
            begins.append(total // 2)
            ends.append(total - total // 2)
            extra.append(0)
        else:
            begins.append(0)
            ends.append(0)
            extra.append(-total)
    return begins + ends, extra


@op("TRANSPOSE_CONV", category=I, exact_int=True, onnx="ConvTranspose", layout_inputs=(2,))
def transpose_conv(ctx, op):
    o = op.options
    x, w = op.inputs[2], op.inputs[1]
    out_c, kh, kw, in_c = ctx.shape(w)
    out_shape = ctx.shape(op.outputs[0])
    strides = (o.get("stride_h", 1), o.get("stride_w", 1))
    pads, extra = transpose_conv_pads(ctx.shape(x)[1:3], out_shape[1:3], (kh, kw), strides)
    # Filter [O, KH, KW, I] -> ONNX [I, O, KH, KW].
    weight = ctx.input(op, 1, (3, 0, 1, 2))
    bias = _bias(ctx, op, 3)
    ctx.node("ConvTranspose", [ctx.input(op, 2), weight] + bias, [ctx.fused(op, ctx.output(op))],
             kernel_shape=[kh, kw], strides=list(strides), pads=pads,
             output_padding=extra if any(extra) else None)
