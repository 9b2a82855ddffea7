"""LiteRT's integer arithmetic, bit for bit, on the ops issue 31's uint8 and int16 nets use: TRANSPOSE_CONV,
BATCH_MATMUL, RESIZE_BILINEAR, SQUARED_DIFFERENCE and SOFTMAX under --exact-int, and int16 convolutions and softmax
in both modes. Every model is compared with LiteRT's reference kernels (every tensor: validate reads the
intermediates); before these kernels each was one step off on some elements."""
from __future__ import annotations

import numpy as np
import pytest

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.proof.islands import onnx_outputs
from inspector.core.proof.validate import make_inputs, run_onnx, run_tflite, validate

from .test_quant import bias_for, nodes, per_channel, save

RNG = np.random.default_rng(31)


def assert_exact(result, seeds=(0, 1)):
    for seed in seeds:
        v = validate(result, seed=seed)
        steps = {e.name: e.steps for e in v.outputs + v.intermediates}
        assert v.ok and steps and all(s == 0 for s in steps.values()), (seed, steps)


def uint8_segmenter(tmp_path):
    """uint8 in and out around an int8 body, as TF's converter writes a full-integer U-Net: QUANTIZE, a strided
    CONV_2D, TRANSPOSE_CONV and RESIZE_BILINEAR (half-pixel) up-sampling, CONCATENATION, a 1x1 CONV_2D to 4
    classes, SOFTMAX, QUANTIZE back to uint8 (scale 1/256, zero point 0)."""
    b = ModelBuilder()
    x = b.input("x", [1, 10, 14, 3], "uint8", quant=(1 / 255, 0))
    q = b.tensor("q", [1, 10, 14, 3], "int8", quant=(1 / 255, -128))
    b.op("QUANTIZE", [x], [q])
    p = (0.03, -20)
    wq, wquant = per_channel(RNG.uniform(-1, 1, (8, 3, 3, 3)), axis=0)
    bq, bquant = bias_for(RNG.uniform(-0.3, 0.3, 8), 1 / 255, wquant["scales"])
    c = b.tensor("c", [1, 5, 7, 8], "int8", quant=p)
    b.op("CONV_2D", [q, b.const("w", wq, quant=wquant), b.const("b", bq, quant=bquant)], [c],
         {"padding": "SAME", "stride_h": 2, "stride_w": 2, "fused_activation_function": "RELU"})
    tq, tquant = per_channel(RNG.uniform(-1, 1, (6, 3, 3, 8)), axis=0)
    tbq, tbquant = bias_for(RNG.uniform(-0.3, 0.3, 6), p[0], tquant["scales"])
    t = b.tensor("t", [1, 10, 14, 6], "int8", quant=p)
    b.op("TRANSPOSE_CONV", [b.const("shape", np.array([1, 10, 14, 6], np.int32)), b.const("tw", tq, quant=tquant), c,
                            b.const("tb", tbq, quant=tbquant)], [t], {"padding": "SAME", "stride_h": 2, "stride_w": 2})
    r = b.tensor("r", [1, 10, 14, 8], "int8", quant=p)
    b.op("RESIZE_BILINEAR", [c, b.const("size", np.array([10, 14], np.int32))], [r], {"half_pixel_centers": True})
    j = b.tensor("j", [1, 10, 14, 14], "int8", quant=p)
    b.op("CONCATENATION", [t, r], [j], {"axis": 3})
    hq, hquant = per_channel(RNG.uniform(-1, 1, (4, 1, 1, 14)), axis=0)
    hbq, hbquant = bias_for(RNG.uniform(-0.3, 0.3, 4), p[0], hquant["scales"])
    h = b.tensor("h", [1, 10, 14, 4], "int8", quant=(0.02, 5))
    b.op("CONV_2D", [j, b.const("hw", hq, quant=hquant), b.const("hb", hbq, quant=hbquant)], [h], {"padding": "VALID"})
    s = b.tensor("s", [1, 10, 14, 4], "int8", quant=(1 / 256, -128))
    b.op("SOFTMAX", [h], [s], {"beta": 1.0})
    y = b.tensor("y", [1, 10, 14, 4], "uint8", quant=(1 / 256, 0))
    b.op("QUANTIZE", [s], [y])
    b.output(y)
    return save(b, tmp_path)


def test_exact_int_uint8_segmenter(tmp_path):
    """--exact-int: every tensor of the uint8-I/O net equals the reference kernels' (TRANSPOSE_CONV requantized per
    channel as convolutions are; the resize's 10-bit weights; softmax in gemmlowp's fixed point)."""
    assert_exact(convert(uint8_segmenter(tmp_path), exact_int=True), seeds=(0, 1, 2))


def test_exact_int_attention_ops(tmp_path):
    """BATCH_MATMUL of two activations (adj_y) and a broadcast SQUARED_DIFFERENCE of two scales, as a full-integer
    BERT's attention scores and layer norms run them."""
    b = ModelBuilder()
    a = b.input("a", [1, 3, 24, 32], "int8", quant=(0.05, 3))
    k = b.input("k", [1, 3, 40, 32], "int8", quant=(0.04, -7))
    m = b.input("m", [1, 3, 24, 1], "int8", quant=(0.02, -1))
    s = b.tensor("scores", [1, 3, 24, 40], "int8", quant=(0.9, 2))
    b.op("BATCH_MATMUL", [a, k], [s], {"adj_y": True})
    d = b.tensor("squares", [1, 3, 24, 32], "int8", quant=(0.2, -128))
    b.op("SQUARED_DIFFERENCE", [a, m], [d])
    b.output(s)
    b.output(d)
    assert_exact(convert(save(b, tmp_path), exact_int=True))


def test_exact_int_resize_bilinear_modes(tmp_path):
    """int8 RESIZE_BILINEAR by uneven factors (5x7 -> 11x16) with half-pixel centres, aligned corners and
    neither: the stored integers interpolated with LiteRT's 10-bit weights, rounded half away from zero."""
    b = ModelBuilder()
    p = (0.07, 9)
    x = b.input("x", [1, 5, 7, 6], "int8", quant=p)
    size = b.const("size", np.array([11, 16], np.int32))
    for name, opts in (("half", {"half_pixel_centers": True}), ("align", {"align_corners": True}), ("plain", {})):
        y = b.tensor(name, [1, 11, 16, 6], "int8", quant=p)
        b.op("RESIZE_BILINEAR", [x, size], [y], opts)
        b.output(y)
    r = convert(save(b, tmp_path), exact_int=True)
    assert not nodes(r, "Resize")
    assert_exact(r)


def test_exact_int_softmax_every_row(tmp_path):
    """int8 SOFTMAX over 3 classes on every pair of differences from the row's maximum (65,536 rows, input scale
    and beta of a U-Net's head), bit for bit: the float form missed LiteRT's fixed point on a few of them."""
    b = ModelBuilder()
    x = b.input("x", [256, 256, 3], "int8", quant=(0.025889948, 26))
    y = b.tensor("y", [256, 256, 3], "int8", quant=(1 / 256, -128))
    b.op("SOFTMAX", [x], [y], {"beta": 1.0})
    b.output(y)
    graph = save(b, tmp_path)
    grid = np.arange(256) - 128
    feed = np.stack([np.full((256, 256), 127), *np.meshgrid(grid, grid, indexing="ij")], axis=-1).astype(np.int8)
    want = run_tflite(graph, [feed], keep_all=False)[graph.main.outputs[0]]
    got = run_onnx(convert(graph, exact_int=True).model, {"x": feed})["y"]
    assert np.array_equal(got, want), int((got != want).sum())


def int16_net(tmp_path):
    """16x8: int16 CONV_2D (per-channel int8 weights, int64 bias, RELU, stride 2 along W) -> DEPTHWISE_CONV_2D
    (multiplier 2) -> SOFTMAX (scale 1/32768) and a FULLY_CONNECTED over its flattened rows, H != W != C."""
    b = ModelBuilder()
    sx, sc, sd = 1 / 2048, 1 / 512, 1 / 1024
    x = b.input("x", [1, 13, 18, 5], "int16", quant=(sx, 0))
    wq, wquant = per_channel(RNG.uniform(-1, 1, (12, 3, 3, 5)), axis=0)
    bq, bquant = bias_for(RNG.uniform(-1, 1, 12), sx, wquant["scales"], dtype="int64")
    c = b.tensor("c", [1, 13, 9, 12], "int16", quant=(sc, 0))
    b.op("CONV_2D", [x, b.const("w", wq, quant=wquant), b.const("b", bq, quant=bquant)], [c],
         {"padding": "SAME", "stride_w": 2, "fused_activation_function": "RELU"})
    dq, dquant = per_channel(RNG.uniform(-1, 1, (1, 3, 3, 24)), axis=3)
    dbq, dbquant = bias_for(RNG.uniform(-1, 1, 24), sc, dquant["scales"], dtype="int64")
    d = b.tensor("d", [1, 13, 9, 24], "int16", quant=(sd, 0))
    b.op("DEPTHWISE_CONV_2D", [c, b.const("dw", dq, quant=dquant), b.const("db", dbq, quant=dbquant)], [d],
         {"padding": "SAME", "depth_multiplier": 2})
    s = b.tensor("s", [1, 13, 9, 24], "int16", quant=(1 / 32768, 0))
    b.op("SOFTMAX", [d], [s], {"beta": 1.0})
    fq, fquant = per_channel(RNG.uniform(-1, 1, (16, 24)), axis=0)
    fbq, fbquant = bias_for(RNG.uniform(-1, 1, 16), sd, fquant["scales"], dtype="int64")
    f = b.tensor("f", [117, 16], "int16", quant=(1 / 256, 0))
    b.op("FULLY_CONNECTED", [d, b.const("fw", fq, quant=fquant), b.const("fb", fbq, quant=fbquant)], [f])
    b.output(s)
    b.output(f)
    return save(b, tmp_path)


@pytest.mark.parametrize("exact", [False, True])
def test_int16_convolutions_and_softmax_are_litert_s(tmp_path, exact):
    """Both modes: 64-bit accumulators requantized with one rounding (convolutions: the multiplier's top 15 bits;
    FULLY_CONNECTED: all 31), and the softmax's two interpolated tables (the QDQ form was one step off on ~4 % of the
    convolutions' elements)."""
    r = convert(int16_net(tmp_path), exact_int=exact)
    assert not nodes(r, "QuantizeLinear")
    assert_exact(r)


# --- the corpus's full-integer nets (tfbuilt/: TF 2.21's converter, uint8 and int16 I/O included) ------------------
REFERENCE_LOADS = ["tfbuilt/tf_unet_uint8.tflite", "tfbuilt/tf_segnet_bilinear_uint8.tflite",
                   "tfbuilt/tf_kws_dscnn_int8.tflite", "tfbuilt/tf_kws_dscnn_int16x8.tflite",
                   "tfbuilt/tf_bert_tiny_int8.tflite"]
# int8 TILE v3 and DEPTH_TO_SPACE v2 are missing from the reference resolver; their kernels move bytes and take
# every type at any version, so the reference runs the model with those versions lowered.
LOWERED = {"tfbuilt/tf_yolo_tiny_int8.tflite": {"TILE": 2}, "tfbuilt/tf_edsr_sr_int8.tflite": {"DEPTH_TO_SPACE": 1}}


@pytest.mark.corpus
@pytest.mark.parametrize("rel", REFERENCE_LOADS)
def test_exact_int_equals_the_reference_on_tfbuilt(corpus, rel):
    graph = read_tflite(corpus / rel)
    v = validate(convert(graph, exact_int=True), seed=1, intermediates=False)
    assert all(e.steps == 0 for e in v.outputs), [(e.name, e.steps) for e in v.outputs]
    if "int16" in rel:                             # int16 runs LiteRT's arithmetic in the default mode too
        v = validate(convert(graph), seed=1, intermediates=False)
        assert all(e.steps == 0 for e in v.outputs), [(e.name, e.steps) for e in v.outputs]


@pytest.mark.corpus
@pytest.mark.parametrize("rel", sorted(LOWERED))
def test_exact_int_equals_the_reference_with_op_versions_lowered(corpus, rel):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    graph = read_tflite(corpus / rel)
    sg = graph.main
    b = ModelBuilder()
    for t in sg.tensors:
        buffer = b.buffer(np.ascontiguousarray(t.data).tobytes()) if t.data is not None else 0
        b.tensor(t.name, t.shape, t.dtype, quant=t.quantization, buffer=buffer)
    for op in sg.ops:
        b.op(op.opcode, list(op.inputs), list(op.outputs), op.options,
             version=min(op.version, LOWERED[rel].get(op.opcode, op.version)), intermediates=op.intermediates)
    b.inputs, b.outputs = list(sg.inputs), list(sg.outputs)
    inputs = make_inputs(graph, 1)
    it = Interpreter(model_content=b.build(), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    got = onnx_outputs(convert(graph, exact_int=True), inputs, optimise=False)
    for t, d in zip(sg.outputs, it.get_output_details()):
        assert np.array_equal(got[t], it.get_tensor(d["index"])), sg.tensors[t].name


def test_an_output_named_like_a_kernel_constant_keeps_its_name(tmp_path, out="d"):
    """The exact kernels make float64 multipliers named "d"; a requantized graph output of that
    name was once emitted twice (the checker's SSA error). The output keeps its name and the model stays exact."""
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3], "int8", quant=(0.05, 3))
    wq, wquant = per_channel(RNG.uniform(-1, 1, (4, 3, 3, 3)), axis=0)
    bq, bquant = bias_for(RNG.uniform(-0.3, 0.3, 4), 0.05, wquant["scales"])
    c = b.tensor("c", [1, 5, 7, 4], "int8", quant=(0.04, -7))
    b.op("CONV_2D", [x, b.const("w", wq, quant=wquant), b.const("b", bq, quant=bquant)], [c],
         {"padding": "SAME", "stride_h": 1, "stride_w": 1})
    y = b.tensor(out, [1, 5, 7, 4], "uint8", quant=(0.03, 120))
    b.op("QUANTIZE", [c], [y])
    b.output(y)
    result = convert(save(b, tmp_path), exact_int=True)
    assert [o.name for o in result.model.graph.output] == [out]
    assert_exact(result)
