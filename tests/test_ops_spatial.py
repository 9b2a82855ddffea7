"""Spatial ops against LiteRT: depth/space/batch rearrangements, normalisations and 3-D convolutions.
Rows with `conv` have a CONV_2D in front, so the op reads a channels-first tensor in ONNX."""
from __future__ import annotations

import numpy as np
import pytest

from tests.opcase import C, Case, In, check, single, uni


def d2s(shape, block, conv):
    n, h, w, c = shape
    out = (n, h * block, w * block, c // (block * block))
    return Case(f"DEPTH_TO_SPACE-{block}{'-conv' if conv else ''}", lambda rng: single(
        "DEPTH_TO_SPACE", [In(uni(rng, shape), conv)], [(out, "float32")], {"block_size": block}), permuted=True)


def s2d(shape, block, conv):
    n, h, w, c = shape
    out = (n, h // block, w // block, c * block * block)
    return Case(f"SPACE_TO_DEPTH-{block}{'-conv' if conv else ''}", lambda rng: single(
        "SPACE_TO_DEPTH", [In(uni(rng, shape), conv)], [(out, "float32")], {"block_size": block}), permuted=True)


def lrn(radius, bias, alpha, beta, conv):
    # Against the default kernel: it sums channels [c-r, c+r] as TensorFlow does, while LiteRT's reference
    # kernel stops at c+r-1 (an off-by-one of its own).
    s = (1, 5, 7, 9)
    return Case(f"LRN-r{radius}{'-conv' if conv else ''}", lambda rng: single(
        "LOCAL_RESPONSE_NORMALIZATION", [In(uni(rng, s, -2, 2), conv)], [(s, "float32")],
        {"radius": radius, "bias": bias, "alpha": alpha, "beta": beta}), permuted=True, optimized=True)


def l2norm(shape, conv, act="NONE"):
    return Case(f"L2_NORMALIZATION-{len(shape)}d-{act}{'-conv' if conv else ''}", lambda rng: single(
        "L2_NORMALIZATION", [In(uni(rng, shape), conv)], [(shape, "float32")], {"fused_activation_function": act}),
        permuted=conv)


def s2b(shape, block, pads, conv):
    padded = [shape[1 + i] + sum(pads[i]) for i in range(len(block))]
    out = (shape[0] * int(np.prod(block)), *[p // b for p, b in zip(padded, block)], *shape[1 + len(block):])
    return Case(f"SPACE_TO_BATCH_ND-{block}-{pads}{'-conv' if conv else ''}", lambda rng: single(
        "SPACE_TO_BATCH_ND", [In(uni(rng, shape), conv), C(block, "int32"), C(pads, "int32")], [(out, "float32")]),
        permuted=conv)


def b2s(shape, block, crops, conv):
    m = len(block)
    out = (shape[0] // int(np.prod(block)),
           *[shape[1 + i] * block[i] - sum(crops[i]) for i in range(m)], *shape[1 + m:])
    return Case(f"BATCH_TO_SPACE_ND-{block}-{crops}{'-conv' if conv else ''}", lambda rng: single(
        "BATCH_TO_SPACE_ND", [In(uni(rng, shape), conv), C(block, "int32"), C(crops, "int32")], [(out, "float32")]),
        permuted=conv)


def conv3d(x_shape, w_shape, padding, strides, dilation=(1, 1, 1), bias=True, act="NONE"):
    def make(rng):
        d, h, w = x_shape[1:4]
        kd, kh, kw = w_shape[:3]
        dims = []
        for n, k, s, dl in zip((d, h, w), (kd, kh, kw), strides, dilation):
            eff = (k - 1) * dl + 1
            dims.append(-(-n // s) if padding == "SAME" else (n - eff) // s + 1)
        out = (x_shape[0], *dims, w_shape[4])
        ins = [In(uni(rng, x_shape)), C(uni(rng, w_shape))] + ([C(uni(rng, (w_shape[4],)))] if bias else [])
        return single("CONV_3D", ins, [(out, "float32")],
                      {"padding": padding, "stride_d": strides[0], "stride_h": strides[1], "stride_w": strides[2],
                       "dilation_d_factor": dilation[0], "dilation_h_factor": dilation[1],
                       "dilation_w_factor": dilation[2], "fused_activation_function": act})
    return Case(f"CONV_3D-{padding}-s{strides}-d{dilation}{'-bias' if bias else ''}-{act}", make, permuted=True,
                rtol=1e-4)


def conv3d_t(x_shape, w_shape, padding, strides, bias):
    def make(rng):
        dims = [n * s if padding == "SAME" else (n - 1) * s + k
                for n, s, k in zip(x_shape[1:4], strides, w_shape[:3])]
        out = (x_shape[0], *dims, w_shape[3])
        ins = [C(out, "int32"), C(uni(rng, w_shape)), In(uni(rng, x_shape))] + \
              ([C(uni(rng, (w_shape[3],)))] if bias else [])
        return single("CONV_3D_TRANSPOSE", ins, [(out, "float32")],
                      {"padding": padding, "stride_d": strides[0], "stride_h": strides[1], "stride_w": strides[2]})
    return Case(f"CONV_3D_TRANSPOSE-{padding}-s{strides}{'-bias' if bias else ''}", make, rtol=1e-4)


CASES = [
    d2s((1, 3, 5, 12), 2, False), d2s((1, 3, 5, 12), 2, True), d2s((2, 2, 4, 18), 3, True),
    s2d((1, 6, 10, 3), 2, False), s2d((1, 6, 10, 3), 2, True), s2d((2, 6, 9, 2), 3, True),
    lrn(2, 1.0, 0.5, 0.75, False), lrn(1, 2.0, 0.1, 0.5, True), lrn(4, 1.5, 1.0, 1.0, True),
    l2norm((1, 5, 7, 6), True), l2norm((3, 7), False), l2norm((2, 4, 6), False),
    s2b((1, 5, 7, 3), [2, 3], [[1, 0], [1, 1]], False), s2b((1, 5, 7, 3), [2, 3], [[1, 0], [1, 1]], True),
    s2b((2, 4, 6, 3), [2, 2], [[0, 0], [0, 0]], True), s2b((2, 6, 3), [3], [[0, 0]], False),
    b2s((6, 3, 3, 3), [2, 3], [[1, 0], [0, 2]], False), b2s((6, 3, 3, 3), [2, 3], [[1, 0], [0, 2]], True),
    b2s((8, 2, 3, 5), [2, 2], [[0, 0], [0, 0]], True), b2s((6, 4, 3), [3], [[1, 1]], False),
    conv3d((1, 4, 5, 6, 3), (2, 3, 3, 3, 4), "SAME", (1, 1, 1)),
    conv3d((1, 5, 6, 7, 2), (3, 2, 3, 2, 5), "VALID", (2, 1, 2), bias=False),
    conv3d((2, 5, 6, 7, 2), (2, 2, 3, 2, 3), "SAME", (1, 2, 1), dilation=(2, 1, 2), act="RELU"),
    conv3d_t((1, 3, 4, 5, 3), (2, 3, 3, 4, 3), "SAME", (2, 2, 2), True),
    conv3d_t((1, 3, 4, 5, 2), (3, 2, 3, 3, 2), "VALID", (1, 2, 1), False),
]


def dynamic_batch(opcode, x_shape, block, pads, out_tail):
    """Batch -1 in the file, fed at batch 3 (x_shape[0]): the emitter must not bake the batch into Reshapes."""
    return Case(f"{opcode}-dynamic-batch", lambda rng: single(
        opcode, [In(uni(rng, x_shape), True, dynamic_batch=True), C(block, "int32"), C(pads, "int32")],
        [((-1, *out_tail), "float32")]), permuted=True)


CASES += [dynamic_batch("SPACE_TO_BATCH_ND", (3, 4, 6, 3), [2, 3], [[0, 0], [0, 0]], (2, 2, 3)),
          dynamic_batch("BATCH_TO_SPACE_ND", (12, 2, 3, 3), [2, 2], [[0, 1], [1, 0]], (3, 5, 3))]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_spatial_op_matches_litert(case):
    check(case)
