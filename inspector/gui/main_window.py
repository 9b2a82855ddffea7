"""The inspector window: the TFLite graph and its ONNX conversion side by side, selection synced via the trace."""
from __future__ import annotations

import html
import os
import re
import weakref
from pathlib import Path
from urllib.parse import unquote

import shiboken6
from PySide6.QtCore import QEvent, QRectF, QSettings, Qt, QThreadPool, QTimer
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence, QPalette
from PySide6.QtWidgets import (QDockWidget, QFileDialog, QLabel, QLineEdit, QMainWindow, QMenu, QMessageBox, QProgressBar,
                               QPushButton, QSplitter, QStackedWidget, QTabWidget, QToolBar, QVBoxLayout, QWidget)

from inspector.core.session.events import Exported, FindingsChecked, ModelOpened, PlanChanged

from . import export, find, gc_guard, graph_layout, graph_model, open_failure
from .document import Document
from .folders import first_folder
from . import layers_job
from .folding import Layers, group_key, is_group, opened_at
from .graph_items import NodeItem
from .graph_model import ONNX, TFLITE
from .graph_view import GraphScene, GraphView
from .legend import Legend
from .palette import DARK, LIGHT
from . import loader_job
from .loader_job import LoadJob
from .panels.conflicts import ConflictsPanel
from .panels.details import DetailsPanel
from .panels.search_results import SearchResults
from .scheme import Scheme
from .start_page import StartPage
from .views import Views
from .words import counted

MAX_RECENT = 8
REMADE_OVER = 1000                         # boxes more or fewer after opening or closing groups: the scene is made
                                           # afresh in slices instead of changed in place
WINDOW_SIZE = (1500, 950)                  # px: the first window, when the screen has room for it
DOCK_WIDTH, DOCK_MAX_WIDTH = 380, 560      # px: the side docks' initial and largest width
LAYOUT_VERSION = 3                         # bumped when the docks change: an older saved layout is not restored
SHORTCUTS = (("Ctrl+O", "open a model (or drop a file on the window)"),
             ("F / Ctrl+0", "fit the graph to the window (F and M act in a graph pane) / actual size"),
             ("Ctrl+= / Ctrl+- / wheel", "zoom; drag to pan"),
             ("Ctrl+F", "search (the Search results dock lists every match; a regular expression if ticked there)"),
             ("name=value, name:value", "in the search field: ops with such an attribute (stride=2 finds stride_h 2 "
                                        "and strides [2,2]; axis:3); plain text matches attribute values too"),
             ("Enter / F3, Shift+F3", "next match, previous match"),
             ("Alt+Up / Alt+Down", "move the selection to its producer / first consumer (the other pane follows)"),
             ("Alt+Left / Alt+Right", "move to the previous / next consumer of the same producer"),
             ("Esc", "clear the selection (in a graph pane)"),
             ("Enter / Backspace", "open the selected group (or a WHILE / IF op's subgraphs) / close the group "
                                   "around the selection (both panes)"),
             ("Ctrl+C", "copy the selection's whole names (in a graph pane, a Conflicts row; a click on the pin "
                        "bar's names copies them too)"),
             ("Ctrl+1 / Ctrl+2, M", "show or hide the TFLite / ONNX graph, the minimap"),
             ("Ctrl+E, Ctrl+S, Ctrl+R", "export ONNX, save the session, validate"),
             ("Ctrl+Z / Ctrl+Shift+Z", "undo / redo"),
             ("Ctrl+Alt+E / Ctrl+Shift+E", "export the view / the whole graph as PNG"),
             ("right-click", "a TFLite tensor or op: pin its layout"),
             ("double-click", "a group's box (or its +): open it; a WHILE / IF op: open its subgraphs in tabs"))
HINT = "Type in the search field above the graphs (Ctrl+F)."
MOVES = (("Alt+Up", find.UP), ("Alt+Down", find.DOWN), ("Alt+Left", find.LEFT), ("Alt+Right", find.RIGHT))
QUITTING = "quitting"
FILTERS = "Models (*.tflite *.onnx);;TFLite (*.tflite);;ONNX (*.onnx);;All files (*)"


_NAMES: list = []           # [(a weak reference to a subgraph, its tensor names' indices)]: the last one read


def pinned(sg, pins: dict) -> dict[int, str]:
    """{tensor index: layout text} of the pins (by name, or by index when a name is not unique)."""
    from inspector.core.layout.pins import names, resolve_pin
    from inspector.core.ir.errors import InspectorError
    out: dict[int, str] = {}
    if not pins:
        return out
    if not _NAMES or _NAMES[0][0]() is not sg:  # a walk of every tensor: once per model, not on every recolour
        _NAMES[:] = [(weakref.ref(sg), names(sg))]
    by_name = _NAMES[0][1]
    for key, text in pins.items():
        try:
            out[resolve_pin(sg, by_name, key, text)[0]] = text
        except InspectorError:              # a pin that does not fit this graph: the others still show
            continue
    return out


def tflite_counts(graph, vg) -> str:
    """What the TFLite tab's count counts: the main subgraph's ops, of which some are drawn inside another."""
    ops = len(graph.main.ops)
    folded = ops - vg.op_count
    text = f"{counted(ops, 'op')} in the main subgraph"
    if folded > 0:
        text += (f"; {counted(vg.op_count, 'box', 'boxes')} drawn: {counted(folded, 'DEQUANTIZE')} of weights "
                 "are shown as a constant of the op that reads them")
    return text


class Pane(QStackedWidget):
    """A tab widget of graph views (main graph, then opened subgraphs) with a placeholder while empty."""

    def __init__(self, title: str, parent=None):
        super().__init__(parent)
        self.title = title
        self.placeholder = QLabel(alignment=Qt.AlignCenter, wordWrap=True)
        self.placeholder.setStyleSheet("font-size:13px; padding:20px")
        self.placeholder.setForegroundRole(QPalette.ColorRole.PlaceholderText)     # follows the colour scheme
        self.tabs = QTabWidget(tabsClosable=True, documentMode=True)
        self.tabs.setElideMode(Qt.ElideMiddle)      # long subgraph names: elided, whole in the tooltip
        self.tabs.tabBar().setExpanding(False)
        self.tabs.setUsesScrollButtons(True)
        self.tabs.tabCloseRequested.connect(self._close_tab)
        self.addWidget(self.placeholder)
        self.addWidget(self.tabs)
        self.message("")

    def message(self, text: str) -> None:
        self.placeholder.setText(text)
        self.setCurrentWidget(self.placeholder)

    def _close_tab(self, i: int) -> None:
        if i > 0:                                    # the main graph stays
            self.tabs.removeTab(i)

    @property
    def main_view(self) -> GraphView | None:
        return self.tabs.widget(0) if self.tabs.count() else None

    def set_main(self, view: GraphView, label: str) -> None:
        old = self.main_view
        if old is not None:                          # the replacement starts at the size it will have
            view.setGeometry(old.geometry())
        while self.tabs.count():
            w = self.tabs.widget(0)
            self.tabs.removeTab(0)
            w.deleteLater()
        self.tabs.addTab(view, label)
        self.tabs.setTabToolTip(0, label)
        self.tabs.tabBar().setTabButton(0, self.tabs.tabBar().ButtonPosition.RightSide, None)
        self.setCurrentWidget(self.tabs)


class MainWindow(QMainWindow):
    def __init__(self, settings: QSettings | None = None, convert: bool = True):
        super().__init__()
        gc_guard.install()              # collections on this thread only (see gc_guard)
        self.settings = settings or QSettings("layout-inspector", "layout-inspector")
        self.convert = convert
        self.doc = None
        self.job: LoadJob | None = None
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(1)
        if convert:
            loader_job.warm()           # a big model's layout and conversion run in the child: started now
        self.scenes: dict[str, GraphScene] = {}
        self.layers: Layers | None = None             # the open model's groups and which are open (both panes)
        self._layout_job = None                       # the last layers_job.LayOut started (kept while it runs)
        self._plan_job = None                         # the LayOut of a re-run's ONNX graph, before it is shown
        self._plan_waiting = None                     # (PlanChanged, graph, layout, live) waiting for that job
        self._plan_took = False                       # its result's metadata pass came meanwhile (_annotated)
        self.active = TFLITE
        self._syncing = False
        self._close_after_export = False    # a close waits for a big model's export (its report is written here)
        self._matches: list[tuple[str, str, object]] = []
        self._match_i = -1
        self._indexes: dict[str, find.Index] = {}    # pane -> the index of the graph it shows (search, moves)
        self._listed = ""                            # the search text the results dock lists
        self._query: find.Query | None = None        # what it was compiled to
        self.setWindowTitle("Layout Inspector")
        self.setAcceptDrops(True)
        self.resize(*WINDOW_SIZE)
        self.views = Views()                 # every view below redraws from the Session's events
        self._replacing = None               # (path, other) of a model read while the open one stays shown
        self._forget = None                  # the Session whose autosave the user discarded, once it is replaced
        # a person at the window: errors and questions are modal dialogs. Offscreen (tests, screenshots) errors go
        # to the status line and unsaved decisions are not asked about (nobody could answer)
        self.interactive = os.environ.get("QT_QPA_PLATFORM") != "offscreen"
        self.scheme = Scheme(self.settings, self)    # first: what is built next reads its colours
        self._build()
        self.views.subscribe(self._model_opened, ModelOpened)      # first: the panels after read self.doc
        self.views.subscribe(self._plan_changed, PlanChanged)
        self.views.subscribe(self._annotated, FindingsChecked)
        self.views.subscribe(self._exported, Exported)
        from .editing import Editor          # pins, metadata, undo, session files, export, validation
        self.editor = Editor(self)
        self.menus["edit"].addSeparator()
        self._action(self.menus["edit"], "Copy &name", self.copy_names, QKeySequence.Copy, pane_key=True)
        # after the editor's docks (tabbed earlier, Qt left a stale tab bar over Details)
        self.results = SearchResults()       # registered like any panel: listed in View, tabbed with Conflicts
        self.results.rowActivated.connect(self.search_goto)
        self.results.regexToggled.connect(lambda _: self._reset_search())
        self.results_dock = self.add_dock("Search results", self.results, Qt.RightDockWidgetArea,
                                          tab_with=self.conflicts_dock)
        self.conflicts_dock.raise_()
        self.results.show_rows([], HINT)
        self.default_layout = self.saveState(LAYOUT_VERSION)
        self._restore_layout()
        self.fit_screen()

    # ---- construction --------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.panes = {TFLITE: Pane("TFLite"), ONNX: Pane("ONNX")}
        self.panes[TFLITE].message("Open a model: File › Open (Ctrl+O), or drop a .tflite or .onnx file here.")
        self.splitter = QSplitter(Qt.Horizontal)
        self.splitter.addWidget(self.panes[TFLITE])
        self.splitter.addWidget(self.panes[ONNX])
        self.legend = Legend()
        central = QWidget()
        lay = QVBoxLayout(central)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.legend)
        lay.addWidget(self.splitter, 1)
        # the start page until a model is opened (no blank window on `layout-inspector gui`)
        self.start_page = StartPage()
        self.start_page.openRequested.connect(self.open_dialog)
        self.start_page.pathRequested.connect(self.user_open)
        self.start_page.set_recent(self.recent())
        self.workspace = central
        self.stack = QStackedWidget()
        self.stack.addWidget(self.start_page)
        self.stack.addWidget(central)
        self.setCentralWidget(self.stack)

        self.details = DetailsPanel()
        self.details.linkActivated.connect(self.follow_link)
        self.conflicts = ConflictsPanel()
        self.conflicts.conflictActivated.connect(self.jump_to_conflict)
        self.menus: dict[str, QMenu] = {}    # (built by _menus below)
        self.details_dock = self.add_dock("Details", self.details, Qt.RightDockWidgetArea)
        self.conflicts_dock = self.add_dock("Conflicts", self.conflicts, Qt.RightDockWidgetArea)
        self.splitDockWidget(self.details_dock, self.conflicts_dock, Qt.Vertical)

        self.progress = QProgressBar(maximumWidth=160, textVisible=False)
        self.progress.setRange(0, 0)
        self.cancel_button = QPushButton("Cancel", clicked=self.cancel)
        self.statusBar().addPermanentWidget(self.progress)
        self.statusBar().addPermanentWidget(self.cancel_button)
        self._busy(False)
        self._menus()

    # ---- the shell: what the editor and the panels register into (never found by text or position) ---------
    def menu(self, key: str) -> QMenu:
        """The menu named `key`: "file", "edit", "view", "search" or "help"."""
        return self.menus[key]

    def add_actions(self, key: str, actions) -> None:
        """Actions into a menu's section for them: the File menu's document actions (above Quit), at the end of
        any other."""
        for a in actions:
            if key == "file":
                self.menus[key].insertAction(self.file_end, a)
            else:
                self.menus[key].addAction(a)

    def add_bar(self, widget) -> None:
        """A bar above the legend and the graphs (the autosave banner)."""
        self.workspace.layout().insertWidget(0, widget)

    def add_dock(self, title: str, widget, area, tab_with: QDockWidget | None = None) -> QDockWidget:
        """A dock holding `widget`; once the menus exist, View lists it (the shell's own two are placed there by
        _menus)."""
        dock = QDockWidget(title, self)
        dock.setObjectName(title)
        dock.setWidget(widget)
        if area in (Qt.LeftDockWidgetArea, Qt.RightDockWidgetArea):
            dock.setMaximumWidth(DOCK_MAX_WIDTH)
        self.addDockWidget(area, dock)
        if tab_with is not None:
            self.tabifyDockWidget(tab_with, dock)
        if "view" in self.menus:
            self.menus["view"].addAction(dock.toggleViewAction())
        return dock

    def size_docks(self) -> None:
        """The side docks take at most a third of the window: the graph panes keep two thirds."""
        side = [d for d in self.findChildren(QDockWidget) if self.dockWidgetArea(d) == Qt.RightDockWidgetArea
                and not d.isHidden()]
        if side:
            self.resizeDocks(side[:1], [min(DOCK_WIDTH, self.width() * 2 // 7)], Qt.Horizontal)
        self.resizeDocks([self.details_dock, self.conflicts_dock], [600, 220], Qt.Vertical)

    def _restore_layout(self) -> None:
        geometry, state = self.settings.value("window/geometry"), self.settings.value("window/state")
        if geometry is not None:
            self.restoreGeometry(geometry)
        if state is None or not self.restoreState(state, LAYOUT_VERSION):
            self.size_docks()

    def fit_screen(self) -> None:
        """The window inside the screen's free area: at a 2x scale factor a 2560x1440 screen is 1280x720 logical
        pixels, and 1500x950 (or a geometry saved on a bigger screen) would open past its edges."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is None:
            return
        room, frame = screen.availableGeometry(), self.frameGeometry()
        framed = frame.height() > self.height()     # not before the first show: borders and a title bar, about
        dw, dh = (frame.width() - self.width(), frame.height() - self.height()) if framed else (8, 38)
        w, h = min(self.width(), room.width() - dw), min(self.height(), room.height() - dh)
        if (w, h) != (self.width(), self.height()):
            self.resize(max(w, 1), max(h, 1))
        x = max(room.left(), min(frame.left(), room.right() + 1 - self.width() - dw))
        y = max(room.top(), min(frame.top(), room.bottom() + 1 - self.height() - dh))
        if (x, y) != (frame.left(), frame.top()):
            self.move(x, y)

    def reset_layout(self) -> None:
        self.restoreState(self.default_layout, LAYOUT_VERSION)
        self.size_docks()

    def _action(self, menu, text, slot, shortcut=None, checkable=False, pane_key=False) -> QAction:
        """pane_key: a single-key shortcut, active only while a graph pane has focus (never eats typed text)."""
        a = QAction(text, self, checkable=checkable)
        if pane_key:
            a.setShortcutContext(Qt.WidgetWithChildrenShortcut)
            for pane in self.panes.values():
                pane.addAction(a)
        if isinstance(shortcut, list):       # the same key twice would make the shortcut ambiguous: dead
            keys = [k for k in dict.fromkeys(QKeySequence(k).toString() for k in shortcut) if k]   # "": unbound
            a.setShortcuts([QKeySequence(k) for k in keys])
        elif shortcut:
            a.setShortcut(QKeySequence(shortcut))
        a.triggered.connect(slot)
        menu.addAction(a)
        return a

    def _menus(self) -> None:
        m = self.menus["file"] = self.menuBar().addMenu("&File")
        self.open_action = self._action(m, "&Open…", self.open_dialog, QKeySequence.Open)
        self._action(m, "Open &Pair…", self.open_pair_dialog, "Ctrl+Shift+O")
        self.recent_menu = m.addMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        ex = m.addMenu("&Export")
        for text, whole, ext, key in (("Current view as PNG…", False, "png", "Ctrl+Alt+E"),
                                      ("Current view as SVG…", False, "svg", None),
                                      ("Whole graph as PNG…", True, "png", "Ctrl+Shift+E"),
                                      ("Whole graph as SVG…", True, "svg", None)):
            self._action(ex, text, lambda _=False, w=whole, e=ext: self.export_dialog(w, e), key)
        ex.addSeparator()
        self.export_dark = self._action(ex, "Dark palette in pictures", lambda on: self.settings.setValue(
            "export/dark", on), checkable=True)
        self.export_dark.setToolTip("PNG and SVG pictures in the dark palette (else light, whatever the window shows)")
        self.export_dark.setChecked(self.settings.value("export/dark", False, type=bool))
        self.file_end = m.addSeparator()     # the editor's document actions go above it (add_actions)
        # QKeySequence.Quit is empty on Windows' key scheme (offscreen uses it too): Ctrl+Q everywhere
        self._action(m, "&Quit", lambda: self.close(), [QKeySequence.Quit, "Ctrl+Q"])

        self.menus["edit"] = self.menuBar().addMenu("&Edit")     # filled by the editor
        v = self.menuBar().addMenu("&View")
        self.show_tflite = self._action(v, "TFLite graph", lambda on: self.panes[TFLITE].setVisible(on),
                                        "Ctrl+1", checkable=True)
        self.show_onnx = self._action(v, "ONNX graph", lambda on: self.panes[ONNX].setVisible(on),
                                      "Ctrl+2", checkable=True)
        self.show_tflite.setChecked(True)
        self.show_onnx.setChecked(True)
        v.addAction(self.details_dock.toggleViewAction())
        v.addAction(self.conflicts_dock.toggleViewAction())
        self.show_minimap = self._action(v, "Minimap", self._toggle_minimap, "M", checkable=True, pane_key=True)
        self.show_minimap.setChecked(True)
        self._action(v, "Reset Layout", self.reset_layout)
        v.addSeparator()
        self._action(v, "&Fit to window", lambda: self._view_do("fit"), "F", pane_key=True)
        self._action(v, "Zoom &in", lambda: self._view_do("in"), ["Ctrl+=", QKeySequence.ZoomIn])
        self._action(v, "Zoom &out", lambda: self._view_do("out"), ["Ctrl+-", QKeySequence.ZoomOut])
        self._action(v, "Actual size", lambda: self._view_do("1:1"), "Ctrl+0")
        v.addSeparator()
        self._action(v, "&Collapse Groups", lambda: self.fold_all(False))
        self._action(v, "&Expand All Groups", lambda: self.fold_all(True))
        v.addSeparator()
        self.scheme.add_to(v.addMenu("&Colour scheme"))
        self.scheme.changed.connect(lambda _: self.restyle())
        v.addSeparator()
        self.menus["view"] = v                        # docks added from now on are listed below

        tb = QToolBar("Search", objectName="search")
        self.addToolBar(tb)
        tb.addAction(self.open_action)
        tb.addSeparator()
        self.search_field = QLineEdit(placeholderText="Search op type, name or stride=2 …  (Ctrl+F)",
                                      clearButtonEnabled=True, minimumWidth=320, toolTip="Search: " + find.SYNTAX)
        self.search_field.returnPressed.connect(lambda: self.search_step(+1))
        self.search_field.textChanged.connect(lambda _: self._reset_search())
        # the results list follows the typing once it pauses (a letter on 10,000 ops matches thousands)
        self._list_later = QTimer(self, singleShot=True, interval=150, timeout=self._find)
        tb.addWidget(self.search_field)
        s = self.menus["search"] = self.menuBar().addMenu("&Search")
        self._action(s, "&Find…", self._focus_search, QKeySequence.Find)
        self.next_action = self._action(s, "Find &next", lambda: self.search_step(+1), QKeySequence.FindNext)
        self.prev_action = self._action(s, "Find &previous", lambda: self.search_step(-1),
                                        QKeySequence.FindPrevious)
        s.addSeparator()
        for key, direction in MOVES:       # window-wide: they also act after a click in the results list
            self._action(s, f"Go to {direction}", lambda _=False, d=direction: self.move_selection(d), key)
        h = self.menus["help"] = self.menuBar().addMenu("&Help")
        self._action(h, "&Keyboard shortcuts", self._shortcuts, QKeySequence.HelpContents)
        tb.addAction(self.prev_action)
        tb.addAction(self.next_action)
        self.search_status = QLabel("  ")
        tb.addWidget(self.search_status)

    def _shortcuts(self) -> None:
        rows = "".join(f"<tr><td style='padding-right:14px'><b>{html.escape(k)}</b></td><td>{html.escape(t)}</td></tr>"
                       for k, t in SHORTCUTS)
        box = QMessageBox(QMessageBox.Information, "Keyboard shortcuts", f"<table>{rows}</table>", parent=self)
        box.setTextFormat(Qt.RichText)
        box.exec()

    # ---- opening -------------------------------------------------------------------------------------------
    def open_folder(self) -> str:
        """Where Open starts: beside the model open now, else the folder last opened from, else the newest recent
        file's, else home; never the package's own folder (where the bundled sample lives)."""
        current = [str(Path(self.doc.path).parent)] if self.doc is not None else []
        last = self.settings.value("open/folder", "")
        return first_folder(current + [last] + [str(Path(p).parent) for p in self.recent()])

    def _opened_from(self, path: str) -> None:
        self.settings.setValue("open/folder", str(Path(path).resolve().parent))

    def ask_file(self, title: str, folder: str, filters: str) -> str:
        """A file chosen in an Open dialog, or "". The window is made active again after it: focus went back to
        the dialog, gone, and none of the window's shortcuts worked (Ctrl+R right after Open Pair did nothing)."""
        try:
            return QFileDialog.getOpenFileName(self, title, folder, filters)[0]
        finally:
            self.activateWindow()

    def open_dialog(self) -> None:
        path = self.ask_file("Open model", self.open_folder(), FILTERS)
        if path:
            self._opened_from(path)
            self.user_open(path)

    def open_pair_dialog(self) -> None:
        """A TFLite model, then an ONNX model made elsewhere to compare it with (inspector.core.pairing.pair)."""
        path = self.ask_file("Open pair: the TFLite model", self.open_folder(), "TFLite (*.tflite)")
        other = path and self.ask_file("Open pair: the ONNX model made elsewhere", str(Path(path).parent),
                                       "ONNX (*.onnx)")
        if path and other:
            self._opened_from(path)
            self.user_open(path, other)

    def user_open(self, path: str, other: str | None = None) -> None:
        """An open the user asked for (dialog, drop, recent, start page): unsaved decisions are asked about first."""
        if self.may_discard(f"opening {Path(path).name}"):
            self.open_path(path, other)

    def may_discard(self, doing: str) -> bool:
        """True when `doing` (quitting, opening another model) may drop the open model's decisions: none are
        unsaved, or the user saved them in a session file or chose to discard them. Cancel: False, nothing changes."""
        ed = self.editor
        if not ed.unsaved or not self.interactive:
            return True
        s = ed.session
        box = QMessageBox(QMessageBox.Warning, "Unsaved decisions",
                          f"{Path(s.path).name} has pins or metadata edits that are not saved.", parent=self)
        can_save = ed.save_action.isEnabled()         # a pair has no session file: its edits are exported
        box.setInformativeText((f"Save them in a session file beside the model before {doing}?" if can_save else
                                f"Export the ONNX model to keep them; {doing} discards them.")
                               + " Cancel keeps everything as it is.")
        save = box.addButton("Save session", QMessageBox.AcceptRole) if can_save else None
        discard = box.addButton("Discard", QMessageBox.DestructiveRole)
        cancel = box.addButton(QMessageBox.Cancel)
        box.setDefaultButton(save or cancel)
        box.setEscapeButton(cancel)
        box.exec()
        if save is not None and box.clickedButton() is save:
            return ed.save_session() is not None        # a failure is on screen: nothing is dropped
        if box.clickedButton() is discard:
            if doing == QUITTING:
                self._drop_autosave(s)
            else:
                self._forget = s                         # its autosave goes once another model replaces it
            return True
        return False

    def _drop_autosave(self, session) -> None:
        """This window's autosave of `session` (another window's stays: it may still be writing it)."""
        self.editor.flush()
        self.editor.autosave.discard(session)

    def open_path(self, path: str, other: str | None = None) -> None:
        """Open a model; with `other`, pair the TFLite model with that ONNX model instead of converting it.
        The model open stays shown until the new one has been read: a file that cannot be opened changes nothing."""
        path = os.fspath(path)
        for p in (path, other) if other else (path,):
            if not os.path.isfile(p):
                self.error("Cannot open model", f"{p}: no such file")
                return
        self.cancel()
        self._replacing = (path, os.fspath(other) if other else None)
        if self.doc is None and self.editor.session is None:     # nothing to keep: the panes say what goes on
            self._replace()
        from .pair_job import PairJob
        self.job = job = LoadJob(path, self.convert) if not other else PairJob(path, os.fspath(other))
        job.signals.stage.connect(lambda text: self.statusBar().showMessage(
            text if self._replacing is None else f"{Path(path).name}: {text}"))
        # queued results of a job cancelled meanwhile are dropped
        job.signals.tfliteReady.connect(lambda *a: job is self.job and self._tflite_ready(*a))
        job.signals.onnxReady.connect(lambda *a: job is self.job and self._onnx_ready(*a))
        job.signals.conversionFailed.connect(lambda *a: job is self.job and self._conversion_failed(*a))
        job.signals.failed.connect(lambda *a: job is self.job and self._failed(*a))
        job.signals.done.connect(lambda: self._job_done(job))
        for ready in (job.signals.tfliteReady, job.signals.onnxReady):     # only what opened goes to Recent
            ready.connect(lambda *a: job is self.job and self._add_recent(path))
        self._busy(True)
        self.pool.start(job)

    def _replace(self) -> None:
        """The model being opened has been read: the open one goes (every view forgets it, ModelOpened)."""
        path, other = self._replacing
        self._replacing = None
        gc_guard.release()                            # the previous model's objects may be garbage from now on
        self.stack.setCurrentWidget(self.workspace)
        self.doc = None
        self.scenes.clear()
        self.layers = None
        self.panes[TFLITE].message("Reading…")
        self.panes[ONNX].message("Converting…" if path.lower().endswith(".tflite") else "Reading…")
        forget, self._forget = self._forget, None
        if forget is not None and forget is self.editor.session:
            self._drop_autosave(forget)               # the user chose to discard those decisions
        self.editor.detach(path, other)               # every view forgets the previous model (ModelOpened)

    @property
    def idle(self) -> bool:
        """No job running and every scene fully built."""
        return self.job is None and self._layout_job is None and self._plan_job is None and \
            all(sc.complete for sc in self.scenes.values())

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()
            self.job = None
            self._busy(False)
            self.statusBar().showMessage("Cancelled", 3000)
            if self._replacing is not None:          # nothing of it was shown: the open model stays as it was
                self._replacing = self._forget = None     # (its autosave too, though the user said Discard)
                return
            for pane in self.panes.values():
                if pane.main_view is None or pane.currentWidget() is pane.placeholder:
                    pane.message("Cancelled.")
            if not self.scenes:                      # nothing of the model was shown: the title names none
                self.setWindowTitle("Layout Inspector")

    def _job_done(self, job) -> None:
        if job is self.job:
            self.job = None
            self._busy(False)

    def _busy(self, on: bool) -> None:
        self.progress.setVisible(on)
        self.cancel_button.setVisible(on)

    def _tflite_ready(self, doc, vg, layout) -> None:
        if self._replacing is not None:
            self._replace()
        self.doc = doc
        self.layers = doc.layers
        label = f"TFLite: {Path(doc.path).name} ({counted(len(doc.graph.main.ops), 'op')})"
        self._show(TFLITE, vg, layout, label)
        whole = self.layers.whole.get(TFLITE, vg) if self.layers is not None else vg
        self.panes[TFLITE].tabs.setTabToolTip(0, f"{label}\n{tflite_counts(doc.graph, whole)}")
        gc_guard.settle()                             # the graph just read lives as long as the model is open
        self.panes[ONNX].message("Converting to ONNX…")
        self.show_onnx.setChecked(True)
        self.panes[ONNX].setVisible(True)

    def _onnx_ready(self, doc, vg, layout) -> None:
        """The loader's conversion (or ONNX model, or pair): it becomes the Session every view shows."""
        if self._replacing is not None:
            self._replace()
        self.doc = doc
        self._adopt_layers(doc.layers)
        self.editor.attach(doc, vg, layout)
        gc_guard.settle()                             # what the model needs lives until the next open

    def show_result(self, session, result, notes, vg=None, layout=None, live=None):
        """Hand a conversion made in a worker to the Session, with the ONNX graph the worker laid out (`live`: the
        shown scene is updated in place, by this live_layout.Diff); the views redraw on its PlanChanged. Returns
        the Session's Change."""
        return session.show(result, notes, (vg, layout, live) if vg is not None else None)

    # ---- what the views do on the Session's events ---------------------------------------------------------
    def _model_opened(self, e: ModelOpened) -> None:
        """Another model: nothing of the previous one stays (its search matches, conflicts, details)."""
        # [*]: shown while the decisions are not saved (the editor follows its undo stack's clean state)
        pair = f" ↔ {Path(e.other).name}" if e.other else ""
        self.setWindowTitle(f"{Path(e.path).name}{pair}[*] — Layout Inspector")
        self.setWindowModified(False)
        self._plan_job = self._plan_waiting = None    # a re-run of the last model waiting for its layout
        self.search_field.clear()                     # the last model's search means nothing in this one
        self._reset_search()
        self.conflicts.set_document(None)
        self.conflicts_dock.setWindowTitle("Conflicts")
        self.refresh_details()

    def _plan_changed(self, e: PlanChanged) -> None:
        """A conversion of the current model, the first or a re-run: the ONNX pane (re-run: the same selection, by
        node/value name, and viewport), colours, conflicts, details and the status line follow it."""
        if e.view is not None:
            vg, layout, live = e.view
        else:                                         # converted on this thread (Session.convert): laid out here
            vg = graph_model.from_onnx(e.result.model)
            layout, live = None, None
        self._plan_shown(e, vg, layout, live)

    def _plan_shown(self, e: PlanChanged, vg, layout, live) -> None:
        """_plan_changed once the ONNX graph to be shown is laid out: a big one (groups opened while the re-run ran
        folded, or one group left closed) is laid out by a worker first. Meanwhile the pane keeps the graph shown
        and self.doc its conversion (clicks, Details and the Conflicts dock agree); a newer re-run replaces it."""
        s = self.views.session
        took, self._plan_waiting, self._plan_job, self._plan_took = self._plan_took, None, None, False
        if self._lay_out_first(e, vg, layout, live):
            self._plan_took = took
            return
        whole = vg
        if self.layers is not None and s.graph is not None and self.layers.recount(e.result, s.graph.main) \
                and self.layers.folds:          # a pin's conflicts: the TFLite pane's boxes count them too
            self._refold((TFLITE,))
        vg, layout, live = self._folded(ONNX, vg, layout, live)
        first = ONNX not in self.scenes
        keep, active, sizes = self._view_state(ONNX), self.active, self.splitter.sizes()
        only_onnx = s.graph is None
        self.doc = Document(s.path, graph=s.graph, result=None if only_onnx else e.result, model=e.result.model,
                            notes=list(s.notes), onnx_shapes=dict(vg.shapes))
        if took and s.result is not None and not only_onnx:   # its metadata pass came while it was laid out
            self.doc.took(s.result)
            self.doc.notes = list(s.notes)
        self._syncing = True                          # the re-selection below is not the user's
        other = s.other or (s.path if only_onnx else None)     # a file's own ONNX model: named
        nodes = counted(whole.op_count, 'node')     # a walk of every node: once
        label = f"ONNX{f': {Path(other).name}' if other else ''} ({nodes})"
        try:
            self._show(ONNX, vg, layout, label, live)
        finally:
            self._syncing = False
        self.panes[ONNX].tabs.setTabToolTip(0, f"{label}\n{other or 'The conversion'}: "
                                               f"{nodes} in its main graph")
        if first:
            self.panes[TFLITE].setVisible(not only_onnx)
            self.show_tflite.setChecked(not only_onnx)
            half = max(self.splitter.width() // 2, 100)
            self.splitter.setSizes([half, half])
        else:
            self.active = active
            self.splitter.setSizes(sizes)
            self._restore_view(ONNX, keep)
        self.conflicts.set_document(self.doc)
        self.conflicts_dock.setWindowTitle(f"Conflicts ({len(self.doc.conflicts())})")
        self.colour(TFLITE)                         # categories arrive with the conversion
        self._reset_search()                         # ONNX names may have changed
        self.refresh_details()
        edited = not s.converts                      # metadata edits only: the graph is the file's
        self.statusBar().showMessage(self._summary(e.change.transposes_after) if first else str(e.change)
                                     if not edited else f"Metadata edits applied to "
                                     f"{Path(s.other or s.path).name}; its graph is unchanged", 15000)

    def _lay_out_first(self, e: PlanChanged, vg, layout, live) -> bool:
        """Whether the ONNX graph as it is to be shown (folded by the open groups) needs a worker's layout first
        (then started: _plan_shown runs again once it is done)."""
        layers = self.layers
        if layers is None or ONNX not in self.scenes or (layout is not None and not layers.folds):
            return False
        shown = layers.fold_of(ONNX, vg).shown if layers.folds else vg
        if not layers_job.wanted(shown):
            return False
        self.statusBar().showMessage("Laying out…")
        self._plan_waiting = (e, vg, layout, live)
        job = self._plan_job = layers_job.LayOut([shown])
        job.signals.done.connect(lambda: self._plan_laid_out(job))
        self.pool.start(job)
        return True

    def _plan_laid_out(self, job) -> None:
        if job is not self._plan_job or self._plan_waiting is None:     # a newer re-run, another model, closed
            return
        self.statusBar().clearMessage()
        self._plan_shown(*self._plan_waiting)

    def _exported(self, e: Exported) -> None:
        s = self.views.session
        self.statusBar().showMessage(f"Exported {e.path}: {counted(s.result.transposes, 'Transpose')}, "
                                     f"{counted(len(s.pins), 'pin')}", 10000)

    def _view_state(self, which: str):
        view, scene = self.panes[which].main_view, self.scenes.get(which)
        if view is None or scene is None:
            return None
        centre = view.mapToScene(view.viewport().rect().center())
        return scene.selected_keys(), view.transform(), centre, view.auto

    def _restore_view(self, which: str, state) -> None:
        view, scene = self.panes[which].main_view, self.scenes.get(which)
        if state is None or view is None or scene is None:
            return
        (nodes, tensors), transform, centre, auto = state
        if not auto:                                 # the user's own zoom and place, not a fresh fit
            view.auto = False
            view.setTransform(transform)
            view.centerOn(centre)
            view.minimap.sync()
        if scene.selects(nodes, tensors):           # a re-run shown in place keeps the selection; select() would
            return                                  # wait for the scene's re-indexing
        if not scene.built:         # made afresh in slices: selected once made (select() makes it all in one turn)
            scene.completed.connect(lambda: self._reselect(which, scene, nodes, tensors, later=True),
                                    Qt.SingleShotConnection)
            return
        self._reselect(which, scene, nodes, tensors)

    def _reselect(self, which: str, scene, nodes, tensors, later: bool = False) -> None:
        """Select what was selected before a re-run; `later`: once its scene was made, unless the pane shows
        another scene or the user selected something meanwhile."""
        if later and (self.scenes.get(which) is not scene or scene.selectedItems()):
            return
        self._syncing = True
        try:
            scene.select(nodes, tensors)
        finally:
            self._syncing = False

    def _annotated(self, e) -> None:
        """A re-run's metadata pass came after its graph: the document takes the result that has it, its model and
        notes (Details shows the model's types)."""
        s = self.views.session
        waiting = self._plan_waiting
        if waiting is not None and waiting[0].result is e.shown:     # its graph is being laid out: taken once shown
            self._plan_took = True
        if self.doc is not None and s is not None and self.doc.result is e.shown and s.result is not None:
            self.doc.took(s.result)
            self.doc.notes = list(s.notes)
            self.refresh_details()

    def refresh_details(self) -> None:
        """Details of the current selection, from the current document (after a re-run, pin or undo)."""
        scene = self.scenes.get(self.active)
        if scene is None:
            self.details.clear()
            return
        self._show_details(self.active, *scene.selected_keys())

    def _summary(self, transposes: int) -> str:
        """The status line of a first conversion; `transposes`: its count, as the Session's Change has it (counting
        walks every ONNX node, and was done three times as a result was shown)."""
        d = self.doc
        if d.result is None:
            return f"{Path(d.path).name}: ONNX model, {counted(len(d.model.graph.node), 'node')}"
        return (f"{Path(d.path).name}: {counted(len(d.graph.main.ops), 'TFLite op')} → "
                f"{counted(len(d.model.graph.node), 'ONNX node')}, {counted(transposes, 'Transpose')}, "
                f"{counted(len(d.conflicts()), 'conflict')}")

    def _conversion_failed(self, message: str) -> None:
        self.panes[ONNX].message(f"Conversion failed:\n{message}")
        self.statusBar().showMessage(f"Conversion failed: {message.splitlines()[0]}", 10000)

    def _failed(self, message: str, details: str) -> None:
        self.statusBar().clearMessage()               # not "Reading model…" forever
        job = self.job
        files = [p for p in (getattr(job, "path", None), getattr(job, "other", None)) if p]
        path = next((p for p in files if message.startswith(p)), files[0] if files else "")   # a pair: which one
        headline = open_failure.plain(path, message)
        if details:                                   # a bug: the traceback follows the reader's words
            message = f"{message}\n\n{details}"
        if self._replacing is not None:               # nothing of it was shown: the open model stays as it was
            self._replacing = None
            self._forget = None
            self.error("Cannot open model", headline, message)
            return
        self.setWindowTitle("Layout Inspector")
        for pane in self.panes.values():
            if pane.main_view is None or pane.currentWidget() is pane.placeholder:
                pane.message("Could not open the model.")
        self.error("Cannot open model", headline, message)

    def error(self, title: str, message: str, details: str = "") -> None:
        box = QMessageBox(QMessageBox.Critical, title, message, QMessageBox.Ok, self)
        if details:
            box.setDetailedText(details)
        self.last_error = message if not details or details.startswith(message) else f"{message}\n{details}"
        if not self.interactive:                      # tests and screenshots: never block
            self.statusBar().showMessage(f"{title}: {message}")
            return
        box.exec()

    def _show(self, which: str, vg, layout, label: str, live=None) -> None:
        scene, view = self.scenes.get(which), self.panes[which].main_view
        if live and scene is not None and view is not None and view.scene() is scene:
            if live is True and (not scene.built or abs(len(vg.nodes) - len(scene.vg.nodes)) > REMADE_OVER
                                 or len(vg.nodes) >= layers_job.BIG):
                # made afresh in slices (no diff of a big graph in one turn), the old picture seen meanwhile
                scene.replace(vg, layout, keep=True)
            else:
                scene.apply(vg, layout, None if live is True else live)   # same items, same view: what changed
            self.panes[which].tabs.setTabText(0, label)
            view.minimap.invalidate(keep=True)
            self.colour(which)
            self._frame_groups(which)
            return
        scene = GraphScene(vg, layout)
        scene.selectionChanged.connect(lambda: self._selection_changed(which, scene))
        view = self._make_view(scene, which)
        scene.completed.connect(view.minimap.redraw)
        # its items (~85,000 objects on 10k ops, made after the model was frozen) live as long as it: scanning them
        # once the guard's wait for a burst ran out was a long collection during the conversion and the pin
        scene.completed.connect(gc_guard.settle)
        self.scenes[which] = scene
        view.groupToggled.connect(self.toggle_group)
        view.groupClosed.connect(lambda key: self.close_group(which, key))
        self.panes[which].set_main(view, label)
        self.colour(which)
        self._frame_groups(which)
        view.initial()

    # ---- layers ----------------------------------------------------------------------------------------------
    def _adopt_layers(self, layers: Layers | None) -> None:
        """The conversion's layers (with each group's ONNX nodes and conflicts): the groups the user opened or
        closed meanwhile stay so, and the TFLite pane's boxes get their badges."""
        before, self.layers = self.layers, layers
        if layers is None or before is None:
            return
        if before.open != layers.open:
            layers.open = {g for g in before.open if g in layers.tree.layers}
        if TFLITE in self.scenes and (before.folds or layers.folds):
            self._refold((TFLITE,))

    def _folded(self, which: str, vg, layout, live) -> tuple:
        """A pane's new whole graph as it is to be shown: folded when some group is closed (then laid out here,
        only its boxes; `live` True: the scene shown updates in place); laid out when no one did."""
        layers = self.layers
        if layers is not None:
            layers.set_whole(which, vg)
            if layers.folds:
                folded, layout = layers.laid_out(which)
                return folded.shown, layout, True if which in self.scenes else None
            if live is None and layout is None and which in self.scenes:   # laid out here or by _lay_out_first:
                live = True                                 # the scene shown (it may be folded) is updated in place
        return vg, layout if layout is not None else graph_layout.compute(vg), live

    def _frame_groups(self, which: str) -> None:
        """Each open group's frame around its nodes in the pane (its tab's − closes it), after the graph shown
        changed; in the next event-loop turn: on a big graph it is a walk of every node."""
        QTimer.singleShot(0, lambda: self._framed(which, self.scenes.get(which)))

    def _framed(self, which: str, scene) -> None:
        layers = self.layers
        if scene is None or self.scenes.get(which) is not scene or not shiboken6.isValid(scene):   # (closed)
            return
        if layers is None or which not in layers.whole or scene.vg.subgraph != 0:
            scene.set_frames(())
            return
        around = layers.frames(which, scene.vg, *scene.layout.boxes(scene.vg))
        scene.set_frames([(layer, QRectF(x0, y0, x1 - x0, y1 - y0)) for layer, (x0, y0, x1, y1) in around])

    def _refold(self, panes=(TFLITE, ONNX), initial: bool = False, then=None) -> None:
        """Show the panes as the open groups say (what the scenes keep stays, moved where the new layout puts it).
        A folded graph too big to lay out here is laid out by a worker first; then this runs again. `initial`: each
        pane then opens as a new model does (fitted, or readable at its top); `then`: what to do once the panes
        show it (select or scroll to a group), now or after the worker's layout."""
        layers = self.layers
        pending = self._layout_job
        if pending is not None:                 # a newer fold than the one being laid out: one job, for both
            panes = tuple(dict.fromkeys((*pending.panes, *panes)))
            initial, then = initial or pending.initial, then or pending.then
        panes = [w for w in panes if self.scenes.get(w) is not None and self.panes[w].main_view is not None
                 and w in layers.whole]
        folded = {w: layers.shown(w) for w in panes}
        big = [f.shown for f in folded.values() if layers_job.wanted(f.shown)]
        if big:
            self.statusBar().showMessage("Laying out…")
            job = self._layout_job = layers_job.LayOut(big, tuple(panes), initial, then)
            job.signals.done.connect(lambda: self._laid_out(job, layers))
            self.pool.start(job)
            return
        if pending is not None:                 # shown now: the job for an older fold has nothing left to show
            self._layout_job = None
            self.statusBar().clearMessage()
        for which in panes:
            scene, view = self.scenes[which], self.panes[which].main_view
            _, layout = layers.laid_out(which, folded[which])
            folded_w = folded[which]
            if abs(len(folded_w.shown.nodes) - len(scene.vg.nodes)) > REMADE_OVER:
                scene.replace(folded_w.shown, layout)   # made afresh in slices, not in one turn
            else:
                scene.apply(folded_w.shown, layout)     # what stays is kept (and moved), the selection too
            view.minimap.invalidate()
            self.colour(which)
            self._frame_groups(which)
            if initial:
                view.initial()
        if then is not None:
            then()

    def _laid_out(self, job, layers) -> None:
        """A LayOut ended: the panes are shown (laid out now: graph_layout's cache has them) if still wanted. One
        that a newer fold replaced does nothing: the newer job shows its panes too (it ran twice before)."""
        if job is not self._layout_job:
            return
        self._layout_job = None
        self.statusBar().clearMessage()
        if self.layers is layers:
            self._refold(job.panes, job.initial, job.then)

    def folds(self, which: str) -> bool:
        """The pane shows a folded graph (some group closed): re-runs lay out its whole graph here, not there."""
        return self.layers is not None and self.layers.folds and which in self.layers.whole

    def fold_all(self, expand: bool) -> None:
        """Every group open, or closed down to the readable overview a big model opens with (both panes)."""
        if self.layers is None:
            return
        tree = self.layers.tree
        self.layers.open = opened_at(tree, max(tree.layers[g].depth for g in tree.layers) if expand else
                                     tree.default_depth)
        self._refold(initial=True)

    def toggle_group(self, layer_id: str) -> None:
        """Open a closed group (or close an open one) in both panes; an opened one's top is brought into view."""
        if self.layers is None or not self.layers.toggle(layer_id):
            return
        if layer_id in self.layers.open:
            self._refold(then=lambda: self._bring_into_view(layer_id))
        else:
            self._refold()

    def _bring_into_view(self, layer_id: str) -> None:
        if self.layers is None or layer_id not in self.layers.open:      # closed again meanwhile
            return
        layer = self.layers.tree.layers[layer_id]
        for which, keys in ((TFLITE, [("op", op) for op in layer.ops]), (ONNX, layer.nodes)):
            scene, view = self.scenes.get(which), self.panes[which].main_view
            if scene is None or view is None:
                continue
            at = scene.vg.index()                   # where the layout puts them (items may still be on their way)
            places = [scene.layout.pos[i] for i in map(at.get, keys[:200]) if i is not None]
            if not places:
                continue
            xs, ys = [p[0] for p in places], [p[1] for p in places]
            rect = QRectF(min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)).adjusted(-90, -40, 90, 40)
            seen = view.mapToScene(view.viewport().rect()).boundingRect()
            if not seen.contains(rect):         # as much of it as fits, from its top
                view.auto = False
                view.centerOn(rect.center().x(), min(rect.center().y(), rect.top() + seen.height() / 2 - 20))
                view.minimap.sync()

    def close_group(self, which: str, key) -> None:
        """Close the group holding this node (a group's box: the group around it) in both panes; its box selected."""
        if self.layers is None:
            return
        group = self.layers.group_of(which, key)
        if not group:
            self.statusBar().showMessage("Not inside a group", 3000)
            return
        self.layers.close(group)
        self._refold(then=lambda: self.select(which, nodes=[group_key(group)]))

    def _reveal(self, which: str, nodes, tensors=()) -> None:
        """Open the groups that hide these nodes (or the producers of tensors no edge shows), in both panes."""
        if self.layers is None or not self.layers.folds or which not in self.scenes:
            return
        scene = self.scenes[which]
        shown = {e.tensor for e in scene.vg.edges} if tensors else set()
        hidden = [t for t in tensors if t not in shown]
        if self.layers.reveal(which, nodes, hidden):
            self._refold()

    def _make_view(self, scene, which: str) -> GraphView:
        view = GraphView(scene)
        scene.setParent(view)                        # the scene dies with its view
        view.setAcceptDrops(False)
        view.viewport().setAcceptDrops(False)
        view.viewport().installEventFilter(self)
        view.setProperty("pane", which)
        view.nodeActivated.connect(lambda item: self._open_subgraphs(which, item))
        view.minimap.enabled = self.show_minimap.isChecked()
        return view

    def eventFilter(self, obj, event):
        if event.type() == QEvent.MouseButtonPress:
            view = obj.parent()
            if isinstance(view, GraphView) and view.property("pane"):
                self.active = view.property("pane")
        return super().eventFilter(obj, event)

    # ---- colours -------------------------------------------------------------------------------------------
    def colour(self, which: str) -> None:
        """Paint a pane in the document's categories, markers and pins (also what clears the validation overlay)."""
        d, scene = self.doc, self.scenes.get(which)
        if d is None or scene is None:
            return
        if which == TFLITE:
            changed = scene.colour(d.tflite_categories(), d.tflite_markers(), d.tflite_edge_conflicts())
            if d.graph is not None:
                scene.mark_pins(pinned(d.graph.main, self.views.session.pins if self.views.session else {}))
        else:
            changed = scene.colour(d.onnx_categories(), d.onnx_markers(), {})
        view = self.panes[which].main_view
        if changed and view is not None:
            view.minimap.invalidate()

    def restyle(self) -> None:
        """The colour scheme switched: every pane (subgraph tabs too), its minimap, the legend."""
        for pane in self.panes.values():
            for i in range(pane.tabs.count()):
                view = pane.tabs.widget(i)
                if view.scene() is not None:
                    view.scene().restyle()
                view.minimap.invalidate()
        self.legend.restyle()
        self.details.restyle()
        self.editor.validation.restyle()
        self.refresh_details()                  # its text carries the scheme's colours (muted notes, links)

    # ---- views ---------------------------------------------------------------------------------------------
    def view(self, which: str | None = None) -> GraphView | None:
        pane = self.panes[which or self.active]
        v = pane.tabs.currentWidget() if pane.tabs.count() else None
        if v is None or not pane.isVisible():
            other = self.panes[ONNX if (which or self.active) == TFLITE else TFLITE]
            v = other.tabs.currentWidget() if other.tabs.count() else None
        return v

    def _view_do(self, what: str) -> None:
        v = self.view()
        if v is None:
            return
        if what == "fit":
            v.fit()
        elif what == "1:1":
            v.resetTransform()
            v.zoomChanged.emit()
            v.minimap.sync()
        else:
            v.zoom(1.25 if what == "in" else 0.8)

    def _toggle_minimap(self, on: bool) -> None:
        for pane in self.panes.values():
            for i in range(pane.tabs.count()):
                pane.tabs.widget(i).minimap.enabled = on
                pane.tabs.widget(i).minimap.sync()

    def _open_subgraphs(self, which: str, item) -> None:
        """Double-click on WHILE/IF (TFLite) or Loop/If (ONNX): their bodies open as tabs in the same pane."""
        if not item.node.subgraphs or self.doc is None:
            return
        for label, build, subgraph in self._bodies(which, item):
            tabs = self.panes[which].tabs
            existing = [i for i in range(tabs.count()) if tabs.tabText(i) == label]
            if existing:
                tabs.setCurrentIndex(existing[0])
                continue
            vg = build()
            scene = GraphScene(vg, graph_layout.compute(vg))
            if which == TFLITE:
                scene.selectionChanged.connect(lambda s=scene, g=subgraph: self._subgraph_selected(s, g))
            view = self._make_view(scene, which)
            i = tabs.addTab(view, label)
            tabs.setTabToolTip(i, label)
            tabs.setCurrentIndex(i)
            view.initial()

    def _bodies(self, which: str, item):
        if which == TFLITE:
            for sgi in item.node.subgraphs:
                if 0 < sgi < len(self.doc.graph.subgraphs):
                    name = self.doc.graph.subgraphs[sgi].name or "(unnamed)"
                    yield (f"subgraph {sgi}: {name}",
                           lambda sgi=sgi: graph_model.from_tflite(self.doc.graph, sgi), sgi)
            return
        node = self.doc.onnx_nodes().get(item.node.key)
        if node is None:                          # a node inside a body: nested bodies are not tracked
            return
        for a in node.attribute:
            graphs = [a.g] if a.name in item.node.subgraphs and a.HasField("g") else list(a.graphs)
            for k, g in enumerate(graphs):
                suffix = f"[{k}]" if len(graphs) > 1 else ""
                yield (f"{item.node.key}.{a.name}{suffix}", lambda g=g: graph_model.from_onnx(None, graph=g), None)

    def _subgraph_selected(self, scene, subgraph: int) -> None:
        if not shiboken6.isValid(scene):
            return
        nodes, tensors = scene.selected_keys()
        self._show_details(TFLITE, nodes, tensors, subgraph)

    # ---- selection -----------------------------------------------------------------------------------------
    def _selection_changed(self, which: str, scene) -> None:
        if self._syncing or not shiboken6.isValid(scene) or self.scenes.get(which) is not scene:
            return
        self.active = which
        nodes, tensors = scene.selected_keys()
        self._show_details(which, nodes, tensors)
        other = ONNX if which == TFLITE else TFLITE
        if other not in self.scenes or self.doc is None:
            return
        mapped = self.doc.to_onnx(nodes, tensors) if which == TFLITE else self.doc.to_tflite(nodes, tensors)
        self._syncing = True
        try:
            self._reveal(other, *mapped)
            rect = self.scenes[other].select(*mapped)
        finally:
            self._syncing = False
        view = self.panes[other].main_view
        if view is not None and not rect.isEmpty():
            self.panes[other].tabs.setCurrentIndex(0)
            view.reveal(rect)

    def select(self, which: str, nodes=(), tensors=(), reveal: bool = True) -> None:
        """Select in one pane (the other follows through the trace) and centre on it."""
        scene = self.scenes.get(which)
        if scene is None:
            return
        self.panes[which].tabs.setCurrentIndex(0)
        self._reveal(which, nodes, tensors)
        rect = scene.select(list(nodes), list(tensors))
        if reveal and self.panes[which].main_view is not None:
            self.panes[which].main_view.reveal(rect)

    def _show_details(self, which: str, nodes, tensors, subgraph: int = 0) -> None:
        d = self.doc
        if d is None or not (nodes or tensors):
            self.details.clear()
            return
        if nodes and is_group(nodes[0]):
            layer = self.layers.tree.layers.get(nodes[0][1]) if self.layers is not None else None
            self.details.show_group(layer) if layer is not None else self.details.clear()
            return
        if which == TFLITE:
            key = nodes[0] if nodes else None
            if key is not None and key[0] == "op":
                self.details.show_tflite_op(d, key[1], subgraph)
            else:
                self.details.show_tflite_tensor(d, key[1] if key is not None else tensors[0], subgraph)
        else:
            key = nodes[0] if nodes else None
            if key is not None and not isinstance(key, tuple):
                self.details.show_onnx_node(d, key)
            else:
                self.details.show_onnx_value(d, key[1] if key is not None else tensors[0])

    def follow_link(self, href: str) -> None:
        kind, _, raw = href.partition(":")
        key = unquote(raw)
        for scene in self.scenes.values():
            scene.finish()
        if kind == "tfl-op":
            self.select(TFLITE, nodes=[("op", int(key))])
        elif kind == "tfl-tensor":
            t = int(key)
            if t in self.scenes[TFLITE].edges_by_tensor:
                self.select(TFLITE, tensors=[t])
            else:                                    # a folded constant: details only
                self.details.show_tflite_tensor(self.doc, t)
        elif kind == "onnx-node":
            self.select(ONNX, nodes=[key])
        elif kind == "onnx-value":
            if ONNX in self.scenes and key in self.scenes[ONNX].edges_by_tensor:
                self.select(ONNX, tensors=[key])
            else:
                self.details.show_onnx_value(self.doc, key)

    def jump_to_conflict(self, c, node: str = "") -> None:
        """Select the conflict's tensor and consumer on the TFLite side and its inserted Transpose on the ONNX side."""
        if c is None or TFLITE not in self.scenes:
            return
        node = node or c.node
        nodes = [("op", c.op)] if c.op is not None else [("out", c.tensor)]
        self._syncing = True
        try:
            self.select(TFLITE, nodes, [c.tensor])
            if node:
                self.select(ONNX, [node])
        finally:
            self._syncing = False
        if node and ONNX in self.scenes:
            self.details.show_onnx_node(self.doc, node)
        else:
            self._show_details(TFLITE, nodes, [c.tensor])

    # ---- search --------------------------------------------------------------------------------------------
    def _focus_search(self) -> None:
        self.search_field.setFocus()
        self.search_field.selectAll()

    def _reset_search(self) -> None:
        """The matches are stale (other text, another model, a re-run): listed again once the typing pauses."""
        self._matches, self._match_i = [], -1
        self._indexes.clear()
        self.search_status.setText("  ")
        self._list_later.start()

    def _index(self, which: str) -> find.Index | None:
        scene = self.scenes.get(which)
        if scene is None:
            return None
        ix = self._indexes.get(which)
        vg = self.layers.whole.get(which, scene.vg) if self.layers is not None else scene.vg    # hidden ones too
        if ix is None or ix.vg is not vg:
            ix = self._indexes[which] = find.Index(vg)
        return ix

    def search(self, text: str) -> list[tuple[str, str, object]]:
        """(pane, "node"|"tensor", key) for every node whose type, names or attributes, or tensor whose name,
        matches text (find.Query: contains it, `name=value` asks about attributes, or a regular expression when the
        results dock says so; a bad one raises re.error)."""
        self._query = query = find.pattern(text, self.results.regex.isChecked())
        if query is None:
            return []
        return [(which, kind, key) for which in (TFLITE, ONNX) if (ix := self._index(which)) is not None
                for kind, key in ix.matches(query)]

    def _find(self) -> bool:
        """Fill the matches of the search field's text (and the results dock) if not yet done; False when there
        are none or the regular expression is bad (the dock and the status say so)."""
        if self._matches:
            return True
        self._list_later.stop()
        text = self.search_field.text()
        try:
            self._matches = self.search(text)
        except re.error as e:
            self.results.show_error(f"Not a regular expression: {e}")
            self.search_status.setText("  bad regular expression  ")
            return False
        if not text.strip():
            self.results.show_rows([], HINT)
            self.search_status.setText("  ")
            return False
        self._match_i = -1
        d = self.doc
        cats = {TFLITE: d.tflite_categories() if d else {}, ONNX: d.onnx_categories() if d else {}}
        rows = [(*self._indexes[w].row(kind, key, cats[w]), self.panes[w].title,
                 self._indexes[w].attributes(kind, key, self._query)) for w, kind, key in self._matches]
        self.results.show_rows(rows, f"{counted(len(rows), 'match', 'matches')} of “{text.strip()}”")
        if text != self._listed:                        # a new search shows its list (a re-run's relisting
            self.results_dock.raise_()                  # leaves Conflicts on top)
        self._listed = text
        if not rows:
            self.search_status.setText("  no match  ")
        return bool(rows)

    def search_step(self, step: int) -> None:
        if not self._find():
            return
        self.search_goto((self._match_i + step) % len(self._matches) if self._match_i >= 0 or step > 0
                         else len(self._matches) - 1)

    def search_goto(self, i: int) -> None:
        """Select the i-th match (a row of the results dock clicked, or F3) and centre it in both panes."""
        if not 0 <= i < len(self._matches):
            return
        self._match_i = i
        which, kind, key = self._matches[i]
        self.search_status.setText(f"  {i + 1} of {len(self._matches)}  ")
        self.results.set_current(i)
        if kind == "node":
            self.select(which, nodes=[key])
        else:
            self.select(which, tensors=[key])

    def copy_names(self) -> None:
        """Ctrl+C in a pane: the selected nodes' or tensors' whole names (boxes and labels show them elided)."""
        scene = self.scenes.get(self.active)
        if scene is None:
            return
        # from the selected items themselves: the key index may still be catching up with a scene being updated
        names = [it.node.name for it in scene.selectedItems() if isinstance(it, NodeItem)]
        _, tensors = scene.selected_keys()
        names += [str(scene.vg.tensor_names.get(t, t)) for t in tensors]
        if names:
            QGuiApplication.clipboard().setText("\n".join(names))
            self.statusBar().showMessage(f"Copied {counted(len(names), 'name')}", 3000)

    def move_selection(self, direction: str) -> None:
        """Alt+arrows: the selection moves along an edge of the pane it was made in; the other pane follows."""
        which = self.active
        scene, ix = self.scenes.get(which), self._index(which)
        if scene is None or ix is None:
            return
        nodes, tensors = scene.selected_keys()
        if not (nodes or tensors):
            self.statusBar().showMessage("Select a node first, then Alt+arrows move along its edges", 4000)
            return
        key = ix.step(direction, nodes[0] if nodes else None, tensors[0] if tensors else None)
        if key is None:
            self.statusBar().showMessage(f"No {direction} to go to", 3000)
            return
        self.select(which, nodes=[key])

    # ---- export --------------------------------------------------------------------------------------------
    def export_dialog(self, whole: bool, ext: str) -> None:
        v = self.view()
        if v is None:
            return
        stem = Path(self.doc.path).stem if self.doc else "graph"
        path, _ = QFileDialog.getSaveFileName(self, "Export", f"{stem}-{self.active}.{ext}", f"{ext.upper()} (*.{ext})")
        if path:
            try:
                export.export(v, path, whole, DARK if self.export_dark.isChecked() else LIGHT)
                self.statusBar().showMessage(f"Wrote {path}", 5000)
            except OSError as e:
                self.error("Export failed", str(e))

    # ---- recent files and drag and drop --------------------------------------------------------------------
    def recent(self) -> list[str]:
        value = self.settings.value("recent", [])
        return [value] if isinstance(value, str) else list(value or [])

    def _add_recent(self, path: str) -> None:
        path = str(Path(path).resolve())
        files = [path] + [p for p in self.recent() if p != path]
        self.settings.setValue("recent", files[:MAX_RECENT])

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for p in self.recent():
            self.recent_menu.addAction(p, lambda p=p: self.user_open(p))
        if self.recent_menu.isEmpty():
            self.recent_menu.addAction("(none)").setEnabled(False)

    def dragEnterEvent(self, event):
        if any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event):
        files = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if files:
            event.acceptProposedAction()
            self.user_open(files[0])

    def closeEvent(self, event):
        if not self._close_after_export and not self.may_discard(QUITTING):
            event.ignore()                              # Cancel: the window and its decisions stay
            return
        job = self.editor.export_job
        if job is not None and not self._close_after_export:     # a second close does not wait
            self._close_after_export = True
            event.ignore()
            self.statusBar().showMessage("Closing once the export is written (close again to close now)…")
            job.signals.done.connect(self._exported_then_close)   # after export_in_child's own: the report first
            return
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState(LAYOUT_VERSION))
        self.cancel()
        self._layout_job = None                 # a fold's layout still running shows nothing in a closed window
        self._plan_job = self._plan_waiting = None      # nor a re-run's
        self.editor.close()
        super().closeEvent(event)

    def _exported_then_close(self, error: str) -> None:
        if not self._close_after_export:
            return
        if error:                       # the failure is on screen: the window stays for it
            self._close_after_export = False
            return
        self.close()
