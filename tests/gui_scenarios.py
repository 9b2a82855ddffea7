"""The window's jobs as a person does them (tests/gui_harness.py runs each in a process of its own): open, select,
pin, undo, metadata, validate, export, a broken file, quit. Each step is real input; `h.check()` after it compares
what the window shows with the document."""
from __future__ import annotations

from pathlib import Path

import onnx



from tests.gui_harness import Failed, scenario

SSD = "torch/ssd_tiny_fpn.tflite"
CONFLICT_MODEL = "ops/conv-reshape-multiple-conv.float32.tflite"


def opened(h, rel: str = "sample") -> None:
    h.step(f"open {rel}")
    # the model under test (a corpus path, or a file of the scenario's); the ways of opening have scenarios of their own
    h.w.open_path(rel if Path(rel).is_absolute() else h.model(rel))
    h.settle()
    h.expect(h.w.editor.session is not None, f"{rel} did not open")
    h.check()


def metadata_dock(h):
    h.dock_tab("Metadata")
    h.pump(0.1)
    return h.w.editor.metadata


# ---- metadata ------------------------------------------------------------------------------------------------
@scenario
def check_for_windows_ml(h):
    """Metadata › Check for › Windows ML, clicked in the drop-down's popup, and back (it once killed the process:
    the dock was rebuilt inside the combo's own `activated`)."""
    from inspector.core.metadata import targets
    opened(h)
    ed = metadata_dock(h)
    for target in ("winml", "onnx", "winml"):
        h.step(f"check for {target}")
        h.choose(ed.target, targets.get(target).label)
        h.settle()
        h.expect(h.w.editor.session.target == target, f"the session checks for {h.w.editor.session.target}")
        h.expect(ed.target.currentText() == targets.get(target).label, f"the drop-down shows {ed.target.currentText()}")
        h.check()


@scenario
def axis_then_next_axis(h):
    """torch/ssd_tiny_fpn: the input's axis 1 set from its drop-down, then the arrow of axis 3 clicked (it once
    killed the process: the dock, stale after the first edit, was rebuilt as the second popup took the focus)."""
    opened(h, SSD)
    ed = metadata_dock(h)
    name = next(iter(ed.dims))
    h.step("axis 1 from its drop-down")
    first = ed.dims[name][1]
    value = next(v for v in first.allowed if v != first.value)
    h.choose(first, value)
    h.pump(0.05)
    h.step("the arrow of axis 3")
    h.choose(ed.dims[name][3], ed.dims[name][3].allowed[0])
    h.settle()
    h.expect(h.w.editor.session.metadata.dims.get(name, [None, None])[1] == value, "axis 1's edit is lost")
    h.check()


@scenario
def every_metadata_combo(h):
    """Every drop-down of the Metadata dock (types, axes, Image keys), for every "Check for" target: a value
    chosen in the popup reaches the session and the model, and the rebuilt dock shows it."""
    from inspector.core.metadata import targets
    opened(h)
    ed = metadata_dock(h)
    s = h.w.editor.session
    for target in targets.names():
        h.step(f"check for {target}")
        h.choose(ed.target, targets.get(target).label)
        h.settle()
        names = list(ed.types)
        for name in names:
            h.step(f"{target}: type of {name}")
            combo = ed.types[name]
            value = "IMAGE" if combo.value != "IMAGE" else "TENSOR"
            h.choose(combo, value)
            h.settle()
            h.expect(s.metadata.types.get(name) == value, f"type of {name}: {s.metadata.types.get(name)!r}")
            h.check()
            for axis in range(len(ed.dims.get(name, []))):
                h.step(f"{target}: axis {axis} of {name}")
                combo = ed.dims[name][axis]
                value = next(v for v in combo.allowed if v != combo.value)
                h.choose(combo, value)
                h.settle()
                got = (s.metadata.dims.get(name) or [None] * (axis + 1))[axis]
                h.expect(got == value, f"axis {axis} of {name}: {got!r}, chosen {value!r}")
                h.check()
        first = names[0]
        if ed.types[first].value != "IMAGE":        # the Image keys apply to IMAGE tensors: enabled with one
            h.step(f"{target}: type of {first} back to IMAGE")
            h.choose(ed.types[first], "IMAGE")
            h.settle()
        for key in list(ed.image):
            h.step(f"{target}: {key}")
            combo = ed.image[key]
            if not combo.isEnabled():
                raise Failed(f"{key} is disabled with an IMAGE input")
            value = next(v for v in combo.allowed if v != combo.value)
            h.choose(combo, value)
            h.settle()
            h.expect(s.metadata.image.get(key) == value, f"{key}: {s.metadata.image.get(key)!r}, chosen {value!r}")
            h.check()
    h.step("undo every edit")
    from inspector.gui.main_window import ONNX
    h.click(h.view(ONNX).viewport())    # the keyboard leaves the field: Ctrl+Z there undoes its text
    for _ in range(h.w.editor.stack.count()):
        h.key("Ctrl+Z")
        h.settle()
    h.expect(s.metadata.types == {} and s.metadata.image == {}, "undo left metadata edits")
    h.check()




# ---- opening ---------------------------------------------------------------------------------------------------
def _copy_sample(h, name: str = "model.tflite") -> str:
    """The sample in the scenario's folder: a session file can be saved beside it."""
    import shutil
    dest = h.tmp / name
    shutil.copyfile(h.model("sample"), dest)
    return str(dest)


def _truncated(h, name: str = "cut.tflite") -> str:
    data = Path(h.model("sample")).read_bytes()
    dest = h.tmp / name
    dest.write_bytes(data[: len(data) * 2 // 3])
    return str(dest)


def _shown(h) -> tuple:
    """What the window shows of the open model: title, the document, the panes' graphs."""
    from inspector.gui.main_window import ONNX, TFLITE
    w = h.w
    return (w.windowTitle(), w.doc, w.editor.session, w.scenes.get(TFLITE), w.scenes.get(ONNX),
            w.panes[TFLITE].main_view, w.panes[ONNX].main_view)


@scenario
def open_ways(h):
    """The start page's button and File › Open (Ctrl+O) through the file dialog, a dropped file, File › Open
    Recent."""
    w = h.w
    first, second = _copy_sample(h, "first.tflite"), h.model(CONFLICT_MODEL)
    h.step("start page: Open a model…")
    h.on_dialog(h.file_dialog(first))
    h.click(w.start_page.open_button)
    h.settle()
    h.expect(w.editor.session is not None and w.editor.session.path == first, "the start page's Open opened nothing")
    h.check()
    h.step("Ctrl+O")
    h.open_with_dialog(second)
    h.expect(w.editor.session.path == second, "Ctrl+O did not open the chosen model")
    h.check()
    h.step("drop")
    h.drop(first)
    h.settle()
    h.expect(w.editor.session.path == first, "the dropped model is not open")
    h.check()
    h.step("File › Open Recent")
    h.menu("File", "Open Recent", str(Path(second).resolve()))
    h.settle()
    h.expect(w.editor.session.path == str(Path(second).resolve()), "Open Recent did not open the model")
    h.check()


@scenario
def start_page_recent(h):
    """A recent file on the start page, double-clicked."""
    w = h.w
    lst = w.start_page.recent_list
    h.expect(lst.count() == 1, f"the start page lists {lst.count()} recent files")
    h.step("double-click the recent file")
    h.click(lst.viewport(), lst.visualItemRect(lst.item(0)).center(), double=True)
    h.settle()
    h.expect(w.editor.session is not None and w.editor.session.path == h.model("sample"),
             "the recent file did not open")
    h.check()





start_page_recent.harness = {"recent": ["sample"]}


@scenario
def open_broken_file(h):
    """Ctrl+O of a truncated .tflite while a model is open, then while a pair is open: the open model, its panes
    and title stay; the error says what is wrong in plain words, the reader's words under Details."""
    w = h.w
    opened(h)
    for what in ("model", "pair"):
        if what == "pair":
            h.step("open a pair")
            w.open_path(h.model("sample"), _sample_onnx(h))
            h.settle()
            h.expect(w.editor.session.other is not None, "the pair did not open")
        before = _shown(h)
        h.step(f"Ctrl+O a truncated file with a {what} open")
        cut = _truncated(h)
        boxes = []

        def answer(d):
            boxes.append((d.text(), d.detailedText()))
            h.press_button(d, "OK")

        def file_then_error(d):
            h.file_dialog(cut)(d)
            h.on_dialog(answer)
        h.on_dialog(file_then_error)
        h.key("Ctrl+O")
        h.settle()
        h.wait_until(lambda: boxes, "the error is shown", 30)
        h.expect(_shown(h) == before, f"a failed open changed the window ({what} open)")
        if boxes:
            text, details = boxes[0]
            h.expect("not a complete TFLite model" in text and "truncated" in text, f"the error says {text!r}")
            h.expect("cut.tflite" in details, f"the reader's message is not under Details: {details!r}")
        h.check()


def _sample_onnx(h) -> str:
    """The sample converted by this tool, saved as the 'other' ONNX model of a pair."""
    from inspector.core.session.pipeline import run
    from inspector.core.io.tflite_reader import read_tflite
    dest = h.tmp / "sample-other.onnx"
    if not dest.exists():
        onnx.save(run(read_tflite(h.model("sample"))).result.model, str(dest))
    return str(dest)


# ---- selection, pins, undo -------------------------------------------------------------------------------------
@scenario
def select_in_each_pane(h):
    """A click on a node in the TFLite pane, then in the ONNX pane: Details shows it, the other pane follows."""
    from inspector.gui.main_window import ONNX, TFLITE
    w = h.w
    opened(h, CONFLICT_MODEL)
    sg = w.doc.graph.main
    op = next(i for i, o in enumerate(sg.ops) if o.opcode == "CONV_2D")
    h.step("click a TFLite op")
    h.click_item(TFLITE, w.scenes[TFLITE].node_by_key[("op", op)])
    h.expect(("op", op) in w.scenes[TFLITE].selected_keys()[0], "the clicked op is not selected")
    h.expect(f"CONV_2D #{op}" in w.details.html(), "Details does not show the clicked op")
    h.expect(any(w.scenes[ONNX].selected_keys()), "the ONNX pane does not follow the selection")
    h.check()
    h.step("click an ONNX node")
    node = next(it for it in w.scenes[ONNX].nodes if it.node.kind == "op" and it.node.title == "Conv")
    h.click_item(ONNX, node)
    h.expect(node.node.key in w.scenes[ONNX].selected_keys()[0], "the clicked node is not selected")
    h.expect(node.node.key in w.details.html(), "Details does not show the clicked node")
    h.expect(any(w.scenes[TFLITE].selected_keys()), "the TFLite pane does not follow the selection")
    h.check()


@scenario
def long_names_elided(h):
    """A PyTorch model's tensor names run to hundreds of characters: a click on an edge shows the name in the pin
    bar elided at the middle (the model's class, the module's class and the op index kept), whole in its tooltip."""
    from inspector.core.ir.names import ELLIPSIS
    from inspector.gui.main_window import TFLITE
    w = h.w
    opened(h, "torch/mobilenet_v2_w050.tflite")
    sg = w.doc.graph.main
    t = next(t for op in sg.ops for t in op.outputs
             if len(sg.tensors[t].name) > 300 and w.scenes[TFLITE].edges_by_tensor.get(t))
    name = sg.tensors[t].name
    h.step("click the edge of a tensor with a long name")
    h.click_item(TFLITE, w.scenes[TFLITE].edges_by_tensor[t][0])
    bar = w.editor.pin_bar
    h.wait_until(lambda: bar.isVisible() and bar.tensors == [t], "the pin bar shows the tensor", 10)
    shown, _, state = bar.label.text().rpartition(": ")
    h.expect(state == "Auto" and len(shown) <= 32 and ELLIPSIS in shown, f"pin bar text {bar.label.text()!r}")
    h.expect(shown.startswith("MobileNetV2/") and shown.endswith(";" + name.rsplit(";", 1)[1]),
             f"the pin bar lost the model or the op index: {shown!r}")
    h.expect(bar.label.toolTip().startswith(name + ": Auto"), "the tooltip does not name the tensor whole")
    h.check()


def _pin_target(h):
    from inspector.gui.main_window import TFLITE
    s = h.w.editor.session
    t = s.graph.main.inputs[0]
    return t, h.w.editor.pin_name(t), h.w.scenes[TFLITE].edges_by_tensor[t][0]


@scenario
def pin_menu_and_bar_undo_redo(h):
    """Pin through the right-click menu, undo and redo with the keys, then through the pin bar above Details."""
    from inspector.gui.main_window import TFLITE
    w = h.w
    opened(h, CONFLICT_MODEL)
    s = w.editor.session
    t, name, edge = _pin_target(h)
    before = w.doc.result.transposes
    h.step("right-click the input's edge › keep as is")
    h.click_item(TFLITE, edge, button=_right())
    h.wait_until(lambda: w.editor.last_menu is not None and w.editor.last_menu.isVisible(), "the pin menu opens", 10)
    h.pick_in_menu(w.editor.last_menu, "keep as is")
    h.settle()
    h.expect(s.pins == {name: "keep"}, f"pins after the menu: {s.pins}")
    h.expect(w.doc.result.transposes != before, "the pin changed nothing in the ONNX graph")
    h.expect(w.isWindowModified(), "the title does not mark the unsaved pin")
    h.check()
    h.step("Ctrl+Z")
    h.key("Ctrl+Z")
    h.settle()
    h.expect(s.pins == {} and w.doc.result.transposes == before, f"undo left pins {s.pins}")
    h.check()
    h.step("Ctrl+Shift+Z")
    h.key("Ctrl+Shift+Z")
    h.settle()
    h.expect(s.pins == {name: "keep"}, f"redo: pins {s.pins}")
    h.check()
    h.step("select the edge, pin bar › Auto")
    h.click_item(TFLITE, w.scenes[TFLITE].edges_by_tensor[t][0])
    bar = w.editor.pin_bar
    h.wait_until(lambda: bar.isVisible() and bar.tensors == [t], "the pin bar shows the tensor", 10)
    h.on_dialog(lambda menu: h.pick_in_menu(menu, "Auto"), popup=True)     # the button's menu runs its own loop
    h.click(bar.button)
    h.settle()
    h.expect(s.pins == {}, f"pins after the bar's Auto: {s.pins}")
    h.check()


def _right():
    from PySide6.QtCore import Qt
    return Qt.RightButton


# ---- validate, export ------------------------------------------------------------------------------------------
@scenario
def validate_and_export(h):
    """Ctrl+R validates (the Validation dock shows the result); Ctrl+E exports through the save dialog: the file
    is the session's ONNX model with the user's pin."""
    w = h.w
    opened(h, CONFLICT_MODEL)
    from inspector.gui.main_window import TFLITE
    edge = _pin_target(h)[2]
    h.step("pin, then Ctrl+R")
    h.click_item(TFLITE, edge, button=_right())
    h.pick_in_menu(w.editor.last_menu, "keep as is")
    h.settle()
    h.key("Ctrl+R")
    h.settle()
    panel = w.editor.validation
    h.expect(w.editor.validation_dock.isVisible(), "the Validation dock is not shown")
    h.expect(panel.validation is not None and panel.validation is w.editor.session.validation,
             "the Validation dock shows no result of the session")
    h.expect(len(panel.scatter.points()) > 0, "the validation plot is empty")
    h.check()
    h.step("Ctrl+E › the save dialog")
    out = h.tmp / "exported.onnx"
    h.on_dialog(h.file_dialog(str(out)))
    h.key("Ctrl+E")
    h.settle()
    h.expect(out.is_file(), "Export ONNX wrote nothing")
    if out.is_file():
        model = onnx.load(str(out))
        onnx.checker.check_model(model)
        h.expect(len(model.graph.node) == len(w.doc.model.graph.node), "the exported graph is not the one shown")
    box = w.editor.last_message
    if box is not None and box.isVisible():
        h.press_button(box, "OK")
    h.check()


# ---- never lose work -------------------------------------------------------------------------------------------
def _pinned(h, path: str) -> None:
    from inspector.gui.main_window import TFLITE
    h.w.open_path(path)
    h.settle()
    edge = _pin_target(h)[2]
    h.step("pin through the menu")
    h.click_item(TFLITE, edge, button=_right())
    h.pick_in_menu(h.w.editor.last_menu, "keep as is")
    h.settle()
    h.expect(h.unsaved() and h.w.isWindowModified(), "the pin is not marked unsaved")


def _asked(h, answer: str, action, file: str | None = None) -> list:
    """Do `action` (real input) expecting the unsaved-decisions question; answer it with the button `answer`.
    With `file`, the action opens the file dialog first: `file` is chosen there, then comes the question."""
    texts = []

    def reply(d):
        texts.append(d.text())
        h.press_button(d, answer)
    seen: list = []

    def question():
        from PySide6.QtWidgets import QMessageBox
        got = h.on_dialog(reply, timeout=20, only=QMessageBox)
        seen.append(got)

    if file is None:
        question()
    else:
        def choose(d):
            question()                  # watched before the dialog closes: the question comes inside its slot
            h.file_dialog(file)(d)
        h.on_dialog(choose)
    action()
    h.settle()
    came = bool(seen and seen[-1])
    h.expect(came, "nothing asked about the unsaved decisions")
    h.expect(not texts or "not saved" in texts[0], f"the question says {texts[:1]}")
    return seen[-1] if seen else []


@scenario
def quit_without_changes(h):
    """Ctrl+Q with nothing unsaved: the window closes, nothing asked."""
    opened(h)
    seen = h.on_dialog(lambda d: h.press_button(d, "Cancel"), timeout=5)
    h.step("Ctrl+Q")
    h.key("Ctrl+Q")
    h.pump(0.5)
    h.expect(not seen, "a question was asked with nothing unsaved")
    h.expect(not h.w.isVisible(), "Ctrl+Q did not close the window")
    h.closed = True


@scenario
def quit_with_changes(h):
    """A pin, then Ctrl+Q: Cancel keeps the window and the pin; Ctrl+Q again, Save session: the session file is
    written beside the model and the window closes."""
    from inspector.core.session.session import Session
    w = h.w
    path = _copy_sample(h)
    _pinned(h, path)
    s = w.editor.session
    pins = dict(s.pins)
    h.step("Ctrl+Q › Cancel")
    _asked(h, "Cancel", lambda: h.key("Ctrl+Q"))
    h.expect(w.isVisible() and w.editor.session is s and s.pins == pins, "Cancel did not keep everything")
    h.check()
    h.step("close the window › Cancel")
    _asked(h, "Cancel", lambda: w.windowHandle().close())
    h.expect(w.isVisible() and s.pins == pins, "Cancel of the window's close did not keep everything")
    h.step("Ctrl+Q › Save session")
    _asked(h, "Save session", lambda: h.key("Ctrl+Q"))
    h.expect(not w.isVisible(), "Save session did not go on to quit")
    saved = s.default_session_path()
    h.expect(Path(saved).is_file(), "no session file beside the model")
    if Path(saved).is_file():
        again = Session(path=path, graph=s.graph)
        again.load_decisions(saved)
        h.expect(again.pins == pins, f"the saved session has pins {again.pins}")
    h.closed = True


@scenario
def open_with_changes(h):
    """A pin, then Ctrl+O of another model: Cancel keeps the model and its pin; Ctrl+O again, Discard: the other
    model opens and no autosave of the discarded pin is offered. Open Pair and drop ask too."""
    w = h.w
    path = _copy_sample(h)
    _pinned(h, path)
    s = w.editor.session
    other = h.model(CONFLICT_MODEL)
    h.step("Ctrl+O › Cancel")
    _asked(h, "Cancel", lambda: h.key("Ctrl+O"), file=other)
    h.expect(w.editor.session is s and s.pins and path in w.editor.session.path, "Cancel did not keep the model")
    h.check()
    h.step("drop › Cancel")
    _asked(h, "Cancel", lambda: h.drop(other))
    h.expect(w.editor.session is s and s.pins, "Cancel of a drop did not keep the model")
    h.step("Ctrl+O › Discard")
    _asked(h, "Discard", lambda: h.key("Ctrl+O"), file=other)
    h.settle()
    h.expect(w.editor.session is not s and w.editor.session.path == other, "Discard did not open the other model")
    h.expect(not w.editor.autosave.pending(s), "the discarded pin is still offered as an autosave")
    h.check()



from tests import gui_scenarios_jobs  # noqa: E402,F401  (more scenarios: a pair, an ONNX alone, Model Explorer, what-if, Fix)
from tests import gui_scenarios_find  # noqa: E402,F401  (finding one's way: search results, keyboard moves)
from tests import gui_scenarios_look  # noqa: E402,F401  (the look: dark palette, attribute search, readable labels)
