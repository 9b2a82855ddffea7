"""MediaPipe custom ops against LiteRT and against numpy versions of MediaPipe's reference kernels.

LiteRT's reference resolver lacks these ops; its XNNPACK delegate (the default resolver) implements them, so the
interpreter runs with the default resolver here. Any other custom op is refused with its name, or kept as a
custom-domain node with allow_custom=True.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from ai_edge_litert.interpreter import Interpreter

from inspector.core.convert import convert
from inspector.core.errors import UnsupportedOpsError
from inspector.core.tflite_builder import ModelBuilder
from inspector.core.tflite_reader import read_tflite_bytes
from inspector.core.validate import run_onnx

RNG = np.random.default_rng(8)
CF, BACK = (0, 3, 1, 2), (0, 2, 3, 1)
SAME, VALID = 1, 2


def struct(*fields) -> bytes:
    return np.asarray(fields, "<i4").tobytes()


def litert(data: bytes, *inputs):
    it = Interpreter(model_content=data)                # default resolver: XNNPACK has MediaPipe's ops
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def onnx_run(data: bytes, *inputs):
    r = convert(read_tflite_bytes(data, "m.tflite"))
    g = r.graph.main
    feeds = {i.name: np.transpose(x, r.plan.perm(t, x.ndim))
             for i, t, x in zip(r.model.graph.input, g.inputs, inputs)}
    got = run_onnx(r.model, feeds)
    outs = []
    for o, t in zip(r.model.graph.output, g.outputs):
        perm = r.plan.outputs.get(t, r.plan.perm(t, g.tensors[t].rank))
        outs.append(np.transpose(got[o.name], np.argsort(perm)))
    return r, outs


# --- numpy versions of MediaPipe's kernels (NHWC) -------------------------------------------------------------
def ref_transpose_conv_bias(x, w, b, stride, same):
    n, h, wd, _ = x.shape
    o, kh, kw, _ = w.shape
    crop = [max(0, k - (s_in - 1) % s - 1) if same else 0 for k, s_in, s in ((kh, h, stride[0]), (kw, wd, stride[1]))]
    full = np.zeros((n, (h - 1) * stride[0] + kh, (wd - 1) * stride[1] + kw, o))
    for i in range(h):
        for j in range(wd):
            full[:, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw, :] += \
                np.einsum("nc,oyxc->nyxo", x[:, i, j, :].astype(np.float64), w.astype(np.float64))
    oh, ow = full.shape[1] - crop[0], full.shape[2] - crop[1]
    t, l = crop[0] // 2, crop[1] // 2
    return full[:, t:t + oh, l:l + ow, :] + b


def ref_pool_argmax(x, f, s, pad):
    n, h, w, c = x.shape
    oh, ow = (-(-h // s[0]), -(-w // s[1])) if pad == SAME else ((h - f[0]) // s[0] + 1, (w - f[1]) // s[1] + 1)
    top = max(((oh - 1) * s[0] + f[0] - h) // 2, 0) if pad == SAME else 0
    left = max(((ow - 1) * s[1] + f[1] - w) // 2, 0) if pad == SAME else 0
    vals, idx = np.zeros((n, oh, ow, c), np.float32), np.zeros((n, oh, ow, c), np.float32)
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for ch in range(c):
                    best, at = -np.inf, 0
                    for dy in range(f[0]):
                        for dx in range(f[1]):
                            y, xx = i * s[0] - top + dy, j * s[1] - left + dx
                            if 0 <= y < h and 0 <= xx < w and x[b, y, xx, ch] > best:
                                best, at = x[b, y, xx, ch], dy * f[1] + dx
                    vals[b, i, j, ch], idx[b, i, j, ch] = best, at + 0.1
    return vals, idx


def ref_unpool(x, idx, f, s):
    n, h, w, c = x.shape
    oh, ow = h * f[0], w * f[1]
    top, left = max(((h - 1) * s[0] + f[0] - oh) // 2, 0), max(((w - 1) * s[1] + f[1] - ow) // 2, 0)
    out = np.zeros((n, oh, ow, c), np.float32)
    for b in range(n):
        for i in range(h):
            for j in range(w):
                for ch in range(c):
                    k = int(idx[b, i, j, ch])
                    y, xx = i * s[0] - top + k // f[1], j * s[1] - left + k % f[1]
                    if 0 <= y < oh and 0 <= xx < ow:
                        out[b, y, xx, ch] = x[b, i, j, ch]
    return out


# --- Convolution2DTransposeBias ------------------------------------------------------------------------------
@pytest.mark.parametrize("h,w,k,stride,pad", [(5, 7, (2, 2), (2, 2), SAME), (4, 6, (3, 2), (2, 1), SAME),
                                              (5, 3, (3, 3), (2, 2), VALID), (3, 5, (4, 3), (2, 3), SAME)])
def test_convolution2d_transpose_bias(h, w, k, stride, pad):
    cin, cout = 3, 4
    x = RNG.uniform(-1, 1, (1, h, w, cin)).astype(np.float32)
    wt = RNG.standard_normal((cout, *k, cin)).astype(np.float32)
    bias = RNG.standard_normal(cout).astype(np.float32)
    want = ref_transpose_conv_bias(x, wt, bias, stride, pad == SAME)
    b = ModelBuilder()
    xi = b.input("x", x.shape)
    y = b.tensor("y", want.shape)
    b.custom_op("Convolution2DTransposeBias", [xi, b.const("w", wt), b.const("b", bias)], [y],
                struct(pad, stride[1], stride[0]))
    b.output(y)
    data = b.build()
    r, (got,) = onnx_run(data, x)
    assert [n.op_type for n in r.model.graph.node] == ["ConvTranspose"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    (lite,) = litert(data, x)
    np.testing.assert_allclose(got, lite, rtol=1e-4, atol=1e-4)


# --- MaxPoolingWithArgmax2D + MaxUnpooling2D -----------------------------------------------------------------
@pytest.mark.parametrize("h,w,f,s,pad", [(6, 8, (2, 2), (2, 2), SAME), (5, 7, (2, 2), (2, 2), SAME),
                                         (7, 9, (3, 2), (2, 2), VALID)])
def test_max_pool_argmax_then_unpool(h, w, f, s, pad):
    c = 3
    x = RNG.uniform(-1, 1, (1, h, w, c)).astype(np.float32)
    vals, idx = ref_pool_argmax(x, f, s, pad)
    opts = struct(pad, s[1], s[0], f[1], f[0], 0, 0, 0)
    b = ModelBuilder()
    xi = b.input("x", x.shape)
    v, i = b.tensor("v", vals.shape), b.tensor("i", idx.shape)
    b.custom_op("MaxPoolingWithArgmax2D", [xi], [v, i], opts)
    u = b.tensor("u", ref_unpool(vals, idx, f, s).shape)
    b.custom_op("MaxUnpooling2D", [v, i], [u], struct(VALID, *np.frombuffer(opts, "<i4")[1:]))  # padding unused
    b.output(v, i, u)
    data = b.build()
    r, (gv, gi, gu) = onnx_run(data, x)
    np.testing.assert_allclose(gv, vals, rtol=1e-6)
    np.testing.assert_allclose(gi, idx, rtol=1e-6)
    np.testing.assert_allclose(gu, ref_unpool(vals, idx, f, s), rtol=1e-6)
    if f != s:
        return                                      # XNNPACK only implements windows that tile (filter == stride)
    lv, _, lu = litert(data, x)
    np.testing.assert_allclose(gv, lv, rtol=1e-6)
    # XNNPACK stores its own indices (uint32 bits, column-major in the window) in the float tensor, so the
    # indices are held to MediaPipe's kernel above; the pooled values and the unpooled map must agree.
    np.testing.assert_allclose(gu, lu, rtol=1e-6)


# --- other custom ops ------------------------------------------------------------------------------------------
def unknown_custom_model() -> bytes:
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 3])
    y = b.tensor("y", [1, 4, 6, 3])
    from flatbuffers import flexbuffers
    b.custom_op("MyFancyOp", [x], [y], bytes(flexbuffers.Dumps({"alpha": 0.5, "mode": "fast", "k": [1, 2]})))
    b.output(y)
    return b.build()


def test_unknown_custom_op_is_named_in_the_error():
    with pytest.raises(UnsupportedOpsError, match="custom op MyFancyOp"):
        convert(read_tflite_bytes(unknown_custom_model(), "m.tflite"))


def test_allow_custom_keeps_the_op_in_a_custom_domain_with_its_options():
    r = convert(read_tflite_bytes(unknown_custom_model(), "m.tflite"), allow_custom=True)
    (node,) = [n for n in r.model.graph.node if n.op_type == "MyFancyOp"]
    assert node.domain == "ai.layout_inspector.tflite"
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["alpha"] == pytest.approx(0.5) and attrs["mode"] == b"fast" and list(attrs["k"]) == [1, 2]
    assert attrs["tflite_custom_options"] == r.graph.main.ops[0].custom_options
    assert ("ai.layout_inspector.tflite", 1) in [(o.domain, o.version) for o in r.model.opset_import]
    assert list(node.input) == ["x"]                     # Terminate: the TFLite layout, no Transpose needed
