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

from inspector.core.emit.convert import convert
from inspector.core.ir.errors import UnsupportedOpsError
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite_bytes
from inspector.core.proof.validate import run_onnx

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


# --- MediaPipe's landmark/affine ops: LiteRT has no kernel for them, so numpy versions of MediaPipe's kernels are
# the reference (mediapipe/util/tflite/operations/*.cc).
def flex(d: dict) -> bytes:
    from flatbuffers import flexbuffers
    return bytes(flexbuffers.Dumps(d))


def ref_transform_landmarks(pts, m, dims, scale=1.0):
    flat = pts.reshape(-1, dims).astype(np.float64)
    m = m.reshape(4, 4).astype(np.float64)
    out = flat.copy()
    out[:, 0] = m[0, 0] * flat[:, 0] + m[0, 1] * flat[:, 1] + m[0, 3] * scale
    out[:, 1] = m[1, 0] * flat[:, 0] + m[1, 1] * flat[:, 1] + m[1, 3] * scale
    return out.reshape(pts.shape)


def ref_tensor_bilinear(x, m, oh, ow, v2):
    _, h, w, c = x.shape
    m = m.reshape(4, 4).astype(np.float64)
    tx, ty = m[0].copy(), m[1].copy()
    if v2:
        tx[3] += tx[0] * 0.5 + tx[1] * 0.5 - 0.5
        ty[3] += ty[0] * 0.5 + ty[1] * 0.5 - 0.5
    out = np.zeros((1, oh, ow, c))

    def read(yy, xx):
        return x[0, yy, xx] if 0 <= yy < h and 0 <= xx < w else np.zeros(c)
    for oy in range(oh):
        for ox in range(ow):
            u, v = tx[0] * ox + tx[1] * oy + tx[3], ty[0] * ox + ty[1] * oy + ty[3]
            if u < 0 or u > w - 1 or v < 0 or v > h - 1:
                continue
            fx, fy = int(np.floor(u)), int(np.floor(v))
            rx, ry = u - fx, v - fy
            top = (1 - rx) * read(fy, fx) + rx * read(fy, fx + 1)
            bottom = (1 - rx) * read(fy + 1, fx) + rx * read(fy + 1, fx + 1)
            out[0, oy, ox] = ry * bottom + (1 - ry) * top
    return out


def ref_landmarks_to_matrix(lm, o):
    p = lm.reshape(-1, 3).astype(np.float64)
    left, right = p[o["left_rotation_idx"]], p[o["right_rotation_idx"]]
    rot = o["target_rotation_radians"] - np.arctan2(right[1] - left[1], right[0] - left[0])
    idx = list(o["subset_idxs"]) + ([o["subset_idxs"][-1]] if len(o["subset_idxs"]) % 2 else [])
    q = p[idx, :2]
    c, s = np.cos(rot), np.sin(rot)
    rq = np.stack([c * q[:, 0] - s * q[:, 1], s * q[:, 0] + c * q[:, 1]], 1)
    hi, lo = rq.max(0), rq.min(0)
    w, h = hi - lo
    mid = (hi + lo) / 2
    cx, cy = np.cos(-rot) * mid[0] - np.sin(-rot) * mid[1], np.sin(-rot) * mid[0] + np.cos(-rot) * mid[1]

    def m4(rows):
        return np.array(rows, np.float64)
    r = -rot
    t = m4([[1, 0, 0, cx], [0, 1, 0, cy], [0, 0, 1, 0], [0, 0, 0, 1]])
    t = t @ m4([[np.cos(r), -np.sin(r), 0, 0], [np.sin(r), np.cos(r), 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    t = t @ np.diag([o["scale_x"] * w / o["output_width"], o["scale_y"] * h / o["output_height"], 1, 1])
    t = t @ m4([[1, 0, 0, -o["output_width"] / 2], [0, 1, 0, -o["output_height"] / 2], [0, 0, 1, 0], [0, 0, 0, 1]])
    return t.reshape(1, 4, 4)


def affine(angle=0.4, scale=(1.3, 0.8), shift=(2.0, -1.5)):
    m = np.eye(4, dtype=np.float32)
    c, s = np.cos(angle), np.sin(angle)
    m[:2, :2] = [[c * scale[0], -s * scale[1]], [s * scale[0], c * scale[1]]]
    m[:2, 3] = shift
    return m.reshape(1, 4, 4)


@pytest.mark.parametrize("version,shape,dims", [(2, (1, 7, 3), 3), (2, (1, 5, 2), 2), (1, (1, 2, 3, 6), 3)])
def test_transform_landmarks(version, shape, dims):
    pts = RNG.uniform(-5, 5, shape).astype(np.float32)
    m = affine()
    b = ModelBuilder()
    x, mi = b.input("lm", shape), b.input("m", [1, 4, 4])
    y = b.tensor("y", shape)
    opts = flex({"dimensions": dims, "scale": 2.0}) if version == 1 else b""
    b.custom_op("TransformLandmarks", [x, mi], [y], opts, version=version)
    b.output(y)
    _, (got,) = onnx_run(b.build(), pts, m)
    np.testing.assert_allclose(got, ref_transform_landmarks(pts, m, dims, 2.0 if version == 1 else 1.0),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("code,version", [("TransformTensorBilinear", 2), ("TransformTensor", 1)])
def test_transform_tensor_bilinear(code, version):
    h, w, c, oh, ow = 9, 12, 3, 6, 5
    x = RNG.uniform(-1, 1, (1, h, w, c)).astype(np.float32)
    m = affine(0.3, (1.6, 1.2), (1.0, 0.5))          # some output pixels fall outside the input
    b = ModelBuilder()
    xi, mi = b.input("x", x.shape), b.input("m", [1, 4, 4])
    y = b.tensor("y", [1, oh, ow, c])
    b.custom_op(code, [xi, mi], [y], flex({"output_size": [oh, ow]}), version=version)
    b.output(y)
    r, (got,) = onnx_run(b.build(), x, m)
    want = ref_tensor_bilinear(x, m, oh, ow, v2=version == 2)
    assert 0 < np.count_nonzero(np.all(want == 0, axis=-1)) < oh * ow     # both inside and outside pixels
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert any(n.op_type == "GridSample" for n in r.model.graph.node)


@pytest.mark.parametrize("subset", [[0, 3, 5, 6, 2], [1, 4]])
def test_landmarks_to_transform_matrix(subset):
    o = {"subset_idxs": subset, "left_rotation_idx": 2, "right_rotation_idx": 4, "target_rotation_radians": 0.3,
         "output_height": 48, "output_width": 64, "scale_x": 1.5, "scale_y": 1.25}
    lm = RNG.uniform(0, 100, (1, 7, 3)).astype(np.float32)
    b = ModelBuilder()
    x = b.input("lm", lm.shape)
    y = b.tensor("m", [1, 4, 4])
    b.custom_op("Landmarks2TransformMatrix", [x], [y], flex(o), version=2)
    b.output(y)
    _, (got,) = onnx_run(b.build(), lm)
    np.testing.assert_allclose(got, ref_landmarks_to_matrix(lm, o), rtol=1e-4, atol=1e-3)


def ref_landmarks_to_matrix_v1(lm, o):
    p = lm.reshape(-1, 3).astype(np.float64)
    left, right = p[o["left_rotation_idx"]], p[o["right_rotation_idx"]]
    alpha = -np.arctan((right[1] - left[1]) / (right[0] - left[0]))
    idx = list(o["subset"]) + ([o["subset"][-1]] if len(o["subset"]) % 2 else [])
    q = p[idx, :2]
    rq = np.stack([q[:, 0] * np.cos(alpha) - q[:, 1] * np.sin(alpha),
                   q[:, 0] * np.sin(alpha) + q[:, 1] * np.cos(alpha)], 1)
    hi, lo = rq.max(0), rq.min(0)
    bw, bh = (hi - lo) * o["bbox_size_multiplier"]
    rng = o["landmarks_range"]
    mid = (hi + lo) / 2
    rm = (mid[0] * np.cos(-alpha) - mid[1] * np.sin(-alpha), mid[0] * np.sin(-alpha) + mid[1] * np.cos(-alpha))
    scale = np.diag([bw / rng, bh / rng, 1])
    rot = np.array([[np.cos(-alpha), -np.sin(-alpha), rm[0] / rng * 2 - 1],
                    [np.sin(-alpha), np.cos(-alpha), rm[1] / rng * 2 - 1], [0, 0, 1]])
    (ih, iw), (oh, ow) = o["input_hw"], o["output_hw"]
    rel = np.array([[2 / (ow - 1), 0, -1], [0, 2 / (oh - 1), -1], [0, 0, 1]])
    absl = np.array([[(iw - 1) / 2, 0, (iw - 1) / 2], [0, (ih - 1) / 2, (ih - 1) / 2], [0, 0, 1]])
    itm = absl @ rot @ scale @ rel
    out = np.zeros((4, 4))
    out[0, [0, 1, 3]] = itm[0]
    out[1, [0, 1, 3]] = itm[1]
    out[2, :3] = itm[2]
    out[3, 3] = 1
    return out.reshape(1, 4, 4)


@pytest.mark.parametrize("flip", [False, True])
def test_landmarks_to_transform_matrix_v1(flip):
    o = {"subset": [0, 3, 5, 6, 2], "left_rotation_idx": 2, "right_rotation_idx": 4, "input_hw": [120, 160],
         "output_hw": [48, 64], "landmarks_range": 100, "bbox_size_multiplier": 1.5, "dimensions": 3}
    lm = RNG.uniform(0, 100, (1, 1, 1, 21)).astype(np.float32)
    if flip:                                          # right landmark left of the left one: dx < 0
        lm[0, 0, 0, 12] = lm[0, 0, 0, 6] - 20
    b = ModelBuilder()
    x = b.input("lm", lm.shape)
    y = b.tensor("m", [1, 4, 4])
    b.custom_op("Landmarks2TransformMatrix", [x], [y], flex(o), version=1)
    b.output(y)
    _, (got,) = onnx_run(b.build(), lm)
    np.testing.assert_allclose(got, ref_landmarks_to_matrix_v1(lm, o), rtol=1e-4, atol=1e-3)
