"""Dynamic dimensions: a shape_signature -1 becomes a named symbolic ONNX dim and the model runs at any batch.

Each model is validated against LiteRT (resized to the batch) at batch 1 and 3.
"""
from __future__ import annotations

import numpy as np
import pytest

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.proof.validate import validate

RNG = np.random.default_rng(5)
H, W, C = 6, 10, 3


def w(*shape):
    return (RNG.standard_normal(shape) * 0.3).astype(np.float32)


def dyn(b, name, shape, dtype="float32"):
    return b.tensor(name, shape, dtype, shape_signature=[-1] + list(shape[1:]))


def image_input(b):
    return b.input("x", [1, H, W, C], shape_signature=[-1, H, W, C])


def conv(b, x, cout=4, h=H, wd=W, cin=C, name="c"):
    y = dyn(b, name, [1, h, wd, cout])
    b.op("CONV_2D", [x, b.const(name + "_w", w(cout, 3, 2, cin)), b.const(name + "_b", w(cout))], [y],
         {"padding": "SAME", "fused_activation_function": "RELU"})
    return y


def flatten_dense(b):
    """conv -> reshape [-1, H*W*4] -> dense: the reshape constant must not freeze the batch."""
    x = image_input(b)
    c = conv(b, x)
    flat = dyn(b, "flat", [1, H * W * 4])
    b.op("RESHAPE", [c, b.const("shape", np.array([-1, H * W * 4], np.int32))], [flat])
    y = dyn(b, "y", [1, 5])
    b.op("FULLY_CONNECTED", [flat, b.const("fc_w", w(5, H * W * 4)), b.const("fc_b", w(5))], [y])
    return y


def shape_pack_reshape(b):
    """The MobileNetV3 head: SHAPE -> STRIDED_SLICE (batch) -> PACK with constants -> RESHAPE."""
    x = image_input(b)
    c = conv(b, x)
    pooled = dyn(b, "pooled", [1, 1, 1, 4])
    b.op("MEAN", [c, b.const("axes", np.array([1, 2], np.int32))], [pooled], {"keep_dims": True})
    shp = b.tensor("shp", [4], "int32")
    b.op("SHAPE", [pooled], [shp], {"out_type": 2})
    n = b.tensor("n", [], "int32")
    b.op("STRIDED_SLICE", [shp, b.const("b0", np.array([0], np.int32)), b.const("e0", np.array([1], np.int32)),
                           b.const("s0", np.array([1], np.int32))], [n], {"shrink_axis_mask": 1})
    target = b.tensor("target", [2], "int32")
    b.op("PACK", [n, b.const("four", np.array(4, np.int32))], [target], {"values_count": 2, "axis": 0})
    y = dyn(b, "y", [1, 4])
    b.op("RESHAPE", [pooled, target], [y])
    return y


def resize_concat(b):
    """Resize to a fixed size and concat along channels with a dynamic batch."""
    x = image_input(b)
    c = conv(b, x)
    up = dyn(b, "up", [1, 2 * H, 2 * W, 4])
    b.op("RESIZE_BILINEAR", [c, b.const("size", np.array([2 * H, 2 * W], np.int32))], [up],
         {"half_pixel_centers": True})
    up2 = dyn(b, "up2", [1, 2 * H, 2 * W, C])
    b.op("RESIZE_NEAREST_NEIGHBOR", [x, b.const("size2", np.array([2 * H, 2 * W], np.int32))], [up2])
    y = dyn(b, "y", [1, 2 * H, 2 * W, 4 + C])
    b.op("CONCATENATION", [up, up2], [y], {"axis": 3})
    return y


def sequence_mean(b):
    """A [batch, T, F] model (no image layout): transpose, batch matmul, softmax, mean over time."""
    x = b.input("x", [1, 7, 5], shape_signature=[-1, 7, 5])
    t = dyn(b, "t", [1, 5, 7])
    b.op("TRANSPOSE", [x, b.const("perm", np.array([0, 2, 1], np.int32))], [t])
    m = dyn(b, "m", [1, 5, 5])
    b.op("BATCH_MATMUL", [t, x], [m])
    s = dyn(b, "s", [1, 5, 5])
    b.op("SOFTMAX", [m], [s], {"beta": 1.0})
    y = dyn(b, "y", [1, 5])
    b.op("MEAN", [s, b.const("ax", np.array([2], np.int32))], [y], {"keep_dims": False})
    return y


@pytest.mark.parametrize("build", [flatten_dense, shape_pack_reshape, resize_concat, sequence_mean])
def test_dynamic_batch_validates_at_1_and_3(build, tmp_path):
    b = ModelBuilder()
    b.output(build(b))
    path = tmp_path / "m.tflite"
    path.write_bytes(b.build())
    r = convert(read_tflite(path))
    dims = r.model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch"
    assert r.model.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    for batch in (1, 3):
        v = validate(r, batch=batch)
        assert v.ok, (batch, [(e.name, e.max_rel) for e in v.outputs])
        assert all(e.ok for e in v.intermediates), (batch, v.first_bad())


@pytest.mark.parametrize("name", ["keras/mobilenetv2_fp32.tflite", "keras/mobilenetv3small_fp32.tflite",
                                  "keras/nasnetmobile_fp32.tflite"])
def test_corpus_dynamic_batch_models_validate_at_batch_3(name, corpus):
    g = read_tflite(corpus / name)
    assert g.main.tensors[g.main.inputs[0]].shape_signature[0] == -1
    r = convert(g)
    assert r.model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    v = validate(r, batch=3, intermediates=False)
    assert v.ok and v.outputs[0].shape[0] == 3, [(e.name, e.max_rel, e.shape) for e in v.outputs]
