"""Indexing, scatter/gather, generator and selection ops against LiteRT, one generated model per row.
Rows with `conv` read a tensor that is NCHW in ONNX: Attribute ops must remap their axes, Terminate ops get it back."""
from __future__ import annotations

import numpy as np
import pytest

from tests.opcase import C, Case, In, check, ints, single, uni

S = (1, 5, 7, 3)


def case(cid, make, **kw):
    return Case(cid, make, **kw)


def gather_nd(params_shape, idx, conv=False):
    idx = np.asarray(idx, np.int32)
    out = idx.shape[:-1] + tuple(params_shape[idx.shape[-1]:])
    return case(f"GATHER_ND-{idx.shape}{'-conv' if conv else ''}", lambda rng: single(
        "GATHER_ND", [In(uni(rng, params_shape), conv), C(idx)], [(out, "float32")]))


def scatter_nd(idx, upd_shape, shape):
    idx = np.asarray(idx, np.int32)
    return case(f"SCATTER_ND-{idx.shape}-{shape}", lambda rng: single(
        "SCATTER_ND", [C(idx), In(uni(rng, upd_shape)), C(shape, "int32")], [(tuple(shape), "float32")]))


def one_hot(idx, depth, axis, dtype="float32"):
    idx = np.asarray(idx, np.int32)
    out = list(idx.shape)
    out.insert(axis % (idx.ndim + 1), depth)
    return case(f"ONE_HOT-{idx.shape}-axis{axis}-{dtype}", lambda rng: single(
        "ONE_HOT", [In(idx), C(depth, "int32"), C(2.5, dtype), C(-1, dtype)], [(tuple(out), dtype)], {"axis": axis}))


def range_(start, limit, delta, dtype):
    n = len(np.arange(start, limit, delta))
    return case(f"RANGE-{start}-{limit}-{delta}-{dtype}", lambda rng: single(
        "RANGE", [In(np.array(start, dtype)), In(np.array(limit, dtype)), In(np.array(delta, dtype))],
        [((n,), dtype)]))


def cumsum(axis, exclusive, reverse, conv, dtype="float32"):
    def make(rng):
        x = uni(rng, S) if dtype == "float32" else ints(rng, S, -9, 9)
        return single("CUMSUM", [In(x, conv), C(axis, "int32")], [(S, dtype)],
                      {"exclusive": exclusive, "reverse": reverse})
    return case(f"CUMSUM-a{axis}-x{int(exclusive)}-r{int(reverse)}-{dtype}{'-conv' if conv else ''}", make,
                permuted=conv)


def where(shape, dtype="bool"):
    def make(rng):
        x = rng.random(shape) < 0.4
        return single("WHERE", [In(x.astype(dtype))], [((int(x.sum()), len(shape)), "int64")])
    return case(f"WHERE-{shape}-{dtype}", make)


def segment_sum(ids, rest):
    ids = np.asarray(ids, np.int32)
    return case(f"SEGMENT_SUM-{len(ids)}", lambda rng: single(
        "SEGMENT_SUM", [In(uni(rng, (len(ids), *rest))), C(ids)], [((int(ids.max()) + 1, *rest), "float32")]))


def unsorted(name, ids, num, rest, dtype="float32"):
    ids = np.asarray(ids, np.int32)

    def make(rng):
        data = uni(rng, ids.shape + tuple(rest)) if dtype == "float32" else ints(rng, ids.shape + tuple(rest), -9, 9)
        return single(name, [In(data), C(ids), C(num, "int32")], [((num, *rest), dtype)])
    return case(f"{name}-{ids.shape}-{num}-{dtype}", make)


def dus(shape, upd, start):
    return case(f"DYNAMIC_UPDATE_SLICE-{upd}-{start}", lambda rng: single(
        "DYNAMIC_UPDATE_SLICE", [In(uni(rng, shape)), In(uni(rng, upd)), In(np.asarray(start, np.int32))],
        [(shape, "float32")]))


def matrix_diag(shape):
    return case(f"MATRIX_DIAG-{shape}", lambda rng: single(
        "MATRIX_DIAG", [In(uni(rng, shape))], [(shape + (shape[-1],), "float32")]))


def matrix_set_diag(shape):
    k = min(shape[-2:])
    return case(f"MATRIX_SET_DIAG-{shape}", lambda rng: single(
        "MATRIX_SET_DIAG", [In(uni(rng, shape)), In(uni(rng, shape[:-2] + (k,)))], [(shape, "float32")]))


def topk(shape, k, conv):
    out = shape[:-1] + (k,)
    return case(f"TOPK_V2-{shape}-k{k}{'-conv' if conv else ''}", lambda rng: single(
        "TOPK_V2", [In(uni(rng, shape), conv), C(k, "int32")], [(out, "float32"), (out, "int32")]), permuted=conv)


def nms(version, n, max_out, iou, score):
    def make(rng):
        c = rng.uniform(0, 1, (n, 2))
        hw = rng.uniform(0.1, 0.4, (n, 2))
        boxes = np.concatenate([c - hw / 2, c + hw / 2], axis=1).astype(np.float32)
        scores = rng.permutation(np.linspace(0.05, 0.95, n)).astype(np.float32)    # distinct: no ties
        ins = [In(boxes), In(scores), C(max_out, "int32"), C(iou, "float32"), C(score, "float32")]
        outs = [((max_out,), "int32")]
        if version == 5:
            ins.append(C(0.0, "float32"))
            outs.append(((max_out,), "float32"))
        return single(f"NON_MAX_SUPPRESSION_V{version}", ins, outs + [((), "int32")])
    return case(f"NMS_V{version}-n{n}-m{max_out}-iou{iou}-s{score}", make)


def reverse_v2(axes, conv):
    return case(f"REVERSE_V2-{axes}{'-conv' if conv else ''}", lambda rng: single(
        "REVERSE_V2", [In(uni(rng, S), conv), C(axes, "int32")], [(S, "float32")]), permuted=conv)


def reverse_sequence(shape, seq_dim, batch_dim, lens, conv):
    return case(f"REVERSE_SEQUENCE-s{seq_dim}-b{batch_dim}{'-conv' if conv else ''}", lambda rng: single(
        "REVERSE_SEQUENCE", [In(uni(rng, shape), conv), C(lens, "int32")], [(shape, "float32")],
        {"seq_dim": seq_dim, "batch_dim": batch_dim}), permuted=conv)


def fill(dims, value):
    v = np.asarray(value)
    return case(f"FILL-{dims}-{v.dtype}", lambda rng: single(
        "FILL", [C(dims, "int32"), In(v)], [(tuple(dims), v.dtype.name)]))


def broadcast_to(shape, target, conv=False):
    return case(f"BROADCAST_TO-{shape}-{target}{'-conv' if conv else ''}", lambda rng: single(
        "BROADCAST_TO", [In(uni(rng, shape), conv), C(target, "int32")], [(tuple(target), "float32")], version=2))


def broadcast_args(a, b):
    out = np.broadcast_shapes(tuple(a), tuple(b))
    return case(f"BROADCAST_ARGS-{a}-{b}", lambda rng: single(
        "BROADCAST_ARGS", [In(np.asarray(a, np.int32)), In(np.asarray(b, np.int32))], [((len(out),), "int32")]))


def rank(conv):
    return case(f"RANK{'-conv' if conv else ''}", lambda rng: single(
        "RANK", [In(uni(rng, S), conv)], [((), "int32")]), permuted=conv)


def embedding(ids, vocab_shape):
    ids = np.asarray(ids, np.int32)
    return case(f"EMBEDDING_LOOKUP-{len(ids)}-{vocab_shape}", lambda rng: single(
        "EMBEDDING_LOOKUP", [In(ids), C(uni(rng, vocab_shape))], [((len(ids), *vocab_shape[1:]), "float32")]))


def sparse_to_dense(idx, shape, scalar_value):
    idx = np.asarray(idx, np.int32)

    def make(rng):
        vals = C(4.0, "float32") if scalar_value else C(uni(rng, (len(idx),)))
        return single("SPARSE_TO_DENSE", [C(idx), C(shape, "int32"), vals, C(-0.5, "float32")],
                      [(tuple(shape), "float32")])
    return case(f"SPARSE_TO_DENSE-{idx.shape}-{'scalar' if scalar_value else 'values'}", make)


def unique(values, idx_type):
    x = np.asarray(values, np.float32)
    n = len(np.unique(x))
    return case(f"UNIQUE-{len(x)}-{idx_type}", lambda rng: single(
        "UNIQUE", [In(x)], [((n,), "float32"), ((len(x),), idx_type)], {"idx_out_type": {"int32": 2, "int64": 4}[idx_type]}))


CASES = [
    gather_nd((4, 5, 3), [[1, 2], [3, 0], [0, 4]]), gather_nd(S, [[0, 4, 6], [0, 1, 2]], conv=True),
    gather_nd((4, 5, 3), [[[2]], [[0]]]),
    scatter_nd([[1], [3], [1]], (3, 5), (6, 5)), scatter_nd([[0, 2], [3, 1]], (2, 7), (4, 3, 7)),
    one_hot([[0, 2, 5], [-1, 1, 3]], 4, -1), one_hot([1, 0, 3, 2, 7], 5, 0), one_hot([[2, 1]], 3, 1, "int32"),
    range_(0, 7, 1, "int32"), range_(3, -9, -2, "int32"), range_(0.5, 3.2, 0.4, "float32"),
    cumsum(1, False, False, False), cumsum(3, True, False, True), cumsum(2, False, True, True),
    cumsum(-1, True, True, False, "int32"),
    where((4, 6)), where((2, 3, 5), "float32"),
    segment_sum([0, 0, 1, 2, 2, 2], (4, 2)), segment_sum([0, 1, 1, 2, 3], (3,)),
    unsorted("UNSORTED_SEGMENT_SUM", [2, 0, 2, 1, 0], 4, (3,)),
    unsorted("UNSORTED_SEGMENT_PROD", [2, 0, 2, 1, 0], 3, (3,)),
    unsorted("UNSORTED_SEGMENT_MAX", [2, 0, 2, 1, 0], 4, (3,)),
    unsorted("UNSORTED_SEGMENT_MIN", [[1, 0], [1, 2]], 3, (5,)),
    unsorted("UNSORTED_SEGMENT_MAX", [1, 1, 0], 2, (2,), "int32"),
    dus((4, 6, 3), (2, 3, 3), [1, 2, 0]), dus((4, 6, 3), (2, 3, 3), [3, -1, 0]), dus((5, 7), (2, 2), [4, 6]),
    matrix_diag((5,)), matrix_diag((2, 4)),
    matrix_set_diag((4, 6)), matrix_set_diag((2, 6, 4)), matrix_set_diag((3, 3)),
    topk((3, 10), 4, False), topk(S, 2, True),
    nms(4, 12, 6, 0.5, 0.0), nms(4, 20, 15, 0.3, 0.4), nms(5, 12, 5, 0.5, 0.2),
    reverse_v2([1], False), reverse_v2([1, 2], True), reverse_v2([3], True), reverse_v2([2, 3], False),
    reverse_sequence((3, 5, 2), 1, 0, [5, 2, 0], False), reverse_sequence((4, 3, 6), 0, 1, [1, 4, 2], False),
    reverse_sequence((2, 5, 7, 3), 2, 0, [7, 3], True), reverse_sequence((1, 5, 7, 3), 1, 3, [2, 5, 4], True),
    fill([2, 3, 4], np.float32(1.5)), fill([5], np.int32(7)),
    broadcast_to((1, 7, 1), (2, 5, 7, 3)), broadcast_to(S, (2, 5, 7, 3), conv=True),
    broadcast_args([5, 1, 3], [4, 1]), broadcast_args([1], [2, 3, 1]),
    rank(False), rank(True),
    embedding([3, 0, 2, 2], (5, 4)), embedding([1], (3, 2, 6)),
    sparse_to_dense([[0, 1], [2, 3], [1, 0]], [3, 5], False), sparse_to_dense([4, 0, 2], [6], True),
    unique([3, 1, 3, 2, 1, 5], "int32"), unique([0.5, 0.5, -1.0], "int64"),
]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_indexing_op_matches_litert(case):
    check(case)


def test_topk_with_computed_k_falls_back_to_tflite_layout_with_a_conflict():
    # k is a graph input, so the rule cannot vouch for the layout: TFLite layout, one recorded "no-rule" Transpose.
    case = Case("TOPK_V2-input-k-conv", lambda rng: single(
        "TOPK_V2", [In(uni(rng, S), True), In(np.array(2, np.int32))], [((1, 5, 7, 2), "float32"),
                                                                        ((1, 5, 7, 2), "int32")]))
    res = check(case)
    topk = res.graph.main.ops[-1]
    assert res.plan.inputs[(topk.index, 0)] == (0, 1, 2, 3)
    assert [c.kind for c in res.plan.conflicts if c.op == topk.index] == ["no-rule"]
