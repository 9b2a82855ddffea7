"""Quantized models as QDQ ONNX, and the QUANTIZE / DEQUANTIZE ops.

A quantized activation's ONNX value is its integer tensor, exactly as TFLite holds it (so intermediate values
compare one to one). Op emitters never see integers: the emit context (`Emitter.q`, a `QDQ`) hands them each
quantized input through a DequantizeLinear and gives them a float value to write, which a QuantizeLinear with
the output's scale and zero point turns back into the integer tensor. Weights stay 8-bit initializers followed by
DequantizeLinear, per-channel axis moved with the weight's transposition; biases stay int32. ONNX Runtime fuses
DQ -> Conv/MatMul -> Q into integer kernels.

Ops that only move data (Reshape, Transpose, slices, concatenation...) run on the integers when every quantized
tensor they touch shares one scale and zero point, as TFLite's kernels do: no rounding at all. Variable and
subgraph boundaries always carry the integers.

Dynamic-range models (float activations, int8 weights): hybrid CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED
compute LiteRT's own arithmetic (ops/hybrid.py); their weights stay int8 initializers.
Float16 weights (`keep_fp16`): the folded DEQUANTIZE's constant is stored as float16 and Cast to float32.
int16 activations need opset 21 for QuantizeLinear/DequantizeLinear; below that the same arithmetic is spelled
out (Div, Round, Add, Clip, Cast and back). `exact_int` (below) trades QDQ for TFLite's own integer arithmetic.
"""
from __future__ import annotations

import dataclasses
import weakref

import numpy as np
from onnx import TensorProto

from inspector.core.layout import layout as L
from inspector.core.ir.errors import ConversionError
from inspector.core.ir.graph import Quantization, Tensor
from .registry import T, op

ACT_TYPES = ("int8", "uint8", "int16")
CONST_TYPES = ("int8", "uint8", "int16", "int32", "int64")
NATIVE = {"int8": 10, "uint8": 10, "int32": 10, "int16": 21}      # first opset with Q/DQ for the type
ONNX_FLOAT, ONNX_DOUBLE = TensorProto.FLOAT, TensorProto.DOUBLE

# Ops whose emitters must see the stored integers: state and subgraph boundaries, reinterpretation.
RAW_ALWAYS = frozenset({"READ_VARIABLE", "ASSIGN_VARIABLE", "VAR_HANDLE", "CALL_ONCE", "WHILE", "IF", "CAST",
                        "BITCAST", "QUANTIZE", "DEQUANTIZE"})
# Ops that only move or select elements: exact on the integers when in and out share scale and zero point.
RAW_IF_SAME = frozenset({"RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "STRIDED_SLICE", "SLICE", "GATHER",
                         "GATHER_ND", "CONCATENATION", "SPLIT", "SPLIT_V", "PACK", "UNPACK", "TILE", "MAX_POOL_2D",
                         "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "BROADCAST_TO", "REVERSE_V2", "BATCH_TO_SPACE_ND",
                         "SPACE_TO_BATCH_ND", "RESIZE_NEAREST_NEIGHBOR"})
# ...but MaxPool, DepthToSpace, SpaceToDepth and Resize have no int16 kernel (in ONNX or in ONNX Runtime): int16
# runs through DequantizeLinear and QuantizeLinear instead, still exact (an int16 times a float32 scale is within
# 2^-9 of a step of itself, so QuantizeLinear rounds every value back, and max/min/selection keep order).
NO_INT16 = frozenset({"MAX_POOL_2D", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "RESIZE_NEAREST_NEIGHBOR"})


def quantized(t: Tensor) -> bool:
    """True for a tensor whose stored integers stand for real values (scale, zero point)."""
    if t.quantization is None or not t.quantization.scales.size:
        return False
    return t.dtype in (CONST_TYPES if t.data is not None else ACT_TYPES)


def params(q: Quantization) -> tuple[float, int] | None:
    """(scale, zero point) when per-tensor, else None."""
    if q.per_channel:
        return None
    return float(q.scales[0]), int(q.zero_points[0])


def describe(t: Tensor, perm=None) -> dict | None:
    """A tensor's quantization for reports: scales, zero points, TFLite axis and the axis in the ONNX layout."""
    q = t.quantization
    if q is None or not q.scales.size:
        return None
    out = {"dtype": t.dtype, "scale": [float(s) for s in q.scales], "zero_point": [int(z) for z in q.zero_points],
           "axis": int(q.axis) if q.per_channel else None}
    out["onnx_axis"] = L.axis_to_onnx(q.axis, perm) if q.per_channel and perm is not None and t.rank else out["axis"]
    if q.min is not None:
        out["min"], out["max"] = [float(v) for v in q.min], [float(v) for v in q.max]
    return out


def dequantize_array(data: np.ndarray, q: Quantization, axis: int | None = None) -> np.ndarray:
    """Real values of stored integers (axis: where the channel axis is in `data`, default the TFLite axis)."""
    scale, zp = q.scales.astype(np.float64), q.zero_points.astype(np.float64)
    if q.per_channel:
        shape = [1] * data.ndim
        shape[q.axis if axis is None else axis] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    else:
        scale, zp = scale[0], zp[0]
    return ((data.astype(np.float64) - zp) * scale).astype(np.float32)


class QDQ:
    """The quantization side of one Emitter."""

    def __init__(self, em):
        self._em = weakref.ref(em)               # the emitter owns this: no reference cycle back to it
        sg = em.sg
        self.q = {t.index for t in sg.tensors if t.quantization is not None and quantized(t)}   # (no call per float)
        self._raw: dict[int, bool] = {}
        self._views: dict[int, Tensor] = {}
        parent = getattr(em, "parent", None)
        self.keep_fp16 = parent.q.keep_fp16 if parent is not None else False   # convert() sets it on the root
        self.exact = parent.q.exact if parent is not None else False
        self.dynamic_as_float = parent.q.dynamic_as_float if parent is not None else False   # ops/hybrid.py
        # LiteRT's kernel tables by op and parameters, for this conversion only: a network repeats its
        # activations' parameters (one LiteRT run each), but a table kept by the process made every conversion
        # after a model's first a third cheaper than a user's first (the bench times repeated conversions)
        self.tables: dict[tuple, np.ndarray | None] = parent.q.tables if parent is not None else {}
        self.ex = Exact(self)
        self.const_axes: dict[int, int] = {}     # per-channel constant -> its channel axis as stored in ONNX
        self.fp16_src: dict[int, int] = {}       # folded DEQUANTIZE output -> its float16 constant
        for o in sg.ops:
            if o.opcode == "DEQUANTIZE" and o.inputs and o.inputs[0] >= 0 \
                    and sg.tensors[o.inputs[0]].dtype == "float16" and o.outputs[0] in em.constants:
                self.fp16_src[o.outputs[0]] = o.inputs[0]

    @property
    def em(self):
        return self._em()

    # --- which tensors and ops ---------------------------------------------------------------------------
    def raw(self) -> bool:
        """Does the current op read and write the stored integers? (No op: graph/subgraph boundaries.)"""
        o = self.em.op
        if o is None:
            return True
        if o.index not in self._raw:
            self._raw[o.index] = self._raw_op(o)
        return self._raw[o.index]

    def _raw_op(self, o) -> bool:
        if o.opcode in RAW_ALWAYS:
            return True
        if o.opcode not in RAW_IF_SAME:
            return False
        sg = self.em.sg
        touched = [t for t in o.outputs if t >= 0] + [t for t in o.inputs if t >= 0 and sg.tensors[t].dtype
                                                      in ACT_TYPES]
        keys = set()
        for t in touched:
            ten = sg.tensors[t]
            if t not in self.q:
                return False
            p = params(ten.quantization)
            if p is None:
                return False
            keys.add((ten.dtype, p))
        return len(keys) == 1 and not (o.opcode in NO_INT16 and "int16" in {k[0] for k in keys})

    def quantized_tensor(self, t: int) -> bool:
        return t in self.q

    def const_key(self, t: int) -> tuple:
        """Part of a constant's cache key: stored integers, real values and centred integers differ."""
        return (t in self.q and self.raw(), t in self.q and self.ex.applies(self.em.op))

    def active(self, t: int) -> bool:
        return t in self.q and not self.raw()

    def view(self, t: int) -> Tensor:
        """What emitters see of tensor t: a quantized one is a float32 tensor (they work on real values)."""
        ten = self.em.sg.tensors[t]
        if t not in self.q or self.raw():           # (active(t), inline: emitters ask for every tensor they touch)
            return ten
        if t not in self._views:
            self._views[t] = dataclasses.replace(ten, dtype="float32")
        return self._views[t]

    # --- nodes -------------------------------------------------------------------------------------------
    def _qparams(self, t: int, int_dtype: str, need_zp: bool = True) -> list[str]:
        """Scale and zero-point initializers of tensor t, shared by every Q/DQ of it. A DequantizeLinear may leave
        out an all-zero zero point (symmetric weights, biases); a QuantizeLinear's gives its output type."""
        em, q = self.em, self.em.sg.tensors[t].quantization
        shape = (-1,) if q.per_channel else ()
        if ("qscale", t) not in em.memo:
            em.memo[("qscale", t)] = em.const(q.scales.astype(np.float32).reshape(shape), f"{self.short(t)}_scale")
        names = [em.memo[("qscale", t)]]
        if need_zp or np.any(q.zero_points):
            if ("qzp", t) not in em.memo:
                em.memo[("qzp", t)] = em.const(q.zero_points.astype(int_dtype).reshape(shape), f"{self.short(t)}_zp")
            names.append(em.memo[("qzp", t)])
        return names

    def short(self, t: int) -> str:
        """A base for the names of t's helper values: TFLite's fused-op names run to hundreds of characters,
        and repeating them on every scale, zero point and float twin costs a tenth of a small model's size."""
        name = self.em.sg.tensors[t].name
        return name if name and len(name) <= 40 else f"t{t}"

    def _native(self, dtype: str) -> bool:
        return self.em.opset >= NATIVE.get(dtype, 10 ** 6)

    def _axis_attr(self, q: Quantization, axis: int | None) -> dict:
        return {"axis": axis} if q.per_channel else {}

    def dequantize(self, t: int, x: str, axis: int | None = None, out: str | None = None) -> str:
        """Real values of the integer value `x` of tensor t (axis: t's channel axis in x's layout)."""
        em, ten = self.em, self.em.sg.tensors[t]
        q = ten.quantization
        dst = [out] if out else 1
        if self._native(ten.dtype):
            y = em.node("DequantizeLinear", [x, *self._qparams(t, ten.dtype, False)], dst,
                        **self._axis_attr(q, axis))[0]
        else:                                    # (float(x) - zp) * scale, spelled out
            scale, zp = self._float_params(t, x, axis)
            f = em.node("Cast", [x], 1, to=ONNX_FLOAT)[0]
            y = em.node("Mul", [em.node("Sub", [f, zp], 1)[0], scale], dst)[0]
        em.note_value(t, y)
        return y

    def quantize(self, t: int, x: str, out: str, axis: int | None = None) -> str:
        """Tensor t's integers from real values `x`: round half to even, saturate (TFLite rounds half away
        from zero: ties differ by one step)."""
        em, ten = self.em, self.em.sg.tensors[t]
        q = ten.quantization
        if self._native(ten.dtype):
            return em.node("QuantizeLinear", [x, *self._qparams(t, ten.dtype)], [out], **self._axis_attr(q, axis))[0]
        from inspector.core.ir.dtypes import onnx_dtype
        info = np.iinfo(ten.dtype)
        scale, zp = self._float_params(t, x, axis)
        r = em.node("Round", [em.node("Div", [x, scale], 1)[0]], 1)[0]
        c = em.node("Clip", [em.node("Add", [r, zp], 1)[0], em.scalar(info.min), em.scalar(info.max)], 1)[0]
        return em.node("Cast", [c], [out], to=onnx_dtype(ten.dtype))[0]

    def _float_params(self, t: int, x: str, axis: int | None) -> tuple[str, str]:
        """Scale and zero point as float32 initializers broadcastable against x (for the spelled-out form)."""
        em, ten = self.em, self.em.sg.tensors[t]
        q = ten.quantization
        key = ("fparams", t, axis)
        if key not in em.memo:
            scales, zps = q.scales.astype(np.float32), q.zero_points.astype(np.float32)
            if q.per_channel:
                shape = [1] * ten.rank
                shape[axis] = -1
                scales, zps = scales.reshape(shape), zps.reshape(shape)
            else:
                scales, zps = scales.reshape(()), zps.reshape(())
            em.memo[key] = (em.const(scales, f"{self.short(t)}_scale"), em.const(zps, f"{self.short(t)}_zp"))
        return em.memo[key]

    # --- hooks the Emitter calls -------------------------------------------------------------------------
    def input(self, t: int, x: str, perm) -> str:
        """An activation input read by a float op: its integers `x` (in layout `perm`) dequantized."""
        q = self.em.sg.tensors[t].quantization
        return self.dequantize(t, x, L.axis_to_onnx(q.axis, perm) if q.per_channel else None)

    def read(self, op, slot: int, x: str, perm) -> str:
        """What an op reads for activation input `slot` (value `x` in layout `perm`): real values of a quantized
        tensor; anything else as is (hybrid ops quantize their float input in their own emitters, ops/hybrid.py)."""
        t = op.inputs[slot]
        if self.active(t):
            if self.ex.applies(op):
                q = self.em.sg.tensors[t].quantization
                return self.ex.centred(t, x, L.axis_to_onnx(q.axis, perm) if q.per_channel else None)
            return self.input(t, x, perm)
        return x

    def output(self, op, slot: int, dst: str) -> str:
        """The float value an op writes for quantized output `slot`; a QuantizeLinear into `dst` follows."""
        t = op.outputs[slot]
        tmp = self.em.fresh(f"{self.short(t)}_real")
        self.em.defer("quantize", tmp, dst, str(t))
        return tmp

    def flush(self, src: str, dst: str, arg: str) -> None:
        t = int(arg)
        if self.ex.applies(self.em.op):
            self.ex.requantize(self.em.op, src, dst, t)
            return
        q = self.em.sg.tensors[t].quantization
        perm = self.em.plan.produced.get((self.em.op.index, list(self.em.op.outputs).index(t)), self.em.perm(t))
        self.quantize(t, src, dst, L.axis_to_onnx(q.axis, perm) if q.per_channel else None)

    def const(self, t: int, perm, shape) -> str | None:
        """A quantized or float16 constant as the op reads it (None: not ours, the plain path applies)."""
        em = self.em
        if t in self.fp16_src and self.keep_fp16:
            arr = self._shaped(em.data(self.fp16_src[t]), perm, shape)
            half = em.const(arr, (em.sg.tensors[t].name or f"c{t}") + "_fp16")
            return em.node("Cast", [half], 1, to=ONNX_FLOAT)[0]
        if t not in self.q or self.raw():
            return None
        ten = em.sg.tensors[t]
        q = ten.quantization
        data = em.data(t)
        axis = None
        if q.per_channel:
            axis = q.axis
            if shape is not None and tuple(shape) == (data.size,) and data.shape[axis] == data.size:
                axis = 0                         # a [1, 1, 1, C] bias flattened (conv.bias_1d)
            elif shape is not None and tuple(shape) != tuple(data.shape):
                extra = len(shape) - data.ndim
                if extra < 0 or tuple(shape[extra:]) != tuple(data.shape):
                    raise ConversionError(f"{ten.name}: per-channel quantized constant reshaped to {list(shape)}")
                axis += extra
            if perm is not None:
                axis = L.axis_to_onnx(axis, perm)
            self.const_axes[t] = axis
        arr = self._shaped(data, perm, shape)
        if self.ex.applies(em.op):
            return self.ex.centred(t, em.const(arr, self.short(t)), axis)
        if not self._native(ten.dtype) or ten.dtype == "int64":
            # int64 (int16x8 biases) and int16 below opset 21: fold to float; such tensors are small biases.
            return em.const(dequantize_array(arr, q, axis), ten.name or f"c{t}")
        stored = em.const(arr, ten.name or f"c{t}")
        return self.dequantize(t, stored, axis)

    def _axis_in(self, t: int, perm) -> int | None:
        q = self.em.sg.tensors[t].quantization
        return L.axis_to_onnx(q.axis, perm) if q.per_channel else None

    # --- float graph I/O (convert(float_io=True)) -----------------------------------------------------------
    def float_input(self, t: int, name: str):
        """Graph input `name` takes real values; a QuantizeLinear makes the integers the model works on."""
        em = self.em
        em.claim(name)
        em.note_value(t, name)                   # first: validation feeds the graph input by this name
        em.reserve(t, em.fresh(f"{name}_quantized"))
        self.quantize(t, name, em.value(t), self._axis_in(t, em.perm(t)))
        return em.value_info_for(t, name, em.perm(t), dtype="float32")

    def float_output(self, t: int, name: str, want):
        """Graph output `name` gives real values: the integers (presented in `want`) dequantized."""
        x = self.em.present(t, want)
        self.dequantize(t, x, self._axis_in(t, want), out=name)
        return self.em.value_info_for(t, name, want, dtype="float32")

    def report(self) -> dict[int, dict]:
        """Every quantized tensor's parameters, with its channel axis in the ONNX layout it got."""
        em, out = self.em, {}
        for ten in em.sg.tensors:
            if ten.quantization is None:             # most tensors of a float model: describe() gives None
                continue
            d = describe(ten, None if ten.data is not None else em.perm(ten.index))
            if d is not None:
                if ten.index in self.const_axes:
                    d["onnx_axis"] = self.const_axes[ten.index]
                out[ten.index] = d
        return out

    @staticmethod
    def _shaped(arr: np.ndarray, perm, shape) -> np.ndarray:
        if shape is not None:
            arr = arr.reshape(shape)
        if perm is not None and not L.is_identity(perm):
            arr = np.transpose(arr, perm)
        return np.ascontiguousarray(arr)


def _io_perm(ctx, op):
    """The layout input 0 is read in (what Emitter.input presents)."""
    t = op.inputs[0]
    default = L.identity(ctx.tensor(t).rank) if ctx.is_const(t) else ctx.perm(t)
    return ctx.plan.inputs.get((op.index, 0), default)


@op("QUANTIZE", category=T, onnx=("QuantizeLinear", "DequantizeLinear"))
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


@op("DEQUANTIZE", category=T, onnx=("DequantizeLinear", "Cast"))
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


# --- integer-exact kernels (convert(exact_int=True)) ------------------------------------------------------------
# TFLite's integer kernels requantize with a fixed-point multiply and a rounding shift: two roundings, where
# QuantizeLinear rounds once, so a QDQ model lands one step off on ~0.1-1 % of elements per op. Deep models
# (EfficientNet's squeeze-excite gates) amplify those steps. With `exact_int`, Conv, depthwise, transposed Conv,
# FullyConnected, BatchMatMul, Mul and Mean run as TFLite runs them: integer-valued float operands (x - zero point;
# exact below 2^24), the accumulator requantized in float64 with TFLite's multiplier and shift, clamped to the fused
# activation's range.
# ONNX Runtime cannot fuse that into its integer kernels: the default stays QDQ.
ONNX_INT32 = TensorProto.INT32
EXACT_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "MUL", "TRANSPOSE_CONV", "BATCH_MATMUL"})
# Where each op reads its data, its weights (an activation for MUL and BATCH_MATMUL) and its bias.
EXACT_SLOTS = {"TRANSPOSE_CONV": (2, 1, 3)}
TWO_ACTIVATIONS = frozenset({"MUL", "BATCH_MATMUL"})


def exact_slots(op) -> tuple[int, int, int]:
    return EXACT_SLOTS.get(op.opcode, (0, 1, 2))


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
    info, zp = np.iinfo(t.dtype), t.quantization.zero_points.astype(np.int64)
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
    so, zo = params(ten.quantization)
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


class Exact:
    """The exact_int side of QDQ: which ops qualify, their centred operands and their requantization."""

    def __init__(self, qdq: QDQ):
        self._qdq = weakref.ref(qdq)             # owned by qdq: no reference cycle back to it
        self._ok: dict[int, bool] = {}

    @property
    def qdq(self) -> QDQ:
        return self._qdq()

    def applies(self, op) -> bool:
        if op is None or not self.qdq.exact or op.opcode not in EXACT_OPS:
            return False
        if op.index not in self._ok:
            self._ok[op.index] = self._check(op)
        return self._ok[op.index]

    def _check(self, op) -> bool:
        sg, q = self.qdq.em.sg, self.qdq.q
        eight = ("int8", "uint8")
        data, weights, bias = exact_slots(op)
        two = op.opcode in TWO_ACTIVATIONS
        acts = [op.inputs[data], op.outputs[0]] + ([op.inputs[weights]] if two else [])
        for t in acts:
            ten = sg.tensors[t]
            if t not in q or ten.dtype not in eight or params(ten.quantization) is None:
                return False
        if not two:
            w = sg.tensors[op.inputs[weights]]
            if op.inputs[weights] not in q or w.dtype not in eight or w.data is None:
                return False
            b = op.inputs[bias] if len(op.inputs) > bias else -1
            if b >= 0 and (b not in q or sg.tensors[b].dtype != "int32"):
                return False
        return True

    def centred(self, t: int, x: str, axis: int | None) -> str:
        """Integers minus their zero point, as float32 (exactly representable)."""
        em = self.qdq.em
        ten = em.sg.tensors[t]
        q = ten.quantization
        f = em.node("Cast", [x], 1, to=ONNX_FLOAT)[0]
        if not np.any(q.zero_points):
            return f
        zp = q.zero_points.astype(np.float32)
        if q.per_channel:
            shape = [1] * ten.rank
            shape[axis] = -1
            zp = zp.reshape(shape)
        else:
            zp = zp.reshape(())
        return em.node("Sub", [f, em.const(zp, f"{self.qdq.short(t)}_zp")], 1)[0]

    def requantize(self, op, src: str, dst: str, t: int) -> None:
        em = self.qdq.em
        sg = em.sg
        data, weights, _ = exact_slots(op)
        scale = lambda i: np.float64(params(sg.tensors[op.inputs[i]].quantization)[0])   # noqa: E731
        so = np.float64(params(sg.tensors[t].quantization)[0])
        rank = sg.tensors[t].rank
        if op.opcode == "MUL":
            # LiteRT's MUL computes its multiplier in float32 (float scales multiplied, then divided, then widened),
            # where convolutions compute it in double: the 31-bit multipliers differ in their last ~6 bits, enough
            # to move a product that lands near a rounding tie by one step.
            f32 = lambda i: np.float32(params(sg.tensors[i].quantization)[0])   # noqa: E731
            mults, axis = np.array([np.float64(f32(op.inputs[0]) * f32(op.inputs[1]) / f32(t))]), None
        elif op.opcode == "BATCH_MATMUL":
            mults, axis = np.array([scale(0) * scale(1) / so]), None
        else:
            mults = scale(data) * sg.tensors[op.inputs[weights]].quantization.scales.astype(np.float64) / so
            perm = em.plan.produced.get((op.index, 0), em.perm(t))
            axis = L.axis_to_onnx(rank - 1, perm)                 # output channels are TFLite's last axis
        requantize(em, to_double(em, src), mults, t, dst, op.options.get("fused_activation_function", "NONE") or "NONE",
                   axis, rank, self.bound(op), single=op.opcode == "FULLY_CONNECTED")

    def bound(self, op) -> float:
        """A bound on |accumulator|: the centred input range times the largest per-channel sum of |weights|
        (BATCH_MATMUL: times the inner dimension)."""
        sg = self.qdq.em.sg
        data, weights, bias_slot = exact_slots(op)
        bx = centred_range(sg.tensors[op.inputs[data]])
        if op.opcode in TWO_ACTIVATIONS:
            by = centred_range(sg.tensors[op.inputs[weights]])
            if op.opcode == "MUL":
                return float(bx * by)
            x = sg.tensors[op.inputs[0]]
            inner = x.shape[-2] if op.options.get("adj_x") else x.shape[-1]
            return float(bx * by * max(int(inner), 1))
        w = sg.tensors[op.inputs[weights]]
        mag = np.abs(w.data.astype(np.int64)) + int(np.abs(w.quantization.zero_points).max())
        axis = 3 if op.opcode == "DEPTHWISE_CONV_2D" else 0
        per_channel = mag.sum(axis=tuple(a for a in range(mag.ndim) if a != axis))
        b = op.inputs[bias_slot] if len(op.inputs) > bias_slot else -1
        bias = int(np.abs(sg.tensors[b].data.astype(np.int64)).max()) if b >= 0 and sg.tensors[b].data is not None \
            else 0
        return float(per_channel.max() * bx + bias)


def exact_mean(ctx, op) -> bool:
    """MEAN of int8/uint8 as TFLite's kernel computes it; False when it does not apply (the float path runs)."""
    sg, qdq = ctx.sg, ctx.q
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = sg.tensors[x_t], sg.tensors[y_t]
    if not (qdq.exact and qdq.quantized_tensor(x_t) and qdq.quantized_tensor(y_t) and tx.dtype == ty.dtype
            and tx.dtype in ("int8", "uint8") and not ctx.is_const(x_t) and ctx.is_const(op.inputs[1])):
        return False
    pin, pout = params(tx.quantization), params(ty.quantization)
    if pin is None or pout is None:
        return False
    qdq._raw[op.index] = True                     # reads and writes the stored integers
    rank = tx.rank
    axes = sorted({int(a) % rank for a in np.asarray(ctx.data(op.inputs[1])).reshape(-1)})
    n = int(np.prod([tx.shape[a] for a in axes]))
    p = ctx.plan.inputs.get((op.index, 0), L.identity(rank))
    onnx_axes = sorted(L.axis_to_onnx(a, p) for a in axes)
    # Sums of stored integers: exact in float32 below 2^24, else summed in float64.
    wide = n * 256 >= 1 << 24
    x = ctx.node("Cast", [ctx.input(op, 0)], 1, to=ONNX_DOUBLE if wide else ONNX_FLOAT)[0]
    s = ctx.node("ReduceSum", [x, ctx.i64(onnx_axes, "axes")], 1, keepdims=1 if op.options.get("keep_dims") else 0)[0]
    s = ctx.node("Sub", [s if wide else to_double(ctx, s), double_const(ctx, float(n * pin[1]))], 1)[0]
    # TFLite folds 1/n into the multiplier with `shift` extra bits (integer division, truncated).
    q, e = quantize_multiplier(pin[0] / pout[0])
    shift = min(n.bit_length() - 1, 32, 31 + e)
    y = fixed_point_multiply(ctx, s, np.array((q << shift) // n), np.array(e - shift), pout[1],
                             bound=float(n * centred_range(tx)))
    clamp_cast(ctx, y, *activation_range("NONE", pout[0], pout[1], ty.dtype), ctx.output(op), ty.dtype)
    return True




def exact_average_pool(ctx, op) -> bool:
    """AVERAGE_POOL_2D on int8/uint8 as TFLite computes it: the window's sum of stored integers divided by the
    in-bounds count, rounded half away from zero (exact in float: a tie k + 1/2 is representable)."""
    sg, qdq = ctx.sg, ctx.q
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = sg.tensors[x_t], sg.tensors[y_t]
    if not (qdq.exact and x_t in qdq.q and y_t in qdq.q and tx.dtype == ty.dtype and tx.dtype in ("int8", "uint8")
            and params(tx.quantization) is not None and params(tx.quantization) == params(ty.quantization)):
        return False
    from .conv import spatial_attrs
    from inspector.core.ir.dtypes import onnx_dtype
    qdq._raw[op.index] = True
    o = op.options
    kernel = (o["filter_height"], o["filter_width"])
    attrs = spatial_attrs(ctx, op, x_t, kernel, (o.get("stride_h", 1), o.get("stride_w", 1)), None)
    f = "float32"
    x = ctx.node("Cast", [ctx.input(op, 0)], 1, to=ONNX_FLOAT)[0]
    m = ctx.node("AveragePool", [x], 1, kernel_shape=list(kernel), **attrs)[0]
    half = ctx.node("Floor", [ctx.node("Add", [ctx.node("Abs", [m], 1)[0], ctx.scalar(0.5, f)], 1)[0]], 1)[0]
    r = ctx.node("Mul", [ctx.node("Sign", [m], 1)[0], half], 1)[0]
    so, zo = params(ty.quantization)
    lo, hi = activation_range(o.get("fused_activation_function", "NONE") or "NONE", so, zo, ty.dtype)
    r = ctx.node("Clip", [r, ctx.scalar(float(lo), f), ctx.scalar(float(hi), f)], 1)[0]
    ctx.node("Cast", [r], [ctx.output(op)], to=onnx_dtype(ty.dtype))
    return True


def ties_away(ctx, op, m: str, count: int, dst: str) -> None:
    """Default QDQ mode: the real-valued window mean `m` of a quantized AVERAGE_POOL_2D moved by a quarter of the
    smallest step between two means (1 / (4 count) of a step), away from zero in the stored integers, into `dst`.
    QuantizeLinear then rounds a tie as TFLite's (sum +- count / 2) / count does, where it would round half to
    even and the float pool's last bit would put it either side; no other mean is moved across a boundary."""
    t = op.outputs[0]
    s, zp = params(ctx.sg.tensors[t].quantization)
    nudge = ctx.const(np.array(s / (4 * count), np.float32), "k")
    if ctx.sg.tensors[t].dtype == "uint8":     # stored means are never negative
        ctx.node("Add", [m, nudge], [dst])
        return
    stored = ctx.node("Add", [m, ctx.const(np.array(s * zp, np.float32), "k")], 1)[0]
    away = ctx.node("Mul", [ctx.node("Sign", [stored], 1)[0], nudge], 1)[0]
    ctx.node("Add", [m, away], [dst])


# Table ops whose float form (DequantizeLinear -> op -> QuantizeLinear) is used when it gives LiteRT's table on
# every input but a few: ONNX Runtime's Gather costs ~13 ns per element, the float form a fraction of that (and
# ONNX Runtime fuses it into QLinearSigmoid), so feature maps of TWIN_MIN elements or more take it. A value closer
# than TIE_MARGIN steps to a rounding boundary counts as a mismatch (float32 kernels are far more accurate than
# that); up to PATCH_MAX mismatches are patched with Where.
FLOAT_TWINS = {"LOGISTIC": "Sigmoid", "TANH": "Tanh", "HARD_SWISH": "HardSwish"}
TIE_MARGIN, PATCH_MAX, TWIN_MIN, OFFSET_MARGIN = 0.01, 4, 1024, 1e-3
LUT_OPS = ("HARD_SWISH", "LOGISTIC", "TANH", "ELU", "LEAKY_RELU", "GELU", "EXP", "LOG", "RSQRT", "SQRT")


def exact_table(ctx, op) -> bool:
    """A unary int8/uint8 op as a 256-entry table of what LiteRT's reference kernel returns for every input
    value (its fixed-point approximations included). Default QDQ mode: only where the op's float form misses the
    table by more than one step or the map is small; elsewhere the float form (offset_twin: moved by a constant
    where that makes it exact, else one step off on a few of the 256 values), which ONNX Runtime fuses, where a
    Gather costs ~13 ns per element (MobileNetV3Small int8: 4 ms -> 7.5 ms with every HARD_SWISH a table). Needs
    ai-edge-litert at conversion time; without it the float path runs."""
    sg, qdq = ctx.sg, ctx.q
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = sg.tensors[x_t], sg.tensors[y_t]
    if not (len([t for t in op.inputs if t >= 0]) == 1 and x_t in qdq.q and y_t in qdq.q
            and tx.dtype in ("int8", "uint8") and ty.dtype in ("int8", "uint8")
            and params(tx.quantization) is not None and params(ty.quantization) is not None):
        return False
    table = _kernel_table(qdq.tables, op, tx, ty)
    if table is None:
        return False
    if not qdq.exact and large(tx) and (misses := float_misses(op, tx, ty, table)) <= 1:
        return bool(misses) and offset_twin(ctx, op, table)
    qdq._raw[op.index] = True
    if qdq.exact:
        if float_twin(ctx, op, table):
            return True
        if tx.dtype == "int8":                   # Gather reads index -k as n - k: int8 values index the table
            table = np.roll(table, -128)         # from its middle, without an offset
        index = ctx.node("Cast", [ctx.input(op, 0)], 1, to=ONNX_INT32)[0]
        ctx.node("Gather", [ctx.const(table, f"{qdq.short(y_t)}_table"), index], [ctx.output(op)], axis=0)
        return True
    # Default mode: read through DequantizeLinear and written through QuantizeLinear, so ONNX Runtime still pairs
    # them with the neighbouring convolutions' (it fuses an int8 convolution only through Q -> DQ pairs, not with
    # a Gather on the integers). The index x / scale + zp - min lies within 1e-4 of an integer: adding 1/2 and
    # truncating finds it; the table holds real values that QuantizeLinear turns back into LiteRT's integers.
    (sx, zx), (so, zo) = params(tx.quantization), params(ty.quantization)
    x = qdq.dequantize(x_t, ctx.input(op, 0))
    scaled = ctx.node("Mul", [x, ctx.const(np.array(1 / sx, np.float32), "k")], 1)[0]
    shift = ctx.const(np.array(zx - np.iinfo(tx.dtype).min + 0.5, np.float32), "k")
    index = ctx.node("Cast", [ctx.node("Add", [scaled, shift], 1)[0]], 1, to=ONNX_INT32)[0]
    real = ((table.astype(np.float64) - zo) * so).astype(np.float32)
    y = ctx.node("Gather", [ctx.const(real, f"{qdq.short(y_t)}_table"), index], 1, axis=0)[0]
    qdq.quantize(y_t, y, ctx.output(op))
    return True


def large(t: Tensor) -> bool:
    """A feature map of TWIN_MIN elements or more (or of dynamic size), where a Gather's cost shows."""
    return not 0 <= int(np.prod(t.shape_signature or t.shape)) < TWIN_MIN


# Real-valued forms of the table ops, as their float emitters compute them (in float64 here).
REAL_FORMS = {
    "LOGISTIC": lambda v, o: 1 / (1 + np.exp(-v)), "TANH": lambda v, o: np.tanh(v),
    "HARD_SWISH": lambda v, o: v * np.clip(v + 3, 0, 6) / 6,
    "ELU": lambda v, o: np.where(v > 0, v, np.expm1(np.minimum(v, 0))),
    "LEAKY_RELU": lambda v, o: np.where(v > 0, v, o.get("alpha", 0.2) * v),
    "GELU": lambda v, o: 0.5 * v * (1 + (np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3))
                                         if o.get("approximate") else _erf(v / np.sqrt(2)))),
    "EXP": lambda v, o: np.exp(v), "LOG": lambda v, o: np.log(v), "SQRT": lambda v, o: np.sqrt(v),
    "RSQRT": lambda v, o: 1 / np.sqrt(v),
}


def _erf(v: np.ndarray) -> np.ndarray:
    import math
    return np.vectorize(math.erf)(v)


def _float_form(op, tx: Tensor, ty: Tensor):
    """(every input value, the op's float form of each in output steps before rounding, the output's int range)."""
    (sx, zx), (so, zo) = params(tx.quantization), params(ty.quantization)
    xs = np.arange(np.iinfo(tx.dtype).min, np.iinfo(tx.dtype).max + 1)
    with np.errstate(all="ignore"):
        y = REAL_FORMS[op.opcode]((xs - zx) * sx, op.options) / so + zo
    return xs, y, np.iinfo(ty.dtype)


def float_misses(op, tx: Tensor, ty: Tensor, table: np.ndarray) -> float:
    """The most steps by which the op's float form, quantized once, misses LiteRT's table (inf: unknown)."""
    if op.opcode not in REAL_FORMS:
        return float("inf")
    _, y, out = _float_form(op, tx, ty)
    d = np.abs(np.clip(np.round(y), out.min, out.max) - table)
    return float(d.max()) if np.all(np.isfinite(d)) else float("inf")


def float_offset(op, tx: Tensor, ty: Tensor, table: np.ndarray) -> float | None:
    """c, in output steps, such that the op's float form minus c rounds to LiteRT's table on every input, with
    OFFSET_MARGIN to spare on both sides (None: no such c). LiteRT's fixed-point kernels land a hundredth of a step
    or so below the real value, so a float form rounds up a few values LiteRT rounds down."""
    _, y, out = _float_form(op, tx, ty)
    t = table.astype(np.float64)
    lo = np.max((y - t - 0.5)[t < out.max], initial=-1.0)      # saturated entries bound c on one side only
    hi = np.min((y - t + 0.5)[t > out.min], initial=1.0)
    if not np.isfinite(lo + hi) or hi - lo < 2 * OFFSET_MARGIN:
        return None
    return float(np.clip(0.0, lo + OFFSET_MARGIN, hi - OFFSET_MARGIN))


def offset_twin(ctx, op, table: np.ndarray) -> bool:
    """Default QDQ mode on a large map: the op's float form moved by float_offset before QuantizeLinear, one Add
    (a Gather would cost ~13 ns per element), equal to LiteRT's table on every input; False (the plain float form,
    one step off on a few values) when no offset does."""
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = ctx.sg.tensors[x_t], ctx.sg.tensors[y_t]
    # Not LOGISTIC: the Add would stop ONNX Runtime's QLinearSigmoid fusion (and its float form matched LiteRT's
    # table on every scale tried, as TANH's did).
    c = float_offset(op, tx, ty, table) if op.opcode in FLOAT_TWINS and op.opcode != "LOGISTIC" else None
    if not c:
        return False
    ctx.q._raw[op.index] = True                     # reads and writes the integers through its own Q/DQ
    real = ctx.node(FLOAT_TWINS[op.opcode], [ctx.q.dequantize(x_t, ctx.input(op, 0))], 1)[0]
    so = params(ty.quantization)[0]
    moved = ctx.node("Add", [real, ctx.const(np.array(-c * so, np.float32), "k")], 1)[0]
    ctx.q.quantize(y_t, moved, ctx.output(op))
    return True


def float_twin(ctx, op, table: np.ndarray) -> bool:
    """Emit the op's float form, patched where it misses LiteRT's table; False when it misses too often."""
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = ctx.tensor(x_t), ctx.tensor(y_t)
    if op.opcode not in FLOAT_TWINS or not large(tx):
        return False
    onnx_op = FLOAT_TWINS[op.opcode]
    xs, y, out = _float_form(op, tx, ty)
    near = (np.abs(y - np.floor(y) - 0.5) < TIE_MARGIN) & (y > out.min - 1) & (y < out.max + 1)
    bad = xs[(np.clip(np.round(y), out.min, out.max) != table) | near]
    if bad.size > PATCH_MAX:
        return False
    x = ctx.input(op, 0)
    real = ctx.node(onnx_op, [ctx.q.dequantize(x_t, x)], 1)[0]
    dst = ctx.output(op)
    y = ctx.q.quantize(y_t, real, ctx.fresh(f"{ctx.q.short(y_t)}_float") if bad.size else dst)
    for i, v in enumerate(bad, 1):
        hit = ctx.node("Equal", [x, ctx.const(np.array(v, tx.dtype), "k")], 1)[0]
        patch = ctx.const(np.array(table[v - xs[0]], ty.dtype), "k")
        y = ctx.node("Where", [hit, patch, y], [dst] if i == bad.size else 1)[0]
    return True


def _kernel_table(tables: dict, op, tx: Tensor, ty: Tensor) -> np.ndarray | None:
    key = (op.opcode, op.version, repr(sorted(op.options.items())), tx.dtype, params(tx.quantization), ty.dtype,
           params(ty.quantization))
    if key not in tables:
        tables[key] = _litert_table(op, tx, ty)
    return tables[key]


def _litert_table(op, tx: Tensor, ty: Tensor) -> np.ndarray | None:
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        return None
    from inspector.core.io.tflite_builder import ModelBuilder
    info = np.iinfo(tx.dtype)
    values = np.arange(info.min, info.max + 1, dtype=tx.dtype)
    b = ModelBuilder()
    x = b.input("x", [values.size], tx.dtype, quant=params(tx.quantization))
    y = b.tensor("y", [values.size], ty.dtype, quant=params(ty.quantization))
    try:
        b.op(op.opcode, [x], [y], op.options, version=op.version)
        b.output(y)
        data = b.build()
        try:
            it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        except (RuntimeError, ValueError):   # not among the reference kernels: what validation runs then
            it = Interpreter(model_content=data,
                             experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], values)
        it.invoke()
        return np.array(it.get_tensor(it.get_output_details()[0]["index"]))
    except (ValueError, RuntimeError, IndexError, KeyError):
        return None


def exact_prelu(ctx, op) -> bool:
    """PRELU on int8/uint8 as TFLite's kernel computes it: the centred input requantized by in/out scale where it
    is >= 0, else its product with the centred alpha requantized by in*alpha/out, each with TFLite's fixed-point
    multiply. (QDQ rounds x * alpha once in float: one step off at some ties.)"""
    sg, qdq = ctx.sg, ctx.q
    ts = [op.inputs[0], op.inputs[1], op.outputs[0]]
    if not (qdq.exact and all(t in qdq.q and sg.tensors[t].dtype in ("int8", "uint8")
                              and params(sg.tensors[t].quantization) is not None for t in ts)):
        return False
    (sx, zx), (sa, za), (so, zo) = (params(sg.tensors[t].quantization) for t in ts)
    qdq._raw[op.index] = True                     # reads and writes the stored integers
    ty = sg.tensors[ts[2]]
    x = ctx.node("Sub", [ctx.node("Cast", [ctx.input(op, 0)], 1, to=ONNX_FLOAT)[0], ctx.scalar(float(zx))], 1)[0]
    alpha = ctx.broadcast_input(op, 1, ty.rank, ctx.perm(ts[2]))
    a = ctx.node("Sub", [ctx.node("Cast", [alpha], 1, to=ONNX_FLOAT)[0], ctx.scalar(float(za))], 1)[0]
    q1, e1 = quantize_multiplier(np.float64(sx) / np.float64(so))
    q2, e2 = quantize_multiplier(np.float64(sx) * np.float64(sa) / np.float64(so))
    pos = fixed_point_multiply(ctx, to_double(ctx, x), np.array(q1), np.array(e1), zo, bound=255.0)
    neg = fixed_point_multiply(ctx, to_double(ctx, ctx.node("Mul", [x, a], 1)[0]), np.array(q2), np.array(e2), zo,
                               bound=255.0 * 255.0)
    y = ctx.node("Where", [ctx.node("Less", [x, ctx.scalar(0.0)], 1)[0], neg, pos], 1)[0]
    clamp_cast(ctx, y, *activation_range("NONE", so, zo, ty.dtype), ctx.output(op), ty.dtype)
    return True
