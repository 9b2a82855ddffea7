"""TFLite's integer arithmetic written as ONNX nodes, for the kernels that compute quantized ops as LiteRT does
(exact_int.py, quant_kernels.py, quant_softmax.py): multipliers and shifts (QuantizeMultiplier,
MultiplyByQuantizedMultiplier), fused activations as clamps, requantization, and the bounds that prove float64
exact. Operands are integer-valued float64 values: ONNX Runtime vectorises Mul/Add/Floor, not int64 Div.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from inspector.core.ir.errors import ConversionError
from inspector.core.ir.graph import Quantization, Tensor

ONNX_FLOAT, ONNX_DOUBLE = TensorProto.FLOAT, TensorProto.DOUBLE


def params(q: Quantization | None) -> tuple[float, int] | None:
    """(scale, zero point) when quantized per tensor, else None."""
    if q is None or q.per_channel:
        return None
    return float(q.scales[0]), int(q.zero_points[0])


def per_tensor(q: Quantization | None) -> tuple[float, int]:
    """params(q) where the caller has checked that the tensor is quantized per tensor."""
    got = params(q)
    if got is None:
        raise ConversionError("a quantized kernel met a tensor that is not quantized per tensor")
    return got


def quantization(t: Tensor) -> Quantization:
    """t's quantization, where the caller has checked that t is quantized."""
    if t.quantization is None:
        raise ConversionError(f"tensor '{t.name}' is not quantized")
    return t.quantization


def quantize_multiplier(m: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: m = q * 2^(e - 31) with q a 31-bit integer."""
    import math
    frac, e = math.frexp(m)
    q = int(round(frac * (1 << 31)))
    if q == 1 << 31:
        q, e = q // 2, e + 1
    return q, e


def fixed_point_multiply(em, x: str, q: np.ndarray, e: np.ndarray, zp: int = 0, lo: int | None = None,
                         bound: float | None = None, single: bool = False) -> str:
    """TFLite's MultiplyByQuantizedMultiplier, plus the zero point, on integer-valued float64 values (q, e
    broadcast against x: per channel or scalar): a rounding doubling high multiply (round half up), then a
    rounding right shift (half away from zero). Both are floor divisions by powers of two, so they merge into one:
    floor((x*Q + 2^30 + 2^(30+r) - 2^31*[h < 0] + zp*2^K) / 2^K), K = 31 + r, Q = q*2^left, h the high
    multiply's result (negative exactly when x < -floor(2^30/Q)). float64 is exact while that numerator stays
    below 2^53, which `bound` (on |x|, from the weights) proves for most ops; otherwise Q is split at bit 16 and
    the low part's product floored first (the floor of a floor by a power of two is one floor), exact for
    |x| < 2^24 and r <= 30. float64 Mul/Add/Floor instead of int64 Div: ONNX Runtime vectorises them, and the
    requantization is most of an exact model's run time. `lo`: the clamp that follows; from the zero point up
    (fused RELU) negative results are clamped anyway, their rounding is moot. `single`: one rounding, half up,
    floor((x*Q + 2^(K-1) + zp*2^K) / 2^K), as LiteRT's int8 FULLY_CONNECTED rounds (measured: 0 of 16,384 outputs
    differ that way, 34 the two-rounding way); without a right shift both are the same."""
    q, e = np.asarray(q, np.int64), np.asarray(e, np.int64)
    left, right = np.maximum(e, 0), np.maximum(-e, 0)
    big_q = q << left
    shifted = right > 0
    k = 31 + right
    if single:
        c_pos = np.ldexp(1.0, k - 1) + zp * np.ldexp(1.0, k)
    else:
        c_pos = np.ldexp(1.0, 30) + np.where(shifted, np.ldexp(1.0, 30 + right), 0.0) + zp * np.ldexp(1.0, k)
    c_neg = c_pos - np.where(shifted, np.ldexp(1.0, 31), 0.0)
    # A multiplier whose low 16 bits are all zero (wide_multipliers) makes every sum a multiple of 2^16: 16 bits more
    # room before float64 stops being exact.
    wide = 16 if not np.any(big_q & 0xFFFF) else 0
    split = bound is None or (bound * float((big_q >> wide).max()) + (float(np.abs(c_pos).max()) + 2.0 ** 31)
                              / 2.0 ** wide >= 2.0 ** 53)
    if not split:
        y, unit = em.node("Mul", [x, double_const(em, np.ldexp(big_q.astype(np.float64), -k))], 1)[0], k
    else:
        low = em.node("Floor", [em.node("Mul", [x, double_const(em, (big_q & 0xFFFF) / 65536.0)], 1)[0]], 1)[0]
        y, unit = em.node("Add", [em.node("Mul", [x, double_const(em, big_q >> 16)], 1)[0], low], 1)[0], 16
    if not single and np.any(shifted) and (lo is None or lo < zp):   # the shift rounds negative ties the other way
        neg = em.node("Less", [x, double_const(em, -((1 << 30) // big_q))], 1)[0]
        c = em.node("Where", [neg, double_const(em, np.ldexp(c_neg, -unit)), double_const(em, np.ldexp(c_pos, -unit))],
                    1)[0]
    else:
        c = double_const(em, np.ldexp(c_pos, -unit))
    y = em.node("Add", [y, c], 1)[0]
    if split:
        y = em.node("Mul", [y, double_const(em, np.ldexp(1.0, -(k - unit)))], 1)[0]
    return em.node("Floor", [y], 1)[0]


def centred_range(t: Tensor) -> int:
    """The largest |stored integer - zero point| of an 8-bit tensor (per-channel: over its channels)."""
    info, zp = np.iinfo(t.dtype), quantization(t).zero_points.astype(np.int64)
    return int(max(np.abs(info.min - zp).max(), np.abs(info.max - zp).max()))


def double_const(em, value) -> str:
    """A float64 operand, one per distinct value; stored as float32 + Cast when that is exact (per-channel
    multipliers and shifts: half the bytes)."""
    arr = np.asarray(value, np.float64)
    key = ("float64", arr.shape, arr.tobytes())
    if key not in em.memo:
        if arr.ndim and np.array_equal(arr.astype(np.float32).astype(np.float64), arr):
            em.memo[key] = em.node("Cast", [em.const(arr.astype(np.float32), "d")], 1, to=ONNX_DOUBLE)[0]
        else:
            em.memo[key] = em.const(arr, "d")
    return em.memo[key]


def to_double(em, x: str) -> str:
    return em.node("Cast", [x], 1, to=ONNX_DOUBLE)[0]


def clamp_cast(em, y: str, lo: int, hi: int, out: str, dtype: str) -> str:
    """Integer-valued float64 -> the output's integer type, saturated to [lo, hi] (the fused activation)."""
    from inspector.core.ir.dtypes import onnx_dtype
    y = em.node("Clip", [y, double_const(em, float(lo)), double_const(em, float(hi))], 1)[0]
    return em.node("Cast", [y], [out], to=onnx_dtype(dtype))[0]


def activation_range(act: str, scale: float, zp: int, dtype: str) -> tuple[int, int]:
    """TFLite's CalculateActivationRangeQuantized: the fused activation as a clamp on the integers."""
    info = np.iinfo(dtype)
    quant = lambda f: zp + int(np.sign(f / scale) * np.floor(abs(f / scale) + 0.5))   # noqa: E731
    lo, hi = {"RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0),
              "RELU_0_TO_1": (0.0, 1.0)}.get(act, (None, None))
    return (max(int(info.min), quant(lo)) if lo is not None else int(info.min),
            min(int(info.max), quant(hi)) if hi is not None else int(info.max))


def requantize(em, acc: str, mults, out_t: int, out: str, act: str = "NONE", axis: int | None = None,
               rank: int = 0, bound: float | None = None, single: bool = False, wide: bool = False) -> str:
    """float64 accumulator -> output integers: TFLite's multiplier/shift per channel, zero point, clamp, cast.
    `wide`: the 64-bit accumulators' rule (int16 activations), see wide_multipliers."""
    ten = em.sg.tensors[out_t]
    so, zo = per_tensor(ten.quantization)
    qe = [quantize_multiplier(float(m)) for m in np.atleast_1d(mults)]
    q, e = np.array([a for a, _ in qe]), np.array([b for _, b in qe])
    if wide:
        q, single = wide_multipliers(q), True
    if axis is not None and q.size > 1:
        shape = [1] * rank
        shape[axis] = -1
        q, e = q.reshape(shape), e.reshape(shape)
    else:
        q, e = q.reshape(()), e.reshape(())
    lo, hi = activation_range(act, so, zo, ten.dtype)
    return clamp_cast(em, fixed_point_multiply(em, acc, q, e, zo, lo, bound, single), lo, hi, out, ten.dtype)


def wide_multipliers(q: np.ndarray) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier on a 64-bit accumulator keeps the multiplier's top 15 bits (rounded,
    capped at 0x7FFF) and rounds once, half up: the same as one rounding with those bits as a 31-bit multiplier."""
    q = np.asarray(q, np.int64)
    return np.where(q < 0x7FFF0000, (q + (1 << 15)) >> 16, 0x7FFF) << 16


def accumulator_bound(w: np.ndarray, channel_axis: int, x_range: int, bias: np.ndarray | None = None,
                      w_zero_point: int = 0) -> tuple[float, int]:
    """A bound on |accumulator| of a convolution or FullyConnected, and the largest per-channel sum of |weights|
    behind it: that sum (each weight's magnitude widened by `w_zero_point`) times the input's centred range
    `x_range`, plus the largest |bias|."""
    mag = np.abs(np.asarray(w).astype(np.int64)) + w_zero_point
    per_channel = int(mag.sum(axis=tuple(a for a in range(mag.ndim) if a != channel_axis)).max())
    largest_bias = int(np.abs(np.asarray(bias).astype(np.int64)).max()) if bias is not None else 0
    return float(per_channel * x_range + largest_bias), per_channel
