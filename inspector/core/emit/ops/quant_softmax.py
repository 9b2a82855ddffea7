"""SOFTMAX as LiteRT's reference kernels compute it: int8 with --exact-int, in gemmlowp's fixed point; int16 in
both modes, with LiteRT's two interpolated tables (int16_softmax).

int8, per row: d = x - max(x) in [-255, 0]; each element's exp(d * beta * scale) as a Q0.31 integer (a 256-entry
table, computed here with the kernel's own polynomial and barrel shifter), their sum in Q12.19, its reciprocal by
three Newton-Raphson steps in Q2.29, and each exp times the reciprocal, rounded to the output's 8 bits. The table is
built at conversion; the rest runs in ONNX as int64 arithmetic (exact: every product is below 2^62, and ONNX
Runtime's integer Div truncates towards zero as the kernel's does).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from inspector.core.layout import layout as L
from .fixed_point import params, per_tensor, quantize_multiplier

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
EXP_BITS, SUM_BITS = 5, 12                     # integer bits of the scaled differences and of the sum
BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


# --- gemmlowp's fixed point, on Python integers (the table) -------------------------------------------------------
def _high_mul(a: int, b: int) -> int:
    """SaturatingRoundingDoublingHighMul."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    v = ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30))
    return -((-v) >> 31) if v < 0 else v >> 31          # towards zero


def _divide_pot(x: int, e: int) -> int:
    """RoundingDivideByPOT: x / 2^e rounded half away from zero."""
    mask = (1 << e) - 1
    return (x >> e) + int((x & mask) > (mask >> 1) + int(x < 0))


def _exp_quarter(a: int) -> int:
    """exp on [-1/4, 0), Q0.31 in and out: a Taylor polynomial around -1/8."""
    x = a + (1 << 28)
    x2 = _high_mul(x, x)
    x3 = _high_mul(x2, x)
    x4 = _high_mul(x2, x2)
    rest = _divide_pot(_high_mul(_divide_pot(x4, 2) + x3, 715827883) + x2, 1)
    c = 1895147668                                        # exp(-1/8)
    return c + _high_mul(c, x + rest)


def _exp_negative(a: int) -> int:
    """exp of a Q5.26 value <= 0, as Q0.31."""
    quarter = 1 << 24
    a_mod = (a & (quarter - 1)) - quarter
    result = _exp_quarter(max(min(a_mod << EXP_BITS, INT32_MAX), INT32_MIN))
    remainder = a_mod - a
    for exponent, multiplier in BARREL:
        if remainder & (1 << (26 + exponent)):
            result = _high_mul(result, multiplier)
    return INT32_MAX if a == 0 else result


def exp_table(scale: float, beta: float) -> np.ndarray:
    """Q0.31 exp of each difference -255..0 (index d + 255); 0 below the kernel's diff_min."""
    real = min(float(beta) * float(scale) * float(1 << (31 - EXP_BITS)), float(INT32_MAX))
    q, shift = quantize_multiplier(real)
    diff_min = -int(np.floor(((1 << EXP_BITS) - 1) * float(1 << (31 - EXP_BITS)) / float(1 << shift)))
    return np.array([_exp_negative(_high_mul(d * (1 << shift), q)) if d >= diff_min else 0
                     for d in range(-255, 1)], np.int64)


# --- the same arithmetic as ONNX int64 nodes -----------------------------------------------------------------------
def exact_softmax(ctx, op) -> bool:
    sg, qdq = ctx.sg, ctx.q
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = sg.tensors[x_t], sg.tensors[y_t]
    px, py = params(tx.quantization), params(ty.quantization)
    if not (qdq.exact and x_t in qdq.q and y_t in qdq.q and tx.dtype == ty.dtype == "int8"
            and px is not None and py is not None and py[1] == -128):
        return False
    qdq._raw[op.index] = True                     # reads and writes the stored integers
    e0 = exp_table(px[0], op.options.get("beta", 1.0))
    terms = np.array([_divide_pot(int(v), SUM_BITS) for v in e0], np.int64)       # each exp in Q12.19
    p = ctx.plan.inputs.get((op.index, 0), L.identity(tx.rank))
    axes = ctx.i64([L.axis_to_onnx(-1, p) if p else -1], "axes")
    i64 = lambda v: ctx.const(np.array(v, np.int64), "k")                          # noqa: E731
    node = lambda kind, ins, **kw: ctx.node(kind, ins, 1, **kw)[0]                  # noqa: E731
    x = node("Cast", [ctx.input(op, 0)], to=TensorProto.INT64)
    index = node("Add", [node("Sub", [x, node("ReduceMax", [x, axes], keepdims=1)]), i64(255)])
    table = lambda v, name: node("Cast", [ctx.const(v.astype(np.int32), name)], to=TensorProto.INT64)   # noqa: E731
    exps = node("Gather", [table(e0, "softmax_exp"), index], axis=0)
    total = node("ReduceSum", [node("Gather", [table(terms, "softmax_terms"), index], axis=0), axes], keepdims=1)
    # GetReciprocal: the sum normalised to [1, 2) (its leading zeros counted against 2^0..2^31), minus one.
    powers = np.array([1 << k for k in range(32)], np.int64)
    lead = node("ReduceSum", [node("Cast", [node("Less", [node("Unsqueeze", [total, i64([-1])]), i64(powers)])],
                                   to=TensorProto.INT64), i64([-1])], keepdims=0)
    shifted = node("Sub", [node("Mul", [total, node("Gather", [i64(powers), lead], axis=0)]), i64(1 << 31)])
    high_mul = lambda a, b: _onnx_high_mul(ctx, node, i64, a, b)                  # noqa: E731
    half = node("Div", [node("Add", [shifted, i64(1 << 31)]), i64(2)])              # RoundingHalfSum(x, 1)
    r = node("Add", [i64(1515870810), high_mul(half, i64(-1010580540))])            # 48/17 - 32/17 x, Q2.29
    for _ in range(3):
        err = node("Sub", [i64(1 << 29), high_mul(half, r)])
        r = node("Add", [r, node("Clip", [node("Mul", [high_mul(r, err), i64(4)]), i64(INT32_MIN), i64(INT32_MAX)])])
    scale = node("Clip", [node("Mul", [r, i64(2)]), i64(INT32_MIN), i64(INT32_MAX)])   # Q0.31 of 1 / (2 x sum)
    # exp * reciprocal / 2^e, half up (both are >= 0), e = bits over unit + 31 - 8 = SUM_BITS - lead + 23.
    e = node("Sub", [i64(SUM_BITS + 23), lead])
    unit = node("Gather", [i64(np.array([1 << k for k in range(48)], np.int64)), e], axis=0)
    prod = high_mul(scale, exps)
    out = node("Div", [node("Add", [node("Mul", [prod, i64(2)]), unit]), node("Mul", [unit, i64(2)])])
    out = node("Clip", [node("Add", [out, i64(-128)]), i64(-128), i64(127)])
    ctx.node("Cast", [out], [ctx.output(op)], to=TensorProto.INT8)
    return True


def _onnx_high_mul(ctx, node, i64, a: str, b: str) -> str:
    """SaturatingRoundingDoublingHighMul on int64 values holding int32s (never both INT32_MIN here)."""
    ab = node("Mul", [a, b])
    nudge = node("Where", [node("Less", [ab, i64(0)]), i64(1 - (1 << 30)), i64(1 << 30)])
    return node("Div", [node("Add", [ab, nudge]), i64(1 << 31)])


# --- int16: LiteRT's two interpolated lookup tables (both modes; ONNX Runtime has no int16 softmax to fuse) ----------
def _round_away(v: np.ndarray) -> np.ndarray:
    r = np.trunc(v)
    return r + np.sign(v) * (np.abs(v - r) >= 0.5)


def int16_lut(func, lo: float, hi: float) -> np.ndarray:
    """LiteRT's 513-entry int16 table of func on [lo, hi] -> [-1, 1): samples biased by half the interpolation's
    error at each midpoint."""
    steps, scale = 512, 65536 / 2.0
    i = np.arange(steps, dtype=np.float64)
    step = (hi - lo) / steps
    val, mid, nxt = func(lo + i * step), func(lo + i * step + step / 2), func(lo + (i + 1) * step)
    sample = _round_away(val * scale)
    bias = _round_away((_round_away((nxt * scale + sample) / 2) - _round_away(mid * scale)) / 2)
    last = _round_away(np.array([func(hi) * scale]))
    return np.clip(np.concatenate([sample - bias, last]), -32768, 32767)


def int16_softmax(ctx, op) -> bool:
    """int16 SOFTMAX as LiteRT's kernel computes it, in float64 (every value an integer below 2^31): each difference
    from the row's maximum rescaled to [-65535, 0] ~ [-10, 0] and looked up in an exp table, their sum normalised
    by its leading zeros and looked up in a 1 / (1 + x) table, each exp times that, shifted back, half up."""
    from .fixed_point import double_const, fixed_point_multiply
    sg, qdq = ctx.sg, ctx.q
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = sg.tensors[x_t], sg.tensors[y_t]
    px, py = params(tx.quantization), params(ty.quantization)
    if not (x_t in qdq.q and y_t in qdq.q and tx.dtype == ty.dtype == "int16" and px is not None
            and py is not None and px[1] == 0 and py[1] == 0):
        return False
    qdq._raw[op.index] = True                     # reads and writes the stored integers
    p = ctx.plan.inputs.get((op.index, 0), L.identity(tx.rank))
    axes = ctx.i64([L.axis_to_onnx(-1, p) if p else -1], "axes")
    d = lambda v: double_const(ctx, v)                                              # noqa: E731
    node = lambda kind, ins, **kw: ctx.node(kind, ins, 1, **kw)[0]                  # noqa: E731
    floor_div = lambda v, k: node("Floor", [node("Mul", [v, d(1.0 / k)])])          # noqa: E731

    def lookup(v: str, table: np.ndarray) -> str:
        lut = node("Cast", [ctx.const(table.astype(np.int16), "softmax_lut")], to=TensorProto.DOUBLE)
        top = floor_div(v, 128)
        index = node("Cast", [node("Add", [top, d(256.0)])], to=TensorProto.INT64)
        base = node("Gather", [lut, index], axis=0)
        slope = node("Sub", [node("Gather", [lut, node("Add", [index, ctx.const(np.array(1, np.int64), "k")])],
                                  axis=0), base])
        offset = node("Sub", [v, node("Mul", [top, d(128.0)])])
        return node("Add", [base, floor_div(node("Add", [node("Mul", [slope, offset]), d(64.0)]), 128)])

    x = node("Cast", [ctx.input(op, 0)], to=TensorProto.DOUBLE)
    diff = node("Sub", [x, node("ReduceMax", [x, axes], keepdims=1)])
    beta = np.float32(np.float32(per_tensor(tx.quantization)[0]) * np.float32(op.options.get("beta", 1.0)))
    q, e = quantize_multiplier(float(np.float64(beta) / (10.0 / 65535.0)))
    scaled = fixed_point_multiply(ctx, diff, np.array(q), np.array(e), bound=65535.0)
    sym = node("Clip", [node("Add", [scaled, d(32767.0)]), d(-32768.0), d(32767.0)])
    exps = lookup(sym, int16_lut(np.exp, -10.0, 0.0))
    total = node("ReduceSum", [exps, axes], keepdims=1)
    powers = np.array([float(1 << k) for k in range(32)])
    lead = node("ReduceSum", [node("Cast", [node("Less", [node("Unsqueeze", [total, ctx.i64([-1])]), d(powers)])],
                                   to=TensorProto.DOUBLE), ctx.i64([-1])], keepdims=0)
    pow2 = lambda k: node("Gather", [d(np.ldexp(1.0, np.arange(-1, 40))),          # noqa: E731
                                     node("Cast", [node("Add", [k, d(1.0)])], to=TensorProto.INT64)], axis=0)
    shifted = floor_div(node("Add", [node("Mul", [total, pow2(node("Sub", [lead, d(1.0)]))]), d(8192.0)]), 16384)
    sym_sum = node("Clip", [node("Sub", [shifted, d(98304.0)]), d(-32768.0), d(32767.0)])
    recip = lookup(sym_sum, int16_lut(lambda v: 1 / (1 + v), 0.0, 1.0))
    right = node("Sub", [d(31.0), lead])
    out = node("Floor", [node("Div", [node("Add", [node("Mul", [exps, recip]), pow2(node("Sub", [right, d(1.0)]))]),
                                      pow2(right)])])
    out = node("Clip", [out, d(0.0), d(32767.0)])
    ctx.node("Cast", [out], [ctx.output(op)], to=TensorProto.INT16)
    return True
