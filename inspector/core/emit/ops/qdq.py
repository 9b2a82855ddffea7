"""Quantized models as QDQ ONNX: the quantization service of the emitter (`Emitter.q`, a `QDQ`).

A quantized activation's ONNX value is its integer tensor, exactly as TFLite holds it (so intermediate values
compare one to one). Op emitters never see integers: the emit context (`Emitter.q`, a `QDQ`) hands them each
quantized input through a DequantizeLinear and gives them a float value to write, which a QuantizeLinear with
the output's scale and zero point turns back into the integer tensor. Weights stay 8-bit initializers followed by
DequantizeLinear, per-channel axis moved with the weight's transposition; biases stay int32. ONNX Runtime fuses
DQ -> Conv/MatMul -> Q into integer kernels.

Ops that only move data (Reshape, Transpose, slices, concatenation...) run on the integers when every quantized
tensor they touch shares one scale and zero point, as TFLite's kernels do: no rounding at all; and where LiteRT's
kernel copies the integers between different ones (OpSpec.copies_integers), with a warning. Variable and
subgraph boundaries always carry the integers.

Dynamic-range models (float activations, int8 weights): hybrid CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED
compute LiteRT's own arithmetic (ops/hybrid.py); their weights stay int8 initializers.
Float16 weights (`keep_fp16`): the folded DEQUANTIZE's constant is stored as float16 and Cast to float32.
int16 activations need opset 21 for QuantizeLinear/DequantizeLinear; below that the same arithmetic is spelled
out (Div, Round, Add, Clip, Cast and back). `exact_int` (exact_int.py) trades QDQ for TFLite's own integer
arithmetic; the QUANTIZE / DEQUANTIZE ops are in quant.py.
"""
from __future__ import annotations

import dataclasses
import weakref

import numpy as np

from inspector.core.layout import layout as L
from inspector.core.ir.dtypes import onnx_dtype
from inspector.core.ir.errors import ConversionError
from inspector.core.ir.graph import Quantization, Tensor
from .exact_int import Exact
from .fixed_point import ONNX_FLOAT, params, per_tensor
from .registry import OPS

ACT_TYPES = ("int8", "uint8", "int16")
CONST_TYPES = ("int8", "uint8", "int16", "int32", "int64")
FUSED_READERS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
NATIVE = {"int8": 10, "uint8": 10, "int32": 10, "int16": 21}      # first opset with Q/DQ for the type



def quantized(t: Tensor) -> bool:
    """True for a tensor whose stored integers stand for real values (scale, zero point)."""
    if t.quantization is None or not t.quantization.scales.size:
        return False
    return t.dtype in (CONST_TYPES if t.data is not None else ACT_TYPES)


def describe(t: Tensor, perm=None) -> dict | None:
    """A tensor's quantization for reports: scales, zero points, TFLite axis and the axis in the ONNX layout."""
    q = t.quantization
    if q is None or not q.scales.size:
        return None
    out = {"dtype": t.dtype, "scale": [float(s) for s in q.scales], "zero_point": [int(z) for z in q.zero_points],
           "axis": int(q.axis) if q.per_channel else None}
    out["onnx_axis"] = L.axis_to_onnx(q.axis, perm) if q.per_channel and perm is not None and t.rank else out["axis"]
    if q.min is not None and q.max is not None:
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
        self._consumers: dict[int, list[int]] | None = None     # integers_back's, built on first use
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
            if self._raw[o.index] and OPS[o.opcode].copies_integers and len(self._keys(o) or ()) > 1:
                self._note_copy(o)
        return self._raw[o.index]

    def _keys(self, o) -> set | None:
        """(dtype, per-tensor parameters) of every quantized tensor op o touches; None if one has none."""
        sg = self.em.sg
        touched = [t for t in o.outputs if t >= 0] + [t for t in o.inputs if t >= 0 and sg.tensors[t].dtype
                                                      in ACT_TYPES]
        keys = set()
        for t in touched:
            ten = sg.tensors[t]
            if t not in self.q:
                return None
            p = params(ten.quantization)
            if p is None:
                return None
            keys.add((ten.dtype, p))
        return keys

    def _raw_op(self, o) -> bool:
        """The op's spec says (OpSpec.quantized): "raw" always, "moves" when every quantized tensor it touches
        shares one scale and zero point, or, of one integer type, LiteRT's kernel copies that type's integers
        whatever the scales (OpSpec.copies_integers). An op without an int16 kernel (OpSpec.int16_kernel: MaxPool,
        DepthToSpace, SpaceToDepth, Resize in ONNX or ONNX Runtime) runs int16 through DequantizeLinear and
        QuantizeLinear instead, still exact (an int16 times a float32 scale is within 2^-9 of a step of itself, so
        QuantizeLinear rounds every value back, and max/min/selection keep order); its emitter pools or picks
        int16 integers as floats where LiteRT copies them between different scales."""
        spec = OPS.get(o.opcode)
        if spec is None or spec.quantized == "dequantize":
            return False
        if spec.quantized == "raw":
            return True
        keys = self._keys(o)
        if not keys:
            return False
        types = {k[0] for k in keys}
        if len(keys) > 1:
            return len(types) == 1 and types <= set(spec.copies_integers)
        return spec.int16_kernel or "int16" not in types

    def _note_copy(self, o) -> None:
        """Say where the ONNX model copies integers between different quantizations, as LiteRT does."""
        sg = self.em.sg
        out = params(sg.tensors[o.outputs[0]].quantization)
        ins = [t for t in o.inputs if t >= 0 and t in self.q]
        ins = [t for t in ins if params(sg.tensors[t].quantization) != out] or ins

        def q(t):
            s, zp = per_tensor(sg.tensors[t].quantization)
            return f"scale {s:.6g} zero point {zp}"
        self.em.warnings.append(
            f"{o.opcode}#{o.index}: LiteRT copies the {sg.tensors[o.outputs[0]].dtype} integers although the file "
            f"gives input and output different quantization ({q(ins[0])} in, {q(o.outputs[0])} out); the ONNX "
            f"model copies them too")

    def fences(self, t: int) -> bool:
        """Should a raw op's stored integers t reach their reader through QuantizeLinear? Yes in the default mode
        when t's one reader is a convolution or dense layer that ONNX Runtime can then fuse into an integer kernel:
        on x86 it does so only after rewriting the int8 Q->DQ pairs on both sides to uint8, and it rewrites a pair
        only where the QuantizeLinear has that one DequantizeLinear reader. A raw op's output is no such pair; the
        reader's own output must be one too (read by one op, through DequantizeLinear)."""
        em = self.em
        if self.exact or t not in self.q or em.sg.tensors[t].dtype not in ("int8", "uint8") \
                or params(em.sg.tensors[t].quantization) is None:
            return False
        if self._consumers is None:
            self._consumers = em.sg.consumers()
        consumers = self._consumers

        def one_reader(u: int):
            readers = consumers.get(u, [])
            return em.sg.ops[readers[0]] if len(readers) == 1 and u not in em.sg.outputs else None

        reader = one_reader(t)
        if reader is None or reader.opcode not in FUSED_READERS or not reader.outputs:
            return False
        after = one_reader(reader.outputs[0])
        return after is not None and not self._raw_op(after)

    def integers_back(self, t: int, f: str, out: str) -> str:
        """Tensor t's stored integers from `f`, the same integers as float32 (a raw op run in float): by a Cast,
        or where `fences(t)`, through t's real values and QuantizeLinear, which rounds each back to itself."""
        em, ten = self.em, self.em.sg.tensors[t]
        if not self.fences(t):
            return em.node("Cast", [f], [out], to=onnx_dtype(ten.dtype))[0]
        s, zp = per_tensor(ten.quantization)
        real = em.node("Mul", [em.node("Sub", [f, em.scalar(zp)], 1)[0], em.scalar(s)], 1)[0]
        return self.quantize(t, real, out)

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
                assert axis is not None, "a per-channel tensor is read with its channel axis"
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
