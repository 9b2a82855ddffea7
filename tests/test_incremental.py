"""Re-conversion after a pin reuses the last conversion's pieces (emit/incremental.py) and must give exactly what a
full conversion with the same pins gives: the ONNX bytes, the trace and the conflicts with their nodes."""
from __future__ import annotations

import pytest

from inspector.core.emit.incremental import Reconverter
from inspector.core.io.loader import load_model
from inspector.core.session.pipeline import run


def conv_outputs(sg, k: int = 3) -> list[str]:
    """Names of k convolution outputs spread over the graph (pinning them to TFLite's layout costs Transposes)."""
    ops = [op for op in sg.ops if op.opcode in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    return [sg.tensors[ops[len(ops) * (i + 1) // (k + 1)].outputs[0]].name for i in range(k)]


def same(a, b) -> None:
    assert a.result.model.SerializeToString() == b.result.model.SerializeToString()
    assert a.result.trace == b.result.trace
    assert [(c.tensor, c.op, c.kind, c.reason, c.node) for c in a.result.plan.conflicts] == \
        [(c.tensor, c.op, c.kind, c.reason, c.node) for c in b.result.plan.conflicts]
    assert a.notes == b.notes and a.result.plan.perms == b.result.plan.perms


@pytest.mark.parametrize("name", ["keras/nasnetmobile_fp32.tflite", "torch/mobilenet_v2_w050.tflite",
                                  "torch/superres_x2_pixelshuffle.tflite"])
def test_incremental_runs_give_a_full_conversions_bytes(corpus, name):
    graph = load_model(corpus / name)
    a, b, c = conv_outputs(graph.main)
    cache = Reconverter()
    first = run(graph, cache=cache, check=False)
    same(first, run(graph, check=False))
    counts = {first.result.transposes}
    for pins in ({a: "keep"}, {a: "keep", b: "NCHW"}, {b: "NCHW"}, {}, {c: "keep"}, {c: "keep", a: "keep"}, {}):
        inc = run(graph, pins, cache=cache, check=False)
        assert cache.replayed > cache.emitted                  # most ops were not emitted again...
        same(inc, run(graph, pins, check=False))               # ...and the result is the same to the byte
        counts.add(inc.result.transposes)
    assert len(counts) > 1                                     # the pins changed the graph
    assert run(graph, {}, cache=cache, check=False).result.model.SerializeToString() == \
        first.result.model.SerializeToString()                 # back to no pins: the first conversion exactly


def test_a_replayed_op_whose_names_would_change_is_emitted_again(tmp_path):
    """Pinning an earlier tensor takes a name a later op had: that op is emitted again, not replayed."""
    import numpy as np

    from inspector.core.io.tflite_builder import ModelBuilder
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    w = b.const("w", np.full((3, 3, 3, 3), 0.1, np.float32))
    bias = b.const("bias", np.zeros(3, np.float32))
    y, z, r = b.tensor("y", [1, 5, 7, 3]), b.tensor("y_NHWC", [1, 5, 7, 3]), b.tensor("r", [1, 5, 7, 3])
    b.op("CONV_2D", [x, w, bias], [y], {"padding": "SAME"})
    b.op("CONV_2D", [y, w, bias], [z], {"padding": "SAME"})
    b.op("RELU", [z], [r])
    b.output(r)
    graph = load_model(b.save(tmp_path / "names.tflite"))
    cache = Reconverter()
    run(graph, cache=cache, check=False)
    for pins in ({"y": "keep"}, {}, {"y_NHWC": "keep"}, {"y": "keep", "y_NHWC": "keep"}):
        same(run(graph, pins, cache=cache, check=False), run(graph, pins, check=False))


def test_an_initializer_a_pin_changes_is_not_taken_from_the_last_run(tmp_path):
    """A Pad's pads are an initializer in its input's layout: a pin that changes that layout changes the weight,
    which the re-run must emit anew, not take from the kept wire form of the last run's (convert's initializers
    parse in from Reconverter.wire)."""
    import numpy as np
    import onnx

    from inspector.core.io.tflite_builder import ModelBuilder
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    w = b.const("w", np.arange(3 * 3 * 3 * 4, dtype=np.float32).reshape(4, 3, 3, 3) / 100)
    bias = b.const("bias", np.zeros(4, np.float32))
    y, p, r = b.tensor("y", [1, 5, 7, 4]), b.tensor("p", [1, 6, 10, 4]), b.tensor("r", [1, 6, 10, 4])
    b.op("CONV_2D", [x, w, bias], [y], {"padding": "SAME"})
    b.op("PAD", [y, b.const("pads", np.array([[0, 0], [0, 1], [1, 2], [0, 0]], np.int32))], [p])
    b.op("RELU", [p], [r])
    b.output(r)
    graph = load_model(b.save(tmp_path / "pad.tflite"))
    cache = Reconverter()
    pads = set()
    for pins in ({}, {"y": "keep"}, {}, {"y": "keep"}, {"y": "NCHW"}):
        inc = run(graph, pins, cache=cache, check=False)
        same(inc, run(graph, pins, check=False))
        pad = next(n for n in inc.result.model.graph.node if n.op_type == "Pad")
        init = {t.name: t for t in inc.result.model.graph.initializer}[pad.input[1]]
        pads.add(tuple(onnx.numpy_helper.to_array(init)))
    assert len(pads) == 2                        # NHWC and NCHW pads: the pin changed the initializer


def test_quantized_models_convert_in_full_each_time(corpus):
    """Quantization keeps state outside the records: no replay, the same result."""
    path = next(p for p in sorted((corpus / "ops").glob("*.tflite")) if "int8" in p.name)
    graph = load_model(path)
    cache = Reconverter()
    run(graph, cache=cache, check=False)
    t = next(t for t in graph.main.tensors if t.data is None and t.rank == 4 and t.name)
    inc = run(graph, {t.name: "NCHW"}, cache=cache, check=False)
    assert cache.replayed == 0
    same(inc, run(graph, {t.name: "NCHW"}, check=False))


def test_results_from_the_child_come_back_whole_from_their_pieces(corpus, monkeypatch):
    """What the child process sends back as a skeleton and pieces (gui.chunked) is the very result, graph view and
    layout, every piece at most CHUNK items."""
    from inspector.gui import chunked, graph_layout, graph_model
    from inspector.gui.chunked import Chunked, pack, unpack
    monkeypatch.setattr(chunked, "CHUNK", 100)              # NASNet's lists are shorter than the real CHUNK
    graph = load_model(corpus / "keras/nasnetmobile_fp32.tflite")
    out = run(graph, check=False)
    vg = graph_model.from_onnx(out.result.model)
    layout = graph_layout.compute(vg)
    store: list = []
    sent = pack((out.result, out.notes, vg, layout), store)
    assert isinstance(sent[0], Chunked) and isinstance(sent[2], Chunked)
    assert len(store) > 20 and all(len(p) <= 100 for p in store)
    fetched = []
    result, notes, vg2, layout2 = unpack(sent, lambda i: fetched.append(i) or store[i])
    assert sorted(fetched) == list(range(len(store)))
    assert result.model.SerializeToString() == out.result.model.SerializeToString()
    assert (result.trace, result.plan, result.categories) == (out.result.trace, out.result.plan, out.result.categories)
    assert notes == out.notes and vg2 == vg
    assert (layout2.pos, layout2.routes, layout2.width) == (layout.pos, layout.routes, layout.width)
