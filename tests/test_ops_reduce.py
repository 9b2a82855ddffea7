"""Reductions, arg-max/min, softmax and matrix products against LiteRT. Rows with `conv` reduce an NCHW tensor,
so reduced axes (and what is left after keep_dims=False) must be remapped."""
from __future__ import annotations

import numpy as np
import pytest

from tests.opcase import C, Case, In, check, single, uni

S = (1, 5, 7, 3)


def out_shape(shape, axes, keep):
    red = {a % len(shape) for a in axes}
    return tuple(1 if i in red else d for i, d in enumerate(shape)) if keep else \
        tuple(d for i, d in enumerate(shape) if i not in red)


def reduce(name, axes, keep, conv, shape=S, dtype="float32"):
    def make(rng):
        if dtype == "bool":
            x = rng.random(shape) < (0.8 if name == "REDUCE_ALL" else 0.1)
        else:
            x = uni(rng, shape, 0.5, 1.5) if name == "REDUCE_PROD" else uni(rng, shape)
        return single(name, [In(x, conv), C(axes, "int32")], [(out_shape(shape, axes, keep), dtype)],
                      {"keep_dims": keep})
    return Case(f"{name}-{axes}-keep{int(keep)}{'-conv' if conv else ''}", make, permuted=conv)


def arg(name, axis, out_type, conv, shape=S):
    def make(rng):
        return single(name, [In(uni(rng, shape), conv), C([axis], "int32")],
                      [(out_shape(shape, [axis], False), out_type)], {"output_type": {"int32": 2, "int64": 4}[out_type]})
    return Case(f"{name}-a{axis}-{out_type}{'-conv' if conv else ''}", make, permuted=conv)


def softmax(name, beta, conv, shape=S):
    opts = {"beta": beta} if name == "SOFTMAX" else {}
    return Case(f"{name}-b{beta}-{len(shape)}d{'-conv' if conv else ''}", lambda rng: single(
        name, [In(uni(rng, shape, -3, 3), conv)], [(shape, "float32")], opts), permuted=conv)


def batch_matmul(a, b, adj_x, adj_y, const_b=False):
    def make(rng):
        m = a[-1] if adj_x else a[-2]
        n = b[-2] if adj_y else b[-1]
        batch = np.broadcast_shapes(a[:-2], b[:-2])
        rhs = C(uni(rng, b)) if const_b else In(uni(rng, b))
        return single("BATCH_MATMUL", [In(uni(rng, a)), rhs], [((*batch, m, n), "float32")],
                      {"adj_x": adj_x, "adj_y": adj_y})
    return Case(f"BATCH_MATMUL-{a}x{b}-adj{int(adj_x)}{int(adj_y)}{'-const' if const_b else ''}", make, rtol=1e-4)


def fully_connected(x_shape, units, keep_num_dims, bias, act="NONE"):
    def make(rng):
        k = x_shape[-1]
        out = (*x_shape[:-1], units) if keep_num_dims else (int(np.prod(x_shape[:-1])), units)
        ins = [In(uni(rng, x_shape)), C(uni(rng, (units, k))), C(uni(rng, (units,))) if bias else None]
        return single("FULLY_CONNECTED", ins, [(out, "float32")],
                      {"keep_num_dims": keep_num_dims, "fused_activation_function": act})
    return Case(f"FULLY_CONNECTED-{x_shape}-{units}-keep{int(keep_num_dims)}-bias{int(bias)}-{act}", make, rtol=1e-4)


CASES = []
for _name in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"):
    CASES += [reduce(_name, [1, 2], True, True), reduce(_name, [1, 2], False, True), reduce(_name, [3], False, True),
              reduce(_name, [-1, 0], False, False, (4, 6))]
CASES += [reduce("REDUCE_ANY", [1], False, False, (2, 5, 7), "bool"), reduce("REDUCE_ALL", [0, 2], True, False,
                                                                            (2, 5, 7), "bool"),
          reduce("MEAN", [2], False, True), reduce("SUM", [0, 1, 2, 3], False, True)]
CASES += [arg("ARG_MAX", 3, "int32", True), arg("ARG_MAX", 1, "int64", True), arg("ARG_MIN", 2, "int64", True),
          arg("ARG_MIN", -1, "int32", False, (4, 9)), arg("ARG_MAX", 0, "int32", False, (4, 9))]
CASES += [softmax("SOFTMAX", 1.0, True), softmax("SOFTMAX", 0.5, False, (3, 10)), softmax("SOFTMAX", 2.0, True),
          softmax("LOG_SOFTMAX", 1.0, True), softmax("LOG_SOFTMAX", 1.0, False, (2, 5, 9))]
CASES += [batch_matmul((2, 3, 4), (2, 4, 5), False, False), batch_matmul((2, 4, 3), (2, 4, 5), True, False),
          batch_matmul((2, 3, 4), (2, 5, 4), False, True), batch_matmul((3, 4, 3), (1, 5, 4), True, True),
          batch_matmul((2, 3, 4), (4, 6), False, False, const_b=True),
          batch_matmul((2, 3, 4), (6, 4), False, True, const_b=True)]
CASES += [fully_connected((3, 8), 5, False, True), fully_connected((2, 3, 8), 5, True, False, "RELU"),
          fully_connected((2, 3, 8), 4, False, True, "RELU6")]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_reduce_op_matches_litert(case):
    check(case)


def reduce_window(shape, window, strides, dilations, fn, init, dtype="float32"):
    fns = {"ADD": 1, "MINIMUM": 3, "MAXIMUM": 4, "ALL": 5, "ANY": 6}

    def make(rng):
        out = tuple((n - ((k - 1) * d + 1)) // s + 1 for n, k, s, d in zip(shape, window, strides, dilations))
        x = (rng.random(shape) < 0.7) if dtype == "bool" else \
            rng.integers(-50, 50, shape).astype(dtype) if dtype.startswith("int") else uni(rng, shape)
        return single("REDUCE_WINDOW", [In(x), C(np.asarray(init, dtype)), C(window, "int64"), C(strides, "int64"),
                                        C(dilations, "int64")], [(out, dtype)], {"reduce_function": fns[fn]})
    return Case(f"REDUCE_WINDOW-{fn}-{window}-{strides}-{dilations}-{dtype}", make)


WINDOW_CASES = [
    reduce_window((1, 5, 7, 3), (1, 2, 3, 1), (1, 1, 2, 1), (1, 1, 1, 1), "MAXIMUM", -0.5),
    reduce_window((1, 6, 7, 3), (1, 2, 2, 1), (1, 2, 2, 1), (1, 1, 1, 1), "ADD", 0.25),
    reduce_window((2, 9, 8), (1, 2, 3), (1, 1, 1), (1, 3, 2), "MINIMUM", 0.3),
    reduce_window((5, 7), (2, 3), (1, 2), (1, 1), "MAXIMUM", -100, "int32"),
    reduce_window((4, 6, 5), (2, 1, 2), (1, 1, 2), (1, 1, 1), "ALL", True, "bool"),
    reduce_window((4, 6, 5), (1, 3, 2), (2, 1, 1), (1, 1, 1), "ANY", False, "bool"),
]


def embedding_sparse(combiner, ids, idx, dense_shape, vocab):
    def make(rng):
        return single("EMBEDDING_LOOKUP_SPARSE", [C(ids, "int32"), C(idx, "int32"), C(dense_shape, "int32"),
                                                  In(uni(rng, (len(ids),), 0.5, 1.5)), C(uni(rng, vocab))],
                      [((*dense_shape[:-1], *vocab[1:]), "float32")], {"combiner": combiner})
    return Case(f"EMBEDDING_LOOKUP_SPARSE-{combiner}-{vocab}", make)


SPARSE_CASES = [embedding_sparse(c, [1, 3, 0, 2, 4], [[0, 0], [0, 1], [2, 0], [2, 2], [3, 1]], [4, 4], (5, 6))
                for c in (0, 1, 2)] + \
               [embedding_sparse(1, [2, 0, 2], [[0, 0, 0], [1, 1, 0], [1, 1, 2]], [2, 3, 5], (4, 2, 3))]


@pytest.mark.parametrize("case", WINDOW_CASES + SPARSE_CASES, ids=repr)
def test_window_and_sparse_lookup_match_litert(case):
    check(case)
