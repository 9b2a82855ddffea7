"""What opening a big model does off the GUI thread (issue 32, item 13): the child converts with its collector
held until the window's `settle`, and the result's Transposes are counted before the GUI thread shows it."""
from __future__ import annotations

import dataclasses
import gc

import numpy as np

from inspector.core.io.tflite_builder import ModelBuilder
from inspector.gui import loader_job, rerun_child

from .test_rerun_transfer import Pool, child_pool


def chain(path, n: int = 30):
    """CONV_2D / RELU ops in a row, some pinned by the NHWC output into a Transpose; H != W != C."""
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    w = b.const("w", np.full((3, 3, 3, 3), 0.01, np.float32))
    bias = b.const("b", np.zeros(3, np.float32))
    for i in range(n):
        y = b.tensor(f"t{i}", [1, 5, 7, 3])
        b.op("CONV_2D" if i % 2 else "RELU", [x, w, bias] if i % 2 else [x], [y], {"padding": "SAME"} if i % 2 else {})
        x = y
    b.output(x)
    return b.save(path)


class Watched(Pool):
    """The child's executor (tests.test_rerun_transfer.Pool) noting whether automatic collection was on as each
    call returned."""

    def __init__(self):
        super().__init__()
        self.collecting = []

    def submit(self, fn, *args):
        f = super().submit(fn, *args)
        self.collecting.append((fn.__name__, gc.isenabled()))
        return f


def test_the_child_converts_an_open_without_collecting_until_the_window_settles_it(tmp_path, monkeypatch):
    """Each collection during a 50,000-op conversion scanned all it had made so far: the child's conversion took
    ~1.7x as long. The open holds the collector, as a re-run does, and the window's `settle` gives it back (also
    when the conversion fails)."""
    from inspector.core.ir.errors import ConversionError
    from inspector.core.session import pipeline
    pool = child_pool(monkeypatch, Watched())
    monkeypatch.setattr(rerun_child, "_in_child", lambda: True)
    path = str(chain(tmp_path / "chain.tflite"))
    try:
        assert gc.isenabled()
        result, *_ = loader_job.LoadJob(path)._in_child()
        assert ("convert_and_lay_out", False) in pool.collecting and pool.collecting[-1] == ("settle", True)
        assert result.transposes == 0 and gc.isenabled()

        def fails(*a, **k):
            raise ConversionError("no")
        monkeypatch.setattr(pipeline.Incremental, "run", fails)
        pool.collecting.clear()
        assert loader_job.LoadJob(path)._in_child() == "no"
        assert pool.collecting == [("convert_and_lay_out", False), ("settle", True)] and gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_the_transposes_are_counted_before_the_gui_thread_shows_the_result(tmp_path, monkeypatch):
    """Session.show counts the result's Transposes, a walk of every ONNX node (50,000 ops: ~30 ms of the GUI
    thread): the child counts them and the count crosses with the model it counted, and stays through
    dataclasses.replace while the model does; a result made with another model counts that one (and keeps no
    reference to the old)."""
    from inspector.core.io.loader import load_model
    from inspector.core.session.pipeline import ConvertOptions, run
    child_pool(monkeypatch, Pool())
    path = str(chain(tmp_path / "chain.tflite"))
    for pins in ({}, {"t9": "NHWC"}):           # none, and a pin that costs Transposes
        if pins:                                # a re-run's result, counted in the child
            monkeypatch.setattr(rerun_child, "CHILD", rerun_child.Child())
            sent = rerun_child.rerun(path, pins, {}, {})
            result = loader_job.received(rerun_child.result_of(sent[0]))[0]
        else:
            result = loader_job.received(loader_job.convert_and_lay_out(path))[0]
        fresh = run(load_model(path), pins, ConvertOptions()).result
        assert result.counted[0] is result.model                                    # counted before it crossed
        assert result.counted[1] == result.transposes == fresh.transposes == sum(
            n.op_type == "Transpose" for n in fresh.model.graph.node) == (2 if pins else 0)
        assert dataclasses.replace(result, graph=None).counted == result.counted     # the same model
    other = type(result.model)()
    other.CopyFrom(fresh.model)
    del other.graph.node[:]
    made = dataclasses.replace(result, model=other)                              # another model: counted again
    assert made.counted is None and made.transposes == 0 and made.counted == (other, 0)
    assert dataclasses.replace(made, model=fresh.model).transposes == 2


def test_an_onnx_opened_alone_is_shown_as_read_and_copied_only_for_an_edit(tmp_path):
    """The model as read was copied as the window opened it (100,000 inputs: ~80 ms of the GUI thread) though
    nothing was applied to it: without edits the result is the model as read; an edit applies to a copy, and
    the model as read stays as it was (export writes it with the edits)."""
    import onnx
    from onnx import TensorProto, helper

    from inspector.core.session.onnx_session import OnnxSession
    ins = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, 2, 3]) for i in range(5)]
    g = helper.make_graph([helper.make_node("Concat", [f"x{i}" for i in range(5)], ["y"], axis=0)], "g", ins,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 2, 3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    before = model.SerializeToString()
    s = OnnxSession.of(str(tmp_path / "m.onnx"), model)
    assert s.result.model is model and s.result.transposes == 0
    s.set_metadata(s.metadata.merged(type(s.metadata)(types={"x3": "TENSOR"}, doc_string="edited")))
    s.convert()
    assert s.result.model is not model and s.result.model.graph.input[3].type.denotation == "TENSOR"
    assert s.result.model.doc_string == "edited" and model.SerializeToString() == before
    s.set_metadata(type(s.metadata)())                  # the edits undone: the model as read again
    s.convert()
    assert s.result.model is model and model.SerializeToString() == before
    out = tmp_path / "out.onnx"
    s.export(str(out))
    assert onnx.load(out).SerializeToString() == before


def test_the_childs_layout_runs_without_collections_and_gives_the_collector_back(monkeypatch):
    """graph_layout.placed (the TFLite layout, run in the child) made ~10^6 young objects on 50,000 ops, each
    collection they set off scanning the child's heap: the collector is off while it lays out, and on after as it
    was before (off stays off: an open's conversion holds it)."""
    from inspector.gui import graph_layout
    sizes = np.array([(120, 40 + 7 * (i % 3)) for i in range(60)], float)
    edges = np.array([(i, i + 1) for i in range(59)] + [(i, i + 5) for i in range(0, 50, 7)], np.intp)
    real, during = graph_layout._place, []
    monkeypatch.setattr(graph_layout, "_place", lambda *a: (during.append(gc.isenabled()), real(*a))[1])
    try:
        for on in (True, False):
            (gc.enable if on else gc.disable)()
            pos, *_ = graph_layout.placed(sizes, edges)
            assert during.pop() is False and gc.isenabled() is on and len(pos) == 60
    finally:
        gc.enable()


def test_the_child_starts_converting_before_the_window_reads_the_model(tmp_path, monkeypatch):
    """An open that converts in the child submits it as soon as the file's header gives the op count: the child
    reads and converts while the window reads the model and draws its TFLite pane. A folding open has the child
    skip the ONNX layout as before; a file whose header cannot be read opens (or fails) as before."""
    from inspector.core.io import tflite_reader
    pool = child_pool(monkeypatch, Pool())
    path = str(chain(tmp_path / "chain.tflite", 31))
    assert tflite_reader.op_count(path) == 31 == len(tflite_reader.read_tflite(path).main.ops)
    monkeypatch.setattr(loader_job.LoadJob, "PROCESS_OPS", 20)
    order, real = [], loader_job.read_tflite
    monkeypatch.setattr(loader_job, "read_tflite", lambda p: order.append(list(pool.calls)) or real(p))
    lay_out = []
    convert = loader_job.convert_and_lay_out

    def convert_and_lay_out(src, conv=None, lay=True):
        lay_out.append(lay)
        return convert(src, conv, lay)
    monkeypatch.setattr(loader_job, "convert_and_lay_out", convert_and_lay_out)
    for folds_from in (10_000, 25):
        monkeypatch.setattr(loader_job, "FOLD_OPS", folds_from)
        got = []
        job = loader_job.LoadJob(path)
        job.signals.onnxReady.connect(lambda doc, vg, layout: got.append((doc, vg, layout)))
        job.signals.failed.connect(lambda msg, details: got.append(msg))
        job.run()
        assert order[-1][0] == "convert_and_lay_out"                # submitted before the window's read
        assert len(got) == 1 and not isinstance(got[0], str)
        doc, vg, layout = got[0]
        assert lay_out[-1] == (folds_from > 31) == (layout is not None) and job.folds == (folds_from <= 31)
        assert doc.result.transposes == 0 and vg.op_count == 31
    order.clear()
    pool.calls.clear()
    job = loader_job.LoadJob(path, convert=False)                # nothing to convert: nothing submitted
    job.run()
    assert order == [[]] and pool.calls == []
    monkeypatch.setattr(loader_job, "PROCESS_BYTES", 100)        # a big file: its header is not read, it is
    got = []                                                     # submitted once read, folded as it reads
    job = loader_job.LoadJob(path)
    job.signals.onnxReady.connect(lambda doc, vg, layout: got.append(layout))
    job.run()
    assert order[-1] == [] and pool.calls[0] == "convert_and_lay_out" and lay_out[-1] is False and got == [None]
    monkeypatch.setattr(loader_job, "PROCESS_BYTES", 64 << 20)
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(open(path, "rb").read()[:200])               # cut short: no op count, the read says why
    assert tflite_reader.op_count(bad) == 0
    pool.calls.clear()
    failed = []
    job = loader_job.LoadJob(str(bad))
    job.signals.failed.connect(lambda msg, details: failed.append(msg))
    job.run()
    assert failed and "convert_and_lay_out" not in pool.calls
