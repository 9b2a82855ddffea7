"""An ONNX model opened alone in the window, offscreen: its denotations and metadata edited by typing, the
findings of the selected target shown per field with their one-click fixes, undo/redo, session files, Export
refused on an error and node-for-node identical apart from the metadata, the graph coloured by op type."""
from __future__ import annotations

import onnx
import pytest

from PySide6.QtCore import Qt  # noqa: E402

from inspector.core.metadata import schema as ms  # noqa: E402
from inspector.core.session.onnx_session import OnnxSession  # noqa: E402
from inspector.gui.export_onnx import export_dialog  # noqa: E402
from inspector.gui.main_window import ONNX  # noqa: E402

from .test_gui_edit import make_window, type_into  # noqa: E402
from .test_gui_polish import choose  # noqa: E402
from .test_metadata_lint import image_model, without_metadata  # noqa: E402

pytestmark = pytest.mark.gui


def settle(qtbot, w) -> None:
    qtbot.waitUntil(lambda: w.idle and w.editor.idle and ONNX in w.scenes, timeout=60_000)


def open_onnx(qtbot, w, path):
    w.open_path(str(path))
    qtbot.waitUntil(lambda: isinstance(w.editor.session, OnnxSession), timeout=60_000)
    settle(qtbot, w)


def enter(qtbot, w, combo, text: str) -> None:
    type_into(qtbot, combo, text)
    qtbot.keyClick(combo.lineEdit(), Qt.Key_Return)
    settle(qtbot, w)


def errors(w) -> list[str]:
    return [f.code for f in w.editor.metadata.found if f.severity == "error"]


def test_standalone_onnx_edited_by_typing_checked_fixed_exported_and_reopened(qtbot, tmp_path):
    src = tmp_path / "made_elsewhere.onnx"
    onnx.save(image_model(denotation="", dims=None), src)             # x [1, 3, 6, 10] -> Cast -> Conv -> y
    before = src.read_bytes()
    w = make_window(qtbot, tmp_path)
    open_onnx(qtbot, w, src)
    ed = w.editor.metadata
    assert set(ed.types) == {"x", "y"} and not w.editor.validate_action.isEnabled()
    assert w.doc.onnx_categories() == {"cast": "Transparent", "conv": "Implicit"}    # coloured by op type

    enter(qtbot, w, ed.types["x"], "image")
    enter(qtbot, w, w.editor.metadata.image[ms.PIXEL_FORMAT], "rgba8")
    ed = w.editor.metadata
    assert ed.types["x"].value == "IMAGE" and ed.image[ms.PIXEL_FORMAT].value == "Rgba8"
    # No DATA_CHANNEL yet: the shape says axis 1 (only it can hold 3 or 4 channels); a Fix under the axes.
    assert [f.code for f in ed.found if f.field == "dims:x"] == ["image-channel-axis"]
    ed.fix_buttons["dims:x"][0].click()
    settle(qtbot, w)
    ed = w.editor.metadata
    assert [c.value for c in ed.dims["x"]] == ["DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE", "DATA_FEATURE"]
    assert errors(w) == ["pixel-format-channels"]                      # Rgba8 on 3 channels, shown by its field
    assert ms.PIXEL_FORMAT in ed.fix_buttons

    choose(qtbot, ed.target, "Windows ML")                             # clicked in the open popup
    settle(qtbot, w)                    # the dock rebuilds on the next turn, not inside the combo's own signal
    ed = w.editor.metadata
    assert w.editor.session.target == "winml"
    assert sorted(errors(w)) == ["pixel-format-channels", "winml-pixel-format"]
    enter(qtbot, w, ed.image[ms.GAMMA], "linear")
    assert "winml-gamma" in errors(w) and ms.GAMMA not in w.editor.metadata.fix_buttons   # no safe fix

    out = tmp_path / "out" / "edited.onnx"
    out.parent.mkdir()
    asked = []
    assert export_dialog(w.editor, str(out), on_errors=lambda e: asked.append(e) or True) is None
    assert not out.exists() and {f.code for f in asked[0].findings} >= {"winml-gamma", "winml-pixel-format"}
    w.editor.stack.undo()                                              # gamma gone again
    settle(qtbot, w)
    assert export_dialog(w.editor, str(out), on_errors=lambda e: True) is not None   # fixed, then exported
    assert errors(w) == [] and w.editor.metadata.image[ms.PIXEL_FORMAT].value == "Rgb8"
    w.editor.stack.undo()                                              # the fix is one undoable step
    settle(qtbot, w)
    assert w.editor.metadata.image[ms.PIXEL_FORMAT].value == "Rgba8"
    w.editor.stack.redo()
    settle(qtbot, w)

    saved = w.editor.save_session()
    assert saved and src.read_bytes() == before                       # the opened file is never touched
    again = onnx.load(out)
    assert again.graph.input[0].type.denotation == "IMAGE"
    assert {p.key: p.value for p in again.metadata_props} == {ms.PIXEL_FORMAT: "Rgb8"}
    assert without_metadata(again) == without_metadata(onnx.load(src))   # node for node, weights and all

    w2 = make_window(qtbot, tmp_path)
    open_onnx(qtbot, w2, out)
    ed2 = w2.editor.metadata
    assert ed2.types["x"].value == "IMAGE" and ed2.image[ms.PIXEL_FORMAT].value == "Rgb8" and errors(w2) == []
    open_onnx(qtbot, w2, src)                                          # its session file comes back with it
    assert w2.editor.metadata.image[ms.PIXEL_FORMAT].value == "Rgb8"


def test_a_metadata_entry_that_is_not_utf8_is_shown_kept_and_exported_unchanged(qtbot, tmp_path):
    """protobuf gives such a key or value as bytes: the open stopped half-way on a TypeError in the Metadata dock.
    It is shown escaped and read-only; a row added by typing beside it is exported, and it is kept byte for byte."""
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QPushButton
    m = image_model(denotation="", dims=None)
    m.metadata_props.add(key="KEYX", value="VALX")
    m.metadata_props.add(key="good", value="VAL2")
    src = tmp_path / "bad_key.onnx"
    src.write_bytes(m.SerializeToString().replace(b"KEYX", b"K\xffYX").replace(b"VAL2", b"V\xfeL2"))
    w = make_window(qtbot, tmp_path)
    open_onnx(qtbot, w, src)
    ed = w.editor.metadata
    rows = [(ed.table.item(r, 0).text(), ed.table.item(r, 1).text()) for r in range(ed.table.rowCount())]
    assert rows == [("K\\xffYX", "VALX"), ("good", "V\\xfeL2")]
    assert not ed.table.item(0, 0).flags() & Qt.ItemIsEditable and not ed.table.item(1, 1).flags() & Qt.ItemIsEditable

    # the dock's fields come a turn after the open (a rebuild never runs inside the signal that asked for it)
    visible_add = lambda: [b for b in ed.findChildren(QPushButton) if b.text() == "Add" and b.isVisible()]  # noqa: E731
    qtbot.waitUntil(lambda: bool(visible_add()), timeout=30_000)
    QTest.mouseClick(visible_add()[0], Qt.LeftButton)
    qtbot.keyClicks(QApplication.focusWidget(), "model_author")
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key_Tab)
    qtbot.keyClicks(QApplication.focusWidget(), "me")
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key_Return)
    settle(qtbot, w)
    assert w.editor.session.metadata.props == {"model_author": "me"}
    out = tmp_path / "edited.onnx"
    assert export_dialog(w.editor, str(out), on_errors=lambda e: True) is not None
    written = onnx.ModelProto()
    written.ParseFromString(out.read_bytes())
    assert [(p.key, p.value) for p in written.metadata_props] == [(b"K\xffYX", "VALX"), ("good", b"V\xfeL2"),
                                                                   ("model_author", "me")]


def test_many_inputs_build_a_page_of_rows_found_by_name_and_edited(qtbot, tmp_path):
    """The Metadata dock built every input's row at once (100,000 inputs: no event-loop turn for minutes); now a
    page at a time, "Show more" for the next, and a filter that finds any input by name, kept across the rebuild
    an edit makes."""
    from PySide6.QtTest import QTest
    from onnx import TensorProto, helper
    from inspector.gui.panels.metadata_editor import IO_PAGE
    n = 1000
    ins = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, 2, 3]) for i in range(n)]
    g = helper.make_graph([helper.make_node("Concat", [f"x{i}" for i in range(n)], ["y"], axis=0)], "g", ins,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, 2, 3])])
    src = tmp_path / "many.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), src)
    w = make_window(qtbot, tmp_path)
    open_onnx(qtbot, w, src)
    ed = w.editor.metadata
    assert len(ed.types) == IO_PAGE < n and ed.io_more.text() == f"Show {IO_PAGE} more (of {n + 1 - IO_PAGE} not shown)"
    QTest.mouseClick(ed.io_more, Qt.LeftButton)
    assert len(ed.types) == 2 * IO_PAGE
    qtbot.keyClicks(ed.io_filter, "x777")
    assert list(ed.types) == ["x777"] and not ed.io_more.isVisible()
    enter(qtbot, w, ed.types["x777"], "tensor")
    ed = w.editor.metadata
    assert w.editor.session.metadata.types == {"x777": "TENSOR"}
    assert ed.io_filter.text() == "x777" and list(ed.types) == ["x777"] and ed.types["x777"].value == "TENSOR"
