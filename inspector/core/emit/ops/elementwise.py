"""Elementwise math, comparisons, logic and activations (Transparent: any layout flows through).

Lower-rank operands broadcast by numpy rules, so they are aligned to the output's rank and layout first
(the Reshape pattern): a [C] bias against an NCHW tensor becomes [1, C, 1, 1].
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from inspector.core.layout import layout as L
from .registry import T, op


def out_perm(ctx, op, slot: int = 0):
    t = op.outputs[slot]
    return ctx.plan.produced.get((op.index, slot), L.identity(ctx.tensor(t).rank))


def operands(ctx, op):
    r = ctx.tensor(op.outputs[0]).rank
    p = out_perm(ctx, op)
    return [ctx.broadcast_input(op, s, r, p) if t >= 0 else "" for s, t in enumerate(op.inputs)]


def _nary(onnx_type: str, **attrs):
    def emit(ctx, op):
        ctx.node(onnx_type, operands(ctx, op), [ctx.fused(op, ctx.output(op))], **attrs)
    return emit


def _chain(*steps):
    """Unary ops expressed as a chain of ONNX nodes: steps are (op_type, attrs) applied in order."""
    def emit(ctx, op):
        x = operands(ctx, op)[0]
        for i, (op_type, attrs) in enumerate(steps):
            dst = [ctx.fused(op, ctx.output(op))] if i == len(steps) - 1 else 1
            x = ctx.node(op_type, [x], dst, **attrs)[0]
    return emit


BINARY = {
    "ADD": "Add", "SUB": "Sub", "MUL": "Mul", "DIV": "Div", "MAXIMUM": "Max", "MINIMUM": "Min", "POW": "Pow",
    "LESS": "Less", "LESS_EQUAL": "LessOrEqual", "GREATER": "Greater", "GREATER_EQUAL": "GreaterOrEqual",
    "EQUAL": "Equal", "LOGICAL_AND": "And", "LOGICAL_OR": "Or",
}
for _name, _onnx in BINARY.items():
    op(_name, category=T, onnx=_onnx, exact_int=_name == "MUL")(_nary(_onnx))

UNARY = {
    "ABS": "Abs", "NEG": "Neg", "EXP": "Exp", "LOG": "Log", "SQRT": "Sqrt", "SIN": "Sin", "COS": "Cos",
    "FLOOR": "Floor", "CEIL": "Ceil", "RELU": "Relu", "LOGISTIC": "Sigmoid", "TANH": "Tanh",
    "HARD_SWISH": "HardSwish", "LOGICAL_NOT": "Not", "SIGN": "Sign", "ROUND": "Round",  # ONNX Round is half-to-even
}
TABLED = {"EXP", "LOG", "SQRT", "LOGISTIC", "TANH", "HARD_SWISH"}      # LiteRT's int8 kernels: 256-entry tables
for _name, _onnx in UNARY.items():
    op(_name, category=T, onnx=_onnx, int8_table=_name in TABLED, sign="nonnegative" if _name == "RELU" else "")(
        _nary(_onnx))

op("RSQRT", category=T, int8_table=True, onnx=("Sqrt", "Reciprocal"))(_chain(("Sqrt", {}), ("Reciprocal", {})))
op("ELU", category=T, int8_table=True, onnx="Elu")(_nary("Elu", alpha=1.0))
op("SELECT", "SELECT_V2", category=T, onnx="Where")(_nary("Where"))
op("PRELU", category=T, onnx="PRelu")(_nary("PRelu"))


def _clip(lo: float, hi: float):
    def emit(ctx, op):
        dt = ctx.tensor(op.outputs[0]).dtype
        ctx.node("Clip", [operands(ctx, op)[0], ctx.scalar(lo, dt), ctx.scalar(hi, dt)], [ctx.output(op)])
    return emit


op("RELU6", category=T, sign="nonnegative", onnx="Clip")(_clip(0.0, 6.0))
op("RELU_N1_TO_1", category=T, onnx="Clip")(_clip(-1.0, 1.0))
op("RELU_0_TO_1", category=T, sign="nonnegative", onnx="Clip")(_clip(0.0, 1.0))


@op("LEAKY_RELU", category=T, int8_table=True, onnx="LeakyRelu")
def leaky_relu(ctx, op):
    ctx.node("LeakyRelu", [operands(ctx, op)[0]], [ctx.output(op)], alpha=float(op.options.get("alpha", 0.2)))


@op("SQUARE", category=T, onnx="Mul")
def square(ctx, op):
    x = operands(ctx, op)[0]
    ctx.node("Mul", [x, x], [ctx.output(op)])


@op("SQUARED_DIFFERENCE", category=T, onnx=("Sub", "Mul"))
def squared_difference(ctx, op):
    d = ctx.node("Sub", operands(ctx, op), 1)[0]
    ctx.node("Mul", [d, d], [ctx.output(op)])


@op("NOT_EQUAL", category=T, onnx=("Equal", "Not"))
def not_equal(ctx, op):
    ctx.node("Not", ctx.node("Equal", operands(ctx, op), 1), [ctx.output(op)])


@op("GELU", category=T, int8_table=True, onnx=("Mul", "Erf", "Tanh"))
def gelu(ctx, op):
    x = operands(ctx, op)[0]
    dt = ctx.tensor(op.outputs[0]).dtype
    half = ctx.node("Mul", [x, ctx.scalar(0.5, dt)], 1)[0]
    if op.options.get("approximate", False):     # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        x3 = ctx.node("Mul", [ctx.node("Mul", [x, x], 1)[0], x], 1)[0]
        inner = ctx.node("Add", [x, ctx.node("Mul", [x3, ctx.scalar(0.044715, dt)], 1)[0]], 1)[0]
        t = ctx.node("Tanh", [ctx.node("Mul", [inner, ctx.scalar(0.7978845608028654, dt)], 1)[0]], 1)[0]
    else:                                        # 0.5 x (1 + erf(x / sqrt 2))
        t = ctx.node("Erf", [ctx.node("Mul", [x, ctx.scalar(0.7071067811865476, dt)], 1)[0]], 1)[0]
    ctx.node("Mul", [half, ctx.node("Add", [t, ctx.scalar(1.0, dt)], 1)[0]], [ctx.output(op)])


def _is_int(ctx, t: int) -> bool:
    return ctx.tensor(t).dtype.startswith(("int", "uint"))


def _floor_mod(ctx, a: str, b: str, dt: str, is_int: bool, dst) -> list[str]:
    """TFLite floor_mod: the remainder takes the divisor's sign, for integers and floats alike."""
    if is_int:                              # ONNX Mod(fmod=0) on integers is already Python's (floor) modulo
        return ctx.node("Mod", [a, b], dst, fmod=0)
    m = ctx.node("Mod", [a, b], 1, fmod=1)[0]          # C fmod: the dividend's sign
    zero = ctx.scalar(0, dt)
    wrong = ctx.node("And", [ctx.node("Not", ctx.node("Equal", [m, zero], 1), 1)[0],
                             ctx.node("Xor", [ctx.node("Less", [m, zero], 1)[0],
                                              ctx.node("Less", [b, zero], 1)[0]], 1)[0]], 1)[0]
    return ctx.node("Add", [m, ctx.node("Where", [wrong, b, zero], 1)[0]], dst)


@op("FLOOR_MOD", category=T, onnx="Mod", notes="floor semantics: the result has the divisor's sign")
def floor_mod(ctx, op):
    a, b = operands(ctx, op)
    _floor_mod(ctx, a, b, ctx.tensor(op.outputs[0]).dtype, _is_int(ctx, op.outputs[0]), [ctx.output(op)])


@op("FLOOR_DIV", category=T, onnx=("Div", "Floor", "Mod"), notes="rounds toward -inf for integers too")
def floor_div(ctx, op):
    a, b = operands(ctx, op)
    dt = ctx.tensor(op.outputs[0]).dtype
    if _is_int(ctx, op.outputs[0]):         # (a - floor_mod(a, b)) / b divides exactly, so truncation is floor
        m = _floor_mod(ctx, a, b, dt, True, 1)[0]
        ctx.node("Div", [ctx.node("Sub", [a, m], 1)[0], b], [ctx.output(op)])
    else:
        ctx.node("Floor", ctx.node("Div", [a, b], 1), [ctx.output(op)])


@op("ATAN2", category=T, onnx=("Atan", "Div", "Where"))
def atan2(ctx, op):
    y, x = operands(ctx, op)
    dt = ctx.tensor(op.outputs[0]).dtype
    zero, pi = ctx.scalar(0, dt), ctx.scalar(np.pi, dt)
    r = ctx.node("Atan", ctx.node("Div", [y, x], 1), 1)[0]        # x == 0 gives +-inf -> +-pi/2
    quad = ctx.node("Where", [ctx.node("GreaterOrEqual", [y, zero], 1)[0], pi,
                              ctx.node("Neg", [pi], 1)[0]], 1)[0]
    r = ctx.node("Add", [r, ctx.node("Where", [ctx.node("Less", [x, zero], 1)[0], quad, zero], 1)[0]], 1)[0]
    origin = ctx.node("And", [ctx.node("Equal", [x, zero], 1)[0], ctx.node("Equal", [y, zero], 1)[0]], 1)[0]
    ctx.node("Where", [origin, zero, r], [ctx.output(op)])


@op("ADD_N", category=T, onnx="Sum")
def add_n(ctx, op):
    ctx.node("Sum", operands(ctx, op), [ctx.output(op)])


op("BITWISE_XOR", category=T, onnx="BitwiseXor")(_nary("BitwiseXor"))


@op("RIGHT_SHIFT", category=T, onnx=("Cast", "Pow", "Div", "Floor"), notes="arithmetic shift (floor) for signed ints")
def right_shift(ctx, op):
    # ONNX BitShift is for unsigned types only; x >> y == floor(x / 2^y) exactly in float64 for <= 32-bit ints.
    from inspector.core.ir.dtypes import onnx_dtype
    x, y = (ctx.node("Cast", [v], 1, to=TensorProto.DOUBLE)[0] for v in operands(ctx, op))
    q = ctx.node("Floor", ctx.node("Div", [x, ctx.node("Pow", [ctx.scalar(2.0, "float64"), y], 1)[0]], 1), 1)
    ctx.node("Cast", q, [ctx.output(op)], to=onnx_dtype(ctx.tensor(op.outputs[0]).dtype))


@op("ZEROS_LIKE", category=T, onnx=("Shape", "ConstantOfShape"))
def zeros_like(ctx, op):
    from onnx import numpy_helper
    value = numpy_helper.from_array(np.zeros([1], ctx.tensor(op.outputs[0]).dtype), "value")
    ctx.node("ConstantOfShape", ctx.node("Shape", [operands(ctx, op)[0]], 1), [ctx.output(op)], value=value)


@op("BUCKETIZE", category=T, onnx=("Unsqueeze", "LessOrEqual", "ReduceSum"))
def bucketize(ctx, op):
    # bucket = how many boundaries are <= x (boundaries are sorted).
    from inspector.core.ir.dtypes import onnx_dtype
    x = operands(ctx, op)[0]
    bounds = np.asarray(op.options.get("boundaries", []), ctx.tensor(op.inputs[0]).dtype)
    r = ctx.tensor(op.inputs[0]).rank
    if bounds.size == 0:
        zeros_like(ctx, op)
        return
    up = ctx.node("Unsqueeze", [x, ctx.i64([r], "axes")], 1)[0]
    le = ctx.node("LessOrEqual", [ctx.const(bounds, "boundaries"), up], 1)[0]
    n = ctx.node("ReduceSum", [ctx.node("Cast", [le], 1, to=TensorProto.INT32)[0], ctx.i64([r], "axes")], 1, keepdims=0)[0]
    ctx.node("Cast", [n], [ctx.output(op)], to=onnx_dtype(ctx.tensor(op.outputs[0]).dtype))


@op("FAKE_QUANT", category=T, onnx=("Clip", "Sub", "Mul", "Add", "Floor"),
    notes="LiteRT's range nudged so that 0 is a step; narrow_range refused, as LiteRT does")
def fake_quant(ctx, op):
    """Each value snapped to the nearest of 2^num_bits steps over [min, max], in float32 as LiteRT computes it:
    the range first moved so that 0.0 falls on a step or bounds it (the zero point rounded and clamped into the
    steps), the value clamped to that range, and its step rounded half away from zero (Floor of v + HALF_EXACT:
    v >= 0 after the shift)."""
    from inspector.core.ir.errors import ConversionError
    from .hybrid import HALF_EXACT
    o = op.options
    if o.get("narrow_range"):
        raise ConversionError(f"{op.label}: narrow_range FAKE_QUANT (LiteRT refuses it too)")
    lo, hi, bits = np.float32(o.get("min", 0.0)), np.float32(o.get("max", 0.0)), int(o.get("num_bits", 0))
    if not (lo < hi and 1 <= bits <= 16):
        raise ConversionError(f"{op.label}: FAKE_QUANT needs min < max and 1 to 16 bits (has [{lo}, {hi}], "
                              f"{bits} bits)")
    top = np.float32((1 << bits) - 1)
    scale = np.float32((hi - lo) / top)
    zero = np.clip(np.float32(0 - lo / scale), 0, top)
    zero = np.float32(np.floor(np.float64(zero) + 0.5))
    low, high = np.float32(-zero * scale), np.float32((top - zero) * scale)

    def k(v):
        return ctx.const(np.array(v, np.float32), "k")
    x = ctx.node("Clip", [operands(ctx, op)[0], k(low), k(high)], 1)[0]
    steps = ctx.node("Mul", [ctx.node("Sub", [x, k(low)], 1)[0], k(np.float32(1) / scale)], 1)[0]
    snapped = ctx.node("Floor", [ctx.node("Add", [steps, k(HALF_EXACT)], 1)[0]], 1)[0]
    ctx.node("Add", [ctx.node("Mul", [snapped, k(scale)], 1)[0], k(low)], [ctx.output(op)])
