"""The QUANTIZE / DEQUANTIZE ops: real values into a quantized tensor's integers and back, through the emitter's
QDQ service (qdq.py)."""
from __future__ import annotations

from inspector.core.layout import layout as L
from inspector.core.ir.errors import ConversionError
from .fixed_point import ONNX_FLOAT
from .registry import T, op


def _io_perm(ctx, op):
    """The layout input 0 is read in (what Emitter.input presents)."""
    t = op.inputs[0]
    default = L.identity(ctx.tensor(t).rank) if ctx.is_const(t) else ctx.perm(t)
    return ctx.plan.inputs.get((op.index, 0), default)


@op("QUANTIZE", category=T, quantized="raw", onnx=("QuantizeLinear", "DequantizeLinear"))
def quantize_op(ctx, op):
    """Float -> integers, or integers -> integers of another scale/type (requantize through real values)."""
    x_t, y_t = op.inputs[0], op.outputs[0]
    perm = _io_perm(ctx, op)
    x = ctx.input(op, 0)
    if ctx.q.quantized_tensor(x_t) and not ctx.is_const(x_t):
        x = ctx.q.input(x_t, x, perm)
    if not ctx.q.quantized_tensor(y_t):
        raise ConversionError(f"QUANTIZE#{op.index}: output {ctx.tensor(y_t).name} has no quantization")
    q = ctx.tensor(y_t).quantization
    ctx.q.quantize(y_t, x, ctx.output(op), L.axis_to_onnx(q.axis, perm) if q.per_channel else None)


@op("DEQUANTIZE", category=T, quantized="raw", onnx=("DequantizeLinear", "Cast"))
def dequantize_op(ctx, op):
    """Integers -> float (float16 constants are folded before emission; a float16 activation is Cast)."""
    x_t = op.inputs[0]
    perm = _io_perm(ctx, op)
    if ctx.tensor(x_t).dtype == "float16":
        ctx.node("Cast", [ctx.input(op, 0)], [ctx.output(op)], to=ONNX_FLOAT)
        return
    if not ctx.q.quantized_tensor(x_t):
        raise ConversionError(f"DEQUANTIZE#{op.index}: input {ctx.tensor(x_t).name} has no quantization")
    q = ctx.tensor(x_t).quantization
    x = ctx.input(op, 0)
    ctx.q.dequantize(x_t, x, L.axis_to_onnx(q.axis, perm) if q.per_channel else None, out=ctx.output(op))
