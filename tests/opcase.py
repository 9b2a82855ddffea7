"""Single-op conformance models: build one TFLite op (optionally behind a CONV_2D so its input is NCHW in ONNX),
convert it, run LiteRT's reference kernels and ONNX Runtime on the same seeded inputs, compare every tensor.

A table row is a Case; adding an op to the conformance suite is adding a row.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from inspector.core.layout import layout as L
from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite_bytes
from inspector.core.proof.validate import run_onnx

RTOL, ATOL = 1e-5, 1e-5          # float32 single ops: a few ulps relative to the tensor's largest magnitude


@dataclass
class Case:
    id: str
    make: Callable[[np.random.Generator], tuple[ModelBuilder, list[np.ndarray]]]
    rtol: float = RTOL
    permuted: bool = False        # the op under test must read its first input channels-first (no fallback)
    pins: dict = field(default_factory=dict)
    optimized: bool = False       # compare with LiteRT's default kernels (see run_litert)
    opset: int = 18

    def __repr__(self) -> str:
        return self.id


class In:
    """A graph input; `conv=True` puts a 1x1 CONV_2D in front so the op reads it in the permuted layout;
    `dynamic_batch=True` declares its first dim -1 (stored as 1) while the value fed may have any batch."""

    def __init__(self, value: np.ndarray, conv: bool = False, dynamic_batch: bool = False):
        self.value, self.conv, self.dynamic_batch = np.asarray(value), conv, dynamic_batch


class C:
    """A constant operand."""

    def __init__(self, value, dtype: str | None = None):
        self.value = np.asarray(value, dtype=dtype)


def single(opcode: str, operands: Sequence, outputs: Sequence[tuple[Sequence[int], str]], options=None,
           version: int = 1) -> tuple[ModelBuilder, list[np.ndarray]]:
    """One op: operands are In / C / None (absent); outputs are (shape, dtype) pairs, a -1 first dim = dynamic."""
    b = ModelBuilder()
    ins, feeds = [], []
    rng = np.random.default_rng(1)
    for i, v in enumerate(operands):
        if v is None:
            ins.append(None)
        elif isinstance(v, C):
            ins.append(b.const(f"c{i}", v.value))
        else:
            shape, sig = v.value.shape, None
            if v.dynamic_batch:
                shape, sig = (1, *shape[1:]), (-1, *shape[1:])
            x = b.input(f"x{i}", shape, v.value.dtype.name, shape_signature=sig)
            feeds.append(v.value)
            if v.conv:
                c = v.value.shape[-1]
                w = b.const(f"w{i}", rng.uniform(-1, 1, (c, 1, 1, c)).astype(np.float32))
                bias = b.const(f"b{i}", np.zeros(c, np.float32))
                y = b.tensor(f"conv{i}", shape, shape_signature=sig)
                b.op("CONV_2D", [x, w, bias], [y], {"padding": "SAME"})
                x = y
            ins.append(x)
    outs = [b.tensor(f"y{k}", [abs(d) for d in shape], dtype,
                     shape_signature=shape if any(d < 0 for d in shape) else None)
            for k, (shape, dtype) in enumerate(outputs)]
    b.op(opcode, ins, outs, options or {}, version=version)
    b.output(*outs)
    return b, feeds


def run(case: Case, seed: int = 0):
    """Convert and compare; returns (result, list of failure strings)."""
    b, inputs = case.make(np.random.default_rng(seed))
    data = b.build()
    g = read_tflite_bytes(data, f"{case.id}.tflite")
    res = convert(g, pins=case.pins or None, opset=case.opset)
    ref = run_litert(data, inputs, len(g.main.tensors), {t.index for t in g.main.tensors if t.data is not None},
                     case.optimized)
    sg, plan, trace = g.main, res.plan, res.trace
    feeds = {}
    for t, x in zip(sg.inputs, inputs):
        feeds[trace.tensor_values[t][0]] = np.transpose(x, plan.perm(t, x.ndim))
    extra = [trace.tensor_values[t][0] for t in ref if t in trace.tensor_values]
    got = run_onnx(res.model, feeds, extra)
    bad = []
    for t, want in ref.items():
        names = trace.tensor_values.get(t)
        if t in sg.outputs:
            name, perm = sg.tensors[t].name, plan.outputs.get(t, plan.perm(t, want.ndim))
        elif names and names[0] in got:
            name, perm = names[0], plan.perm(t, want.ndim)
        else:
            continue
        y = np.transpose(got[name], L.inverse(perm))
        msg = mismatch(want, y, case.rtol)
        if msg:
            bad.append(f"{sg.tensors[t].name}: {msg}")
    return res, bad


def run_litert(data: bytes, inputs, n_tensors: int, constants: set[int], optimized: bool = False):
    """Every non-constant tensor after invoke, by index. Reference kernels unless `optimized`; LiteRT's reference
    resolver lacks a few builtins (CEIL, ROUND, ELU...), for which the default (delegate-free) kernels run."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    try:
        if optimized:
            raise ValueError("default kernels asked for")
        it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                         experimental_preserve_all_tensors=True)
    except ValueError:
        it = Interpreter(model_content=data,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                         experimental_preserve_all_tensors=True)
    for d, x in zip(it.get_input_details(), inputs):
        if list(d["shape"]) != list(x.shape):         # a dynamic batch fed at another size
            it.resize_tensor_input(d["index"], x.shape)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    out = {}
    for i in range(n_tensors):
        if i not in constants:
            try:
                out[i] = np.array(it.get_tensor(i))
            except ValueError:
                pass
    return out


def mismatch(ref: np.ndarray, got: np.ndarray, rtol: float) -> str:
    if ref.shape != got.shape:
        return f"shape {got.shape} != {ref.shape}"
    if ref.dtype != got.dtype:
        return f"dtype {got.dtype} != {ref.dtype}"
    if ref.dtype == bool or np.issubdtype(ref.dtype, np.integer):
        n = int(np.count_nonzero(ref != got))
        return f"{n} elements differ" if n else ""
    if ref.size == 0:
        return ""
    r, y = ref.astype(np.float64), got.astype(np.float64)
    if not np.array_equal(np.isnan(r), np.isnan(y)):
        return "NaNs differ"
    r, y = np.nan_to_num(r), np.nan_to_num(y)
    err = float(np.max(np.abs(r - y)))
    scale = float(np.max(np.abs(r)))
    return "" if err <= rtol * scale + ATOL else f"max abs err {err:.3g} (scale {scale:.3g})"


def check(case: Case, seed: int = 0):
    res, bad = run(case, seed)
    assert not bad, f"{case.id}: " + "; ".join(bad)
    if case.permuted:
        sg = res.graph.main
        op = sg.ops[-1]                        # single() adds the op under test last
        got = res.plan.inputs.get((op.index, 0))
        assert got == L.channels_first(sg.tensors[op.inputs[0]].rank), \
            f"{case.id}: {op.opcode} read its input as {got}, not channels-first (layout fell back)"
    return res


def uni(rng, shape, lo=-1.0, hi=1.0, dtype="float32") -> np.ndarray:
    return rng.uniform(lo, hi, shape).astype(dtype)


def ints(rng, shape, lo, hi, dtype="int32") -> np.ndarray:
    return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)
