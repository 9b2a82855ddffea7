"""Elementwise math, comparisons, logic and activations: one generated single-op model per row, checked against
LiteRT. Rows with `conv` read an NCHW (permuted) input, with constants broadcast against it."""
from __future__ import annotations

import numpy as np
import pytest

from inspector.core.emit.ops.elementwise import BINARY, UNARY
from tests.opcase import C, Case, In, check, ints, single, uni

S = (1, 5, 7, 3)          # N, H, W, C: non-square, C distinct


def pos(rng, shape):
    return uni(rng, shape, 0.1, 2.0)


def divisor(rng, shape):
    return (uni(rng, shape, 0.5, 2.0) * rng.choice([-1, 1], shape)).astype(np.float32)


OUT_BOOL = {"LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"}
LOGICAL = {"LOGICAL_AND", "LOGICAL_OR"}
POSITIVE = {"LOG", "SQRT", "RSQRT"}


def binary(name, conv=False, bcast=False, a=None, b=None, dtype="float32", options=None):
    def make(rng):
        if name in LOGICAL:
            x, y = rng.integers(0, 2, S).astype(bool), rng.integers(0, 2, (3,) if bcast else S).astype(bool)
        else:
            x = a(rng, S) if a else uni(rng, S)
            y = b(rng, (3,) if bcast else S) if b else uni(rng, (3,) if bcast else S)
            if name in ("EQUAL", "NOT_EQUAL"):      # make some elements equal
                y = np.where(rng.random(y.shape) < 0.5, np.broadcast_to(x, S)[..., :y.shape[-1]] if not bcast
                             else y, y).astype(y.dtype)
        out = "bool" if name in OUT_BOOL | LOGICAL else x.dtype.name
        return single(name, [In(x, conv), C(y) if bcast else In(y)], [(S, out)], options)
    tag = ("-conv" if conv else "") + ("-bcast" if bcast else "")
    return Case(f"{name}{tag}", make, permuted=conv)


def unary(name, gen=uni, conv=False, options=None, shape=S, tag="", dtype_out=None):
    def make(rng):
        x = gen(rng, shape)
        return single(name, [In(x, conv)], [(shape, dtype_out or x.dtype.name)], options)
    return Case(f"{name}{tag}{'-conv' if conv else ''}", make, permuted=conv)


def int_binary(name, lo=-9, hi=9, dtype="int32", nonzero=False, tag=""):
    def make(rng):
        x = ints(rng, S, lo, hi, dtype)
        y = ints(rng, S, lo, hi, dtype)
        if nonzero:
            y = np.where(y == 0, 3, y).astype(dtype)
        return single(name, [In(x), In(y)], [(S, dtype)])
    return Case(f"{name}-{dtype}{tag}", make)


def halves(rng, shape):
    return (rng.integers(-6, 6, shape) + rng.choice([0.5, 0.25, 0.0, 0.75], shape)).astype(np.float32)


CASES = []
for _name in BINARY:
    if _name in LOGICAL:
        CASES += [binary(_name), binary(_name, bcast=True)]
        continue
    gen_a = pos if _name == "POW" else None
    gen_b = divisor if _name == "DIV" else None
    CASES += [binary(_name, a=gen_a, b=gen_b), binary(_name, conv=_name != "POW", bcast=True, a=gen_a, b=gen_b)]
CASES += [binary("NOT_EQUAL"), binary("NOT_EQUAL", conv=True, bcast=True),
          binary("SQUARED_DIFFERENCE"), binary("SQUARED_DIFFERENCE", conv=True, bcast=True),
          binary("FLOOR_DIV", b=divisor), binary("FLOOR_DIV", conv=True, bcast=True, b=divisor),
          binary("FLOOR_MOD", b=divisor), binary("FLOOR_MOD", conv=True, bcast=True, b=divisor),
          binary("ATAN2"),
          int_binary("FLOOR_DIV", nonzero=True), int_binary("FLOOR_MOD", nonzero=True),
          int_binary("BITWISE_XOR", -100, 100), int_binary("BITWISE_XOR", 0, 255, "uint8"),
          int_binary("RIGHT_SHIFT", -100, 100, tag="-neg"), int_binary("RIGHT_SHIFT", 0, 255, "uint8")]
# RIGHT_SHIFT's shift amount must be small and non-negative.
CASES[-2].make = (lambda rng: single("RIGHT_SHIFT", [In(ints(rng, S, -300, 300)), In(ints(rng, S, 0, 7))],
                                     [(S, "int32")]))
CASES[-1].make = (lambda rng: single("RIGHT_SHIFT", [In(ints(rng, S, 0, 255, "uint8")), In(ints(rng, S, 0, 7, "uint8"))],
                                     [(S, "uint8")]))

for _name in UNARY:
    if _name == "LOGICAL_NOT":
        CASES.append(unary(_name, lambda rng, s: rng.integers(0, 2, s).astype(bool)))
        continue
    if _name == "ROUND":
        CASES.append(unary(_name, halves, tag="-halves"))
        continue
    gen = pos if _name in POSITIVE else (lambda rng, s: uni(rng, s, -4, 4))
    CASES += [unary(_name, gen), unary(_name, gen, conv=_name not in POSITIVE)]
CASES += [unary("RSQRT", pos), unary("SQUARE"), unary("SQUARE", conv=True),
          unary("ELU", lambda r, s: uni(r, s, -3, 3), conv=True),
          unary("LEAKY_RELU", options={"alpha": 0.2}), unary("LEAKY_RELU", options={"alpha": 0.01}, conv=True),
          unary("RELU6", lambda r, s: uni(r, s, -8, 8), conv=True), unary("RELU_N1_TO_1", lambda r, s: uni(r, s, -3, 3)),
          unary("RELU_0_TO_1", lambda r, s: uni(r, s, -3, 3), conv=True),
          unary("HARD_SWISH", lambda r, s: uni(r, s, -5, 5), conv=True),
          unary("GELU", lambda r, s: uni(r, s, -4, 4), options={"approximate": False}, tag="-exact"),
          unary("GELU", lambda r, s: uni(r, s, -4, 4), options={"approximate": True}, tag="-tanh", conv=True),
          unary("ZEROS_LIKE", conv=True), unary("ZEROS_LIKE", lambda r, s: ints(r, s, -5, 5), tag="-int"),
          unary("BUCKETIZE", lambda r, s: uni(r, s, -3, 3), options={"boundaries": [-2.0, 0.0, 1.0, 2.0]},
                dtype_out="int32"),
          unary("BUCKETIZE", lambda r, s: uni(r, s, -3, 3), options={"boundaries": [1.0]}, dtype_out="int32",
                conv=True),
          unary("CAST", dtype_out="int32", tag="-f2i", gen=lambda r, s: uni(r, s, -9, 9)),
          unary("CAST", dtype_out="float32", tag="-i2f", gen=lambda r, s: ints(r, s, -9, 9)),
          unary("CAST", dtype_out="bool", tag="-f2b", gen=lambda r, s: rng_zero(r, s)),
          ]


def rng_zero(rng, shape):
    return np.where(rng.random(shape) < 0.5, 0.0, 1.5).astype(np.float32)


def prelu(conv, alpha_shape):
    def make(rng):
        return single("PRELU", [In(uni(rng, S), conv), C(uni(rng, alpha_shape, 0, 0.5))], [(S, "float32")])
    return Case(f"PRELU-{alpha_shape}{'-conv' if conv else ''}", make, permuted=conv)


def add_n(n, conv):
    def make(rng):
        return single("ADD_N", [In(uni(rng, S), conv) for i in range(n)], [(S, "float32")])
    return Case(f"ADD_N-{n}{'-conv' if conv else ''}", make, permuted=conv)


def select(name, conv, cond_shape):
    def make(rng):
        cond = rng.integers(0, 2, cond_shape).astype(bool)
        return single(name, [In(cond), In(uni(rng, S), conv), In(uni(rng, S))], [(S, "float32")])
    return Case(f"{name}-{len(cond_shape)}d{'-conv' if conv else ''}", make)


def fused(name, act):
    def make(rng):
        return single(name, [In(uni(rng, S, -4, 4), True), C(uni(rng, (3,), -2, 2))], [(S, "float32")],
                      {"fused_activation_function": act})
    return Case(f"{name}-{act}", make, permuted=True)


CASES += [prelu(False, (1, 1, 3)), prelu(True, (1, 1, 3)), prelu(True, (5, 7, 3)),
          add_n(2, False), add_n(3, True),
          select("SELECT", False, S), select("SELECT_V2", True, S), select("SELECT_V2", False, (1, 1, 7, 1)),
          fused("ADD", "RELU6"), fused("MUL", "RELU"), fused("SUB", "RELU_N1_TO_1"),
          # TFLite's ATAN2 kernel does not broadcast: both operands full-size.
          Case("ATAN2-conv", lambda rng: single("ATAN2", [In(uni(rng, S), True), In(uni(rng, S), True)],
                                                [(S, "float32")]), permuted=True)]



def near_steps(lo, hi, bits):
    """Values over [lo - 1, hi + 1], a third of them on or next to the half-way points between two steps."""
    def gen(rng, shape):
        step = (hi - lo) / ((1 << bits) - 1)
        k = rng.integers(0, 1 << bits, shape)
        halves = (lo + (k + 0.5) * step).astype(np.float32)
        nudged = np.nextafter(halves, rng.choice([-np.inf, np.inf], shape).astype(np.float32))   # one float32 ulp
        spread = uni(rng, shape, lo - 1, hi + 1)
        return np.choose(rng.integers(0, 3, shape), [spread, halves, nudged]).astype(np.float32)
    return gen


# FAKE_QUANT: a value on the wrong step is off by a whole step, more than the tolerance (1e-5 + 1e-5 x the largest
# value) in every row. (0, 3, 2): steps of exactly 1, so 0.49999997 rounds down (not through Floor(v + 0.5), which
# gives 1); (-0.25, 1.25, 2): the zero point 0.5 rounds half away from zero, to 1 (the range becomes [-0.5, 1.0]);
# (0.5, 1.5, 3): a range without 0 becomes [0, 1.0].
CASES += [unary("FAKE_QUANT", near_steps(lo, hi, bits), conv=conv, tag=f"-{lo}-{hi}-{bits}",
                options={"min": lo, "max": hi, "num_bits": bits})
          for lo, hi, bits in [(-1.0, 1.0, 8), (-0.3, 2.7, 4), (0.0, 6.0, 8), (-3.1, 0.0, 2), (-0.7, 5.3, 16),
                               (0.0, 3.0, 2), (-0.25, 1.25, 2), (0.5, 1.5, 3)]
          for conv in (False, True)]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_elementwise_op_matches_litert(case):
    check(case)


def test_round_is_half_to_even():
    case = unary("ROUND", lambda r, s: np.array([0.5, 1.5, 2.5, -0.5, -1.5, 3.5, 0.25], np.float32), shape=(7,))
    check(case)


def test_floor_mod_takes_divisor_sign():
    # -7 mod 3 = 2 and 7 mod -3 = -2 in TFLite (floor); C's fmod would give -1 and 1.
    case = Case("FLOOR_MOD-signs", lambda rng: single(
        "FLOOR_MOD", [In(np.array([-7, 7, -7, 7], np.int32)), In(np.array([3, -3, -3, 3], np.int32))],
        [((4,), "int32")]))
    check(case)
    f = Case("FLOOR_MOD-fsigns", lambda rng: single(
        "FLOOR_MOD", [In(np.array([-7.5, 7.5, -7.5, 7.5, 6.0], np.float32)),
                      In(np.array([3, -3, -3, 3, 3], np.float32))], [((5,), "float32")]))
    check(f)


def test_bucketize_fractional_boundaries():
    check(unary("BUCKETIZE", lambda r, s: uni(r, s, -3, 3), options={"boundaries": [-2.0, -0.5, 0.0, 1.0, 2.5]},
                dtype_out="int32"))


def test_fake_quant_refuses_what_litert_refuses():
    from inspector.core.ir.errors import ConversionError
    case = unary("FAKE_QUANT", options={"min": -1.0, "max": 1.0, "num_bits": 8, "narrow_range": True})
    with pytest.raises(ConversionError, match="narrow_range"):
        check(case)
    case = unary("FAKE_QUANT", options={"min": 1.0, "max": 1.0, "num_bits": 8})
    with pytest.raises(ConversionError, match=r"min < max.*\[1.0, 1.0\]"):
        check(case)
