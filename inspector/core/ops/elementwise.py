"""Elementwise math, comparisons, logic and activations (Transparent: any layout flows through).

Lower-rank operands broadcast by numpy rules, so they are aligned to the output's rank and layout first
(the Reshape pattern): a [C] bias against an NCHW tensor becomes [1, C, 1, 1].
"""
from __future__ import annotations

from .. import layout as L
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
    op(_name, category=T, onnx=_onnx)(_nary(_onnx))

UNARY = {
    "ABS": "Abs", "NEG": "Neg", "EXP": "Exp", "LOG": "Log", "SQRT": "Sqrt", "SIN": "Sin", "COS": "Cos",
    "FLOOR": "Floor", "CEIL": "Ceil", "RELU": "Relu", "LOGISTIC": "Sigmoid", "TANH": "Tanh",
    "HARD_SWISH": "HardSwish", "LOGICAL_NOT": "Not", "SIGN": "Sign", "ROUND": "Round",  # ONNX Round is half-to-even
}
for _name, _onnx in UNARY.items():
    op(_name, category=T, onnx=_onnx)(_nary(_onnx))

op("RSQRT", category=T, onnx=("Sqrt", "Reciprocal"))(_chain(("Sqrt", {}), ("Reciprocal", {})))
op("ELU", category=T, onnx="Elu")(_nary("Elu", alpha=1.0))
op("SELECT", "SELECT_V2", category=T, onnx="Where")(_nary("Where"))
op("PRELU", category=T, onnx="PRelu")(_nary("PRelu"))


def _clip(lo: float, hi: float):
    def emit(ctx, op):
        dt = ctx.tensor(op.outputs[0]).dtype
        ctx.node("Clip", [operands(ctx, op)[0], ctx.scalar(lo, dt), ctx.scalar(hi, dt)], [ctx.output(op)])
    return emit


op("RELU6", category=T, onnx="Clip")(_clip(0.0, 6.0))
op("RELU_N1_TO_1", category=T, onnx="Clip")(_clip(-1.0, 1.0))
op("RELU_0_TO_1", category=T, onnx="Clip")(_clip(0.0, 1.0))


@op("LEAKY_RELU", category=T, onnx="LeakyRelu")
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


@op("GELU", category=T, onnx=("Mul", "Erf", "Tanh"))
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
