"""The window's editing side: one Session per opened TFLite model, changed only through undo commands.

After each command the Session re-runs propagation, emission and the metadata pass in a worker; the result is
handed to the Session on the GUI thread (Session.show), whose PlanChanged redraws every view (gui/views.py). The
editor also owns the Edit menu (Undo/Redo, history), session files, autosave, Export ONNX and the Validate action.
"""
from __future__ import annotations

import os
import threading
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence, QUndoStack
from PySide6.QtWidgets import (QApplication, QFileDialog, QFrame, QHBoxLayout, QLabel, QMessageBox, QPushButton,
                               QToolBar, QUndoView, QVBoxLayout)

from inspector.core.ir.errors import InspectorError
from inspector.core.metadata.edits import MetadataEdits
from inspector.core.session.session import Session
from inspector.core.session.events import ModelOpened, PinsChanged, PlanChanged
from inspector.core.session.onnx_session import OnnxSession
from inspector.core.session.pair_session import PairSession

from . import gc_guard, graph_layout, graph_model
from .autosave import Autosave
from .commands import ClearPins, EditMetadata, LoadDecisions, PinLayout
from .live_layout import MAX_NEW_SHARE, Placement, diff
from .pin_menu import PinBar, install_context_menu
from .rerun_child import annotated_and_checked, derived, incremental, with_findings
from .palette import palette
from .words import counted

SHOW_WAIT = 10.0        # s a re-run's worker waits for its result to be shown before annotating it (the GUI
                        # thread sets it before it blocks on the pool: Editor._unblock; this bounds a bug)
RELEASE_POLL_MS, RELEASE_TURNS = 5, 40
SESSION_FILTER = "Inspector session (*.inspector.json *.json);;All files (*)"


class RerunSignals(QObject):
    done = Signal(object, object, object, object, object)  # ConversionResult, notes, ONNX ViewGraph, Geometry, Diff
    checked = Signal(object, object)                       # that ConversionResult, its Annotation (or None)
    failed = Signal(str, str)


@dataclass
class Annotation:
    """What follows a re-run's repaint: the metadata pass's model and notes, and the checker's findings on it; or
    why the pass failed (the shown result then has no metadata and is not exported)."""
    model: object = None
    notes: list | None = None           # None: the Session keeps its notes (the converter's warnings)
    mapping: list = field(default_factory=list)
    findings: list = field(default_factory=list)
    error: str = ""


class RerunJob(QRunnable):
    """The Session's pipeline (without the full checker: export runs it) and the ONNX graph's placement, off the GUI
    thread; for big models in the loader's child process (see rerun_child). The conversion reuses the last one's
    pieces (`converter`, an incremental Reconverter: the same bytes as a full conversion). With a Placement, nodes
    the graph keeps stay where they were (live_layout); without one, or when too much is new, the graph is laid out
    afresh.
    The result is shown before its metadata pass: the pass's model, notes and findings follow (`checked`).
    The Session itself changes on the GUI thread, when the result is shown (its events reach the views there)."""

    def __init__(self, session: Session, placement: Placement | None = None, converter=None, shown=None,
                 lay_out: bool = True, ahead=None):
        super().__init__()
        self.session, self.placement, self.converter = session, placement, converter
        self.lay_out = lay_out
        self.ahead = ahead                  # without lay_out (a folded pane): the fold worked out here (Layers.ahead)
        self.shown = shown                  # (ViewGraph, Geometry) of the ONNX pane now: what a live result diffs
        self.signals = RerunSignals()
        self.drawn = threading.Event()      # set by the GUI thread once `done` is shown and painted
        self.dropped = False                # set by the GUI thread: a newer re-run replaced this one's result
        self.waited_out = False             # the wait for `drawn` ran out (tests: it never should)
        self.setAutoDelete(False)

    def run(self) -> None:
        from .loader_job import executor, in_child
        s = self.session
        metadata = s.metadata                   # the decisions this run reads (the user may edit on meanwhile)
        annotate = None                         # the metadata pass and the checker, after the graph is shown
        child = False
        try:
            if s.graph is not None and in_child(s.path, s.graph) and s.converts:   # a pair converts nothing
                child = True                    # until its `finish` is queued (with `annotated`)
                result, vg, layout, changes, annotating = self._in_child(executor())
                child = False
                result = _derived(result, graph=s.graph)
                annotate = lambda: _annotated(annotating.result(), result, metadata)          # noqa: E731
            else:
                if not s.converts:          # metadata edits on an ONNX model (a pair's, or one opened alone)
                    s.convert(check=False)
                    result = with_findings(s.result)
                else:
                    result = incremental(self.converter).converted(s.graph, s.pins, s.options, check=False)
                    annotate = lambda: _annotated_here(result, metadata)                       # noqa: E731
                vg = graph_model.from_onnx(result.model)
                layout, changes = self._lay_out(vg)
            notes = s.notes if annotate is None else list(result.warnings)     # the pass's follow with its model
            if annotate is not None:
                result = _derived(result, findings=None, checking=True)     # the Metadata dock waits for them
            self.signals.done.emit(result, notes, vg, layout, changes)
        except InspectorError as e:
            self._failed(child, str(e), "")
            return
        except Exception as e:   # a bug: the dialog carries the traceback
            self._failed(child, f"{type(e).__name__}: {e}", traceback.format_exc())
            return
        if annotate is None and changes is None:
            self.signals.checked.emit(result, None)
            return
        # The metadata pass run here and the overview's arrays wait until the result is shown and painted: they
        # took the GIL from the GUI thread (the child's answer is unpickled by the executor's thread as it comes)
        self.waited_out = not self.drawn.wait(SHOW_WAIT)
        if changes is not None:             # the overview's arrays (the minimap waits 120 ms for a picture; an
            layout.prepare(vg, order=False)     # overview asking first makes them itself)
        annotation = None
        if annotate is not None and not self.dropped:
            try:
                annotation = annotate()
            except InspectorError as e:
                annotation = Annotation(error=str(e))
            except Exception as e:          # noqa: BLE001 - a bug, or the child process has gone
                annotation = Annotation(error=f"{type(e).__name__}: {e}")
        self.signals.checked.emit(result, annotation)     # the job's last word (None: nothing follows)

    def _failed(self, child: bool, message: str, details: str) -> None:
        if child:                       # no `annotated` follows: the child's last step (its collector back on)
            from .loader_job import executor
            from .rerun_child import finish
            try:
                executor().submit(finish)
            except Exception:           # noqa: BLE001 - the child may have gone; the failure is what is shown
                pass
        self.signals.failed.emit(message, details)

    def _in_child(self, pool) -> tuple:
        """The re-run in the child process (rerun_child): it converts and sends the graph view; the view is laid
        out here while the child packs the result. (result, ViewGraph, Geometry, Diff, the future of the `annotated`
        step, queued with `finish` behind it before another window's exchange can start)."""
        from .loader_job import CHILD_TURN, received
        with CHILD_TURN:
            return self._exchange(pool, received)

    def _exchange(self, pool, received) -> tuple:
        from .rerun_child import Replaced, annotated, finish, last_result, last_view, rerun, result_of, view_in
        s = self.session
        whole = False
        while True:             # again whenever something else was sent in between (see loader_job.CHILD_TURN)
            running = pool.submit(rerun, s.path, dict(s.pins), s.options.to_dict(), s.metadata.to_dict(),
                                  None if whole else last_view())
            if self.placement is not None:      # while the child converts
                self.placement.made()
            sent = running.result()
            if isinstance(sent, str):
                raise InspectorError(sent)
            try:
                (vg,) = received(sent)
            except Replaced:
                continue
            # the child packs the result while the view is made whole and laid out (or folded) here
            packing = pool.submit(result_of, sent[0], last_result())
            if not view_in(vg):             # sent against a view no longer kept here: again, whole
                whole = True
                continue
            layout, changes = self._lay_out(vg)
            packed = packing.result()
            if packed is None:
                continue
            try:
                (result,) = received(packed)
            except Replaced:
                continue
            annotating = pool.submit(annotated, sent[0])
            pool.submit(finish)             # runs even when this thread stops waiting, before any later re-run
            return result, vg, layout, changes, annotating

    def _lay_out(self, vg) -> tuple:
        """(Geometry, live_layout.Diff or None): with a Placement, nodes the graph keeps stay where they were; without
        one, or when too much is new, the graph is laid out afresh."""
        p = self.placement
        if not self.lay_out:
            if self.ahead is not None:
                self.ahead(vg)
            return None, None
        live = p is not None and self.shown is not None and p.new_share(vg) <= MAX_NEW_SHARE
        layout = p.layout(vg) if live else graph_layout.compute(vg).prepare(vg)    # (prepared: a new scene's order)
        return layout, diff(*self.shown, vg, layout) if live else None


def _derived(result, **changes):
    """dataclasses.replace(result, **changes), kept as the base of the next result from the child in its place."""
    new = replace(result, **changes)
    derived(result, new)
    return new


def _annotated(outcome, result, metadata) -> Annotation:
    """The child's `annotated` answer as an Annotation (run here when another re-run replaced it there)."""
    if outcome is None:
        return _annotated_here(result, metadata)
    if isinstance(outcome, str):
        raise InspectorError(outcome)
    return Annotation(*outcome)


def _annotated_here(result, metadata) -> Annotation:
    """The metadata pass and the checker on a copy of the result's model: the window reads the shown one
    meanwhile (a copy costs little beside the pass)."""
    import onnx
    model = onnx.ModelProto()
    model.CopyFrom(result.model)
    return Annotation(*annotated_and_checked(replace(result, model=model), metadata))


class AutosaveJob(QRunnable):
    """One autosave, written off the GUI thread (its fsyncs held up a pin on a busy disk); the editor's
    one-thread pool keeps them in order."""

    def __init__(self, autosave: Autosave, encoded: tuple, signals: "AutosaveSignals"):
        super().__init__()
        self.autosave, self.encoded, self.signals = autosave, encoded, signals

    def run(self) -> None:
        error = ""
        try:
            self.autosave.store(*self.encoded)
        except InspectorError as e:
            error = str(e)
        except OSError as e:            # the folder itself could not be made
            error = f"{e.filename}: {e.strerror}"
        self.signals.done.emit(error)


class AutosaveSignals(QObject):
    done = Signal(str)                  # "" or why the write failed


class Banner(QFrame):
    """A bar above the graphs offering to restore autosaves, one row each (Restore, Discard), under a note when
    the model is open in another window too. `label`, `restore` and `discard` are the first row's."""

    def __init__(self, parent=None):
        super().__init__(parent)
        pal = palette()                 # text and background set together: readable in either scheme
        self.setStyleSheet(f"Banner{{background:{pal.banner.name()}; border-bottom:1px solid {pal.banner_edge.name()}}}"
                           f" Banner QLabel{{color:{pal.ink.name()}}}")
        self.note = QLabel(wordWrap=True)
        self.rows: list[tuple[QLabel, QPushButton, QPushButton]] = []
        self.box = QVBoxLayout(self)
        self.box.setContentsMargins(8, 4, 8, 4)
        self.box.addWidget(self.note)
        self.show_offers("", [], None, None)

    def show_offers(self, note: str, texts: list[tuple[str, bool]], on_restore, on_discard) -> None:
        """`texts`: (what the autosave holds, whether a window still open writes it: then it is not discarded)."""
        while self.box.count() > 1:
            item = self.box.takeAt(1)
            if item.layout() is not None:
                while item.layout().count():
                    w = item.layout().takeAt(0).widget()
                    w.hide()            # not setParent(None): Python would own it and delete it at once,
                    w.deleteLater()     # maybe inside the clicked() of the button being removed
        self.rows = []
        self.note.setText(note)
        self.note.setVisible(bool(note))
        for k, (text, live) in enumerate(texts):
            row = QHBoxLayout()
            label, restore, discard = QLabel(text, wordWrap=True), QPushButton("Restore"), QPushButton("Discard")
            restore.clicked.connect(lambda _=False, k=k: on_restore(k))
            discard.clicked.connect(lambda _=False, k=k: on_discard(k))
            discard.setEnabled(not live)
            if live:
                discard.setToolTip("written by a window still open: closing it there is how it goes")
            row.addWidget(label, 1)
            row.addWidget(restore)
            row.addWidget(discard)
            self.box.addLayout(row)
            self.rows.append((label, restore, discard))
        self.label, self.restore, self.discard = self.rows[0] if self.rows else (self.note, None, None)
        self.setVisible(bool(note or texts))


class Editor(QObject):
    def __init__(self, window, autosave: Autosave | None = None):
        super().__init__(window)
        self.window = window
        self.session: Session | None = None
        self.stack = QUndoStack(self)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(1)
        self.autosave = autosave or Autosave()
        self.baseline: int | None = None     # Transposes of the first conversion, for the export summary
        self.last_menu = self.last_dialog = self.last_message = None
        self._job: RerunJob | None = None
        self.placement: Placement | None = None
        self.reconverter = None             # the session's emit.incremental.Reconverter (re-runs in this process)
        self._what_if: dict = {}
        self.export_job = None               # a big model's export running in the child process
        self.offers: list = []               # the autosaves the banner offers (autosave.Offer)
        self._also_open = 0                  # other windows showing this model
        self._pending = False
        self._running: set = set()          # jobs started and not finished (their findings still to come)
        self.io = QThreadPool(self)         # autosaves, in order, off the GUI thread
        self.io.setMaxThreadCount(1)
        self._writing = 0
        self._saved = AutosaveSignals(self)
        self._saved.done.connect(self._autosaved)
        self.stack.indexChanged.connect(self._edited)
        self.stack.cleanChanged.connect(self._unsaved)
        self._install()
        views = window.views
        views.subscribe(self._model_opened, ModelOpened)
        views.subscribe(lambda _e: self.pin_bar.show_tensors(self.pin_bar.tensors), PinsChanged, PlanChanged)

    # ---- construction --------------------------------------------------------------------------------------
    def _install(self) -> None:
        from .panels.metadata_editor import MetadataEditor
        from .panels.validation import ValidationPanel
        w = self.window
        self.banner = Banner()
        w.add_bar(self.banner)
        self.pin_bar = PinBar(self)
        w.details.add_header(self.pin_bar)
        from . import fix_conflict
        fix_conflict.install(self, w.conflicts)

        self.metadata = MetadataEditor(self)
        self.validation = ValidationPanel(self)
        self.history = QUndoView(self.stack)
        self.history.setEmptyLabel("<opened model>")
        # beside Details as tabs: one side column, so the graph panes keep two thirds of the window
        self.metadata_dock = w.add_dock("Metadata", self.metadata, Qt.RightDockWidgetArea, tab_with=w.details_dock)
        self.validation_dock = w.add_dock("Validation", self.validation, Qt.BottomDockWidgetArea)
        self.history_dock = w.add_dock("History", self.history, Qt.RightDockWidgetArea, tab_with=w.details_dock)
        w.details_dock.raise_()
        self.validation_dock.hide()
        # shown (View menu, Ctrl+R): as tall as what it holds, not as it was last
        self.validation_dock.visibilityChanged.connect(lambda on: on and self.validation.fit_dock())

        edit = w.menu("edit")
        self.undo_action = self.stack.createUndoAction(w, "&Undo")
        self.undo_action.setShortcut(QKeySequence("Ctrl+Z"))
        self.redo_action = self.stack.createRedoAction(w, "&Redo")
        self.redo_action.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
        edit.addAction(self.undo_action)
        edit.addAction(self.redo_action)
        edit.addSeparator()
        self.clear_pins_action = self._act(edit, "Clear all &pins", self.clear_pins)

        self.export_action = self._act(None, "E&xport ONNX…", self.export_dialog, "Ctrl+E")
        self.save_action = self._act(None, "&Save Session", self.save_session, QKeySequence.Save)
        self.save_as_action = self._act(None, "Save Session &As…", self.save_session_as, "Ctrl+Shift+S")
        self.open_session_action = self._act(None, "Open Sess&ion…", self.open_session_dialog)
        from .export_model_explorer import action
        self.model_explorer_action = action(self)
        w.add_actions("file", (self.export_action, self.model_explorer_action, self.save_action, self.save_as_action,
                               self.open_session_action))

        self.validate_action = self._act(None, "&Validate", self.validate, "Ctrl+R")
        self.validate_tip = ("Run the TFLite model and the ONNX model on the same inputs and compare every tensor "
                             "(Ctrl+R)")
        self.validate_action.setToolTip(self.validate_tip)
        tb = QToolBar("Edit", objectName="edit")
        w.addToolBar(tb)
        undo = self._act(None, "Undo", self.stack.undo)          # short labels: the menu's say what
        redo = self._act(None, "Redo", self.stack.redo)
        undo.setEnabled(False)
        redo.setEnabled(False)
        self.stack.canUndoChanged.connect(undo.setEnabled)
        self.stack.canRedoChanged.connect(redo.setEnabled)
        self.stack.undoTextChanged.connect(lambda t: undo.setToolTip(f"Undo {t}"))
        self.stack.redoTextChanged.connect(lambda t: redo.setToolTip(f"Redo {t}"))
        for a in (undo, redo, self.export_action, self.validate_action):
            tb.addAction(a)
        self._enable()

    def _act(self, menu, text, slot, shortcut=None) -> QAction:
        a = QAction(text, self.window)
        if shortcut:
            a.setShortcut(QKeySequence(shortcut))
        a.triggered.connect(lambda _=False: slot())
        if menu is not None:
            menu.addAction(a)
        return a

    def _enable(self) -> None:
        s = self.session                       # each action asks what this session can do
        can = {"save_session": (self.save_action, self.save_as_action, self.open_session_action),
               "pin": (self.clear_pins_action,), "validate": (self.validate_action,),
               "export_onnx": (self.export_action,), "export_model_explorer": (self.model_explorer_action,)}
        for what, actions in can.items():
            for a in actions:
                a.setEnabled(s is not None and getattr(s, f"can_{what}"))
        why = s.why_not if s is not None else {}
        self.clear_pins_action.setToolTip(why.get("pin", ""))
        self.validate_action.setToolTip(why.get("validate", self.validate_tip))

    # ---- life cycle (hooks called by the window) -----------------------------------------------------------
    def detach(self, path: str = "", other: str | None = None) -> None:
        """A new model is being opened (`path`, paired with `other`): forget the session; the views show nothing
        of it."""
        self.validation.cancel()
        self.session, self.baseline = None, None
        self._pending = False
        self._job = None
        self._running = set()
        self.placement = None
        self.reconverter = None
        self._what_if = {}
        self.stack.clear()
        self.window.views.bind(None, path, other)

    def attach(self, doc, vg=None, layout=None) -> None:
        """The loader's result (a conversion, an ONNX model alone or a pair) becomes the Session every view shows:
        ModelOpened, then its first PlanChanged draws the ONNX pane with the graph the loader laid out."""
        self.session = None                  # nothing autosaves while the stack is cleared
        self.stack.clear()
        if doc.graph is None:
            s = OnnxSession.of(doc.path, doc.model)
            s.sources = doc.sources                  # read by the loader, off the GUI thread, like the findings
            if doc.findings is not None:
                s.result = replace(s.result, findings=doc.findings)
            result, notes = s.result, s.notes
        else:
            s = PairSession(doc) if doc.result.pair is not None else Session(path=doc.path, graph=doc.graph)
            result, notes = doc.result, doc.notes if s.converts else s.notes
        self.session = s
        from inspector.core.emit.incremental import Reconverter
        self.reconverter = doc.reconverter or Reconverter()
        self.window.views.bind(s, doc.path, s.other)
        change = self.window.show_result(s, result, notes, vg, layout)   # the loader ran the whole pipeline
        self.baseline = change.transposes_after     # counted once, by the Session (a walk of every ONNX node)
        self._hook_tflite_view()
        if s.can_save_session:               # a pair's decisions are not saved (autosave keys on the TFLite model)
            also_open = self.autosave.hold(s.path)
            self.load_saved_session()
            self._offer_autosave(also_open)
        else:
            self.autosave.hold(None)

    def _unsaved(self, clean: bool) -> None:
        """The title's [*]: decisions not saved in a session file (a pair has none: its edits are exported)."""
        self.window.setWindowModified(not clean and self.session is not None and self.session.can_save_session)

    def _model_opened(self, _e) -> None:
        self.banner.hide()
        self.pin_bar.show_tensors([])
        self._enable()

    def load_saved_session(self) -> None:
        """The session file saved beside the model (MODEL.inspector.json), applied when there is one."""
        s = self.session
        saved = Path(s.default_session_path())
        if saved.is_file():
            try:
                warnings = s.load_decisions(str(saved))
                self.rerun()
                self.window.statusBar().showMessage(f"Loaded session {saved.name}"
                                                    + (f" ({'; '.join(warnings)})" if warnings else ""), 8000)
            except InspectorError as e:
                self.window.error("Cannot load the session file", str(e))

    def _hook_tflite_view(self) -> None:
        from .graph_model import TFLITE
        view = self.window.panes[TFLITE].main_view
        scene = self.window.scenes.get(TFLITE)
        if view is None or scene is None:
            return
        install_context_menu(view, self)
        scene.selectionChanged.connect(lambda: self._tflite_selection(scene))

    def _tflite_selection(self, scene) -> None:
        import shiboken6
        if not shiboken6.isValid(scene) or self.session is None:
            return
        nodes, tensors = scene.selected_keys()
        sg = self.session.graph.main
        picked = list(tensors)
        for kind, key in nodes:
            if kind == "op":
                picked += [t for t in sg.ops[key].outputs if t >= 0]
            elif kind in ("in", "out"):                 # (a group's box has no tensor of its own)
                picked.append(key)
        self.pin_bar.show_tensors(list(dict.fromkeys(picked)))

    def close(self) -> None:
        self.validation.cancel()
        self._unblock()
        self.pool.waitForDone(30_000)
        self.flush()
        self.autosave.hold(None)

    # ---- edits ---------------------------------------------------------------------------------------------
    def pin_name(self, t: int) -> str:
        """How a pin names tensor t: its name, or its index when the name is empty or not unique."""
        sg = self.session.graph.main
        name = sg.tensors[t].name
        found = sg.tensor_by_name(name) if name else None
        return name if found is not None and found.index == t else str(t)

    def pin(self, tensor: str, layout: str | None) -> bool:
        """Push a PinLayout; a pin the converter would refuse is reported and not pushed."""
        if self.session is None or self.session.pins.get(tensor) == (layout if layout != "auto" else None):
            return False
        if not self.session.can_pin:
            self.window.statusBar().showMessage(self.session.why_not["pin"], 8000)
            return False
        try:
            self.session.check_pin(tensor, layout)              # a refused pin is never pushed
        except InspectorError as e:
            self.window.error("Cannot pin", str(e))
            return False
        self.stack.push(PinLayout(self, tensor, layout))
        return True

    def what_if(self, t: int, choices) -> dict:
        """{pin choice: Transposes of the whole plan} for tensor t, from the solver (cached per set of pins)."""
        from .what_if import costs
        s = self.session
        key = (t, tuple(choices), tuple(sorted(s.pins.items())), s.options.keep_io_layout)
        if key not in self._what_if:
            if len(self._what_if) > 256:
                self._what_if.clear()
            try:
                self._what_if[key] = costs(s, t, choices)
            except InspectorError:
                self._what_if[key] = {}
        return self._what_if[key]

    def clear_pins(self) -> None:
        if self.session is not None and self.session.pins:
            self.stack.push(ClearPins(self))

    def edit_metadata(self, edits: MetadataEdits, text: str) -> str | None:
        """Push an EditMetadata; returns the error message instead when the edits are invalid."""
        if self.session is None:
            return "no model"
        try:
            edits.normalized()
        except InspectorError as e:
            return str(e)
        if edits.to_dict() != self.session.metadata.to_dict():
            self.stack.push(EditMetadata(self, edits, text))
        return None

    def _edited(self, _index: int) -> None:
        if self.session is None or not self.session.can_save_session:     # (a pair: autosave keys on the TFLite model)
            return
        try:
            encoded = self.autosave.encode(self.session)
        except InspectorError as e:
            self.window.statusBar().showMessage(f"Autosave failed: {e}", 8000)
            return
        self._writing += 1
        self.io.start(AutosaveJob(self.autosave, encoded, self._saved))

    def _autosaved(self, error: str) -> None:
        self._writing -= 1
        if error:
            self.window.statusBar().showMessage(f"Autosave failed: {error}", 8000)

    def flush(self) -> None:
        """Every autosave written (before the side file is read, removed or the window closes)."""
        self.io.waitForDone()

    # ---- re-running ----------------------------------------------------------------------------------------
    @property
    def unsaved(self) -> bool:
        """Decisions (pins, metadata edits) made since the model opened or its session was last saved."""
        return self.session is not None and not self.stack.isClean()

    @property
    def exporting(self) -> bool:
        return self.export_job is not None

    @property
    def idle(self) -> bool:
        """Every re-run shown, its metadata findings included (the Metadata dock rebuilt), and every autosave
        written."""
        return self.drawn and not self._running and not self._writing and not self.metadata.pending

    @property
    def drawn(self) -> bool:
        """The latest re-run's graph is shown (its metadata findings may still be on their way)."""
        return self._job is None and not self._pending

    def rerun(self) -> None:
        if self.session is None:
            return
        if self._job is not None:
            self._pending = True            # the running job read older decisions: run again when it ends
            return
        self.window.statusBar().showMessage("Re-running propagation…")
        from .graph_model import ONNX
        scene = self.window.scenes.get(ONNX)
        if self.window.folds(ONNX):     # a folded pane: the window folds and lays out the new graph itself
            job = self._job = RerunJob(self.session, None, self.reconverter, None, lay_out=False,
                                       ahead=self.window.layers.ahead(ONNX))
        else:
            job = self._job = RerunJob(self.session, self._placement(), self.reconverter,
                                       (scene.vg, scene.layout) if scene is not None else None)
        job.signals.done.connect(lambda *a: self._rerun_done(job, *a))
        job.signals.failed.connect(lambda *a: self._rerun_failed(job, *a))
        job.signals.checked.connect(lambda *a: self._checked(job, *a))
        self._running.add(job)
        self.pool.start(job)

    def _checked(self, job, result, annotation) -> None:
        self._running.discard(job)
        if annotation is None or self.session is None:
            return
        a = annotation                  # ignored unless it is still the result shown
        checked = self.session.checked(result, a.findings, a.model, a.notes, a.mapping, a.error)
        if checked:
            derived(result, self.session.result)
        if checked and a.error:
            self.window.statusBar().showMessage(f"Metadata pass failed: {a.error.splitlines()[0]}", 15000)
            self.window.error("The metadata pass failed", a.error + "\n\nThe graph shown carries no metadata "
                              "(denotations, Image fields, your edits) and is not exported as it is: undo (Ctrl+Z) "
                              "the last edit to go back.")

    def _placement(self) -> Placement | None:
        """Where the ONNX graph's nodes are now (kept across re-runs so undo puts them back)."""
        from .graph_model import ONNX
        scene = self.window.scenes.get(ONNX)
        if scene is None:
            self.placement = None
        elif self.placement is None or self.placement.scene is not scene:
            self.placement = Placement(scene.vg, scene.layout, later=True)     # read by the re-run's worker
            self.placement.scene = scene
        return self.placement

    def _next(self, job) -> bool:
        """True when this job's result is the latest wanted; otherwise starts the next run."""
        if job is not self._job:
            return False
        self._job = None
        if self._pending:
            self._pending = False
            self.rerun()
            return False
        return True

    def _rerun_done(self, job, result, notes, vg, layout, live) -> None:
        try:
            if self._next(job):
                self.window.show_result(self.session, result, notes, vg, layout, live)
                gc_guard.settle()           # a full collection would scan the new graph once more
            else:
                job.dropped = True          # its metadata pass would be thrown away
        finally:
            from .graph_model import ONNX
            view = self.window.panes[ONNX].main_view
            self._release(job, view, view.paints if view is not None else 0)

    def _release(self, job, view, paints: int, turn: int = 0) -> None:
        """Let the job's worker go on (the metadata pass, or its model from the child, and the overview's arrays)
        once the scenes are complete and the ONNX pane has painted the result (at most RELEASE_TURNS polls): they
        took the GIL from the re-indexing slices and the repaint (which came visibly later on NASNet)."""
        if job.drawn.is_set():
            return
        painted = view is None or not view.isVisible() or view.paints > paints
        if (self.window.idle and painted) or turn >= RELEASE_TURNS:
            job.drawn.set()
        else:
            QTimer.singleShot(RELEASE_POLL_MS, lambda: self._release(job, view, paints, turn + 1))

    def _rerun_failed(self, job, message: str, details: str) -> None:
        self._running.discard(job)
        if not self._next(job):
            return
        self.window.statusBar().showMessage(f"Re-run failed: {message.splitlines()[0]}", 15000)
        self.window.error("Re-running the conversion failed",
                          message + "\n\nUndo (Ctrl+Z) the last edit to go back.", details)

    def wait(self, timeout_ms: int = 120_000) -> None:
        """Block until re-runs are shown with their findings and autosaves are written (export and save want the
        latest result); a pending autosave is waited for, not spun on."""
        while not self.idle:
            self._unblock()
            self.pool.waitForDone(timeout_ms)
            self.flush()
            QApplication.processEvents()

    def _unblock(self) -> None:
        """Before the GUI thread blocks on the pool: its jobs' workers must not wait for a paint that cannot come
        (their results are shown once the pool is done)."""
        for job in self._running:
            job.drawn.set()

    # ---- session files and autosave ------------------------------------------------------------------------
    def save_session(self, path: str | None = None) -> str | None:
        if self.session is None:
            return None
        try:
            written = self.session.save(path)
        except InspectorError as e:
            self.window.error("Cannot save the session", str(e) + "\n\nUse File › Save Session As… to choose "
                              "another folder.")
            return None
        self.stack.setClean()
        self.flush()
        self.autosave.discard(self.session)
        self.window.statusBar().showMessage(f"Saved session {written}", 8000)
        return written

    def save_session_as(self) -> None:
        if self.session is None:
            return
        path, _ = QFileDialog.getSaveFileName(self.window, "Save session", self.session.default_session_path(),
                                              SESSION_FILTER)
        if path:
            self.save_session(path)

    def open_session_dialog(self) -> None:
        if self.session is None:
            return
        path, _ = QFileDialog.getOpenFileName(self.window, "Open session", str(Path(self.session.path).parent),
                                              SESSION_FILTER)
        if path:
            self.open_session(path)

    def open_session(self, path: str, text: str = "Open session") -> bool:
        try:
            cmd = LoadDecisions(self, path, text)
        except InspectorError as e:
            self.window.error("Cannot open the session", str(e))
            return False
        self.stack.push(cmd)
        if cmd.warnings:
            self.window.statusBar().showMessage("; ".join(cmd.warnings), 10000)
        return True

    def _offer_autosave(self, also_open: int | None = None) -> None:
        """The banner: each autosave of this model worth restoring, and whether another window has it open."""
        self.flush()
        if also_open is not None:
            self._also_open = also_open
        self.offers = self.autosave.pending(self.session)
        if self.autosave.notice:
            self.window.statusBar().showMessage(self.autosave.notice, 15000)
        name = Path(self.session.path).name
        note = (f"{name} is open in {counted(self._also_open, 'other window')} too: each window autosaves its own decisions, "
                "and none overwrites another's." if self._also_open else "")
        texts = []
        for p, d, live in self.offers:
            edited = "yes" if d.metadata.to_dict() != MetadataEdits().to_dict() else "none"
            texts.append((f"Unsaved decisions for {name} from {_mtime(p)} were autosaved ({counted(len(d.pins), 'pin')}, "
                          f"metadata edits: {edited})" + (", by a window still open" if live else "")
                          + ". Restore them?", live))
        self.banner.show_offers(note, texts, self.restore_autosave, self.discard_autosave)

    def restore_autosave(self, k: int = 0) -> None:
        """Apply the k-th offered autosave as one undoable step; it then lives in this window's own autosave, so
        its file goes (unless a window still open writes it)."""
        if self.session is None or k >= len(self.offers):
            return
        p, _d, live = self.offers[k]
        self.flush()
        if self.open_session(str(p), "Restore autosave"):
            self.flush()
            if not live and p != self.autosave.path_for(self.session.path):
                self.autosave.discard(self.session, p)
        self._offer_autosave()

    def discard_autosave(self, k: int = 0) -> None:
        if self.session is None or k >= len(self.offers):
            return
        self.flush()
        p, _d, live = self.offers[k]
        if not live:
            self.autosave.discard(self.session, p)
        self._offer_autosave()

    # ---- export and validation -----------------------------------------------------------------------------
    def export_dialog(self) -> None:
        from .export_onnx import export_dialog
        export_dialog(self)

    def validate(self) -> None:
        if self.session is None:
            return
        self.wait()
        self.validation_dock.show()
        self.validation_dock.raise_()
        self.validation.run()

    def inform(self, title: str, text: str, details: str = "") -> QMessageBox:
        """A non-blocking message box (kept as last_message so tests and screenshots can read it)."""
        box = QMessageBox(QMessageBox.Information, title, text, QMessageBox.Ok, self.window)
        if details:
            box.setDetailedText(details)
        box.setAttribute(Qt.WA_DeleteOnClose, False)
        self.last_message = box
        if os.environ.get("QT_QPA_PLATFORM") != "offscreen":
            box.open()
        return box


def _mtime(p: Path) -> str:
    import datetime
    return datetime.datetime.fromtimestamp(p.stat().st_mtime).strftime("%Y-%m-%d %H:%M:%S")
