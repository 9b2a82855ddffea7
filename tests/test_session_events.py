"""The Session's typed events and the one pipeline behind the CLI, the window's worker and its child process."""
from __future__ import annotations

import numpy as np
import pytest

from inspector.core.emit.convert import DEFAULT_OPSET
from inspector.core.io.loader import load_model
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.metadata.edits import MetadataEdits
from inspector.core.session.session import Session
from inspector.core.session.events import (MetadataChanged, ModelOpened, OptionsChanged, PinsChanged, PlanChanged,
                                           ValidationDone)
from inspector.core.session.pipeline import ConvertOptions, run
from inspector.gui.loader_job import convert_and_lay_out
from inspector.gui.chunked import unpack
from inspector.gui.graph_model import from_onnx
from inspector.gui.rerun_child import annotated, piece, rerun, result_of
from tests.test_session import model  # noqa: F401  (conv -> reshape -> conv, non-square)


@pytest.fixture
def runnable(tmp_path):
    """A biased conv LiteRT can run ([1, 5, 7, 3] -> [1, 5, 7, 4])."""
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    x, y = b.input("x", [1, 5, 7, 3]), b.tensor("y", [1, 5, 7, 4])
    b.op("CONV_2D", [x, b.const("w", rng.standard_normal((4, 3, 2, 3)).astype(np.float32)),
                     b.const("bias", rng.standard_normal(4).astype(np.float32))], [y], {"padding": "SAME"})
    b.output(y)
    path = tmp_path / "c.tflite"
    path.write_bytes(b.build())
    return path


def kinds(events):
    return [type(e).__name__ for e in events]


def test_listeners_get_the_kinds_they_asked_for_until_they_unsubscribe(model):  # noqa: F811
    every = []
    s = Session.open(model, listeners=(every.append,))
    plans = []
    stop = s.subscribe(plans.append, PlanChanged)
    s.convert()
    s.set_pin("y", "keep")
    change = s.convert()
    assert kinds(every) == ["ModelOpened", "PlanChanged", "PinsChanged", "PlanChanged"]
    assert every[0] == ModelOpened(str(model)) and every[2] == PinsChanged({"y": "keep"})
    assert kinds(plans) == ["PlanChanged", "PlanChanged"]
    assert plans[-1].result is s.result and plans[-1].change == change and change.transposes_after == 3
    stop()
    s.clear_pins()
    s.convert()
    assert len(plans) == 2 and kinds(every)[-2:] == ["PinsChanged", "PlanChanged"]


def test_a_change_counts_the_transposes_of_the_result_it_replaces(model):  # noqa: F811
    """Session.show reuses the count it made when the shown result came in, and only for that very result: one
    put in place by other means is counted again."""
    s = Session.open(model)
    assert s.convert().transposes_before is None
    s.set_pin("y", "keep")
    pinned = s.convert()
    assert (pinned.transposes_before, pinned.transposes_after) == (2, 3)
    s.clear_pins()
    assert (s.convert().transposes_before, s.result.transposes) == (3, 2)
    other = run(s.graph, {"y": "keep"}, s.options, s.metadata).result
    s.result = other                                # not through show: its count was never taken
    assert s.convert().transposes_before == 3


def test_metadata_options_restore_and_validation_are_published(runnable):
    s = Session.open(runnable)
    seen = []
    s.subscribe(seen.append, MetadataChanged, OptionsChanged, ValidationDone)
    edits = MetadataEdits(doc_string="d")
    s.set_metadata(edits)
    s.set_options(s.options.updated(keep_io_layout=True))
    s.restore({}, MetadataEdits(), {"keep_io_layout": False, "opset": 19})
    v = s.validate()
    assert kinds(seen) == ["MetadataChanged", "OptionsChanged", "MetadataChanged", "OptionsChanged",
                           "ValidationDone"]
    assert seen[0].metadata is edits and seen[1].options.keep_io_layout and seen[3].options.opset == 19
    assert seen[-1].validation is v and v.ok


def test_convert_options_round_trip_as_session_files_store_them():
    assert ConvertOptions().opset == DEFAULT_OPSET
    o = ConvertOptions(opset=20, exact_int=True)
    assert o.to_dict() == {"keep_io_layout": False, "opset": 20, "exact_int": True}
    assert ConvertOptions.from_dict(o.to_dict()) == o
    with pytest.raises(AttributeError):
        o.opset = 18                                   # frozen: a change is a new value (updated)


def test_cli_window_and_child_process_run_the_same_pipeline(model):  # noqa: F811
    """Same decisions -> same ONNX bytes and notes whichever entry point runs them."""
    pins, options, edits = {"y": "keep"}, ConvertOptions(keep_io_layout=True), MetadataEdits(doc_string="d")
    s = Session.open(model)
    s.pins, s.options, s.metadata = dict(pins), options, edits
    s.convert(check=False)
    direct = run(load_model(model), pins, options, edits, check=False)
    number, *sent = rerun(str(model), pins, options.to_dict(), edits.to_dict())       # as the child sends it
    (vg,) = unpack(sent, lambda i: piece(number, i))
    packed, *sent = result_of(number)                 # the result, while the window lays the view out
    (shown,) = unpack(sent, lambda i: piece(packed, i))
    before = shown.model.SerializeToString()          # shown before its metadata pass: the same nodes
    child, child_notes, _, _ = annotated(number)        # the metadata pass, while the window shows the result
    data = s.result.model.SerializeToString()
    assert direct.result.model.SerializeToString() == data == child.SerializeToString() != before
    assert [n.SerializeToString() for n in shown.model.graph.node] == \
        [n.SerializeToString() for n in child.graph.node]
    assert direct.notes == s.notes == child_notes and any("denotation" in n for n in s.notes)
    assert vg == from_onnx(s.result.model)     # the view sent before the metadata pass is the final model's
    opened, notes, _, _ = convert_and_lay_out(load_model(model))           # the window opening the model
    fresh = Session.open(model)
    fresh.convert()
    assert opened.model.SerializeToString() == fresh.result.model.SerializeToString() and notes == fresh.notes


def test_a_rerun_sends_the_nodes_the_window_has_as_references(model):  # noqa: F811
    """The child sends the ONNX view's unchanged nodes as indices into the view the window has; the window's
    view is then the one a full conversion gives, sharing the unchanged nodes' objects with the view before."""
    import pickle

    from inspector.gui import rerun_child
    from inspector.gui.rerun_child import last_view, view_in

    def window_gets(sent):                   # through pickle, as across the process boundary
        number, *objs = pickle.loads(pickle.dumps(sent))
        (vg,) = unpack(objs, lambda i: pickle.loads(pickle.dumps(piece(number, i))))
        return vg, view_in(vg)

    options = ConvertOptions().to_dict()
    first, ok = window_gets(rerun(str(model), {}, options, {}))
    assert ok and len(first.nodes) > 3
    sent = rerun(str(model), {"y": "keep"}, options, {}, last_view())
    refs = sum(type(n) is int for n in sent[1].small["nodes"])      # what crossed: indices, and the new nodes
    pinned, ok = window_gets(sent)
    assert ok
    full = from_onnx(run(load_model(model), {"y": "keep"}, check=False).result.model)
    assert pinned.nodes == full.nodes and pinned.edges == full.edges
    kept = {id(n) for n in first.nodes}
    shared = [n for n in pinned.nodes if id(n) in kept]
    assert refs == len(shared) and 0 < len(shared) < len(pinned.nodes)   # the inserted Transpose is new
    assert any(n.title == "Transpose" for n in pinned.nodes if id(n) not in kept)
    lost = rerun(str(model), {}, options, {}, ("elsewhere", 1))      # a view the child never sent: whole
    back, ok = window_gets(lost)
    assert ok and not any(id(n) in kept for n in back.nodes) and back.nodes == first.nodes
    rerun_child.WINDOW.got.clear()
    stale = rerun(str(model), {}, options, {}, last_view() or next(iter(rerun_child.CHILD.sent)))
    assert not window_gets(stale)[1]                         # sent against a view the window dropped: asks again


def test_the_childs_second_step_answers_only_the_rerun_it_follows(model):  # noqa: F811
    """annotated(number) runs the metadata pass of re-run `number` only: after another re-run it answers None (the
    window runs again), and a metadata edit that cannot apply comes back as its message."""
    options = ConvertOptions().to_dict()
    first = rerun(str(model), {}, options, {})
    second = rerun(str(model), {"y": "keep"}, options, {})
    assert annotated(first[0]) is None
    pinned, notes, _, findings = annotated(second[0])
    assert sum(n.op_type == "Transpose" for n in pinned.graph.node) == 3   # the pinned run's model, annotated
    assert any("denotation" in n for n in notes) and isinstance(findings, list)
    assert annotated(second[0]) is None                                          # answered once
    bad = rerun(str(model), {}, options, MetadataEdits(types={"nowhere": "IMAGE"}).to_dict())
    assert "no tensor named 'nowhere'" in annotated(bad[0])
