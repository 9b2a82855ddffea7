"""Weights only a Loop body reads are that body's own initializers (emit/body_weights.py: ONNX Runtime runs a body's
Gemm slower when its weight comes from the enclosing graph). Checked on the non-square LSTM cell of test_gemm_fold (batch
2, 5 features, 3 units, 4 steps) against LiteRT; what the main graph reads, and a model converted with its weights
left out, keep their constants in the main graph; a re-conversion gives the same bytes."""
from __future__ import annotations

from inspector.core.emit.incremental import Reconverter
from inspector.core.io.tflite_reader import read_tflite

from tests.test_gemm_fold import K, U, _body, _check, lstm_model
from tests.test_control_flow import convert_bytes


def test_gate_weights_move_into_the_loop_body(tmp_path):
    data = lstm_model()
    r = convert_bytes(data, tmp_path)
    body, main = _body(r), {t.name: t for t in r.model.graph.initializer}
    inside = {t.name: t for t in body.initializer}
    gemms = [n for n in body.node if n.op_type == "Gemm"]
    weights = {g.input[1] for g in gemms}
    assert len(weights) == 2 and weights <= set(inside) and not weights & set(main)
    assert sorted(tuple(inside[w].dims) for w in weights) == sorted([(4 * U, K), (4 * U, U)])
    (loop,) = [n for n in r.model.graph.node if n.op_type == "Loop"]
    assert {"i0", "h0", "c0"} <= set(main) and {"i0", "h0", "c0"} <= set(loop.input)     # the main graph reads them
    assert not set(inside) & {x for n in r.model.graph.node for x in n.input}
    _check(r, data)


def test_a_conversion_that_may_leave_weights_out_keeps_them_in_the_main_graph(tmp_path):
    r = convert_bytes(lstm_model(), tmp_path, weights_over=1 << 30)
    assert not _body(r).initializer
    gemms = [n for n in _body(r).node if n.op_type == "Gemm"]
    assert len(gemms) == 2 and {g.input[1] for g in gemms} <= {t.name for t in r.model.graph.initializer}


def test_a_reconversion_gives_the_same_bytes(tmp_path):
    fresh = convert_bytes(lstm_model(), tmp_path).model.SerializeToString()
    graph, cache = read_tflite(tmp_path / "m.tflite"), Reconverter()
    for _ in range(2):
        again = cache.convert(graph, check=False)
        assert again.model.SerializeToString() == fresh
        assert _body(again).initializer
