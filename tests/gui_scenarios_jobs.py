"""More of the window's jobs as a person does them (registered with tests/gui_scenarios.py's): open a pair through
its two file dialogs and validate at once, an ONNX model opened alone (metadata edited, exported), Export for Model
Explorer, a pin's what-if count, a conflict's Fix. Real input only; what the window shows is compared with the
document and with conversions made here, outside the window."""
from __future__ import annotations

import json
from pathlib import Path

import onnx

from tests.gui_harness import scenario
from tests.gui_scenarios import CONFLICT_MODEL, _copy_sample, _pin_target, _right, _sample_onnx, metadata_dock, opened


def _file_dialog():
    from PySide6.QtWidgets import QFileDialog
    return QFileDialog


def _counts(menu) -> dict[str, int]:
    """{choice label: the Transposes a pin menu says the graph would have under it}."""
    out = {}
    for a in menu.actions():
        label, _, count = a.text().partition("  —  ")
        if count.endswith("in the graph"):
            out[label] = int(count.split()[0])
    return out


# ---- a pair ----------------------------------------------------------------------------------------------------
@scenario
def open_pair_then_validate(h):
    """File › Open Pair (Ctrl+Shift+O): the TFLite model in the first file dialog, the ONNX model in the second; the
    title and the ONNX tab name both files; Ctrl+R, right after, validates the pair (it once did nothing: the
    keyboard stayed with the dialog gone)."""
    from PySide6.QtGui import QGuiApplication

    from inspector.gui.main_window import ONNX
    w = h.w
    tfl, other = _copy_sample(h, "pair.tflite"), _sample_onnx(h)
    h.step("Ctrl+Shift+O › the TFLite model, then the ONNX model")
    titles = []

    def first(d):
        titles.append(d.windowTitle())

        def second(d2):
            titles.append(d2.windowTitle())
            h.file_dialog(other)(d2)
        h.file_dialog(tfl)(d)
        h.on_dialog(second, only=_file_dialog())     # asked by the same slot, once the first has closed
    h.on_dialog(first, only=_file_dialog())
    h.key("Ctrl+Shift+O")
    h.settle()
    s = w.editor.session
    h.expect(len(titles) == 2 and "TFLite" in titles[0] and "ONNX" in titles[1], f"the dialogs were {titles}")
    h.expect(s is not None and s.path == tfl and getattr(s, "other", None) == other, "the pair did not open")
    h.expect(Path(tfl).name in w.windowTitle() and Path(other).name in w.windowTitle(),
             f"the title {w.windowTitle()!r} does not name both files")
    tab = w.panes[ONNX].tabs.tabText(0)
    h.expect(Path(other).name in tab, f"the ONNX tab {tab!r} does not name its file")
    h.check()
    h.step("Ctrl+R right after Open Pair")
    h.expect(QGuiApplication.focusWindow() is w.windowHandle(), "the window does not have the keyboard after Open Pair")
    h.key("Ctrl+R", w)              # into the window as it is now: no re-activation by the harness first
    h.settle()
    panel = w.editor.validation
    h.expect(w.editor.validation_dock.isVisible(), "Ctrl+R showed no Validation dock")
    h.expect(s is not None and s.validation is not None and panel.validation is s.validation,
             "Ctrl+R did not validate the pair")
    h.expect(len(panel.scatter.points()) > 0, "the validation plot is empty")
    h.check()


# ---- an ONNX model alone ---------------------------------------------------------------------------------------
@scenario
def onnx_alone_edit_export(h):
    """Ctrl+O of an ONNX model: only the ONNX pane, no pins or validation; its input's type chosen in the Metadata
    dock's drop-down and the doc string typed (Enter); Ctrl+E writes a copy that carries both, nodes unchanged."""
    import shutil

    from inspector.core.session.onnx_session import OnnxSession
    from inspector.gui.main_window import ONNX, TFLITE
    w = h.w
    path = str(h.tmp / "alone.onnx")
    shutil.copyfile(_sample_onnx(h), path)
    h.step("Ctrl+O an ONNX model")
    h.open_with_dialog(path)
    s = w.editor.session
    h.expect(isinstance(s, OnnxSession) and s.path == path, "the ONNX model did not open alone")
    h.expect(not w.panes[TFLITE].isVisible(), "a TFLite pane is shown for an ONNX model")
    h.expect(not w.editor.validate_action.isEnabled() and not w.editor.model_explorer_action.isEnabled(),
             "validation or Model Explorer export is offered without a TFLite model")
    h.check()
    ed = metadata_dock(h)
    name = sorted(ed.types)[0]
    value = "TENSOR" if ed.types[name].value != "TENSOR" else "IMAGE"
    h.step(f"type of {name} → {value}")
    h.choose(ed.types[name], value)
    h.settle()
    h.expect(s.metadata.types.get(name) == value, f"type of {name}: {s.metadata.types.get(name)!r}")
    h.expect(w.isWindowModified(), "the title does not mark the edit")
    h.check()
    h.step("doc string typed, Enter")
    text = "edited alone"
    h.click(ed.doc_string)
    h.key("Ctrl+A", ed.doc_string)
    h.type(text, ed.doc_string)
    h.key("Return", ed.doc_string)
    h.settle()
    h.expect(s.metadata.doc_string == text, f"doc string: {s.metadata.doc_string!r}")
    h.check()
    h.step("Ctrl+E › the save dialog")
    out = h.tmp / "alone-out.onnx"
    h.click(h.view(ONNX).viewport())    # the keyboard leaves the field (X11 keys: Ctrl+E there is end-of-line)
    h.on_dialog(h.file_dialog(str(out)))
    h.key("Ctrl+E")
    h.settle()
    h.expect(out.is_file(), "Export ONNX wrote nothing")
    if out.is_file():
        model, source = onnx.load(str(out)), onnx.load(path)
        onnx.checker.check_model(model)
        got = {vi.name: vi.type.denotation for vi in model.graph.input}
        h.expect(got.get(name) == value, f"the export's {name} is denoted {got.get(name)!r}")
        h.expect(model.doc_string == text, f"the export's doc string is {model.doc_string!r}")
        h.expect([n.op_type for n in model.graph.node] == [n.op_type for n in source.graph.node],
                 "the export's nodes are not the opened model's")
    h.check()


# ---- Model Explorer ------------------------------------------------------------------------------------------
@scenario
def model_explorer_export(h):
    """File › Export for Model Explorer…, a folder typed into its dialog: what is written there is the document's
    (both models, each TFLite op's category, each inserted Transpose, each conflict, the trace's mapping)."""
    from inspector.core.session import model_explorer as me
    from inspector.gui.main_window import ONNX
    w = h.w
    opened(h, CONFLICT_MODEL)
    folder = h.tmp / "explorer"
    folder.mkdir()
    h.step("File › Export for Model Explorer…")
    h.on_dialog(h.file_dialog(str(folder)), only=_file_dialog())
    h.menu("File", "Export for Model Explorer…")
    h.settle()
    names = sorted(p.name for p in folder.iterdir())
    h.expect(names == sorted(me.names(["categories", "conflicts"])), f"written: {names}")
    if names != sorted(me.names(["categories", "conflicts"])):
        return
    doc = w.doc
    sg, result = doc.graph.main, doc.result
    h.expect((folder / me.TFLITE).read_bytes() == Path(doc.path).read_bytes(), "model.tflite is not the model open")
    exported = onnx.load(str(folder / me.ONNX))
    h.expect([n.name for n in exported.graph.node] == [n.name for n in doc.model.graph.node],
             "model.onnx is not the ONNX graph shown")
    tfl_id, onx_id = me.tflite_graph_id(doc.graph), exported.graph.name
    cats = json.loads((folder / "categories.json").read_text())
    h.expect(sorted(cats) == sorted([tfl_id, onx_id]), f"categories for graphs {sorted(cats)}")
    tfl = cats.get(tfl_id, {}).get("results", {})
    h.expect({k: v["value"] for k, v in tfl.items()} ==
             {sg.tensors[op.outputs[0]].name: result.categories[op.index].value for op in sg.ops},
             "the TFLite categories are not the document's")
    shown = {it.node.key for it in w.scenes[ONNX].nodes if it.node.kind == "op"}
    onx = cats.get(onx_id, {}).get("results", {})
    inserted = set(doc.inserted())
    h.expect({k for k, v in onx.items() if v["value"] == "Inserted Transpose"} == inserted and inserted,
             "the inserted Transposes are not the document's")
    h.expect(set(onx) <= shown, "categories of nodes the ONNX pane does not show")
    conflicts = json.loads((folder / "conflicts.json").read_text())
    reasons = sorted(c.reason for c in doc.conflicts())
    h.expect(sorted(v["value"] for v in conflicts.get(tfl_id, {}).get("results", {}).values()) == reasons,
             "the TFLite conflicts are not the Conflicts dock's")
    h.expect(len(reasons) == w.conflicts.topLevelItemCount(), "the Conflicts dock lists another count")
    mapping = json.loads((folder / me.MAPPING).read_text())
    h.expect(mapping["ops"] == {sg.ops[k].label: v for k, v in result.trace.op_nodes.items()},
             "the mapping is not the trace's")
    h.expect("Model Explorer files" in w.statusBar().currentMessage(), "the status line does not say it was written")


# ---- what-if and Fix -------------------------------------------------------------------------------------------
@scenario
def what_if_counts(h):
    """Right-click a tensor: each choice of the pin menu says how many Transposes the graph would have; each count
    equals a conversion made here with that pin, and the one chosen is what the window then shows."""
    from inspector.core.session.pipeline import converted
    from inspector.gui.commands import AUTO, CHANNELS_FIRST, KEEP, pin_label
    from inspector.gui.main_window import TFLITE
    w = h.w
    opened(h, CONFLICT_MODEL)
    s = w.editor.session
    t, name, edge = _pin_target(h)
    h.step("right-click the input's edge: the what-if counts")
    h.click_item(TFLITE, edge, button=_right())
    h.wait_until(lambda: w.editor.last_menu is not None and w.editor.last_menu.isVisible(), "the pin menu opens", 10)
    menu = w.editor.last_menu
    shown = _counts(menu)
    h.expect(set(shown) == {pin_label(c) for c in (AUTO, CHANNELS_FIRST, KEEP)}, f"the menu's counts: {shown}")
    real = {pin_label(c): converted(s.graph, {name: c} if c else {}, s.options, check=False).transposes
            for c in (AUTO, CHANNELS_FIRST, KEEP)}
    h.expect(shown == real, f"the menu says {shown}, conversions with those pins have {real}")
    h.expect(len(set(real.values())) > 1, "every choice costs the same: nothing is told apart")
    h.step(f"choose keep as is (the menu's counts {shown})")
    h.pick_in_menu(menu, pin_label(KEEP))
    h.settle()
    h.expect(s.pins == {name: KEEP}, f"pins {s.pins}")
    h.expect(w.doc.result.transposes == shown.get(pin_label(KEEP)),
             f"{w.doc.result.transposes} Transposes shown, the menu said {shown.get(pin_label(KEEP))}")
    h.check()


@scenario
def conflict_fix(h):
    """A pin that costs Transposes, then a right-click on each row of the Conflicts dock: its menu stays inside the
    window; the Fix it offers lowers the Transposes to the count it names, and removes that conflict."""
    from inspector.gui.commands import KEEP, pin_label
    from inspector.gui.main_window import TFLITE
    w = h.w
    opened(h, CONFLICT_MODEL)
    edge = _pin_target(h)[2]
    h.step("pin the input: keep as is")
    h.click_item(TFLITE, edge, button=_right())
    h.pick_in_menu(w.editor.last_menu, pin_label(KEEP))
    h.settle()
    before, conflicts = w.doc.result.transposes, len(w.doc.conflicts())
    panel = w.conflicts
    h.expect(panel.topLevelItemCount() == conflicts and conflicts, f"the dock lists {panel.topLevelItemCount()} "
             f"conflicts, the document has {conflicts}")
    fix = None
    for row in range(panel.topLevelItemCount()):
        h.step(f"right-click conflict {row}")
        item = panel.topLevelItem(row)
        w.editor.last_menu = None
        h.click(panel.viewport(), panel.visualItemRect(item).center(), button=_right())
        menu = w.editor.last_menu
        if not h.wait_until(lambda: menu is not None and menu.isVisible(), "the conflict's menu opens", 10):
            return
        inside = w.frameGeometry().contains(menu.geometry())
        h.expect(inside, f"the menu {menu.geometry()} runs off the window {w.frameGeometry()}")
        first = menu.actions()[0]
        if first.isEnabled() and first.text().startswith("Fix:"):
            fix = (item.data(0, 0x0100), first.text(), int(first.text().split("  —  ")[1].split()[0]))
            h.step(f"click {first.text()!r}")
            h.pick_in_menu(menu, first.text().split("  —  ")[0])
            h.settle()
            break
        h.dismiss(menu)
    h.expect(fix is not None, "no conflict offered a Fix after a pin that costs Transposes")
    if fix is None:
        return
    c, text, predicted = fix
    h.expect(predicted < before, f"{text!r} does not lower {before} Transposes")
    h.expect(w.doc.result.transposes == predicted, f"{w.doc.result.transposes} Transposes after the Fix, "
             f"it said {predicted}")
    h.expect(not any(d.tensor == c.tensor and d.op == c.op for d in w.doc.conflicts()), "the conflict is still there")
    h.expect(panel.topLevelItemCount() == len(w.doc.conflicts()), "the dock does not list the conflicts left")
    h.check()


# ---- never lose work: the answers the other scenarios leave out ------------------------------------------------
@scenario
def quit_discard(h):
    """A pin, then Ctrl+Q › Discard: the window closes, no session file is written and no autosave of the pin is
    left to be offered next time."""
    from inspector.gui.autosave import Autosave
    from tests.gui_scenarios import _asked, _pinned
    w = h.w
    path = _copy_sample(h)
    _pinned(h, path)
    s = w.editor.session
    h.step("Ctrl+Q › Discard")
    _asked(h, "Discard", lambda: h.key("Ctrl+Q"))
    h.expect(not w.isVisible(), "Discard did not go on to quit")
    h.expect(not Path(s.default_session_path()).exists(), "a session file was written")
    h.expect(not Autosave(h.tmp / "autosave").pending(s), "the discarded pin is still offered as an autosave")
    h.closed = True


@scenario
def open_save_session(h):
    """A pin, then Ctrl+O of another model › Save session: the session file is written beside the model and the
    other model opens; the first one, opened again, comes back with its pin."""
    from tests.gui_scenarios import _asked, _pinned
    w = h.w
    path = _copy_sample(h)
    _pinned(h, path)
    s = w.editor.session
    pins = dict(s.pins)
    other = h.model(CONFLICT_MODEL)
    h.step("Ctrl+O › Save session")
    _asked(h, "Save session", lambda: h.key("Ctrl+O"), file=other)
    h.settle()
    h.expect(Path(s.default_session_path()).is_file(), "no session file beside the model")
    h.expect(w.editor.session is not s and w.editor.session.path == other, "the other model did not open")
    h.expect(not w.isWindowModified(), "the other model is marked unsaved")
    h.check()
    h.step("Ctrl+O the first model again")
    h.open_with_dialog(path)
    h.expect(w.editor.session.path == path and w.editor.session.pins == pins,
             f"the first model came back with pins {w.editor.session.pins}, not {pins}")
    h.check()


# ---- where a pin's Transposes are drawn --------------------------------------------------------------------------
def _rects(h) -> dict:
    from inspector.gui.main_window import ONNX
    scene = h.w.scenes[ONNX]
    scene.finish()
    return {it.node.key: it.mapRectToScene(it.rect) for it in scene.nodes}


@scenario
def pin_transposes_keep_their_gap(h):
    """Two pins through the menu (the input kept as it is, the Reshape's output channels-first): no Transpose they
    insert comes nearer another node than live_layout.MIN_GAP, and the one that feeds three Convs, where the gap
    has room for it, is as far from its producer and its consumers as graph bands are from each other (it sat
    10 px above them); no other node moves; undo puts the picture back."""
    from inspector.gui.commands import CHANNELS_FIRST, KEEP, pin_label
    from inspector.gui.graph_layout import V_GAP
    from inspector.gui.live_layout import MIN_GAP
    from inspector.gui.main_window import ONNX, TFLITE
    w = h.w
    opened(h, CONFLICT_MODEL)
    sg = w.doc.graph.main
    pins = [(_pin_target(h)[0], KEEP), (sg.tensor_by_name("functional_1/reshape/Reshape").index, CHANNELS_FIRST)]
    before = _rects(h)
    for t, choice in pins:
        h.step(f"right-click tensor {t} › {pin_label(choice)}")
        h.click_item(TFLITE, w.scenes[TFLITE].edges_by_tensor[t][0], button=_right())
        h.wait_until(lambda: w.editor.last_menu is not None and w.editor.last_menu.isVisible(), "the menu opens", 10)
        h.pick_in_menu(w.editor.last_menu, pin_label(choice))
        h.settle()
        h.check()
    rects = _rects(h)
    vg = w.scenes[ONNX].vg
    new = [k for k in rects if k not in before]
    h.expect(len(new) >= 2 and all(w.scenes[ONNX].node_by_key[k].node.title == "Transpose" for k in new),
             f"the pins inserted {new}")
    index = {n.key: i for i, n in enumerate(vg.nodes)}
    fans = []
    for k in new:
        r = rects[k]
        for other, o in rects.items():
            if other != k:
                gap = max(o.left() - r.right(), r.left() - o.right(), o.top() - r.bottom(), r.top() - o.bottom())
                h.expect(gap >= MIN_GAP, f"{k} is {gap:.0f} px from {other}")
        ins = [vg.nodes[e.src].key for e in vg.edges if e.dst == index[k]]
        outs = [vg.nodes[e.dst].key for e in vg.edges if e.src == index[k]]
        fans.append(len(outs))
        if len(outs) < 2:               # (one consumer: on the edge's old route, live_layout._on_route)
            continue
        for p in ins:
            h.expect(r.top() - rects[p].bottom() >= V_GAP, f"{k} is {r.top() - rects[p].bottom():.0f} px below "
                     f"its producer {p} (bands: {V_GAP})")
        for c in outs:
            h.expect(rects[c].top() - r.bottom() >= V_GAP, f"{k} is {rects[c].top() - r.bottom():.0f} px above "
                     f"its consumer {c} (bands: {V_GAP})")
    h.expect(max(fans, default=0) >= 3, f"no Transpose with several consumers: {fans}")
    h.expect(all(rects[k] == before[k] for k in before if k in rects), "a node the graph kept moved")
    h.step("undo both pins")
    h.click(h.view(ONNX).viewport(), h.view(ONNX).viewport().rect().topLeft() + _point(3, 3))
    h.key("Ctrl+Z")
    h.settle()
    h.key("Ctrl+Z")
    h.settle()
    h.expect(_rects(h) == before, "undo did not put every node back")
    h.check()


def _point(x: int, y: int):
    from PySide6.QtCore import QPoint
    return QPoint(x, y)


# ---- the Metadata dock: Enter commits and the findings follow at once --------------------------------------------
def _typed_enter(h, combo, text: str) -> None:
    """Click into a drop-down's text, replace it by typing, press Enter: the keyboard stays in the field."""
    field = combo.lineEdit()
    h.click(field)
    h.key("Ctrl+A", field)
    h.type(text, field)
    h.key("Return", field)


@scenario
def enter_refreshes_findings(h):
    """An ONNX model with an IMAGE input, checked for Windows ML: "Linear" typed into the gamma field and Enter. The
    value is committed and the findings (under the field and in the list) say at once that Windows ML ignores it,
    while the keyboard stays in the field with the cursor where it was; typing "SRGB" and Enter there clears it."""
    from PySide6.QtWidgets import QApplication

    from inspector.core.metadata import schema as ms, targets
    from tests.test_metadata_lint import image_model
    w = h.w
    path = h.tmp / "image.onnx"
    onnx.save(image_model(shape=(1, 3, 6, 10)), str(path))
    opened(h, str(path))
    ed = metadata_dock(h)
    h.step("Check for › Windows ML")
    h.choose(ed.target, targets.get("winml").label)
    h.settle()
    s = w.editor.session
    for value, present in (("Linear", True), ("SRGB", False)):
        h.step(f"type {value} into the gamma field, Enter")
        combo = w.editor.metadata.image[ms.GAMMA]
        _typed_enter(h, combo, value)
        h.settle()
        ed = w.editor.metadata
        h.expect(s.metadata.image.get(ms.GAMMA) == value, f"gamma in the session: {s.metadata.image.get(ms.GAMMA)}")
        field = combo.lineEdit()
        h.expect(QApplication.focusWidget() in (field, combo),       # (an editable drop-down has it for its text)
                 f"the keyboard left the field for {QApplication.focusWidget()}")
        h.expect(field.text() == value and field.cursorPosition() == len(value),
                 f"the field shows {field.text()!r}, cursor at {field.cursorPosition()}")
        codes = [f.code for f in ed.found]
        h.expect(("winml-gamma" in codes) == present, f"the dock's findings after Enter: {codes}")
        listed = [ed.findings.item(i).text() for i in range(ed.findings.count())]
        h.expect(any("winml-gamma" in t for t in listed) == present, f"the findings list shows {listed}")
        under = ed.field_findings.get(ms.GAMMA)
        shown = under is not None and under.count() > 0 and under.itemAt(0).widget() is not None \
            and not under.itemAt(0).widget().isHidden()
        h.expect(shown == present, "the gamma field's own finding " + ("is not shown" if present else "stays"))
