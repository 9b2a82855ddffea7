"""Ops that only move integers ("moves" in the op table) in models whose input and output quantization differ.

LiteRT's kernels for most of them copy the stored integers whatever the scales say (the check that they match is a
debug-build assertion); for a few they refuse the model at allocation; uint8 CONCATENATION rescales. The conversion
must do what LiteRT does: copy the integers too (0 steps, by default and with --exact-int, and say so in a warning),
and keep dequantizing where LiteRT rescales (docs/quantization.md has the table).
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.proof.validate import LiteRTRefusal, run_tflite

from .test_quant import nodes, save
from .test_quant_seeds import litert_and_onnx

RNG = np.random.default_rng(47)
QUANT = {"int8": ((0.05, -3), (0.09, 7)), "uint8": ((0.05, 120), (0.09, 131)), "int16": ((5e-4, 0), (9e-4, 0))}


def i32(v):
    return np.array(v, np.int32)


def one(opcode, in_shape, out_shape, consts=(), options=None, n_out=1, const_first=False, version=1, n_in=1):
    """A builder of a one-op model: `n_in` inputs of in_shape, constant operands, `n_out` outputs of out_shape
    (or a list of shapes)."""
    def build(b, dtype, qi, qo):
        xs = [b.input(f"x{i}", in_shape, dtype, quant=qi) for i in range(n_in)]
        cs = [b.const(f"c{i}", i32(c)) for i, c in enumerate(consts)]
        shapes = out_shape if isinstance(out_shape, list) else [out_shape] * n_out
        ys = [b.tensor(f"y{i}", s, dtype, quant=qo) for i, s in enumerate(shapes)]
        b.op(opcode, cs + xs if const_first else xs + cs, ys, options or {}, version=version)
        b.output(*ys)
    return build


# op -> (model, integer types whose LiteRT kernel copies) for the ops LiteRT runs with differing quantization
COPIES = {
    "MAX_POOL_2D": one("MAX_POOL_2D", [1, 6, 10, 3], (1, 3, 5, 3), options={
        "padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2, "filter_width": 2}),
    "RESIZE_NEAREST_NEIGHBOR": one("RESIZE_NEAREST_NEIGHBOR", [1, 3, 5, 2], (1, 6, 10, 2), [[6, 10]]),
    "RESHAPE": one("RESHAPE", [1, 3, 5, 2], (1, 30), [[1, 30]], {"new_shape": [1, 30]}),
    "SQUEEZE": one("SQUEEZE", [1, 3, 1, 5], (1, 3, 5), options={"squeeze_dims": [2]}),
    "STRIDED_SLICE": one("STRIDED_SLICE", [1, 6, 10, 3], (1, 2, 3, 3), [[0, 1, 2, 0], [1, 5, 9, 3], [1, 2, 3, 1]]),
    "SLICE": one("SLICE", [1, 6, 10, 3], (1, 4, 5, 2), [[0, 1, 2, 1], [1, 4, 5, 2]]),
    "SPLIT": one("SPLIT", [1, 6, 10, 4], (1, 6, 10, 2), [3], {"num_splits": 2}, n_out=2, const_first=True),
    "SPLIT_V": one("SPLIT_V", [1, 6, 10, 4], [(1, 6, 10, 1), (1, 6, 10, 3)], [[1, 3], 3], {"num_splits": 2}),
    "GATHER": one("GATHER", [5, 7], (3, 7), [[4, 0, 2]], {"axis": 0}),
    "GATHER_ND": one("GATHER_ND", [5, 7, 3], (2, 3), [[[4, 1], [0, 6]]]),
    "BROADCAST_TO": one("BROADCAST_TO", [1, 5, 1], (3, 5, 4), [[3, 5, 4]], version=2),
    "REVERSE_V2": one("REVERSE_V2", [3, 5, 4], (3, 5, 4), [[1]]),
    "TRANSPOSE": one("TRANSPOSE", [2, 3, 5], (5, 2, 3), [[2, 0, 1]]),
    "DEPTH_TO_SPACE": one("DEPTH_TO_SPACE", [1, 2, 3, 8], (1, 4, 6, 2), options={"block_size": 2}),
    "SPACE_TO_DEPTH": one("SPACE_TO_DEPTH", [1, 4, 6, 3], (1, 2, 3, 12), options={"block_size": 2}),
    "TILE": one("TILE", [2, 3, 5], (2, 6, 15), [[1, 2, 3]]),
    "CONCATENATION": one("CONCATENATION", [1, 3, 5, 2], (1, 3, 5, 4), options={"axis": 3}, n_in=2),
}
NO_INT16 = {"DEPTH_TO_SPACE", "SPACE_TO_DEPTH"}          # LiteRT has no int16 kernel for these at all
COPY_CASES = [(op, dt) for op in COPIES for dt in ("int8", "uint8", "int16")
              if (op != "CONCATENATION" or dt == "int16") and not (dt == "int16" and op in NO_INT16)]


def model(tmp_path, build, dtype, qo=None, name="m.tflite"):
    """The model in `dtype`, input and output quantized as QUANT says (or the output as `qo`)."""
    qi, qo_ = QUANT[dtype]
    b = ModelBuilder()
    build(b, dtype, qi, qo or qo_)
    return save(b, tmp_path, name)


def ints(graph, dtype):
    info = np.iinfo(dtype)
    return [RNG.integers(info.min, info.max + 1, graph.main.tensors[t].shape).astype(dtype) for t in graph.main.inputs]


@pytest.mark.parametrize("opcode, dtype", COPY_CASES)
def test_litert_copies_the_integers_and_so_does_the_conversion(tmp_path, opcode, dtype):
    """LiteRT's reference and default (delegate-free) kernels give the output exactly the input's integers (those
    of the same model with the output quantized as the input); the ONNX model gives the same, 0 steps, by default
    and with --exact-int, and its warnings name the op. (The old conversion rescaled: tens of steps off.)"""
    from ai_edge_litert.interpreter import OpResolverType as R
    graph = model(tmp_path, COPIES[opcode], dtype)
    same = model(tmp_path, COPIES[opcode], dtype, QUANT[dtype][0], "same.tflite")
    xs = ints(graph, dtype)
    copied = [run_tflite(same, xs, keep_all=False)[t] for t in same.main.outputs]
    for resolver in (R.BUILTIN_REF, R.BUILTIN_WITHOUT_DEFAULT_DELEGATES):
        run = run_tflite(graph, xs, keep_all=False, resolver=resolver)
        for t, want in zip(graph.main.outputs, copied):
            np.testing.assert_array_equal(run[t], want)
    for exact in (False, True):
        result = convert(graph, exact_int=exact)
        ref, got = litert_and_onnx(graph, result, xs)
        for r, g in zip(ref, got):
            assert g.dtype == r.dtype
            np.testing.assert_array_equal(g, r)
        notes = [w for w in result.warnings if "LiteRT copies" in w]
        assert len(notes) == 1 and notes[0].startswith(f"{opcode}#0:") and dtype in notes[0], result.warnings


def test_copied_pool_read_by_a_convolution(tmp_path):
    """A copying int8 MAX_POOL_2D read by a convolution goes back through QuantizeLinear in the default mode (so that
    ONNX Runtime fuses the convolution) with the pool output's own scale, which gives back the integers. Against
    LiteRT's reference kernels: 0 steps with --exact-int, at most 1 by default (the convolution's one rounding; the
    average pool after it keeps the convolution's reader a fusable one)."""
    b = ModelBuilder()
    x = b.input("x", [1, 8, 12, 3], "int8", quant=(0.05, -3))
    p = b.tensor("p", [1, 4, 6, 3], "int8", quant=(0.09, 7))
    b.op("MAX_POOL_2D", [x], [p], {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2,
                                   "filter_width": 2})
    w = b.const("w", RNG.integers(-127, 128, (5, 3, 3, 3)).astype(np.int8), quant=(0.01, 0))
    bias = b.const("b", RNG.integers(-300, 300, 5).astype(np.int32), quant=(0.09 * 0.01, 0))
    c = b.tensor("c", [1, 2, 4, 5], "int8", quant=(0.2, 1))
    b.op("CONV_2D", [p, w, bias], [c], {"padding": "VALID"})
    y = b.tensor("y", [1, 1, 2, 5], "int8", quant=(0.2, 1))
    b.op("AVERAGE_POOL_2D", [c], [y], {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2,
                                       "filter_width": 2})
    b.output(y)
    graph = save(b, tmp_path)
    xs = ints(graph, "int8")
    qdq = convert(graph)
    scales = {i.name: float(numpy_helper.to_array(i).ravel()[0]) for i in qdq.model.graph.initializer
              if i.data_type == 1 and len(numpy_helper.to_array(i).ravel()) == 1}
    assert any(scales.get(n.input[1]) == np.float32(0.09) for n in nodes(qdq, "QuantizeLinear")), \
        "the pool's integers reach the convolution through QuantizeLinear at the pool output's scale"
    (ref,), (got,) = litert_and_onnx(graph, qdq, xs)
    assert np.abs(got.astype(int) - ref.astype(int)).max() <= 1
    (ref,), (got,) = litert_and_onnx(graph, convert(graph, exact_int=True), xs)
    np.testing.assert_array_equal(got, ref)


REFUSED = {
    "EXPAND_DIMS": one("EXPAND_DIMS", [3, 5], (3, 1, 5), [1]),
    "PACK": one("PACK", [3, 5], (2, 3, 5), options={"values_count": 2, "axis": 0}, n_in=2),
    "UNPACK": one("UNPACK", [2, 3, 5], (3, 5), options={"num": 2, "axis": 0}, n_out=2),
    "CONCATENATION": one("CONCATENATION", [1, 3, 5, 2], (1, 3, 5, 4), options={"axis": 3}, n_in=2),
    "SPACE_TO_BATCH_ND": one("SPACE_TO_BATCH_ND", [1, 4, 6, 3], (4, 2, 4, 3), [[2, 2], [[0, 0], [1, 1]]]),
    "BATCH_TO_SPACE_ND": one("BATCH_TO_SPACE_ND", [4, 2, 3, 3], (1, 4, 5, 3), [[2, 2], [[0, 0], [0, 1]]]),
}


@pytest.mark.parametrize("opcode", sorted(REFUSED))
def test_models_litert_refuses_keep_their_conversion(tmp_path, opcode):
    """Where LiteRT refuses the model (its kernels check the quantization in every build), the conversion is as
    before: the op between DequantizeLinear and QuantizeLinear, no copy warning."""
    graph = model(tmp_path, REFUSED[opcode], "int8")
    with pytest.raises(LiteRTRefusal, match=r"params\.(scale|zero_point) != "):
        run_tflite(graph, ints(graph, "int8"), keep_all=False)
    result = convert(graph)
    assert nodes(result, "DequantizeLinear") and nodes(result, "QuantizeLinear")
    assert not [w for w in result.warnings if "LiteRT copies" in w]


def test_uint8_concatenation_rescales_as_litert(tmp_path):
    """uint8 CONCATENATION is the one "moves" op LiteRT rescales: the conversion keeps dequantizing, within one step
    of LiteRT (QuantizeLinear rounds ties to even; 0 steps on these inputs), with no copy warning."""
    graph = model(tmp_path, COPIES["CONCATENATION"], "uint8")
    xs = ints(graph, "uint8")
    run = run_tflite(graph, xs, keep_all=False)
    assert not np.array_equal(run[graph.main.outputs[0]], np.concatenate(xs, axis=3))      # not copied
    for exact in (False, True):
        result = convert(graph, exact_int=exact)
        (want,), (got,) = litert_and_onnx(graph, result, xs)
        assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
        assert not [w for w in result.warnings if "LiteRT copies" in w]
