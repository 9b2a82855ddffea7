"""Shape and data-movement ops against LiteRT. Rows with `conv` read an NCHW tensor in ONNX, so axes, paddings,
begins and multiples must be remapped (Attribute) or the TFLite layout restored (Terminate)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.opcase import C, Case, In, check, single, uni

S = (1, 5, 7, 3)


def row(cid, opcode, operands, outputs, options=None, permuted=False, version=1):
    def make(rng):
        ins = [In(uni(rng, v.shape), v.conv) if isinstance(v, X) else v for v in operands]
        return single(opcode, ins, outputs, options, version=version)
    return Case(cid, make, permuted=permuted)


class X:
    """A float input of `shape`, its values drawn when the case runs."""

    def __init__(self, shape, conv=False):
        self.shape, self.conv = tuple(shape), conv


def strided(begin, end, strides, out, conv, **masks):
    return row(f"STRIDED_SLICE-{begin}-{end}-{strides}-{masks}{'-conv' if conv else ''}", "STRIDED_SLICE",
               [X(S, conv), C(begin, "int32"), C(end, "int32"), C(strides, "int32")], [(out, "float32")], masks,
               permuted=conv)


CASES = [
    row("RESHAPE", "RESHAPE", [X(S), C([5, 21], "int32")], [((5, 21), "float32")], {"new_shape": [5, 21]}),
    row("RESHAPE-conv", "RESHAPE", [X(S, True), C([35, 3], "int32")], [((35, 3), "float32")], {"new_shape": [35, 3]}),
    row("SQUEEZE", "SQUEEZE", [X((1, 5, 1, 3))], [((5, 3), "float32")], {"squeeze_dims": [0, 2]}),
    row("SQUEEZE-all-conv", "SQUEEZE", [X((1, 1, 7, 3), True)], [((7, 3), "float32")]),
    row("EXPAND_DIMS", "EXPAND_DIMS", [X((5, 7)), C(1, "int32")], [((5, 1, 7), "float32")]),
    row("EXPAND_DIMS-neg-conv", "EXPAND_DIMS", [X(S, True), C(-1, "int32")], [((1, 5, 7, 3, 1), "float32")]),
    row("PACK-0", "PACK", [X((5, 7)), X((5, 7))], [((2, 5, 7), "float32")], {"axis": 0, "values_count": 2}),
    row("PACK-last-conv", "PACK", [X(S, True), X(S)], [((1, 5, 7, 3, 2), "float32")], {"axis": 4, "values_count": 2}),
    row("UNPACK-1", "UNPACK", [X((2, 3, 4))], [((2, 4), "float32")] * 3, {"num": 3, "axis": 1}),
    row("UNPACK-conv", "UNPACK", [X(S, True)], [((1, 5, 7), "float32")] * 3, {"num": 3, "axis": 3}),
    row("CONCATENATION-c-conv", "CONCATENATION", [X(S, True), X((1, 5, 7, 2), True)], [((1, 5, 7, 5), "float32")],
        {"axis": 3}, permuted=True),
    row("CONCATENATION-w-conv", "CONCATENATION", [X(S, True), X((1, 5, 2, 3), True)], [((1, 5, 9, 3), "float32")],
        {"axis": -2}, permuted=True),
    row("CONCATENATION-2d", "CONCATENATION", [X((5, 3)), X((5, 4))], [((5, 7), "float32")], {"axis": 1}),
    row("PAD-conv", "PAD", [X(S, True), C([[0, 0], [1, 2], [0, 3], [1, 0]], "int32")], [((1, 8, 10, 4), "float32")],
        permuted=True),
    row("PADV2-conv", "PADV2", [X(S, True), C([[0, 0], [2, 0], [1, 1], [0, 2]], "int32"), C([0.75], "float32")],
        [((1, 7, 9, 5), "float32")], permuted=True),
    row("MIRROR_PAD-REFLECT-conv", "MIRROR_PAD", [X(S, True), C([[0, 0], [1, 2], [2, 1], [0, 0]], "int32")],
        [((1, 8, 10, 3), "float32")], {"mode": "REFLECT"}, permuted=True),
    row("MIRROR_PAD-SYMMETRIC-conv", "MIRROR_PAD", [X(S, True), C([[0, 0], [2, 1], [0, 3], [1, 1]], "int32")],
        [((1, 8, 10, 5), "float32")], {"mode": "SYMMETRIC"}, permuted=True),
    row("MIRROR_PAD-SYMMETRIC-2d", "MIRROR_PAD", [X((4, 6)), C([[1, 3], [2, 0]], "int32")],
        [((8, 8), "float32")], {"mode": "SYMMETRIC"}),
    strided([0, 1, 0, 0], [1, 5, 7, 2], [1, 2, 3, 1], (1, 2, 3, 2), True),
    strided([0, -1, 0, 1], [1, 0, 7, 3], [1, -1, 2, 1], (1, 4, 4, 2), True, begin_mask=1, end_mask=4),
    strided([0, 2, 0, 0], [1, 3, 7, 3], [1, 1, 1, 1], (1, 7, 3), True, shrink_axis_mask=2),
    strided([0, 0, 0, 1], [1, 5, 7, 2], [1, 1, 1, 1], (1, 5, 7), True, shrink_axis_mask=8),
    row("SLICE-conv", "SLICE", [X(S, True), C([0, 1, 2, 1], "int32"), C([1, 3, -1, 2], "int32")],
        [((1, 3, 5, 2), "float32")], permuted=True),
    row("SPLIT-c-conv", "SPLIT", [C(3, "int32"), X((1, 5, 7, 6), True)], [((1, 5, 7, 2), "float32")] * 3,
        {"num_splits": 3}),
    row("SPLIT-h", "SPLIT", [C(1, "int32"), X((1, 6, 7, 3))], [((1, 3, 7, 3), "float32")] * 2, {"num_splits": 2}),
    row("SPLIT_V-w-conv", "SPLIT_V", [X(S, True), C([2, -1, 1], "int32"), C(2, "int32")],
        [((1, 5, 2, 3), "float32"), ((1, 5, 4, 3), "float32"), ((1, 5, 1, 3), "float32")], {"num_splits": 3},
        permuted=True),
    row("TRANSPOSE-conv", "TRANSPOSE", [X(S, True), C([0, 3, 1, 2], "int32")], [((1, 3, 5, 7), "float32")],
        permuted=True),
    row("TRANSPOSE-3d", "TRANSPOSE", [X((2, 5, 7)), C([2, 0, 1], "int32")], [((7, 2, 5), "float32")]),
    row("TRANSPOSE-swap-conv", "TRANSPOSE", [X(S, True), C([0, 2, 1, 3], "int32")], [((1, 7, 5, 3), "float32")],
        permuted=True),
    row("GATHER-c-conv", "GATHER", [X(S, True), C([2, 0, 0, 1], "int32")], [((1, 5, 7, 4), "float32")],
        {"axis": 3}, permuted=True),
    row("GATHER-h-scalar-conv", "GATHER", [X(S, True), C(3, "int32")], [((1, 7, 3), "float32")], {"axis": 1},
        permuted=True),
    row("GATHER-2d-idx", "GATHER", [X((6, 4)), C([[1, 5], [0, 0], [3, 2]], "int32")], [((3, 2, 4), "float32")]),
    row("SHAPE-conv", "SHAPE", [X(S, True)], [((4,), "int32")], {"out_type": 2}, permuted=True),
    row("SHAPE-int64", "SHAPE", [X((2, 5, 7))], [((3,), "int64")], {"out_type": 4}),
    row("TILE-conv", "TILE", [X(S, True), C([2, 1, 3, 2], "int32")], [((2, 5, 21, 6), "float32")], permuted=True),
    row("TILE-2d", "TILE", [X((3, 4)), C([2, 3], "int32")], [((6, 12), "float32")]),
    row("DILATE-3d", "DILATE", [X((2, 3, 4)), C([1, 2, 3], "int32"), C(0.5, "float32")], [((2, 5, 10), "float32")]),
    row("DILATE-conv", "DILATE", [X(S, True), C([1, 3, 1, 2], "int32"), C(-2.0, "float32")],
        [((1, 13, 7, 5), "float32")], permuted=True),
]


def batched_gather(params, idx_shape, axis, batch_dims, conv=False):
    out = params[:axis] + idx_shape[batch_dims:] + params[axis + 1:]
    return Case(f"GATHER-batch{batch_dims}-axis{axis}-{idx_shape}{'-conv' if conv else ''}", lambda rng: single(
        "GATHER", [In(uni(rng, params), conv), C(rng.integers(0, params[axis], idx_shape).astype(np.int32))],
        [(out, "float32")], {"axis": axis, "batch_dims": batch_dims}))


CASES += [batched_gather((2, 3, 5, 4), (2, 3, 2), 2, 2), batched_gather((2, 3, 5, 4), (2, 6), 2, 1),
          batched_gather((2, 5, 7, 3), (2, 4), 1, 1, conv=True), batched_gather((3, 4, 6), (3, 2, 2), 2, 1)]


def bitcast(src, dst, lo, hi):
    return Case(f"BITCAST-{src}-{dst}", lambda rng: single(
        "BITCAST", [In(rng.integers(lo, hi, (3, 5, 2)).astype(src))], [((3, 5, 2), dst)]))


def bitcast_const():
    return Case("BITCAST-const-f32-i32", lambda rng: single("BITCAST", [C(uni(rng, (2, 3)))], [((2, 3), "int32")]))


CASES += [bitcast("int32", "uint32", -2**31, 2**31 - 1), bitcast("uint8", "int8", 0, 255),
          bitcast("int16", "uint16", -300, 300), bitcast_const()]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_shape_op_matches_litert(case):
    check(case)
