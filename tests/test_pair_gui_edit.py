"""The window's editing half for a pair, offscreen: the other model's metadata edited through the Metadata dock's
widgets (undoable, refused as typed), exported with write_with_metadata (graph byte-identical, source kept unless
confirmed), pins off, and Validate pointing at the first op where the other converter went wrong."""
from __future__ import annotations

import onnx
import pytest

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QMenu  # noqa: E402

from inspector.core.metadata import schema as ms  # noqa: E402
from inspector.core.io.tflite_reader import read_tflite  # noqa: E402
from inspector.gui.export_onnx import export_dialog  # noqa: E402
from inspector.gui.main_window import ONNX, TFLITE  # noqa: E402
from inspector.core.session.pair_session import PIN_REASON, PairSession  # noqa: E402
from inspector.gui.panels.validation import NOT_COMPARED, colour_for  # noqa: E402
from inspector.gui.pin_menu import fill_menu  # noqa: E402

from .test_gui_edit import assert_cancels, make_window, type_into  # noqa: E402
from .test_pair import hand_onnx, tflite_model  # noqa: E402

pytestmark = pytest.mark.gui


def open_pair(qtbot, tmp_path, **onnx_kwargs):
    tfl = tflite_model(tmp_path / "m.tflite")
    other = tmp_path / "other.onnx"
    hand_onnx(read_tflite(tfl), other, **onnx_kwargs)
    w = make_window(qtbot, tmp_path)
    w.open_path(str(tfl), str(other))
    qtbot.waitUntil(lambda: isinstance(w.editor.session, PairSession), timeout=60_000)
    settle(qtbot, w)
    return w, tfl, other


def settle(qtbot, w) -> None:
    qtbot.waitUntil(lambda: w.idle and w.editor.idle and ONNX in w.scenes, timeout=60_000)


def choose(combo, text: str) -> None:
    i = combo.findText(text)
    assert i >= 0, text
    combo.setCurrentIndex(i)
    combo.activated.emit(i)


def graph_bytes(model) -> tuple[list[bytes], list[bytes]]:
    return ([n.SerializeToString() for n in model.graph.node],
            [i.SerializeToString() for i in model.graph.initializer])


def test_pair_metadata_edited_through_the_dock_and_exported(qtbot, tmp_path):
    w, tfl, other = open_pair(qtbot, tmp_path, softmax_axis=-1)
    source = other.read_bytes()
    ed = w.editor.metadata
    assert set(ed.types) == {"x", "output_0", "debug"}                 # their I/O, not our conversion's
    assert ed.producer.text() == "hand" and ed.sources["producer"] == "from other.onnx"
    assert not ed.image[ms.PIXEL_FORMAT].isEnabled()

    type_into(qtbot, ed.types["x"], "image")
    qtbot.keyClick(ed.types["x"].lineEdit(), Qt.Key_Return)
    settle(qtbot, w)
    ed = w.editor.metadata
    assert ed.types["x"].value == "IMAGE" and ed.image[ms.PIXEL_FORMAT].isEnabled()
    assert ed.sources["x"] == "edited"
    fmt = ed.image[ms.PIXEL_FORMAT]
    type_into(qtbot, fmt, "bgr9")                                       # the 9 is refused as typed
    assert fmt.lineEdit().text() == "bgr" and "Bgr8" in fmt.refusal.text()
    qtbot.keyClick(fmt.lineEdit(), Qt.Key_Return)
    assert w.editor.session.metadata.image == {}
    type_into(qtbot, fmt, "bgr8")
    qtbot.keyClick(fmt.lineEdit(), Qt.Key_Return)
    settle(qtbot, w)
    choose(w.editor.metadata.image[ms.PIXEL_RANGE], "NominalRange_0_255")
    settle(qtbot, w)
    for axis, value in enumerate(["DATA_BATCH", "DATA_FEATURE", "DATA_FEATURE", "DATA_CHANNEL"]):   # NHWC input
        choose(w.editor.metadata.dims["x"][axis], value)
        settle(qtbot, w)
    ed = w.editor.metadata
    ed.doc_string.setText("checked against the TFLite model")
    ed.doc_string.editingFinished.emit()
    settle(qtbot, w)
    s = w.editor.session
    assert s.metadata.types == {"x": "IMAGE"} and s.metadata.dims["x"][3] == "DATA_CHANNEL"
    assert w.statusBar().currentMessage() == "Metadata edits applied to other.onnx; its graph is unchanged"
    # the ONNX pane shows the edited copy; their model as read is untouched
    shown = next(vi for vi in w.doc.model.graph.input if vi.name == "x")
    assert shown.type.denotation == "IMAGE" and s.pair.model.graph.input[0].type.denotation == ""
    assert w.doc.result.pair is s.pair and set(w.doc.trace.inserted) >= {"extra_t1", "extra_t2"}

    # undo / redo through the stack: one command per accepted edit
    assert w.editor.stack.count() == 8
    w.editor.undo_action.trigger()
    settle(qtbot, w)
    assert w.editor.metadata.doc_string.text() == "" and s.metadata.doc_string in (None, "")
    w.editor.redo_action.trigger()
    settle(qtbot, w)
    assert w.editor.metadata.doc_string.text() == "checked against the TFLite model"

    out = tmp_path / "out.onnx"
    summary = export_dialog(w.editor, str(out))
    assert summary is not None and summary["metadata"]["types"] == {"x": "IMAGE"} and summary["pins"] == {}
    edited, original = onnx.load(str(out)), onnx.load(str(other))
    x = edited.graph.input[0]
    assert x.type.denotation == "IMAGE"
    assert [d.denotation for d in x.type.tensor_type.shape.dim] == ["DATA_BATCH", "DATA_FEATURE", "DATA_FEATURE",
                                                                     "DATA_CHANNEL"]
    props = {p.key: p.value for p in edited.metadata_props}
    assert props == {ms.PIXEL_FORMAT: "Bgr8", ms.PIXEL_RANGE: "NominalRange_0_255"}
    assert edited.doc_string == "checked against the TFLite model" and edited.producer_name == "hand"
    assert graph_bytes(edited) == graph_bytes(original)               # a metadata-only edit: same graph
    assert [v.name for v in edited.graph.output] == ["output_0", "debug"]
    assert other.read_bytes() == source

    # the source ONNX is replaced only after an explicit yes; the TFLite model never
    asked = []
    assert export_dialog(w.editor, str(other), confirm=lambda: asked.append(1) or False) is None
    assert asked and other.read_bytes() == source
    assert export_dialog(w.editor, str(tfl), confirm=lambda: True) is None
    assert "source model" in w.last_error and read_tflite(tfl).main.ops
    assert export_dialog(w.editor, str(other), confirm=lambda: True) is not None
    replaced = onnx.load(str(other))
    assert replaced.graph.input[0].type.denotation == "IMAGE" and graph_bytes(replaced) == graph_bytes(original)


def test_pins_are_off_for_a_pair(qtbot, tmp_path):
    w, _, _ = open_pair(qtbot, tmp_path)
    ed = w.editor
    x = w.doc.graph.main.inputs[0]
    w.select(TFLITE, tensors=[x])
    assert ed.pin_bar.isVisible() and not ed.pin_bar.button.isEnabled()
    assert ed.pin_bar.button.toolTip() == PIN_REASON and "made elsewhere" in PIN_REASON
    assert not ed.clear_pins_action.isEnabled() and ed.clear_pins_action.toolTip() == PIN_REASON
    assert not ed.save_action.isEnabled() and not ed.open_session_action.isEnabled()
    assert ed.export_action.isEnabled() and ed.validate_action.isEnabled()
    menu = QMenu(w)
    fill_menu(menu, ed, [x])
    (only,) = menu.actions()
    assert not only.isEnabled() and only.toolTip() == PIN_REASON
    assert not ed.pin("x", "keep") and ed.stack.count() == 0
    assert w.statusBar().currentMessage() == PIN_REASON
    assert not ed.autosave.folder.exists()                             # nothing autosaved for the TFLite model


def validate(qtbot, w):
    panel = w.editor.validation
    w.editor.validate_action.trigger()
    qtbot.waitUntil(lambda: not panel.running, timeout=120_000)
    assert panel.validation is not None
    return panel, panel.validation


def test_pair_validation_selects_and_colours_the_wrong_softmax(qtbot, tmp_path):
    w, _, _ = open_pair(qtbot, tmp_path, softmax_axis=-1)
    panel, v = validate(qtbot, w)
    assert not v.ok
    bad = v.first_bad()
    assert bad.name == "s" and w.doc.graph.main.ops[bad.op].opcode == "SOFTMAX"
    assert "first bad: s (op 4 SOFTMAX" in panel.status.text()
    # selected in both graphs, through the mapping, and ringed in the plot
    assert w.scenes[TFLITE].selected_keys()[0] == [("op", bad.op)]
    assert set(w.scenes[ONNX].selected_keys()[0]) == {"softmax", "tr_out"}
    (ring,) = panel.mark.points()
    assert ring.pos().x() == bad.op
    # plotted in TFLite op order: c, p, q, cat and the output
    xs = [p.pos().x() for p in panel.scatter.points()]
    assert xs == sorted(xs) and len(xs) == len(v.outputs) + len(v.intermediates) == 5
    # their nodes coloured by the error of the tensor they write; the unmatched one grey
    nodes = w.scenes[ONNX].node_by_key
    errors = {e.name: e.max_rel for e in v.tensors}
    assert nodes["softmax"].fill.name() == colour_for(errors["s"]).name()
    assert nodes["relu1"].fill.name() == colour_for(errors["c"]).name()
    assert nodes["extra_t2"].fill.name() == colour_for(errors["p"]).name()
    assert nodes["softmax"].fill.name() != nodes["relu1"].fill.name()
    assert nodes["debug_mean"].fill.name() == NOT_COMPARED.name()
    assert "not compared" in nodes["debug_mean"].toolTip()
    assert panel.scale.isVisible()


def test_pair_validation_of_the_faithful_model_selects_nothing(qtbot, tmp_path):
    w, _, _ = open_pair(qtbot, tmp_path, softmax_axis=1)
    panel, v = validate(qtbot, w)
    assert v.ok and v.first_bad() is None and panel.status.text().startswith("ok: ")
    assert w.scenes[TFLITE].selected_keys() == ([], [])
    nodes = w.scenes[ONNX].node_by_key
    assert all(nodes[n].fill.name() != NOT_COMPARED.name() for n in ("conv1", "pool", "concat", "softmax"))
    assert nodes["debug_mean"].fill.name() == NOT_COMPARED.name()


def test_pair_validation_cancel_and_a_model_onnx_runtime_refuses(qtbot, tmp_path):
    w, _, _ = open_pair(qtbot, tmp_path, concat_axis=2)      # ONNX Runtime refuses the model
    panel = w.editor.validation
    assert_cancels(qtbot, panel)
    panel, v = validate(qtbot, w)
    assert not v.ok and v.outputs == [] and "ONNX Runtime cannot run it" in panel.status.text()
    assert all(it.fill.name() == NOT_COMPARED.name() for it in w.scenes[ONNX].nodes if it.node.kind == "op")


def test_validate_pair_reports_progress_and_stops_when_cancelled(tmp_path):
    """What the worker relies on: progress in order, a cancel honoured between steps, the Validation-shaped fields."""
    import threading

    from inspector.core.pairing.pair import open_pair as open_files
    from inspector.core.proof.validate import RTOL, Cancelled
    tfl = tflite_model(tmp_path / "m.tflite")
    hand_onnx(read_tflite(tfl), tmp_path / "o.onnx", softmax_axis=-1)
    pair = open_files(str(tfl), str(tmp_path / "o.onnx"))
    seen = []
    v = pair.validate(progress=lambda msg, f: seen.append(f))
    assert seen == sorted(seen) and len(seen) == 4
    assert v.rtol == RTOL["float"] and [e.name for e in v.intermediates] == ["c", "p", "q", "cat"]
    assert len(v.output_diffs) == 1 and v.output_diffs[0].size == 1 * 3 * 5 * 6
    stop = threading.Event()
    with pytest.raises(Cancelled):
        pair.validate(progress=lambda msg, f: f > 0.3 and stop.set(), cancel=stop)
