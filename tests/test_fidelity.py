"""Models the corpus never had (issue 17): what real converters write that our generated tests did not, each as a
small generated model converted, run in ONNX Runtime and validated against LiteRT; and `convert`'s ONNX Runtime
check, which refuses to write a model ONNX Runtime cannot load or run."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from inspector.cli import main
from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.ir.errors import ConversionError
from inspector.core.proof.ort_check import ort_check
from inspector.core.proof.validate import make_inputs, run_tflite, validate

from .test_quant import bias_for, per_channel, save

RNG = np.random.default_rng(23)


def run_and_validate(graph, **options):
    """Convert, pass ONNX Runtime's check (load + one run), validate every tensor against LiteRT."""
    result = convert(graph, **options)
    assert ort_check(result.model) is None
    v = validate(result)
    assert v.ok and not v.first_bad(), [(e.name, e.max_rel, e.steps) for e in v.outputs + v.intermediates
                                        if not e.ok]
    return result, v


# --- 3: constant operands in the shape ONNX wants ----------------------------------------------------------------
def transpose_conv(tmp_path, bias_shape, quantized: bool):
    """TRANSPOSE_CONV stride 2 SAME on a non-square map, its bias [1, 1, 1, C] as onnx2tf writes it."""
    b = ModelBuilder()
    sx = 0.05
    x = b.input("x", [1, 3, 4, 5], "int8" if quantized else "float32", quant=(sx, 1) if quantized else None)
    w = RNG.uniform(-1, 1, (6, 3, 3, 5))
    bias = RNG.uniform(-0.3, 0.3, 6)
    if quantized:
        wq, wquant = per_channel(w, axis=0)
        bq, bquant = bias_for(bias, sx, wquant["scales"])
        wc = b.const("w", wq, quant=wquant)
        bquant["axis"] = len(bias_shape) - 1
        bc = b.const("b", bq.reshape(bias_shape), quant=bquant)
    else:
        wc = b.const("w", w.astype(np.float32))
        bc = b.const("b", bias.reshape(bias_shape).astype(np.float32))
    y = b.tensor("y", [1, 6, 8, 6], "int8" if quantized else "float32", quant=(0.08, -3) if quantized else None)
    b.op("TRANSPOSE_CONV", [b.const("out_shape", np.array([1, 6, 8, 6], np.int32)), wc, x, bc], [y],
         {"padding": "SAME", "stride_h": 2, "stride_w": 2})
    b.output(y)
    return save(b, tmp_path)


@pytest.mark.parametrize("quantized", [False, True])
def test_transpose_conv_with_a_4d_bias(tmp_path, quantized):
    result, _ = run_and_validate(transpose_conv(tmp_path, (1, 1, 1, 6), quantized))
    conv = next(n for n in result.model.graph.node if n.op_type == "ConvTranspose")
    shapes = {i.name: list(i.dims) for i in result.model.graph.initializer}
    producers = {o: n for n in result.model.graph.node for o in n.output}
    bias = conv.input[2]
    while bias not in shapes:                    # quantized: the int32 bias behind its DequantizeLinear
        bias = producers[bias].input[0]
    assert shapes[bias] == [6]


def test_fully_connected_with_a_2d_bias(tmp_path):
    """A [1, units] bias on a 3-D FULLY_CONNECTED (keep_num_dims): an Add of it as given would still broadcast
    right, but a [1, 1, units] one would not; any rank is flattened."""
    b = ModelBuilder()
    x = b.input("x", [1, 4, 7], "float32")
    y = b.tensor("y", [1, 4, 3])
    b.op("FULLY_CONNECTED", [x, b.const("w", RNG.uniform(-1, 1, (3, 7)).astype(np.float32)),
                             b.const("b", RNG.uniform(-1, 1, (1, 1, 3)).astype(np.float32))], [y],
         {"keep_num_dims": True})
    b.output(y)
    run_and_validate(save(b, tmp_path))


# --- convert runs the result in ONNX Runtime before writing it --------------------------------------------------
def test_ort_check_names_onnx_runtimes_reason():
    """A model the ONNX checker accepts and ONNX Runtime refuses to run (ConvTranspose with a 4-D bias)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 5, 6])
    w = onnx.numpy_helper.from_array(RNG.uniform(-1, 1, (5, 6, 3, 3)).astype(np.float32), "w")
    bias = onnx.numpy_helper.from_array(np.zeros((1, 1, 1, 6), np.float32), "b")
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[3, 3])
    model = helper.make_model(helper.make_graph([node], "g", [x], [y], [w, bias]),
                              opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    with pytest.raises(ConversionError, match="ONNX Runtime cannot run the converted model: .*[Bb]ias"):
        ort_check(model)


def test_convert_refuses_to_write_what_onnx_runtime_cannot_run(tmp_path, monkeypatch, capsys):
    """With the bias normalisation undone (the defect onnx2tf's files exposed), `convert` exits 1 with ONNX
    Runtime's reason and writes nothing; --no-ort-check writes it anyway; fixed, it converts."""
    from inspector.core.emit.ops import conv
    graph = transpose_conv(tmp_path, (1, 1, 1, 6), quantized=False)
    out = tmp_path / "out.onnx"
    assert main(["convert", graph.path, "-o", str(out)]) == 0 and out.exists()
    out.unlink()
    monkeypatch.setattr(conv, "bias_1d", lambda ctx, op, slot: ctx.input(op, slot))
    assert main(["convert", graph.path, "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert not out.exists() and "ONNX Runtime cannot run" in err and "Traceback" not in err, err
    assert main(["convert", graph.path, "-o", str(out), "--no-ort-check"]) == 0 and out.exists()


# --- 5: int16 activations through ops ONNX Runtime has no int16 kernel for ----------------------------------------
@pytest.mark.parametrize("opset", [18, 21])
def test_int16_pools_and_resizes_are_exact(tmp_path, opset):
    """16x8: a CONV_2D, then MAX_POOL_2D and RESIZE_NEAREST_NEIGHBOR (no int16 MaxPool in ONNX, no int16 Resize in
    ONNX Runtime) and a PADV2: computed through Dequantize/QuantizeLinear (or their arithmetic below opset 21),
    exactly, so each equals LiteRT's integers wherever its input does."""
    b = ModelBuilder()
    sx = 1 / 4096
    x = b.input("x", [1, 6, 10, 3], "int16", quant=(sx, 0))
    wq, wquant = per_channel(RNG.uniform(-1, 1, (4, 3, 3, 3)), axis=0)
    bq, bquant = bias_for(RNG.uniform(-1, 1, 4), sx, wquant["scales"], dtype="int64")
    q = (1 / 2048, 0)
    c = b.tensor("c", [1, 6, 10, 4], "int16", quant=q)
    b.op("CONV_2D", [x, b.const("w", wq, quant=wquant), b.const("b", bq, quant=bquant)], [c], {"padding": "SAME"})
    p = b.tensor("p", [1, 3, 4, 4], "int16", quant=q)
    b.op("MAX_POOL_2D", [c], [p], {"padding": "SAME", "filter_height": 2, "filter_width": 3, "stride_h": 2,
                                   "stride_w": 3})
    r = b.tensor("r", [1, 6, 12, 4], "int16", quant=q)
    b.op("RESIZE_NEAREST_NEIGHBOR", [p, b.const("size", np.array([6, 12], np.int32))], [r], {})
    y = b.tensor("y", [1, 8, 13, 4], "int16", quant=q)
    b.op("PADV2", [r, b.const("pads", np.array([[0, 0], [1, 1], [0, 1], [0, 0]], np.int32)),
                   b.const("v", np.array([-7], np.int16), quant=q)], [y], {})
    b.output(y)
    result, v = run_and_validate(save(b, tmp_path), opset=opset)
    steps = {e.name: e.steps for e in v.intermediates + v.outputs}
    assert steps["c"] <= 1 and steps["p"] <= steps["c"] and steps["r"] <= steps["p"] and steps["y"] <= steps["r"]
    assert {n.op_type for n in result.model.graph.node} >= {"MaxPool", "Resize"}


# --- 7: --exact-int PRELU bit-exact ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, qx, qa, qo", [("int8", (0.05, -3), (0.004, -20), (0.03, 10)),
                                               ("uint8", (0.04, 120), (0.003, 100), (0.05, 90))])
def test_exact_int_prelu_is_bit_exact(tmp_path, dtype, qx, qa, qo):
    """A channel-wise alpha [1, 1, C] broadcast over a non-square map, fed every 8-bit value: the negative side is
    TFLite's (x - zp) * (alpha - zp_alpha) requantized with its own multiplier, where QDQ was one step off."""
    from .test_quant_seeds import litert_and_onnx
    b = ModelBuilder()
    shape = [1, 8, 16, 6]
    x = b.input("x", shape, dtype, quant=qx)
    info = np.iinfo(dtype)
    alpha = b.const("alpha", RNG.integers(info.min, info.max, (1, 1, 6), endpoint=True).astype(dtype), quant=qa)
    y = b.tensor("y", shape, dtype, quant=qo)
    b.op("PRELU", [x, alpha], [y], {})
    b.output(y)
    graph = save(b, tmp_path)
    xs = np.resize(np.arange(info.min, info.max + 1, dtype=dtype), int(np.prod(shape)))
    xs = RNG.permutation(xs).reshape(shape)
    result = convert(graph, exact_int=True)
    assert not [n for n in result.model.graph.node if n.op_type in ("PRelu", "QuantizeLinear")]
    (ref,), (got,) = litert_and_onnx(graph, result, [xs])
    np.testing.assert_array_equal(got, ref)
    (_,), (qdq,) = litert_and_onnx(graph, convert(graph), [xs])
    assert np.abs(qdq.astype(int) - ref).max() <= 1           # the default stays QDQ, within a step


# --- 4: STRIDED_SLICE with begin/end/strides computed at run time ------------------------------------------------
def shape_minus(b, x, rank: int, minus, name: str):
    """SHAPE(x) - minus: an int32 vector known only at run time."""
    s = b.tensor(f"{name}_shape", [rank], "int32")
    b.op("SHAPE", [x], [s], {"out_type": 2})
    y = b.tensor(name, [rank], "int32")
    b.op("SUB", [s, b.const(f"{name}_minus", np.array(minus, np.int32))], [y], {})
    return y


@pytest.mark.parametrize("masks, out_shape", [
    ({"begin_mask": 0b1000, "end_mask": 0b0001}, [1, 3, 3, 3]),                  # x[:, 1:6:2, 2:9:3, :]
    ({"shrink_axis_mask": 0b0001, "end_mask": 0b0100}, [3, 3, 3]),              # x[0, 1:6:2, 2::3, 0:3]
    ({"shrink_axis_mask": 0b1001, "begin_mask": 0b0100}, [3, 3]),               # x[0, 1:6:2, :9:3, 0]
])
def test_strided_slice_with_run_time_operands(tmp_path, masks, out_shape):
    """begin, end and strides all from SHAPE arithmetic on a non-square [1, 6, 10, 3] map, behind a CONV_2D (so
    the slice reads a channels-first value), with begin/end/shrink masks."""
    b = ModelBuilder()
    x = b.input("x", [1, 6, 10, 3], "float32")
    c = b.tensor("c", [1, 6, 10, 3])
    b.op("CONV_2D", [x, b.const("w", RNG.uniform(-1, 1, (3, 1, 1, 3)).astype(np.float32)),
                     b.const("bias", np.zeros(3, np.float32))], [c], {"padding": "SAME"})
    begin = shape_minus(b, c, 4, [1, 5, 8, 3], "begin")                   # [0, 1, 2, 0]
    end = shape_minus(b, c, 4, [0, 0, 1, 0], "end")                       # [1, 6, 9, 3]
    strides = shape_minus(b, c, 4, [0, 4, 7, 2], "strides")               # [1, 2, 3, 1]
    y = b.tensor("y", out_shape)
    b.op("STRIDED_SLICE", [c, begin, end, strides], [y], masks)
    b.output(y)
    result, _ = run_and_validate(save(b, tmp_path))
    assert any(n.op_type == "Slice" and n.input[1] not in {i.name for i in result.model.graph.initializer}
               for n in result.model.graph.node)                          # the starts are computed, not folded


# --- 1: complex values through shape ops -------------------------------------------------------------------------
def test_complex_values_through_shape_ops(tmp_path):
    """RFFT2D [1, 8, 9] -> EXPAND_DIMS -> TRANSPOSE -> SQUEEZE -> STRIDED_SLICE -> RESHAPE, and SLICE ->
    COMPLEX_ABS / REAL / IMAG: the complex tensor stays float pairs with the pair axis last. (LiteRT has no complex
    CONCATENATION.)"""
    b = ModelBuilder()
    x = b.input("x", [1, 8, 16], "float32")
    z = b.tensor("z", [1, 8, 9], "complex64")
    b.op("RFFT2D", [x, b.const("fft_length", np.array([8, 16], np.int32))], [z])

    def t(name, shape, opcode, ins, options=None):
        y = b.tensor(name, shape, "complex64")
        b.op(opcode, ins, [y], options or {})
        return y
    e = t("e", [1, 8, 9, 1], "EXPAND_DIMS", [z, b.const("axis", np.array(-1, np.int32))])
    tr = t("tr", [1, 9, 8, 1], "TRANSPOSE", [e, b.const("perm", np.array([0, 2, 1, 3], np.int32))])
    sq = t("sq", [1, 9, 8], "SQUEEZE", [tr], {"squeeze_dims": [3]})
    ss = t("ss", [1, 4, 5], "STRIDED_SLICE", [sq, b.const("b", np.array([0, 1, 0], np.int32)),
                                              b.const("e", np.array([1, 9, 5], np.int32)),
                                              b.const("s", np.array([1, 2, 1], np.int32))])
    sl = t("sl", [1, 4, 3], "SLICE", [sq, b.const("begin", np.array([0, 0, 2], np.int32)),
                                      b.const("size", np.array([1, 4, 3], np.int32))])
    rs = t("rs", [4, 5], "RESHAPE", [ss, b.const("shape", np.array([4, 5], np.int32))])
    for name, src, shape in (("COMPLEX_ABS", rs, [4, 5]), ("REAL", rs, [4, 5]), ("IMAG", sl, [1, 4, 3])):
        y = b.tensor(name.lower(), shape)
        b.op(name, [src], [y])
        b.output(y)
    run_and_validate(save(b, tmp_path))


def test_complex_concatenation_against_numpy(tmp_path):
    """RFFT2D of [1, 8, 16] and of [1, 4, 16] (fft 4 x 16), CONCATENATION on axis 1 into [1, 12, 9], a complex
    constant [1, 2, 9] appended, then COMPLEX_ABS: compared with numpy's rfft2/abs (1e-5 of the output's scale),
    since LiteRT has no complex CONCATENATION kernel (it refuses to prepare the model, asserted here too)."""
    from ai_edge_litert.interpreter import Interpreter
    from inspector.core.proof.validate import run_onnx
    b = ModelBuilder()
    xs = [RNG.uniform(-1, 1, (1, rows, 16)).astype(np.float32) for rows in (8, 4)]
    zs = []
    for k, x in enumerate(xs):
        xi = b.input(f"x{k}", x.shape, "float32")
        z = b.tensor(f"z{k}", [1, x.shape[1], 9], "complex64")
        b.op("RFFT2D", [xi, b.const(f"fft{k}", np.array([x.shape[1], 16], np.int32))], [z])
        zs.append(z)
    k = (RNG.uniform(-1, 1, (1, 2, 9)) + 1j * RNG.uniform(-1, 1, (1, 2, 9))).astype(np.complex64)
    cat = b.tensor("cat", [1, 14, 9], "complex64")
    b.op("CONCATENATION", zs + [b.const("k", k)], [cat], {"axis": 1})
    y = b.tensor("y", [1, 14, 9])
    b.op("COMPLEX_ABS", [cat], [y])
    b.output(y)
    graph = save(b, tmp_path)
    with pytest.raises(RuntimeError, match="CONCATENATION"):
        Interpreter(model_path=graph.path).allocate_tensors()
    result = convert(graph)
    assert ort_check(result.model) is None
    got = run_onnx(result.model, {"x0": xs[0], "x1": xs[1]})["y"]
    want = np.abs(np.concatenate([np.fft.rfft2(x) for x in xs] + [k], axis=1))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("pins", [None, {"real": "NCHW"}])
def test_cast_of_a_complex_tensor_is_its_real_part(tmp_path, pins):
    """BirdNET's front end CASTs its RFFT2D result to float32 (LiteRT keeps the real part): [1, 6, 8, 16] -> RFFT2D
    [1, 6, 8, 9] -> CAST -> CONV_2D over the 6 x 8 map with 9 channels, validated against LiteRT tensor by tensor
    (default tolerances); also with the CAST's output pinned channels-first (the pair is in TFLite's layout)."""
    b = ModelBuilder()
    x = b.input("x", [1, 6, 8, 16], "float32")
    z = b.tensor("z", [1, 6, 8, 9], "complex64")
    b.op("RFFT2D", [x, b.const("fft_length", np.array([8, 16], np.int32))], [z])
    real = b.tensor("real", [1, 6, 8, 9])
    b.op("CAST", [z], [real])
    y = b.tensor("y", [1, 6, 8, 4])
    b.op("CONV_2D", [real, b.const("w", RNG.uniform(-1, 1, (4, 3, 3, 9)).astype(np.float32)),
                     b.const("bias", RNG.uniform(-1, 1, 4).astype(np.float32))], [y], {"padding": "SAME"})
    b.output(y)
    result, _ = run_and_validate(save(b, tmp_path), pins=pins)
    assert any(n.op_type == "Gather" for n in result.model.graph.node)
    assert result.transposes == 1


# --- 2: stale static shapes in the file ---------------------------------------------------------------------------
def litert_shapes(graph, inputs) -> dict[str, tuple[int, ...]]:
    """Every non-constant tensor's shape after LiteRT ran the model on `inputs` (it resizes them in Prepare)."""
    return {graph.main.tensors[i].name: v.shape for i, v in run_tflite(graph, inputs).items()}


def onnx_shapes(result, batch: int) -> dict[str, tuple[int, ...]]:
    """Each TFLite tensor's shape as the ONNX model declares it (value info or graph output, moved back to TFLite's
    axis order), with its symbolic batch dim at `batch`."""
    g, sg, plan = result.model.graph, result.graph.main, result.plan
    declared = {v.name: tuple(batch if d.dim_param else d.dim_value for d in v.type.tensor_type.shape.dim)
                for v in list(g.value_info) + list(g.output) + list(g.input)}
    named = {t: (names[0], plan.perm(t, sg.tensors[t].rank)) for t, names in result.trace.tensor_values.items()}
    named.update({t: (sg.tensors[t].name, plan.outputs.get(t, plan.perm(t, sg.tensors[t].rank))) for t in sg.outputs})
    return {sg.tensors[t].name: tuple(declared[name][list(perm).index(a)] for a in range(len(perm)))
            for t, (name, perm) in named.items() if sg.tensors[t].data is None and name in declared}


def stale_spectrum(tmp_path):
    """x [1, 8, 16] -> RFFT2D -> COMPLEX_ABS -> MUL by a [9] window: the RFFT2D result and the COMPLEX_ABS are
    declared [1, 8, 16] (the fft length, as a converter wrote it), the output [1, 8, 32]; LiteRT computes
    [1, 8, 9] for all three."""
    b = ModelBuilder()
    x = b.input("x", [1, 8, 16], "float32")
    z = b.tensor("z", [1, 8, 16], "complex64")
    b.op("RFFT2D", [x, b.const("fft_length", np.array([8, 16], np.int32))], [z])
    a = b.tensor("a", [1, 8, 16])
    b.op("COMPLEX_ABS", [z], [a])
    y = b.tensor("y", [1, 8, 32])
    b.op("MUL", [a, b.const("k", RNG.uniform(0.5, 1.5, 9).astype(np.float32))], [y], {})
    b.output(y)
    return save(b, tmp_path), ["z", "a", "y"], ["a", "y"]       # (z is inside the DFT chain: no ONNX value)


def stale_feature_map(tmp_path):
    """A dynamic-batch [N, 6, 10, 3] image -> CONV_2D stride 2 SAME (declared [N, 6, 10, 4], LiteRT: [N, 3, 5, 4]) ->
    MAX_POOL_2D 2x2 stride 2 SAME (declared [N, 6, 10, 4], LiteRT: [N, 2, 3, 4]) -> RESHAPE to SHAPE(pool)[0], -1
    (declared [N, 240], LiteRT: [N, 24]); the convolution reads channels-first in ONNX."""
    b = ModelBuilder()
    x = b.input("x", [1, 6, 10, 3], "float32", shape_signature=[-1, 6, 10, 3])
    c = b.tensor("c", [1, 6, 10, 4], shape_signature=[-1, 6, 10, 4])
    b.op("CONV_2D", [x, b.const("w", RNG.uniform(-1, 1, (4, 3, 2, 3)).astype(np.float32)),
                     b.const("bias", RNG.uniform(-1, 1, 4).astype(np.float32))], [c],
         {"padding": "SAME", "stride_h": 2, "stride_w": 2})
    p = b.tensor("p", [1, 6, 10, 4], shape_signature=[-1, 6, 10, 4])
    b.op("MAX_POOL_2D", [c], [p], {"padding": "SAME", "filter_height": 2, "filter_width": 2, "stride_h": 2,
                                   "stride_w": 2})
    s = b.tensor("s", [4], "int32")
    b.op("SHAPE", [p], [s], {"out_type": 2})
    n = b.tensor("n", [1], "int32")
    b.op("SLICE", [s, b.const("b0", np.array([0], np.int32)), b.const("n1", np.array([1], np.int32))], [n])
    target = b.tensor("target", [2], "int32")
    b.op("CONCATENATION", [n, b.const("minus1", np.array([-1], np.int32))], [target], {"axis": 0})
    y = b.tensor("y", [1, 240], shape_signature=[-1, 240])
    b.op("RESHAPE", [p, target], [y])
    b.output(y)
    return save(b, tmp_path), ["c", "p", "y"], ["c", "p", "y"]


@pytest.mark.parametrize("make, batch", [(stale_spectrum, None), (stale_feature_map, 1), (stale_feature_map, 3)])
def test_stale_static_shapes_are_replaced_by_litert_s(tmp_path, make, batch):
    """Shapes an intermediate and an output declare, which LiteRT does not use: the conversion takes the shapes
    LiteRT computes (compared with LiteRT's own after a run, at batch 1 and 3 for the dynamic one), says so in a
    note per tensor, passes strict ONNX shape inference (convert's checker) and ONNX Runtime (a session run), and
    validates against LiteRT (default tolerances)."""
    graph, stale, declared = make(tmp_path)
    result = convert(graph)
    assert ort_check(result.model) is None
    v = validate(result, batch=batch)
    assert v.ok and not v.first_bad(), [(e.name, e.max_rel) for e in v.outputs + v.intermediates if not e.ok]
    ref = litert_shapes(graph, make_inputs(graph, batch=batch))
    got = onnx_shapes(result, batch or 1)
    assert {k: got[k] for k in ref if k in got} == {k: ref[k] for k in ref if k in got}
    assert set(declared) <= set(got)
    noted = [n for n in result.warnings if "the file declares shape" in n]
    assert sorted(n.split("'")[1] for n in noted) == sorted(stale), result.warnings


def test_info_shows_litert_s_shapes_and_the_notes(tmp_path, capsys):
    """`info` on a file with stale shapes lists the output as LiteRT computes it, and a note per corrected tensor."""
    import json
    from ai_edge_litert.interpreter import Interpreter
    graph, stale, _ = stale_spectrum(tmp_path)
    it = Interpreter(model_path=graph.path)
    it.allocate_tensors()
    assert main(["info", graph.path, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["outputs"][0]["shape"] == it.get_output_details()[0]["shape"].tolist() == [1, 8, 9]
    assert [n.split("'")[1] for n in s["notes"]] == stale
    assert main(["info", graph.path]) == 0
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("note: ")]
    assert len(notes) == 3 and "LiteRT computes [1, 8, 9]" in notes[-1]


def stale_everywhere(tmp_path):
    """A chain of 33 ops of 30 kinds, every output declared with its true rank and all dims 11 (LiteRT checks the rank;
    SLICE with constant bounds also checks the dims, so its output is declared right); what LiteRT computes is in
    the comments. Non-square throughout."""
    b = ModelBuilder()
    count = iter(range(100))
    rng = np.random.default_rng(7)             # its own: ARG_MAX must not meet a near tie whatever ran before

    def f(*shape):
        return rng.uniform(-1, 1, shape).astype(np.float32)

    def i(v):
        return np.asarray(v, np.int32)

    def s(opcode, ins, options=None, rank=4, n=1, **kw):
        k = next(count)
        outs = [b.tensor(f"{opcode.lower()}{k}_{j}", kw.get("exact") or [11] * rank, kw.get("dtype", "float32"))
                for j in range(n)]
        b.op(opcode, [b.const(f"c{k}_{j}", v) if isinstance(v, np.ndarray) else v for j, v in enumerate(ins)], outs,
             options or {}, version=kw.get("version", 1))
        return outs if n > 1 else outs[0]
    x = b.input("x", [1, 6, 10, 3])
    c = s("CONV_2D", [x, f(4, 3, 2, 3), f(4)], {"padding": "SAME", "stride_h": 2, "stride_w": 2})     # 1, 3, 5, 4
    d = s("DEPTHWISE_CONV_2D", [c, f(1, 2, 3, 8), f(8)], {"padding": "VALID", "depth_multiplier": 2})  # 1, 2, 3, 8
    p = s("PAD", [d, i([[0, 0], [1, 2], [0, 1], [0, 0]])])                                            # 1, 5, 4, 8
    m = s("MIRROR_PAD", [p, i([[0, 0], [1, 1], [2, 0], [0, 0]])], {"mode": "REFLECT"})                # 1, 7, 6, 8
    mp = s("MAX_POOL_2D", [m], {"padding": "SAME", "filter_height": 2, "filter_width": 3, "stride_h": 2,
                                "stride_w": 2})                                                       # 1, 4, 3, 8
    ap = s("AVERAGE_POOL_2D", [m], {"padding": "VALID", "filter_height": 3, "filter_width": 2, "stride_h": 2,
                                    "stride_w": 2})                                                   # 1, 3, 3, 8
    ap = s("PAD", [ap, i([[0, 0], [0, 1], [0, 0], [0, 0]])])                                          # 1, 4, 3, 8
    cat = s("CONCATENATION", [mp, ap], {"axis": 3})                                                   # 1, 4, 3, 16
    tr = s("TRANSPOSE", [cat, i([0, 2, 1, 3])])                                                       # 1, 3, 4, 16
    ss = s("STRIDED_SLICE", [tr, i([0, 0, 1, 0]), i([1, 3, 4, 16]), i([1, 2, 1, 3])], {"shrink_axis_mask": 1},
           rank=3)                                                                                    # 2, 3, 6
    sl = s("SLICE", [ss, i([0, 0, 1]), i([-1, 3, 4])], exact=[2, 3, 4])
    tl = s("TILE", [sl, i([1, 1, 2])], rank=3)                                                        # 2, 3, 8
    a, bb = s("SPLIT", [i(2), tl], {"num_splits": 2}, rank=3, n=2)                                    # 2, 3, 4
    sv = s("SPLIT_V", [s("ADD", [a, bb], rank=3), i([1, 1, -1]), i(1)], {"num_splits": 3}, rank=3,
           n=3)                                                                                       # 2, 1, 4
    pk = s("PACK", sv, {"axis": 1, "values_count": 3})                                                # 2, 3, 1, 4
    sq = s("SQUEEZE", [pk], {"squeeze_dims": [2]}, rank=3)                                            # 2, 3, 4
    rs = s("RESHAPE", [s("EXPAND_DIMS", [sq, i(-1)]), i([3, -1])], rank=2)                            # 3, 8
    fc = s("FULLY_CONNECTED", [rs, f(5, 8), f(5)], {"keep_num_dims": True}, rank=2)                   # 3, 5
    bm = s("BATCH_MATMUL", [s("EXPAND_DIMS", [fc, i(0)], rank=3), f(2, 5, 7)], rank=3)                # 2, 3, 7
    g = s("GATHER", [bm, i([2, 0, 1])], {"axis": 1}, rank=3)                                          # 2, 3, 7
    mean = s("MEAN", [g, i([1])], {"keep_dims": True}, rank=3)                                        # 2, 1, 7
    sm = s("SOFTMAX", [s("SUM", [g, i([1])], {"keep_dims": False}, rank=2)], {"beta": 1.0}, rank=2)   # 2, 7
    am = s("ARG_MAX", [sm, i(1)], {"output_type": 2}, dtype="int32", rank=1)                          # 2
    up = s("UNPACK", [mean], {"num": 2, "axis": 0}, rank=2, n=2)                                      # 1, 7
    bt = s("BROADCAST_TO", [up[0], i([3, 7])], rank=2, version=2)                                     # 3, 7
    rz = s("RESIZE_BILINEAR", [s("RESHAPE", [bt, i([1, 1, 3, 7])]), i([4, 6])],
           {"half_pixel_centers": True})                                                              # 1, 4, 6, 7
    d2s = s("DEPTH_TO_SPACE", [s("SPACE_TO_DEPTH", [rz], {"block_size": 2})], {"block_size": 2})      # 1, 4, 6, 7
    b.output(d2s, am, up[1], sm)
    return save(b, tmp_path)


def test_stale_shapes_on_every_op_family(tmp_path):
    """Every op output declared wrong: read, each non-constant tensor has the shape LiteRT gives it after a run, one
    note per tensor; converted, ONNX Runtime runs it and every tensor validates against LiteRT."""
    graph = stale_everywhere(tmp_path)
    ref = litert_shapes(graph, make_inputs(graph))
    got = {t.name: tuple(t.shape) for t in graph.main.tensors if t.data is None}
    assert got == ref
    assert len(graph.notes) == len(got) - 2                    # all but the input and the SLICE
    run_and_validate(graph)


# --- 8: a BirdNET-style audio front end with dynamic shapes ------------------------------------------------------
def audio_front_end(tmp_path, mel_op: str, hop: int = 32, frame: int = 64, mels: int = 20):
    """A waveform [N, L] (batch and length dynamic, stored [1, 1056]) framed as BirdNET's front end does without a
    FRAME op: RESHAPE to [N, L/hop, hop] with a shape PACKed from SHAPE(wave), two STRIDED_SLICEs whose ends come
    from SHAPE(blocks) at run time, CONCATENATION into [N, F, frame] (F = 32); a Hann window MUL, EXPAND_DIMS,
    RFFT2D, SQUEEZE, COMPLEX_ABS, a mel matrix (FULLY_CONNECTED or BATCH_MATMUL), POW, ADD, LOG; then the
    spectrogram [N, F, mels, 1] through two CONV_2D, MAX_POOL_2D, MEAN and a dense head."""
    b = ModelBuilder()
    length = 1056
    frames = (length - frame) // hop + 1
    dyn2, dyn3 = [-1, -1], [-1, -1, -1]

    def t(name, shape, dtype="float32", sig=None):
        return b.tensor(name, shape, dtype, shape_signature=sig)

    def i32(v):
        return np.asarray(v, np.int32)

    def run(opcode, ins, out, options=None):
        b.op(opcode, ins, [out], options or {})
        return out

    wave = b.input("wave", [1, length], "float32", shape_signature=dyn2)
    shp = run("SHAPE", [wave], t("wave_shape", [2], "int32"), {"out_type": 2})
    n = run("STRIDED_SLICE", [shp, b.const("s0", i32([0])), b.const("s1", i32([1])), b.const("st", i32([1]))],
            t("n", [], "int32"), {"shrink_axis_mask": 1})
    target = run("PACK", [n, b.const("minus1", i32(-1)), b.const("hop", i32(hop))], t("target", [3], "int32"),
                 {"axis": 0, "values_count": 3})
    blocks = run("RESHAPE", [wave, target], t("blocks", [1, length // hop, hop], sig=dyn3[:2] + [hop]))
    bshape = run("SHAPE", [blocks], t("blocks_shape", [3], "int32"), {"out_type": 2})
    last = run("MUL", [bshape, b.const("time_axis", i32([0, 1, 0]))], t("last", [3], "int32"))
    end = run("SUB", [last, b.const("one", i32([0, 1, 0]))], t("end", [3], "int32"))
    masks = {"begin_mask": 0b101, "end_mask": 0b101}
    ones = b.const("ones", i32([1, 1, 1]))
    halves = [run("STRIDED_SLICE", [blocks, b.const(f"b{k}", i32([0, k, 0])), e, ones],
                  t(f"half{k}", [1, frames, hop], sig=[-1, -1, hop]), masks) for k, e in ((0, end), (1, last))]
    framed = run("CONCATENATION", halves, t("frames", [1, frames, frame], sig=[-1, -1, frame]), {"axis": 2})
    win = run("MUL", [framed, b.const("hann", np.hanning(frame + 1)[:-1].astype(np.float32))],
              t("windowed", [1, frames, frame], sig=[-1, -1, frame]))
    e4 = run("EXPAND_DIMS", [win, b.const("ax2", i32(2))], t("windowed4", [1, frames, 1, frame], sig=[-1, -1, 1, frame]))
    bins = frame // 2 + 1
    z = run("RFFT2D", [e4, b.const("fft_length", i32([1, frame]))],
            t("spectrum", [1, frames, 1, bins], "complex64", sig=[-1, -1, 1, bins]))
    z3 = run("SQUEEZE", [z], t("spectrum3", [1, frames, bins], "complex64", sig=[-1, -1, bins]), {"squeeze_dims": [2]})
    mag = run("COMPLEX_ABS", [z3], t("magnitude", [1, frames, bins], sig=[-1, -1, bins]))
    weights = RNG.uniform(0, 0.1, (mels, bins)).astype(np.float32)
    mel = t("mel", [1, frames, mels], sig=[-1, -1, mels])
    if mel_op == "FULLY_CONNECTED":
        run("FULLY_CONNECTED", [mag, b.const("mel_w", weights), None], mel, {"keep_num_dims": True})
    else:
        run("BATCH_MATMUL", [mag, b.const("mel_w", np.ascontiguousarray(weights.T))], mel)
    p = run("POW", [mel, b.const("gamma", np.float32(0.3))], t("mel_pow", [1, frames, mels], sig=[-1, -1, mels]))
    s = run("ADD", [p, b.const("eps", np.float32(1e-3))], t("mel_eps", [1, frames, mels], sig=[-1, -1, mels]))
    lg = run("LOG", [s], t("mel_log", [1, frames, mels], sig=[-1, -1, mels]))
    img = run("EXPAND_DIMS", [lg, b.const("ax3", i32(3))], t("image", [1, frames, mels, 1], sig=[-1, -1, mels, 1]))
    relu = {"padding": "SAME", "fused_activation_function": "RELU"}
    c1 = run("CONV_2D", [img, b.const("w1", RNG.uniform(-1, 1, (8, 3, 5, 1)).astype(np.float32)),
                         b.const("b1", RNG.uniform(-1, 1, 8).astype(np.float32))],
             t("conv1", [1, frames, mels, 8], sig=[-1, -1, mels, 8]), relu)
    pl = run("MAX_POOL_2D", [c1], t("pool", [1, frames // 2, mels // 2, 8], sig=[-1, -1, mels // 2, 8]),
             {"padding": "VALID", "filter_height": 2, "filter_width": 2, "stride_h": 2, "stride_w": 2})
    c2 = run("CONV_2D", [pl, b.const("w2", RNG.uniform(-1, 1, (12, 3, 3, 8)).astype(np.float32)),
                         b.const("b2", RNG.uniform(-1, 1, 12).astype(np.float32))],
             t("conv2", [1, frames // 2, mels // 2, 12], sig=[-1, -1, mels // 2, 12]), relu)
    m = run("MEAN", [c2, b.const("axes", i32([1, 2]))], t("mean", [1, 12], sig=[-1, 12]), {"keep_dims": False})
    y = run("FULLY_CONNECTED", [m, b.const("fc_w", RNG.uniform(-1, 1, (5, 12)).astype(np.float32)),
                                b.const("fc_b", RNG.uniform(-1, 1, 5).astype(np.float32))], t("logits", [1, 5], sig=[-1, 5]))
    b.output(y)
    return save(b, tmp_path)


@pytest.mark.parametrize("mel_op", ["FULLY_CONNECTED", "BATCH_MATMUL"])
def test_audio_front_end_with_dynamic_batch_and_length(tmp_path, mel_op):
    """Validated against LiteRT tensor by tensor at its stored length, batch 1 and 3 (default tolerances), and on
    its output at other lengths and batches (1e-4 of the output's scale); ONNX Runtime's session created and run at
    the stored sizes (at length 1 the framing RESHAPE cannot run, in LiteRT either: a note, not a refusal); no
    Transpose (the spectrogram's channel axis is size 1: Squeeze/Unsqueeze, with two dynamic dims)."""
    from inspector.core.proof.ort_check import input_sizes
    from .test_quant_seeds import litert_and_onnx
    graph = audio_front_end(tmp_path, mel_op)
    result = convert(graph)
    assert ort_check(result.model, input_sizes(result)) is None and result.transposes == 0
    assert "dynamic dimensions at wave [1, 1] failed" in ort_check(result.model)
    dims = [d.dim_param or d.dim_value for d in result.model.graph.input[0].type.tensor_type.shape.dim]
    assert all(isinstance(d, str) for d in dims), dims              # batch and length stay dynamic
    for batch in (1, 3):
        v = validate(result, batch=batch)
        assert v.ok and not v.first_bad(), [(e.name, e.max_rel) for e in v.outputs + v.intermediates if not e.ok]
    for shape in [(2, 1344), (1, 800)]:
        (ref,), (got,) = litert_and_onnx(graph, result, [RNG.uniform(-1, 1, shape).astype(np.float32)])
        assert got.shape == ref.shape == (shape[0], 5)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * np.abs(ref).max())
