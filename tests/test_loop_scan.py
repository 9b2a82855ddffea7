"""A WHILE body that writes row i of a carried accumulator (TensorFlow's TensorList writes as TFLite lowers them:
SLICE before row i, the row, SLICE after it, CONCATENATION) becomes a Loop scan output with the rows put in place
after the loop; the body keeps no copy of the accumulator. Checked against LiteRT on non-square shapes."""
from __future__ import annotations

import numpy as np
import pytest

from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.proof.validate import validate
from inspector.core.session.pipeline import Incremental

from tests.test_control_flow import compare, convert_bytes, loop_subgraphs

RNG = np.random.default_rng(5)
ROWS, H, W = 6, 2, 3                                     # accumulator (ROWS, H, W), one (1, H, W) row per step


def i32(v):
    return np.array(v, np.int32)


def row_write_model(limit=None, start: int = 0, acc_input: bool = False, reads_acc: bool = False) -> bytes:
    """h <- tanh(h * k + x[i]); acc[i] <- h, for i from `start` while i < n (n: the constant `limit`, or an input
    when None). The accumulator starts as an input (`acc_input`) or zeros. `reads_acc`: the body also reads the
    accumulator (a sum of it joins h), which the scan form cannot keep."""
    b = ModelBuilder()
    x = b.input("x", [ROWS, H, W])
    n = b.input("n", [], "int32") if limit is None else b.const("n", i32(limit))
    acc0 = b.input("acc0", [ROWS, H, W]) if acc_input else b.const("acc0", np.zeros((ROWS, H, W), np.float32))
    h0 = b.const("h0", np.full((H, W), 0.1, np.float32))
    shapes = [([], "int32"), ([], "int32"), ([ROWS, H, W], "float32"), ([H, W], "float32"), ([ROWS, H, W], "float32")]
    names = ["i", "n", "acc", "h", "x"]

    cond, body, (bi, bn, bacc, bh, bx) = loop_subgraphs(b, names, shapes)
    one = body.const("one", i32(1))
    i1 = body.tensor("i1", [], "int32")
    body.op("ADD", [bi, one], [i1])
    xi = body.tensor("xi", [H, W])
    body.op("GATHER", [bx, bi], [xi], {"axis": 0})
    hk = body.tensor("hk", [H, W])
    body.op("MUL", [bh, body.const("k", (RNG.standard_normal((H, W)) * 0.5).astype(np.float32))], [hk])
    pre = body.tensor("pre", [H, W])
    body.op("ADD", [hk, xi], [pre])
    if reads_acc:
        total = body.tensor("total", [H, W])
        body.op("SUM", [bacc, body.const("axis0", i32([0]))], [total], {"keep_dims": False})
        pre2 = body.tensor("pre2", [H, W])
        body.op("ADD", [pre, total], [pre2])
        pre = pre2
    h1 = body.tensor("h1", [H, W])
    body.op("TANH", [pre], [h1])
    # the write, as TFLite lowers TensorListSetItem
    i_1 = body.tensor("i_1", [1], "int32")
    body.op("RESHAPE", [bi, body.const("shape1", i32([1]))], [i_1])
    sizes = body.tensor("sizes", [3], "int32")
    body.op("CONCATENATION", [i_1, body.const("rest", i32([-1, -1]))], [sizes], {"axis": 0})
    head = body.tensor("head", [1, 1, 1], shape_signature=[-1, -1, -1])      # the static shapes TFLite gives them
    body.op("SLICE", [bacc, body.const("zeros", i32([0, 0, 0])), sizes], [head])
    n_1 = body.tensor("n_1", [1], "int32")
    body.op("RESHAPE", [i1, body.const("shape1b", i32([1]))], [n_1])
    begins = body.tensor("begins", [3], "int32")
    body.op("CONCATENATION", [n_1, body.const("zeros2", i32([0, 0]))], [begins], {"axis": 0})
    tail = body.tensor("tail", [1, H, W], shape_signature=[-1, H, W])
    body.op("SLICE", [bacc, begins, body.const("all", i32([-1, -1, -1]))], [tail])
    row = body.tensor("row", [1, H, W])
    body.op("RESHAPE", [h1, body.const("row_shape", i32([1, H, W]))], [row])
    acc1 = body.tensor("acc1", [ROWS, H, W])
    body.op("CONCATENATION", [head, row, tail], [acc1], {"axis": 0})
    body.output(i1, bn, acc1, h1, bx)

    outs = [b.tensor(f"{nm}_end", s, d) for nm, (s, d) in zip(names, shapes)]
    b.op("WHILE", [b.const("i0", i32(start)), n, acc0, h0, x], outs,
         {"cond_subgraph_index": cond.index, "body_subgraph_index": body.index})
    y = b.tensor("y", [ROWS, H, W])
    b.op("MUL", [outs[2], b.const("two", np.array([2.0], np.float32))], [y])
    b.output(y, outs[3], outs[4])                      # x_end: a value the loop passes through
    return b.build()


def _loop(r):
    (loop,) = [n for n in r.model.graph.node if n.op_type == "Loop"]
    return loop, loop.attribute[0].g


def _body_ops(body) -> list[str]:
    return sorted(n.op_type for n in body.node)


def test_rows_filled_whole_become_a_scan_output(tmp_path):
    """Counter from 0 to the accumulator's length: the body computes the row only (no Slice, no Concat, no copy
    of the accumulator), the Loop carries one value fewer and the rows are the accumulator."""
    data = row_write_model(limit=ROWS)
    r = convert_bytes(data, tmp_path)
    loop, body = _loop(r)
    # i and h carried, the rows scanned; n and x, which the body passes through, read from outside (carried, each
    # would need an Identity per iteration: a Loop body's output may not be its input)
    assert len(loop.input) == 2 + 2 and len(loop.output) == 2 + 1
    # Add (i + 1), Gather, Mul, Add, Tanh, the row's Reshape, the cond's Less
    assert _body_ops(body) == ["Add", "Add", "Gather", "Less", "Mul", "Reshape", "Tanh"]
    assert not any(n.op_type in ("Slice", "Concat") for n in r.model.graph.node)
    assert "acc0" not in {i.name for i in r.model.graph.initializer}   # the zeros are never read
    compare(r, data, [RNG.standard_normal((ROWS, H, W)).astype(np.float32)])
    v = validate(r)
    assert v.ok, [(e.name, e.max_rel) for e in v.outputs]


@pytest.mark.parametrize("steps", [0, 1, 4, ROWS])
def test_rows_written_in_part_keep_the_others(steps, tmp_path):
    """The step count an input: rows the loop did not reach keep the accumulator's initial values (an input here),
    zero steps included."""
    data = row_write_model(limit=None, acc_input=True)
    r = convert_bytes(data, tmp_path)
    loop, body = _loop(r)
    assert not any(n.op_type in ("Slice", "Concat") for n in body.node)
    assert len(loop.output) == 2 + 1
    x = RNG.standard_normal((ROWS, H, W)).astype(np.float32)
    acc = RNG.standard_normal((ROWS, H, W)).astype(np.float32)
    compare(r, data, [x, np.array(steps, np.int32), acc])


@pytest.mark.parametrize("start,limit", [(2, ROWS), (1, 4)])
def test_rows_from_a_later_start(start, limit, tmp_path):
    data = row_write_model(limit=limit, start=start, acc_input=True)
    r = convert_bytes(data, tmp_path)
    loop, body = _loop(r)
    assert not any(n.op_type in ("Slice", "Concat") for n in body.node)
    x = RNG.standard_normal((ROWS, H, W)).astype(np.float32)
    compare(r, data, [x, RNG.standard_normal((ROWS, H, W)).astype(np.float32)])


def test_accumulator_read_in_the_body_stays_carried(tmp_path):
    """A body that reads the accumulator beyond the write needs it every iteration: emitted as TFLite wrote it."""
    data = row_write_model(limit=ROWS, reads_acc=True)
    r = convert_bytes(data, tmp_path)
    loop, body = _loop(r)
    assert len(loop.output) == 3 and any(n.op_type == "Concat" for n in body.node)
    compare(r, data, [RNG.standard_normal((ROWS, H, W)).astype(np.float32)])


def test_bilstm_re_conversions_equal_full_ones(corpus):
    """onnx2tf's BiLSTM (two WHILEs writing their steps' outputs row by row): each Loop scans its rows, the result
    matches LiteRT, and re-conversions after pins give a full conversion's bytes."""
    from inspector.core.emit.incremental import Reconverter
    from inspector.core.io.loader import load_model
    from inspector.core.session.pipeline import run
    from tests.test_incremental import same

    graph = load_model(corpus / "onnx2tf/bilstm_classifier.tflite")
    cache = Reconverter()
    first = Incremental(cache).run(graph, check=False)
    loops = [n for n in first.result.model.graph.node if n.op_type == "Loop"]
    assert len(loops) == 2
    for loop in loops:
        ops = [n.op_type for n in loop.attribute[0].g.node]
        assert "Concat" not in ops and "Slice" not in ops and len(loop.output) == 5   # 4 carried + the rows
    v = validate(first.result)
    assert v.ok, [(e.name, e.max_rel) for e in v.outputs]
    four_d = [t.name for t in graph.main.tensors if t.rank == 4 and t.data is None]
    for pins in ({four_d[0]: "keep"}, {four_d[-1]: "NCHW"}, {}):
        same(Incremental(cache).run(graph, pins, check=False), run(graph, pins, check=False))
