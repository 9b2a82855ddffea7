"""Dense layers and softmax: FULLY_CONNECTED, BATCH_MATMUL (Terminate), SOFTMAX, LOG_SOFTMAX (Attribute)."""
from __future__ import annotations

import numpy as np

from inspector.core.layout import layout as L
from . import hybrid
from .conv import bias_1d
from .fixed_point import params
from .registry import A, X, op


def keep_layout(op, sg, in_perms, out_pin):
    """Attribute rule for ops whose output keeps the first input's layout (axis attributes remapped)."""
    p = in_perms[0]
    if p is None:
        return None
    return {0: p}, [p] * len(op.outputs)


def _softmax(onnx_type: str):
    def emit(ctx, op):
        x = ctx.input(op, 0)
        p = ctx.plan.inputs.get((op.index, 0), L.identity(ctx.tensor(op.inputs[0]).rank))
        beta = float(op.options.get("beta", 1.0))
        if beta != 1.0:
            x = ctx.node("Mul", [x, ctx.scalar(beta, ctx.tensor(op.inputs[0]).dtype)], 1)[0]
        rank = ctx.tensor(op.inputs[0]).rank
        axis = L.axis_to_onnx(-1, p) if p else -1
        if onnx_type == "Softmax" and axis % max(rank, 1) != rank - 1:
            spelled_softmax(ctx, op, x, axis, beta)
            return
        ctx.node(onnx_type, [x], [ctx.output(op)], axis=axis)
    return emit


def spelled_softmax(ctx, op, x: str, axis: int, beta: float) -> None:
    """Softmax over an axis that is not the last, as exp(x - top) / sum: ONNX Runtime's Softmax (and the
    QLinearSoftmax it fuses from Q/DQ) transposes its input and output for such an axis, 3-4x slower on a
    channels-first map. `top` is the row maximum; for a quantized input whose whole range is within 80 of the
    top of its range (exp stays a normal float32), that constant instead, which leaves the DequantizeLinear one
    consumer: ONNX Runtime then still fuses the convolution before it into an integer kernel."""
    t, top = op.inputs[0], None
    got = params(ctx.sg.tensors[t].quantization) if ctx.q.active(t) else None
    if got is not None:
        s, zp = got
        info = np.iinfo(ctx.sg.tensors[t].dtype)
        ends = [beta * (info.min - zp) * s, beta * (info.max - zp) * s]
        if max(ends) - min(ends) <= 80:
            top = ctx.scalar(max(ends))
    if top is None:
        top = ctx.node("ReduceMax", [x, ctx.i64([axis], "axes")], 1, keepdims=1)[0]
    e = ctx.node("Exp", [ctx.node("Sub", [x, top], 1)[0]], 1)[0]
    ctx.node("Div", [e, ctx.node("ReduceSum", [e, ctx.i64([axis], "axes")], 1, keepdims=1)[0]], [ctx.output(op)])


# TFLite softmax is over the last (channel) axis; on an NCHW tensor that is axis 1 (the trap of 4-D softmax).
op("SOFTMAX", category=A, onnx="Softmax", rule=keep_layout,
   notes="over an axis that is not the last in ONNX (channels-first): Exp, ReduceSum, Div")(_softmax("Softmax"))
op("LOG_SOFTMAX", category=A, onnx="LogSoftmax", rule=keep_layout)(_softmax("LogSoftmax"))


def fc_rule(op, sg, in_perms, out_pin):
    """A float Dense over the last axis of a tensor that is channels-first is a 1x1 convolution: it reads and
    writes channels-first (ConvNeXt's Linear layers between its depthwise convolutions)."""
    x, w = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
    out = sg.tensors[op.outputs[0]]
    r = x.rank
    if (r < 3 or in_perms[0] != L.channels_first(r) or out.rank != r or not op.options.get("keep_num_dims")
            or w.data is None or x.dtype != "float32" or w.dtype != "float32" or out.dtype != "float32"
            or x.quantization is not None or out.quantization is not None):
        return None
    return {0: in_perms[0]}, [L.channels_first(r)]


def _fc_as_conv(ctx, op) -> None:
    """FULLY_CONNECTED read channels-first: Conv with the [units, K] weights as a [units, K, 1, ...] kernel."""
    r = ctx.tensor(op.inputs[0]).rank
    w = ctx.data(op.inputs[1]) if ctx.is_const(op.inputs[1]) else ctx.tensor(op.inputs[1]).data
    kernel = ctx.const(w.reshape(w.shape + (1,) * (r - 2)), "fc_kernel")
    bias = ctx.input(op, 2) if len(op.inputs) > 2 else ""
    ctx.node("Conv", [ctx.input(op, 0), kernel] + ([bias] if bias else []), [ctx.fused(op, ctx.output(op))])


@op("FULLY_CONNECTED", category=X, exact_int=True, hybrid=True, onnx=("Gemm", "MatMul", "Reshape", "Conv"),
    rule=fc_rule)
def fully_connected(ctx, op):
    if hybrid.applies(ctx, op):
        return hybrid.fully_connected(ctx, op)
    if ctx.plan.inputs.get((op.index, 0)) == L.channels_first(ctx.tensor(op.inputs[0]).rank) and \
            ctx.tensor(op.inputs[0]).rank >= 3:
        return _fc_as_conv(ctx, op)
    x_t, w_t = op.inputs[0], op.inputs[1]
    out_t = op.outputs[0]
    w_shape = ctx.shape(w_t)                          # [units, K]
    k = w_shape[1]
    x = ctx.input(op, 0)
    x_rank = ctx.tensor(x_t).rank
    bias = bias_1d(ctx, op, 2)                        # index -1 = no bias (Keras Dense(use_bias=False))
    out_rank = ctx.tensor(out_t).rank
    dst = ctx.fused(op, ctx.output(op))
    if x_rank != 2 and not (op.options.get("keep_num_dims") and out_rank == x_rank):
        x = ctx.node("Reshape", [x, ctx.i64([-1, k])], 1)[0]
        x_rank = 2
    if x_rank == 2:
        w = ctx.input(op, 1)
        final = dst if out_rank == 2 else ctx.fresh("fc_out")
        ctx.node("Gemm", [x, w] + ([bias] if bias else []), [final], transB=1)
    else:
        w = ctx.const_of(w_t, (1, 0)) if ctx.is_const(w_t) else ctx.node("Transpose", [ctx.input(op, 1)], 1,
                                                                           perm=[1, 0])[0]
        mm = ctx.node("MatMul", [x, w], 1 if bias else [dst])[0]
        if bias:
            ctx.node("Add", [mm, bias], [dst])
        final = dst
    if final != dst:
        sig = ctx.tensor(out_t).shape_signature or ctx.shape(out_t)
        shape = [-1 if d < 0 else d for d in sig]
        ctx.node("Reshape", [final, ctx.i64(shape)], [dst])


@op("BATCH_MATMUL", category=X, exact_int=True, onnx="MatMul")
def batch_matmul(ctx, op):
    names = []
    for slot, adj in ((0, "adj_x"), (1, "adj_y")):
        t = op.inputs[slot]
        r = ctx.tensor(t).rank
        if op.options.get(adj):
            swap = tuple(range(r - 2)) + (r - 1, r - 2)
            names.append(ctx.const_of(t, swap) if ctx.is_const(t) else
                         ctx.node("Transpose", [ctx.input(op, slot)], 1, perm=list(swap))[0])
        else:
            names.append(ctx.input(op, slot))
    ctx.node("MatMul", names, [ctx.output(op)])

