"""An LSTM cell in a WHILE body (as Keras lowers one): the ADD of the input's and the state's FULLY_CONNECTED
outputs becomes the second Gemm's C input, and the gates' constant biases, added after the SPLIT, become the first
Gemm's C input. Checked against LiteRT on non-square shapes (batch 2, 5 features, 3 units, 4 steps), and the cases
that must not fold (a value read twice, a computed bias) left as they are."""
from __future__ import annotations

import numpy as np
import pytest

from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.proof.validate import validate

from tests.test_control_flow import compare, convert_bytes, loop_subgraphs

RNG = np.random.default_rng(23)
T, B, K, U = 4, 2, 5, 3                    # steps, batch, features, units: the gates are [B, 4U]


def f32(*shape):
    return (RNG.standard_normal(shape) * 0.4).astype(np.float32)


def lstm_model(share_fh: bool = False, computed_bias: bool = False) -> bytes:
    """h, c <- LSTM cell(x[i], h, c) while i < n. `share_fh`: the state's FULLY_CONNECTED output is also added to
    the new h (read twice: no fold into a Gemm's C); `computed_bias`: the third gate's bias is h's sum, not a
    constant (no bias fold)."""
    b = ModelBuilder()
    x = b.input("x", [T, B, K])
    n = b.input("n", [], "int32")
    names = ["i", "n", "h", "c", "x"]
    shapes = [([], "int32"), ([], "int32"), ([B, U], "float32"), ([B, U], "float32"), ([T, B, K], "float32")]

    cond, s, (bi, bn, bh, bc, bx) = loop_subgraphs(b, names, shapes)

    def t(name, shape=(B, U)):
        return s.tensor(name, list(shape))

    i1 = s.tensor("i1", [], "int32")
    s.op("ADD", [bi, s.const("one", np.array(1, np.int32))], [i1])
    xt = t("xt", (B, K))
    s.op("GATHER", [bx, bi], [xt], {"axis": 0})
    fx, fh, pre = t("fx", (B, 4 * U)), t("fh", (B, 4 * U)), t("pre", (B, 4 * U))
    s.op("FULLY_CONNECTED", [xt, s.const("wx", f32(4 * U, K)), None], [fx])
    s.op("FULLY_CONNECTED", [bh, s.const("wh", f32(4 * U, U)), None], [fh])
    s.op("ADD", [fx, fh], [pre])
    parts = [t(f"part{k}") for k in range(4)]
    s.op("SPLIT", [s.const("axis", np.array(1, np.int32)), pre], parts, {"num_splits": 4})
    gates = []
    for k, (part, act) in enumerate(zip(parts, ["LOGISTIC", "LOGISTIC", "TANH", "LOGISTIC"])):
        if computed_bias and k == 2:
            bias = s.tensor("hsum", [B, 1])
            s.op("SUM", [bh, s.const("ax1", np.array([1], np.int32))], [bias], {"keep_dims": True})
        else:
            bias = s.const(f"bias{k}", f32(U))
        z, g = t(f"z{k}"), t(f"g{k}")
        s.op("ADD", [part, bias], [z])
        s.op(act, [z], [g])
        gates.append(g)
    fc_, ig, c1, tc, h1 = t("fc"), t("ig"), t("c1"), t("tc"), t("h1")
    s.op("MUL", [gates[1], bc], [fc_])
    s.op("MUL", [gates[0], gates[2]], [ig])
    s.op("ADD", [fc_, ig], [c1])
    s.op("TANH", [c1], [tc])
    s.op("MUL", [gates[3], tc], [h1])
    if share_fh:
        head, h2 = t("fh_head"), t("h2")
        s.op("SLICE", [fh, s.const("b0", np.array([0, 0], np.int32)), s.const("sz", np.array([B, U], np.int32))],
             [head])
        s.op("ADD", [h1, head], [h2])
        h1 = h2
    s.output(i1, bn, h1, c1, bx)

    outs = [b.tensor(f"{nm}_end", sh, d) for nm, (sh, d) in zip(names, shapes)]
    b.op("WHILE", [b.const("i0", np.array(0, np.int32)), n, b.const("h0", f32(B, U)), b.const("c0", f32(B, U)), x],
         outs, {"cond_subgraph_index": cond.index, "body_subgraph_index": s.index})
    b.output(outs[2], outs[3])
    return b.build()


def _body(r):
    (loop,) = [n for n in r.model.graph.node if n.op_type == "Loop"]
    return loop.attribute[0].g


def _check(r, data, steps=(0, 1, T)):
    for n in steps:
        compare(r, data, [f32(T, B, K), np.array(n, np.int32)], rtol=1e-4)
    v = validate(r)
    assert v.ok, [(e.name, e.max_rel) for e in v.outputs]


def test_lstm_cell_gemms_take_the_add_and_the_gate_biases(tmp_path):
    data = lstm_model()
    r = convert_bytes(data, tmp_path)
    body = _body(r)
    gemms = [n for n in body.node if n.op_type == "Gemm"]
    assert len(gemms) == 2 and all(len(g.input) == 3 for g in gemms)
    first, second = gemms
    assert second.input[2] == first.output[0]                   # (h U + bias) is the C of x W
    bias = next(t for t in body.initializer if t.name == first.input[2])       # (body_weights: the body's own)
    assert list(bias.dims) == [4 * U]
    (split,) = [n for n in body.node if n.op_type == "Split"]
    assert split.input[0] == second.output[0]
    # Adds left: i + 1 and c's f*c + i*g; none reads a Gemm or a Split
    adds = [n for n in body.node if n.op_type == "Add"]
    assert len(adds) == 2
    made_by = {o: n.op_type for n in body.node for o in n.output}
    assert not any(made_by.get(i) in ("Gemm", "Split") for a in adds for i in a.input)
    names = {i.name for i in r.model.graph.initializer}
    assert not any(f"bias{k}" in names for k in range(4))        # the four rows are not kept besides
    body_trace = r.subgraphs[max(r.subgraphs)][1]
    made = {n.name for n in body.node}
    assert all(name in made for nodes in body_trace.op_nodes.values() for name in nodes)
    _check(r, data)


@pytest.mark.parametrize("share_fh, computed_bias, gemms_with_c, adds", [
    (True, False, 0, 8),      # fh read twice: the pair stays an Add, so the SPLIT reads no Gemm: nothing folds
    (False, True, 1, 6),      # a computed bias: the pair folds, the four bias Adds stay (with i + 1 and c's)
])
def test_what_is_read_elsewhere_does_not_fold(share_fh, computed_bias, gemms_with_c, adds, tmp_path):
    data = lstm_model(share_fh=share_fh, computed_bias=computed_bias)
    r = convert_bytes(data, tmp_path)
    body = _body(r)
    gemms = [n for n in body.node if n.op_type == "Gemm"]
    assert sum(len(g.input) == 3 for g in gemms) == gemms_with_c
    assert sum(n.op_type == "Add" for n in body.node) == adds
    _check(r, data)
