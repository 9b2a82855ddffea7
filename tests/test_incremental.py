"""Re-conversion after a pin reuses the last conversion's pieces (emit/incremental.py) and must give exactly what a
full conversion with the same pins gives: the ONNX bytes, the trace and the conflicts with their nodes."""
from __future__ import annotations

import pytest

from inspector.core.emit.incremental import Reconverter
from inspector.core.io.loader import load_model
from inspector.core.session.pipeline import Incremental, run


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
    same_plan(a.result.plan, b.result.plan)
    assert a.result.categories == b.result.categories and a.result.warnings == b.result.warnings


def same_plan(p, q) -> None:
    """Every table of the plan, in the same order (a re-plan updates the last plan's copies), its Conflicts and
    its Transposes and bound (the method's words count the parts a re-plan searched, not all of them)."""
    for f in ("perms", "why", "inputs", "produced", "outputs", "io_rules", "pins"):
        assert list(getattr(p, f).items()) == list(getattr(q, f).items()), f
    assert [vars(c) for c in p.conflicts] == [vars(c) for c in q.conflicts]
    assert (p.optimality.transposes, p.optimality.bound) == (q.optimality.transposes, q.optimality.bound)


@pytest.mark.parametrize("name", ["keras/nasnetmobile_fp32.tflite", "torch/mobilenet_v2_w050.tflite",
                                  "torch/superres_x2_pixelshuffle.tflite"])
def test_incremental_runs_give_a_full_conversions_bytes(corpus, name):
    graph = load_model(corpus / name)
    a, b, c = conv_outputs(graph.main)
    cache = Reconverter()
    first = Incremental(cache).run(graph, check=False)
    same(first, run(graph, check=False))
    counts = {first.result.transposes}
    for pins in ({a: "keep"}, {a: "keep", b: "NCHW"}, {b: "NCHW"}, {}, {c: "keep"}, {c: "keep", a: "keep"}, {}):
        inc = Incremental(cache).run(graph, pins, check=False)
        assert cache.replayed > cache.emitted                  # most ops were not emitted again...
        same(inc, run(graph, pins, check=False))               # ...and the result is the same to the byte
        counts.add(inc.result.transposes)
    assert len(counts) > 1                                     # the pins changed the graph
    assert Incremental(cache).run(graph, {}, check=False).result.model.SerializeToString() == \
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
    Incremental(cache).run(graph, check=False)
    for pins in ({"y": "keep"}, {}, {"y_NHWC": "keep"}, {"y": "keep", "y_NHWC": "keep"}):
        same(Incremental(cache).run(graph, pins, check=False), run(graph, pins, check=False))


def test_identities_a_transpose_pair_leaves_go_in_place_with_and_without_the_last_run(tmp_path):
    """Two TFLite TRANSPOSEs that undo each other between convolutions become two Identities, which the peephole
    drops where they are (the nodes before them untouched, their readers and the trace moved to their input, their
    value infos gone), in a conversion from scratch and after pins alike, to the byte."""
    import numpy as np

    from inspector.core.io.tflite_builder import ModelBuilder
    b = ModelBuilder()
    w = b.const("w", np.full((3, 3, 3, 3), 0.1, np.float32))
    bias = b.const("bias", np.zeros(3, np.float32))
    prev = b.input("x", [1, 5, 7, 3])
    for i in range(6):
        y = b.tensor(f"c{i}", [1, 5, 7, 3])
        b.op("CONV_2D", [prev, w, bias], [y], {"padding": "SAME"})
        prev = y
        if i == 2:
            t1, t2 = b.tensor("nchw", [1, 3, 5, 7]), b.tensor("back", [1, 5, 7, 3])
            b.op("TRANSPOSE", [prev, b.const("p1", np.array([0, 3, 1, 2], np.int32))], [t1])
            b.op("TRANSPOSE", [t1, b.const("p2", np.array([0, 2, 3, 1], np.int32))], [t2])
            prev = t2
    b.output(prev)
    graph = load_model(b.save(tmp_path / "pair.tflite"))
    cache = Reconverter()
    for pins in ({}, {"c4": "keep"}, {}, {"c0": "keep", "c4": "keep"}, {"c1": "NCHW"}):
        inc = Incremental(cache).run(graph, pins, check=False)
        same(inc, run(graph, pins, check=False))
        g = inc.result.model.graph
        assert [n.op_type for n in g.node].count("Conv") == 6 and "Identity" not in [n.op_type for n in g.node]
        assert not {"nchw", "back"} & {v.name for v in g.value_info}
        assert {"nchw", "back"}.isdisjoint(i for n in g.node for i in n.input)
        back = next(t.index for t in graph.main.tensors if t.name == "back")
        c3 = next(n for n in g.node if n.op_type == "Conv" and n.output[0].startswith("c3"))
        assert c3.input[0] in inc.result.trace.tensor_values[back]     # the reader and the trace: its input


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
        inc = Incremental(cache).run(graph, pins, check=False)
        same(inc, run(graph, pins, check=False))
        pad = next(n for n in inc.result.model.graph.node if n.op_type == "Pad")
        init = {t.name: t for t in inc.result.model.graph.initializer}[pad.input[1]]
        pads.add(tuple(onnx.numpy_helper.to_array(init)))
    assert len(pads) == 2                        # NHWC and NCHW pads: the pin changed the initializer


def test_re_runs_leave_no_reference_cycles(corpus):
    """A re-run's Recorder and its Logged dicts must be freed by their reference counts: the window freezes what
    lives after a pin (gc_guard.settle), so a cycle among them was kept for good, pin after pin."""
    import gc
    graph = load_model(corpus / "torch/mobilenet_v2_w050.tflite")
    a, b, _ = conv_outputs(graph.main)
    cache = Reconverter()
    gc.collect()
    gc.disable()
    try:
        for pins in ({}, {a: "keep"}, {a: "keep", b: "NCHW"}, {}):
            Incremental(cache).run(graph, pins, check=False)
        assert cache.replayed > 0                               # the re-runs recorded and replayed
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        kinds = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not kinds & {"Recorder", "Logged", "Cursor", "Segment"}, kinds


def mixed_graph(path, steps: int, rng):
    """A graph of convolutions, adds, pads, means, concatenations and a reshape (about 1.5 ops a step), whose
    tensor names collide with the names conversion makes ("t3_NCHW", "t3_1", "t 4"), and its pinnable tensors."""
    import numpy as np

    from inspector.core.io.tflite_builder import ModelBuilder
    b = ModelBuilder()
    shape = [1, 5, 7, 3]
    w = b.const("w", np.arange(81, dtype=np.float32).reshape(3, 3, 3, 3) / 100)
    bias = b.const("bias", np.zeros(3, np.float32))
    names = ["t0", "t0_NCHW", "t1", "t 4", "t3", "t3_1", "t3_NCHW", "t3_NHWC", "t2"]
    made = [b.input("x", shape)]
    for i in range(steps):
        prev = made[-1]
        name = names[i] if i < len(names) else f"t{i}"
        kind = i % 6
        if kind == 0:
            y = b.tensor(name, shape)
            b.op("CONV_2D", [prev, w, bias], [y], {"padding": "SAME"})
        elif kind == 1 and len(made) > 2:
            y = b.tensor(name, shape)
            b.op("ADD", [prev, made[rng.randrange(len(made) - 1)]], [y])
        elif kind == 2:
            p, y = b.tensor(name + "_p", [1, 6, 9, 3]), b.tensor(name, shape)
            b.op("PAD", [prev, b.const(name + "_pads", np.array([[0, 0], [0, 1], [1, 1], [0, 0]], np.int32))],
                 [p])
            b.op("AVERAGE_POOL_2D", [p], [y], {"padding": "VALID", "filter_height": 2, "filter_width": 3})
        elif kind == 3:
            m, y = b.tensor(name + "_m", [1, 1, 1, 3]), b.tensor(name, shape)
            b.op("MEAN", [prev, b.const(name + "_axes", np.array([1, 2], np.int32))], [m], {"keep_dims": True})
            b.op("ADD", [prev, m], [y])
        elif kind == 4:
            c, y = b.tensor(name + "_c", [1, 5, 7, 6]), b.tensor(name, shape)
            b.op("CONCATENATION", [prev, made[-2]], [c], {"axis": 3})
            b.op("CONV_2D", [c, b.const(name + "_w", np.ones((3, 1, 1, 6), np.float32) / 6), bias], [y],
                 {"padding": "SAME"})
        else:
            y = b.tensor(name, shape)
            b.op("RELU", [prev], [y])
        made.append(y)
    flat = b.tensor("flat", [1, 105])
    b.op("RESHAPE", [made[-1], b.const("shape", np.array([1, 105], np.int32))], [flat], {"new_shape": [1, 105]})
    b.output(flat)
    graph = load_model(b.save(path))
    sg = graph.main
    return graph, [sg.tensors[t].name for t in range(len(sg.tensors))
                   if sg.tensors[t].rank == 4 and sg.tensors[t].data is None]


def kept_pieces_hold(cache: Reconverter, model) -> None:
    """What a re-run took from its pieces instead of walking the model (a model peephole left as it was): where the
    Transposes are, which value_info each name has, and a bound of the model's size."""
    g = model.graph
    assert cache.transposes_at == [i for i, n in enumerate(g.node) if n.op_type == "Transpose"]
    index = cache.info_index()
    assert len(index) == len({v.name for v in g.value_info})
    assert all(g.value_info[i].name == name for name, i in index.items())
    assert model.ByteSize() <= cache.rest_bound(model)


def test_random_pins_on_a_mixed_graph_give_a_full_conversions_bytes(tmp_path):
    """Pins picked at random on a mixed graph: each re-run equals a full conversion, and most records are
    replayed without being checked read by read (Reconverter.checked)."""
    import random
    rng = random.Random(7)
    graph, pinnable = mixed_graph(tmp_path / "mixed.tflite", 40, rng)
    sg = graph.main
    cache = Reconverter()
    Incremental(cache).run(graph, check=False)
    counts, unchecked = set(), 0
    for _ in range(12):
        pins = {t: rng.choice(["keep", "NCHW"]) for t in rng.sample(pinnable, rng.randint(0, 3))}
        inc = Incremental(cache).run(graph, pins, check=False)
        same(inc, run(graph, pins, check=False))
        kept_pieces_hold(cache, inc.result.model)
        counts.add(inc.result.transposes)
        unchecked += cache.checked < len(sg.ops) // 2
    assert len(counts) > 2 and unchecked >= 6      # the pins changed the graph; most runs checked few records


def test_pins_and_undos_in_a_row_replay_whole_chunks(tmp_path):
    """Several pins set and undone in a row on a graph of several chunks (incremental.CHUNK ops): each re-run equals
    a full conversion (bytes, trace, every table of the plan), the untouched chunks are replayed whole, and the
    re-plan's changes from the last plan are what the re-emission compares (not a diff of the whole plan)."""
    import random

    from inspector.core.emit import incremental
    rng = random.Random(11)
    graph, pinnable = mixed_graph(tmp_path / "long.tflite", 260, rng)
    n_chunks = -(-len(graph.main.ops) // incremental.CHUNK)
    assert n_chunks >= 5
    a, b, c = pinnable[40], pinnable[len(pinnable) // 2], pinnable[-30]
    cache = Reconverter()
    Incremental(cache).run(graph, check=False)
    counts = set()
    for pins in ({a: "keep"}, {a: "keep", b: "NCHW"}, {a: "keep"}, {}, {c: "keep"}, {c: "keep", b: "keep"},
                 {b: "keep"}, {}, {}):
        inc = Incremental(cache).run(graph, pins, check=False)
        same(inc, run(graph, pins, check=False))
        kept_pieces_hold(cache, inc.result.model)
        assert cache.replanner.plan_changes is not None         # the plan updated from the last one...
        assert n_chunks - 3 <= cache.bulk <= n_chunks          # ...and most chunks replayed whole
        counts.add(inc.result.transposes)
    assert len(counts) > 2


def test_quantized_models_convert_in_full_each_time(corpus):
    """Quantization keeps state outside the records: no replay, the same result."""
    path = next(p for p in sorted((corpus / "ops").glob("*.tflite")) if "int8" in p.name)
    graph = load_model(path)
    cache = Reconverter()
    Incremental(cache).run(graph, check=False)
    t = next(t for t in graph.main.tensors if t.data is None and t.rank == 4 and t.name)
    inc = Incremental(cache).run(graph, {t.name: "NCHW"}, check=False)
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


def test_a_childs_rerun_leaves_big_weights_out_as_the_window_gets_them(corpus):
    """The child's re-runs convert with weights_over: NASNet's big weights join the model as name, type and dims
    only, never parsed in to be cleared again. The model is byte for byte a full conversion's with those weights
    cleared (what leave_out_weights sent before), small initializers keep their data, and the metadata pass and
    its findings are those of the model with its weights."""
    from inspector.core.session.pipeline import ConvertOptions, converted, metadata_pass
    from inspector.gui.rerun_child import STRIP_BYTES, findings_of, leave_out_weights
    graph = load_model(corpus / "keras/nasnetmobile_fp32.tflite")
    a, b, _ = conv_outputs(graph.main)
    cache = Reconverter()
    Incremental(cache).run(graph, check=False)
    for pins in ({a: "keep"}, {a: "keep", b: "NCHW"}, {}):
        expect = leave_out_weights(converted(graph, pins, ConvertOptions(), check=False)).model
        for c in (cache, None):            # replayed records, and a conversion without any
            convert = Incremental(c).converted if c is not None else converted
            out = convert(graph, pins, ConvertOptions(), check=False, weights_over=STRIP_BYTES)
            assert out.weights_left_out
            assert out.model.SerializeToString() == expect.SerializeToString()
            data = {t.name: len(t.raw_data) for t in out.model.graph.initializer}
            assert 0 < sum(n > 0 for n in data.values()) < len(data)       # small ones kept, big ones left out
            annotated = metadata_pass(out)
            whole = run(graph, pins, check=False)
            assert annotated.notes == whole.notes
            assert [f.message for f in findings_of(annotated.result.model)] == \
                [f.message for f in findings_of(whole.result.model)]
            assert annotated.result.model.SerializeToString() == \
                leave_out_weights(whole.result).model.SerializeToString()
    assert cache.replayed > cache.emitted


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int8", "uint8", "int16", "int32", "int64",
                                   "bool"])
def test_weights_left_out_without_reading_them(dtype):
    """without_data and raw_length never read raw_data (reading it copies the weight: ~0.2 s each for 256 MiB);
    they must give what reading it gives: the copy with every other field, byte for byte, and its length."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    from inspector.core.emit.convert import raw_length, without_data
    t = numpy_helper.from_array(np.arange(3 * 5 * 7).reshape(3, 5, 7).astype(dtype), "w")
    t.doc_string, t.data_location = "kept", onnx.TensorProto.DEFAULT
    t.external_data.add(key="k", value="v")
    t.metadata_props.add(key="a", value="b")
    t.segment.begin = 2
    read = onnx.TensorProto()
    read.CopyFrom(t)
    read.ClearField("raw_data")
    assert without_data(t).SerializeToString() == read.SerializeToString()
    assert raw_length(t) == len(t.raw_data) > 0 and raw_length(read) == 0
