"""One source of truth: every view of the window redraws from the Session's events (gui/views.py), so a change made
to the Session by anyone shows everywhere, and the views hear only the model now open (issue 21)."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from inspector.gui.main_window import ONNX, TFLITE
from inspector.gui.panels.validation import LO

from .test_gui_edit import CONFLICT_MODEL, open_model, settle, validated, window  # noqa: F401  (fixture)
from .test_gui_trust import chain
from .test_session import model  # noqa: F401  (conv -> reshape -> conv, input x [1, 5, 7, 3])

pytestmark = pytest.mark.gui


def onnx_names(w) -> set:
    return {it.node.key for it in w.scenes[ONNX].nodes if it.node.kind == "op"}


def test_views_follow_a_change_made_to_the_session_directly(qtbot, window, corpus):  # noqa: F811
    """No command, no editor: the Session is changed and converted on the GUI thread, and every view shows it."""
    w = window
    s = open_model(qtbot, w, corpus / CONFLICT_MODEL)
    x = s.graph.main.tensors[s.graph.main.inputs[0]]
    w.select(TFLITE, tensors=[x.index])
    before = s.result
    s.set_pin(x.name, "channels-first")
    change = s.convert()
    assert s.result is not before
    assert w.doc.result is s.result                                     # the window's document is the Session's
    assert onnx_names(w) == {n.name for n in s.result.model.graph.node}
    rows = w.conflicts.topLevelItemCount()
    assert rows >= len(s.result.plan.conflicts) and w.conflicts_dock.windowTitle() == \
        f"Conflicts ({len(s.result.plan.conflicts)})"
    assert "pinned by the user" in w.details.html()                     # the selection's Details, redrawn
    assert w.statusBar().currentMessage() == str(change)
    assert w.editor.pin_bar.tensors == [x.index] and "pinned channels-first" in w.editor.pin_bar.label.text()
    s.set_pin(x.name, None)
    s.convert()
    assert "pinned" not in w.details.html() and w.doc.result is s.result


def test_views_hear_only_the_model_now_open(qtbot, window, model, tmp_path):  # noqa: F811
    """The previous model's Session, still alive (a worker holds it), changes nothing on screen."""
    w = window
    old = open_model(qtbot, w, chain(tmp_path))
    panel = w.editor.validation
    w.editor.validate()
    qtbot.waitUntil(lambda: not panel.running, timeout=120_000)
    v = old.validation
    assert v is not None and len(panel.scatter.points()) > 0
    new = open_model(qtbot, w, model)
    doc, title = w.doc, w.windowTitle()
    old.validated(v)                                                     # its ValidationDone, after the switch
    old.convert()                                                        # its PlanChanged
    assert len(panel.scatter.points()) == 0 and panel.validation is None
    assert w.doc is doc and w.windowTitle() == title and w.editor.session is new
    assert onnx_names(w) == {n.name for n in new.result.model.graph.node}


def test_opening_a_model_resets_every_model_specific_view(qtbot, window, model, tmp_path):  # noqa: F811
    w = window
    s = open_model(qtbot, w, chain(tmp_path, n=3))
    w.select(TFLITE, nodes=[("op", 1)])
    w.search_field.setText("c1")
    w.search_step(+1)
    validated(qtbot, w)
    assert w.details.html() and w._matches and w.editor.validation.validation is not None
    assert s.graph.main.ops
    w.open_path(str(model))
    # until the next model has been read the open one stays (a file that fails to open changes nothing); from
    # then on nothing of it is on screen
    assert w.editor.session is s and "chain" in w.windowTitle()
    qtbot.waitUntil(lambda: "m.tflite" in w.windowTitle(), timeout=120_000)
    assert w.editor.session is not s and w._matches == [] and "chain" not in w.windowTitle()
    assert len(w.editor.validation.scatter.points()) == 0 and w.editor.validation.validation is None
    assert w.editor.pin_bar.tensors == [] and "CONV_2D" not in w.details.html()
    settle(qtbot, w)
    assert w.editor.export_action.isEnabled() and w.editor.validation.run_button.isEnabled()
    assert w.editor.metadata.state is not None and w.doc.result is w.editor.session.result


def test_a_rerun_keeps_the_tflite_pane_hidden_when_the_user_hid_it(qtbot, window, model):  # noqa: F811
    """The old re-run path re-showed every pane as on a first open."""
    w = window
    open_model(qtbot, w, model)
    w.show_tflite.trigger()
    assert not w.panes[TFLITE].isVisible()
    w.editor.pin("a", "keep")
    settle(qtbot, w)
    assert not w.panes[TFLITE].isVisible() and not w.show_tflite.isChecked()
    assert w.editor.session.pins == {"a": "keep"}


def test_conflicts_and_status_follow_undo(qtbot, window, corpus):  # noqa: F811
    w = window
    s = open_model(qtbot, w, corpus / CONFLICT_MODEL)
    n0 = len(s.result.plan.conflicts)
    x = s.graph.main.tensors[s.graph.main.inputs[0]].name
    w.editor.pin(x, "channels-first")
    settle(qtbot, w)
    n1 = len(s.result.plan.conflicts)
    assert w.conflicts_dock.windowTitle() == f"Conflicts ({n1})"
    w.editor.stack.undo()
    settle(qtbot, w)
    assert len(s.result.plan.conflicts) == n0 and w.conflicts_dock.windowTitle() == f"Conflicts ({n0})"
    items = [w.conflicts.topLevelItem(i).data(0, Qt.UserRole) for i in range(w.conflicts.topLevelItemCount())]
    assert all(any(c is d for d in s.result.plan.conflicts) or c in w.doc.inserted().values() for c in items)


# ---- the validation plot shows the current model's validation, or nothing (item 7) -----------------------------
def open_kind(qtbot, w, kind: str, tmp_path, model):
    """Open a TFLite model, an ONNX model alone, or a pair whose ONNX side has a wrong Softmax axis (a FAIL)."""
    import onnx

    from inspector.core.io.tflite_reader import read_tflite

    from .test_metadata_lint import image_model
    from .test_pair import hand_onnx, tflite_model
    folder = tmp_path / kind
    folder.mkdir(exist_ok=True)
    if kind == "tflite":
        return open_model(qtbot, w, model)
    if kind == "onnx":
        path = folder / "alone.onnx"
        onnx.save(image_model(), path)
        return open_model(qtbot, w, path)
    tfl = tflite_model(folder / "p.tflite")
    hand_onnx(read_tflite(tfl), folder / "other.onnx", softmax_axis=-1)
    w.open_path(str(tfl), str(folder / "other.onnx"))
    qtbot.waitUntil(lambda: w.editor.session is not None, timeout=120_000)
    settle(qtbot, w)
    return w.editor.session


def validate(qtbot, w):
    panel = validated(qtbot, w)
    assert panel.validation is not None and len(panel.scatter.points()) > 0, panel.status.text()
    return panel


def assert_no_validation_shown(w) -> None:
    panel = w.editor.validation
    assert panel.validation is None and w.editor.session.validation is None
    assert len(panel.scatter.points()) == 0 and len(panel.mark.points()) == 0
    assert panel.hist.getPlotItem().listDataItems() == []
    assert not panel.tol_line.isVisible()                         # the previous model's tolerance
    assert not panel.scale.isVisible() and panel.status.styleSheet() == ""      # its FAIL colour
    assert not panel.clear_button.isEnabled()                     # its error colours (none now) to take back
    for plot, empty in ((panel.per_op, [[0, 1], [LO, 0]]), (panel.hist, [[-1, 1], [0, 1]])):
        box = plot.getPlotItem().getViewBox()           # its axes (an empty plot kept them) and zoom
        assert all(box.autoRangeEnabled()) and box.viewRange() == [pytest.approx(r) for r in empty]
    assert all(it.category != "error" for it in w.scenes[ONNX].nodes)           # its error overlay


@pytest.mark.parametrize("first, then", [("tflite", "tflite"), ("pair", "tflite"), ("pair", "onnx"),
                                         ("tflite", "pair")])
def test_opening_another_model_leaves_nothing_of_the_previous_validation(qtbot, window, tmp_path, first,  # noqa: F811
                                                                         then):
    w = window
    open_kind(qtbot, w, first, tmp_path, chain(tmp_path))
    panel = validate(qtbot, w)
    panel.select_point(0)
    panel.per_op.getPlotItem().getViewBox().scaleBy((0.5, 0.5))    # the user zoomed into the plot
    open_kind(qtbot, w, then, tmp_path, chain(tmp_path, "next.tflite", n=2))
    assert_no_validation_shown(w)
    if then != "onnx":                                              # and the next one's is its own
        validate(qtbot, w)
        v = w.editor.session.validation
        assert sorted(name for _op, name in panel.points) == sorted(e.name for e in v.outputs + v.intermediates)
        assert len(panel.scatter.points()) == len(v.outputs) + len(v.intermediates) and panel.tol_line.isVisible()


def test_validation_finishing_after_another_model_opened_never_reaches_the_plot(qtbot, window, model,  # noqa: F811
                                                                                tmp_path, monkeypatch):
    import threading
    w = window
    old = open_model(qtbot, w, chain(tmp_path))
    release, started = threading.Event(), threading.Event()
    measure = old.measure

    def slow(**kwargs):
        started.set()
        release.wait(60)
        return measure(**kwargs)
    monkeypatch.setattr(old, "measure", slow)
    panel = w.editor.validation
    w.editor.validate()
    assert started.wait(30) and panel.running
    open_model(qtbot, w, model)                     # while the old model's validation still runs in its worker
    release.set()
    assert panel.pool.waitForDone(120_000)
    qtbot.wait(100)                                 # its queued signals are delivered (and must be dropped)
    assert_no_validation_shown(w)
    assert old.validation is None                   # cancelled: not even the old Session took it


def test_cancelled_validation_then_another_model_plots_only_the_new_models_tensors(qtbot, window,  # noqa: F811
                                                                                    tmp_path):
    w = window
    open_model(qtbot, w, chain(tmp_path, n=4))
    panel = w.editor.validation
    w.editor.validate()
    panel.cancel()
    assert not panel.running and panel.status.text() == "cancelled"
    new = open_model(qtbot, w, chain(tmp_path, "next.tflite", n=2))
    assert_no_validation_shown(w)
    validate(qtbot, w)
    v = new.validation
    assert len(panel.points) == len(v.outputs) + len(v.intermediates)
    assert {name for _op, name in panel.points} <= {t.name for t in new.graph.main.tensors}


def test_autosave_banner_and_error_scale_sit_above_the_graphs_not_over_them(qtbot, window, tmp_path):  # noqa: F811
    """Both were inserted into the window's central stack (start page | workspace) as pages of their own, drawn
    over the TFLite tab bar, once the start page came in."""
    w = window
    open_model(qtbot, w, chain(tmp_path))
    validate(qtbot, w)
    banner, scale = w.editor.banner, w.editor.validation.scale
    banner.show()
    qtbot.wait(50)
    lay = w.workspace.layout()
    order = [lay.itemAt(i).widget() for i in range(lay.count())]
    assert order.index(banner) < order.index(w.legend) < order.index(scale) < order.index(w.splitter)
    assert w.stack.count() == 2 and scale.isVisible() and banner.isVisible()
    top = w.splitter.mapTo(w, w.splitter.rect().topLeft()).y()
    for widget in (banner, scale):
        assert widget.mapTo(w, widget.rect().bottomLeft()).y() < top


def test_each_conflict_row_names_the_transpose_that_feeds_its_consumer(qtbot, window, corpus):  # noqa: F811
    """One Transpose feeding three Convs was credited to one of their conflicts; the other two said
    "no Transpose" beside a node named after the first Conv."""
    w = window
    s = open_model(qtbot, w, corpus / CONFLICT_MODEL)
    doc, table = w.doc, w.conflicts
    nodes = doc.onnx_nodes()
    _producer, consumers = doc.onnx_links()
    checked = 0
    for i in range(table.topLevelItemCount()):
        item = table.topLevelItem(i)
        c, name = item.data(0, Qt.UserRole), item.data(1, Qt.UserRole)
        values = doc.trace.tensor_values.get(c.tensor, [])
        feeds_op = set(doc.trace.op_nodes.get(c.op, [])) if c.op is not None else set()
        if name:
            t = nodes[name]
            assert t.op_type == "Transpose" and t.input[0] in values, (c.reason, name)
            assert c.op is None or feeds_op & set(consumers.get(t.output[0], [])), (c.reason, name)
            checked += 1
        else:                                           # nothing inserted between the tensor and this consumer
            assert not any(nodes[n].op_type == "Transpose" and set(consumers.get(nodes[n].output[0], [])) & feeds_op
                           for v in values for n in consumers.get(v, [])), c.reason
    assert checked >= 2 and len(s.result.plan.conflicts) >= 3


def test_an_onnx_model_alone_cannot_start_a_validation_from_the_dock(qtbot, window, tmp_path):  # noqa: F811
    """The dock's own Validate button stayed enabled and failed with "AttributeError: 'types.SimpleNamespace'...";
    the session refuses in one sentence too."""
    from inspector.core.ir.errors import InspectorError
    w = window
    s = open_kind(qtbot, w, "onnx", tmp_path, None)
    panel = w.editor.validation
    assert not panel.run_button.isEnabled() and "TFLite model" in panel.run_button.toolTip()
    assert not w.editor.validate_action.isEnabled() and "Open a TFLite model" in panel.status.text()
    panel.run()                                            # even if asked: nothing starts for a model alone
    assert not panel.running and not hasattr(w, "last_error")
    with pytest.raises(InspectorError, match="no TFLite model"):
        s.measure()


def test_cancelling_an_open_leaves_the_open_model_as_it_was(qtbot, window, model, tmp_path):  # noqa: F811
    w = window
    s = open_model(qtbot, w, chain(tmp_path))
    doc, title, nodes = w.doc, w.windowTitle(), onnx_names(w)
    w.open_path(str(model))
    w.cancel()                                          # before anything of it arrived
    assert w.pool.waitForDone(120_000)                  # it ran to its end all the same
    qtbot.wait(100)                                     # its queued results are delivered (and must be dropped)
    assert w.windowTitle() == title and w.editor.session is s and w.doc is doc and onnx_names(w) == nodes
    assert w.editor.export_action.isEnabled() and "m.tflite" not in w.windowTitle()


def test_the_title_marks_decisions_not_saved_in_a_session_file(qtbot, window, model, tmp_path):  # noqa: F811
    w = window
    open_model(qtbot, w, model)
    assert not w.isWindowModified() and "m.tflite" in w.windowTitle()
    w.editor.pin("a", "keep")
    settle(qtbot, w)
    assert w.isWindowModified()
    assert w.editor.save_session(str(tmp_path / "m.inspector.json"))
    assert not w.isWindowModified()
    w.editor.stack.undo()
    settle(qtbot, w)
    assert w.isWindowModified()
    open_model(qtbot, w, chain(tmp_path))                 # another model: nothing of it is edited yet
    assert not w.isWindowModified()
