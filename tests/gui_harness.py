"""Real-input scenarios on the real window: each job of the window done as a person does it, with mouse clicks and
key presses delivered to the window system's side of Qt (QTest on the widgets' QWindow: popups, shortcuts, focus and
context menus behave as with a real mouse), never by calling a slot or emitting a signal.

A scenario runs in a process of its own (a crash kills only it: the test sees exit code -11 and says which step
was under way). In it, `sys.excepthook` and a Qt message handler record every Python exception and Qt warning;
after each step `check()` reads the window (panes, docks, title) and compares it with the document.

    python -m tests.gui_harness SCENARIO --corpus ../shared/corpus      # one scenario; exit 0 when it passed
    python -m tests.gui_harness --list

tests/test_gui_real.py runs every scenario; tests/gui_monkey.py strings the same actions together at random.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Qt's messages that say nothing about the window (the offscreen plugin's missing features)
IGNORED_QT = ("This plugin does not support", "QFont::setPointSize", "Populating font family aliases",
              "QStandardPaths: ", "XDG_RUNTIME_DIR",
              "org.freedesktop.portal.Desktop was not provided")    # tests/desktop_bus.py runs no portal service
SCENARIOS: dict = {}
TIMEOUT = 600           # s a scenario's process may take


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


class Failed(AssertionError):
    pass


class Harness:
    """The real MainWindow in this process, and the real-input actions of a person on it."""

    def __init__(self, tmp: Path, corpus: Path | None = None, recent: list[str] | None = None):
        from PySide6.QtCore import QSettings, QStandardPaths, qInstallMessageHandler

        from inspector.gui.app import application
        from inspector.gui.autosave import Autosave
        from inspector.gui.main_window import MainWindow
        self.problems: list[str] = []
        self.delivering = False             # an input is being delivered (see _deliver)
        self.watched = 0                    # widgets watched so far (each one's key)
        self.deferred = None                # the keys of widgets a deleteLater deleted (_deferred_deletes)
        self.step_name = "start"
        sys.excepthook = self._exception
        qInstallMessageHandler(self._qt_message)
        self.app = application()
        QStandardPaths.setTestModeEnabled(True)
        self.tmp, self.corpus = Path(tmp), corpus
        self.timers: list = []
        settings = QSettings(str(self.tmp / "settings.ini"), QSettings.IniFormat)
        if recent:
            settings.setValue("recent", [self.model(r) for r in recent])
        w = self.w = MainWindow(settings)
        # on a desktop (xcb) the window asks and shows errors by itself; offscreen it must be told to
        self.expect(w.interactive or os.environ.get("QT_QPA_PLATFORM") == "offscreen",
                    "the window on a desktop does not ask before losing work")
        w.interactive = True                # errors and questions as a person sees them: modal dialogs
        w.editor.autosave = Autosave(self.tmp / "autosave")
        w.resize(1400, 900)
        w.show()
        self.wait_until(lambda: w.windowHandle() is not None and w.windowHandle().isExposed(), "the window shows")
        w.activateWindow()
        self.pump(0.2)
        self.closed = False

    # ---- what went wrong -----------------------------------------------------------------------------------
    def _exception(self, kind, exc, tb) -> None:
        text = "".join(traceback.format_exception(kind, exc, tb))
        self.problems.append(f"Python exception during {self.step_name}:\n{text}")
        print(text, file=sys.stderr, flush=True)

    def _qt_message(self, mode, context, message) -> None:
        from PySide6.QtCore import QtMsgType
        if mode in (QtMsgType.QtDebugMsg, QtMsgType.QtInfoMsg) or any(s in message for s in IGNORED_QT):
            return
        self.problems.append(f"Qt {mode.name} during {self.step_name}: {message}")
        print(f"Qt: {message}", file=sys.stderr, flush=True)

    def step(self, name: str) -> None:
        """Names what follows (printed at once: a crash's output ends with the step it died in)."""
        self.step_name = name
        print(f"step: {name}", flush=True)

    def expect(self, ok: bool, text: str) -> None:
        if not ok:
            self.problems.append(f"{self.step_name}: {text}")

    # ---- time ----------------------------------------------------------------------------------------------
    def pump(self, seconds: float = 0.05) -> None:
        end = time.monotonic() + seconds
        while True:
            self.app.processEvents()
            if time.monotonic() >= end:
                return
            time.sleep(0.005)

    def wait_until(self, cond, what: str, timeout: float = 180.0) -> bool:
        end = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > end:
                self.problems.append(f"{self.step_name}: timed out waiting until {what}")
                return False
            self.pump(0.02)
        return True

    def settle(self, timeout: float = 180.0) -> None:
        """Until the window has nothing under way: loads, re-runs, the Metadata dock's rebuild, export, validation."""
        w = self.w
        self.wait_until(lambda: self.closed or (w.idle and w.editor.idle and not w.editor.exporting
                                                and not w.editor.validation.running), "the window is idle", timeout)
        self.pump(0.1)

    # ---- real input ----------------------------------------------------------------------------------------
    def _deliver(self, send) -> None:
        """Deliver one input (`send()`) with every widget of the docks and the bar above the graphs watched: one
        destroyed before `send` returns, other than by a deleteLater (QTest's delivery runs the event loop once),
        was deleted inside a signal of the input's own chain (a panel that rebuilt itself at once instead of on the
        next event-loop turn), which is how issue 36's crashes happened."""
        from PySide6.QtWidgets import QDockWidget, QWidget
        w = self.w
        if self.deferred is None:
            self.deferred = _deferred_deletes()     # (Qt is imported inside the window's process only)
            self.app.installEventFilter(self.deferred)
        roots = [d.widget() for d in w.findChildren(QDockWidget)] + [w.editor.banner]
        for root in roots:
            for widget in [root] + root.findChildren(QWidget):
                if not widget.property("watched"):
                    self.watched += 1
                    widget.setProperty("watched", self.watched)
                    widget.destroyed.connect(lambda _=None, n=type(widget).__name__, k=self.watched:
                                             self._destroyed(n, k))
        self.delivering = True
        try:
            send()
        finally:
            self.delivering = False

    def _destroyed(self, name: str, key: int) -> None:
        if self.delivering and key not in self.deferred.keys:
            self.problems.append(f"{self.step_name}: a {name} of the window was deleted inside the input's own "
                                 "signal chain (deleted at once, not with deleteLater or on the next turn)")

    @staticmethod
    def _window(widget, pos=None):
        from PySide6.QtCore import QPoint
        pos = widget.rect().center() if pos is None else QPoint(int(pos.x()), int(pos.y()))
        top = widget.window()
        return top.windowHandle(), widget.mapTo(top, pos)

    def click(self, widget, pos=None, button=None, modifiers=None, double: bool = False) -> None:
        """A mouse click on `widget` (at `pos`, its coordinates). On a window it goes through the window system's
        side of Qt (context menus, popups closing, focus); inside a popup (drop-down, menu), to the widget."""
        from PySide6.QtCore import QPoint, Qt
        from PySide6.QtTest import QTest
        button = Qt.LeftButton if button is None else button
        modifiers = Qt.NoModifier if modifiers is None else modifiers
        pos = widget.rect().center() if pos is None else QPoint(int(pos.x()), int(pos.y()))
        if _in_popup(widget):
            QTest.mouseMove(widget, pos)
            self.pump(0.01)
            self._deliver(lambda: (QTest.mouseDClick if double else QTest.mouseClick)(widget, button, modifiers,
                                                                                     pos))
        else:
            self._scroll_to(widget)
            handle, at = self._window(widget, pos)
            assert handle is not None, f"{widget} is not on screen"
            hit = widget.window().childAt(at)
            assert hit is not None and (hit is widget or widget.isAncestorOf(hit)), \
                (f"{type(widget).__name__} {widget.toolTip()[:40]!r} is covered at {at} by {type(hit).__name__} "
                 f"(window {widget.window().size()}, visible {widget.isVisible()})")
            QTest.mouseMove(handle, at)
            self.pump(0.01)
            self._deliver(lambda: (QTest.mouseDClick if double else QTest.mouseClick)(handle, button, modifiers, at))
        self.pump(0.05)

    @staticmethod
    def _scroll_to(widget) -> None:
        """Scroll a widget inside a scroll area into view, as a person does before clicking it."""
        from PySide6.QtWidgets import QScrollArea
        parent = widget.parentWidget()
        while parent is not None:
            if isinstance(parent, QScrollArea) and parent.widget() is not None and \
                    parent.widget().isAncestorOf(widget):
                parent.ensureWidgetVisible(widget)
            parent = parent.parentWidget()

    def move(self, widget, pos=None) -> None:
        from PySide6.QtCore import QPoint
        from PySide6.QtTest import QTest
        pos = widget.rect().center() if pos is None else QPoint(int(pos.x()), int(pos.y()))
        if _in_popup(widget):
            QTest.mouseMove(widget, pos)
        else:
            QTest.mouseMove(*self._window(widget, pos))
        self.pump(0.05)

    def key(self, sequence: str, widget=None) -> None:
        """A key or shortcut ("Ctrl+Q") typed into the focused window (or `widget`'s)."""
        from PySide6.QtGui import QGuiApplication, QKeySequence
        from PySide6.QtTest import QTest
        from PySide6.QtWidgets import QApplication
        combo = QKeySequence(sequence)[0]
        if widget is None:
            widget = QApplication.activePopupWidget() or QApplication.activeModalWidget()
        if widget is None and QGuiApplication.focusWindow() is not self.w.windowHandle():
            self.w.activateWindow()         # back from a dialog: the window has the keyboard again
            self.pump(0.05)
        handle = widget.window().windowHandle() if widget is not None else self.w.windowHandle()
        self._deliver(lambda: QTest.keyClick(handle, combo.key(), combo.keyboardModifiers()))
        self.pump(0.05)

    def dismiss(self, menu, right_click: bool = True) -> None:
        """Close a menu with Escape, as a person changing their mind. A context menu's right-click release went to
        the menu: QTest then owes the window that release (without it the next right-click opened no menu, which
        xdotool's real clicks on Xvfb do)."""
        from PySide6.QtCore import QPoint, Qt
        from PySide6.QtTest import QTest
        self.key("Escape", menu)
        if right_click:
            QTest.mouseRelease(self.w.windowHandle(), Qt.RightButton, Qt.NoModifier, QPoint(2, 2))
        self.pump(0.05)

    def type(self, text: str, widget) -> None:
        """Typed into `widget`, which has the keyboard (QTest types into a QWindow only key by key)."""
        from PySide6.QtTest import QTest
        self._deliver(lambda: QTest.keyClicks(widget, text))
        self.pump(0.05)

    def choose(self, combo, text: str) -> None:
        """Open a drop-down with a click and click the item `text` in its popup."""
        import shiboken6
        from PySide6.QtWidgets import QApplication, QStyle, QStyleOptionComboBox
        opt = QStyleOptionComboBox()
        combo.initStyleOption(opt)
        arrow = combo.style().subControlRect(QStyle.CC_ComboBox, opt, QStyle.SC_ComboBoxArrow, combo)
        self.click(combo, arrow.center() if combo.isEditable() else None)     # an editable one's text field: typing
        view = combo.view()
        if not self.wait_until(lambda: view.isVisible(), f"the drop-down of {combo.toolTip()[:40]!r} opens", 10):
            return
        row = next((i for i in range(combo.count()) if combo.itemText(i) == text), None)
        assert row is not None, f"{text!r} not in the drop-down ({[combo.itemText(i) for i in range(combo.count())]})"
        index = view.model().index(row, 0)
        view.scrollTo(index)
        self.pump(0.02)
        at = view.visualRect(index).center()
        self.move(view.viewport(), at)
        # a release within the double-click interval of the popup showing is taken as the opening click's
        self.pump(QApplication.doubleClickInterval() / 1000 + 0.05)
        self.click(view.viewport(), at)
        # (the combo itself may be gone by now: a rebuild replaced it)
        self.wait_until(lambda: not shiboken6.isValid(view) or not view.isVisible(), "the drop-down closes", 10)

    def menu(self, *path: str) -> None:
        """Click through the menu bar: menu("File", "Open Recent", "sample.tflite")."""
        bar = self.w.menuBar()
        action = _find(bar.actions(), path[0])
        self.click(bar, bar.actionGeometry(action).center())
        menu = action.menu()
        self.wait_until(menu.isVisible, f"the {path[0]} menu opens", 10)
        for name in path[1:]:
            action = _find(menu.actions(), name)
            assert action.isEnabled(), f"{' › '.join(path)}: {name} is disabled"
            self.click(menu, menu.actionGeometry(action).center())
            if action.menu() is not None:
                menu = action.menu()
                self.wait_until(menu.isVisible, f"the {name} submenu opens", 10)

    def pick_in_menu(self, menu, text: str) -> None:
        self.wait_until(menu.isVisible, "the menu opens", 10)
        action = _find(menu.actions(), text)
        assert action.isEnabled(), f"{text} is disabled"
        self.click(menu, menu.actionGeometry(action).center())

    def on_dialog(self, answer, timeout: float = 60.0, popup: bool = False, only=None) -> list:
        """`answer(dialog)` runs on the next modal dialog (or `popup` menu) shown, inside its exec, with real input;
        returns a list that holds the dialog once it came."""
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication
        seen: list = []
        end = time.monotonic() + timeout

        def poll():
            d = QApplication.activePopupWidget() if popup else QApplication.activeModalWidget()
            if d is not None and d.isVisible() and d not in seen and (only is None or isinstance(d, only)):
                timer.stop()
                seen.append(d)
                self.pump(0.05)
                answer(d)
            elif time.monotonic() > end:
                timer.stop()
        timer = QTimer(interval=30, timeout=poll)
        timer.start()
        self.timers.append(timer)          # kept alive until the scenario ends
        return seen

    def press_button(self, box, text: str) -> None:
        from PySide6.QtWidgets import QAbstractButton
        button = next((b for b in box.findChildren(QAbstractButton) if b.text().replace("&", "") == text
                       and b.isVisible()), None)
        assert button is not None, f"no {text!r} button in {box.windowTitle()!r}"
        self.click(button)

    def file_dialog(self, path: str):
        """An answer for a file dialog: the path typed into its name field, then Enter."""
        from PySide6.QtWidgets import QLineEdit

        def answer(d):
            field = d.findChild(QLineEdit, "fileNameEdit")
            assert field is not None, f"{d} is not Qt's file dialog"
            self.click(field)
            field.selectAll()
            self.type(path, field)
            self.key("Return", field)
        return answer

    def drop(self, path: str) -> None:
        """A file dragged from a file manager onto the window: the drag's enter and drop events, as Qt's drag
        manager delivers them."""
        from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
        from PySide6.QtGui import QDragEnterEvent, QDropEvent
        from PySide6.QtWidgets import QApplication
        mime = QMimeData()
        mime.setUrls([QUrl.fromLocalFile(path)])
        at = self.w.rect().center()
        enter = QDragEnterEvent(at, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
        QApplication.sendEvent(self.w, enter)
        self.expect(enter.isAccepted(), "the window refuses the dragged file")
        drop = QDropEvent(QPointF(at), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
        QApplication.sendEvent(self.w, drop)
        self.pump(0.05)

    def dock_tab(self, title: str) -> None:
        """Click the tab of a tabbed dock (Details, Metadata, History)."""
        from PySide6.QtWidgets import QTabBar
        for bar in self.w.findChildren(QTabBar):
            for i in range(bar.count()):
                # (QMainWindow keeps tab bars of earlier dock arrangements, shown but covered: the one on top)
                if bar.tabText(i).split(" (")[0] == title and bar.isVisible() and \
                        self.w.childAt(bar.mapTo(self.w, bar.tabRect(i).center())) is bar:
                    self.click(bar, bar.tabRect(i).center())
                    return
        raise Failed(f"no dock tab {title!r}")

    # ---- the graph panes -----------------------------------------------------------------------------------
    def view(self, which: str):
        return self.w.panes[which].main_view

    def on_screen(self, which: str, item):
        """A point (viewport coordinates) of a graph item scrolled into view that nothing covers (the minimap sits
        in a corner of the pane)."""
        view = self.view(which)
        view.centerOn(item)
        self.pump(0.05)
        if hasattr(item, "edge"):
            points = [item.path().pointAtPercent(f) for f in (0.5, 0.3, 0.7, 0.15, 0.85)]
        else:
            r = item.sceneBoundingRect()
            points = [r.center(), r.topLeft() * 0.75 + r.bottomRight() * 0.25,
                      r.topLeft() * 0.25 + r.bottomRight() * 0.75]
        vp = view.viewport()
        for p in points:
            at = view.mapFromScene(p)
            if vp.rect().contains(at) and vp.childAt(at) is None:
                return at
        return view.mapFromScene(points[0])

    def click_item(self, which: str, item, button=None) -> None:
        self.click(self.view(which).viewport(), self.on_screen(which, item), button)

    # ---- opening -------------------------------------------------------------------------------------------
    def model(self, rel: str) -> str:
        if rel == "sample":
            from inspector.resources import SAMPLE, path
            return str(path(SAMPLE))
        assert self.corpus is not None, "this scenario needs --corpus"
        return str(self.corpus / rel)

    def open_with_dialog(self, path: str, shortcut: str = "Ctrl+O") -> None:
        self.on_dialog(self.file_dialog(path))
        self.key(shortcut)
        self.settle()

    # ---- checks --------------------------------------------------------------------------------------------
    def check(self) -> None:
        """What the window shows equals the document; nothing went wrong so far."""
        from inspector.gui.main_window import ONNX, TFLITE
        w = self.w
        if self.closed:
            return
        self.expect(w.isVisible(), "the window is gone")
        doc, s = w.doc, w.editor.session
        if doc is None or s is None:
            return
        self.expect(Path(s.path).name in w.windowTitle(), f"title {w.windowTitle()!r} does not name {s.path}")
        self.expect(w.isWindowModified() == self.unsaved(), "the title's [*] disagrees with the undo stack")
        scene = w.scenes.get(ONNX)
        self.expect(scene is not None, "no ONNX pane")
        if scene is not None:
            nodes = {it.node.key for it in scene.nodes if it.node.kind == "op"}
            self.expect(nodes == {n.name for n in doc.model.graph.node}, "the ONNX pane's nodes are not the model's")
        self.expect(s.result is doc.result or doc.result is None, "the window's document is not the session's")
        if doc.graph is not None and TFLITE in w.scenes:
            sc = w.scenes[TFLITE]
            ops = [it for it in sc.nodes if it.node.kind == "op"]
            self.expect(len(ops) + len(sc.vg.folded) == len(doc.graph.main.ops), "the TFLite pane's ops differ")
        if doc.result is not None and doc.graph is not None:
            self.expect(w.conflicts.topLevelItemCount() >= len(doc.conflicts()), "conflicts missing from the dock")
        ed = w.editor.metadata
        if not ed.pending and not ed.stale and s.result is not None and getattr(s.result, "findings", 1) is not None:
            for vi in [*s.result.model.graph.input, *s.result.model.graph.output]:
                combo = ed.types.get(vi.name)
                if combo is not None:
                    self.expect(combo.value == vi.type.denotation,
                                f"the Metadata dock shows type {combo.value!r} for {vi.name}, the model "
                                f"{vi.type.denotation!r}")
                dims = ed.dims.get(vi.name)
                if dims:
                    model = [d.denotation for d in vi.type.tensor_type.shape.dim]
                    self.expect([c.value for c in dims] == model,
                                f"the Metadata dock shows axes {[c.value for c in dims]} for {vi.name}, the model "
                                f"{model}")

    def unsaved(self) -> bool:
        ed = self.w.editor
        return ed.session is not None and not ed.stack.isClean() and ed.session.can_save_session

    def finish(self) -> int:
        self.step("end")
        if not self.closed:
            self.check()
        for p in self.problems:
            print(f"PROBLEM: {p}", flush=True)
        print(f"{len(self.problems)} problem(s)", flush=True)
        return 1 if self.problems else 0


def _deferred_deletes():
    from PySide6.QtCore import QEvent, QObject

    class DeferredDeletes(QObject):
        """Remembers the watched widgets a deleteLater is deleting (the object and every widget inside it)."""

        def __init__(self):
            super().__init__()
            self.keys: set[int] = set()

        def eventFilter(self, obj, event):
            if event.type() == QEvent.DeferredDelete:
                from PySide6.QtWidgets import QWidget
                for o in [obj] + obj.findChildren(QWidget):
                    key = o.property("watched")
                    if key:
                        self.keys.add(key)
            return False
    return DeferredDeletes()


def _in_popup(widget) -> bool:
    from PySide6.QtCore import Qt
    return widget.window().windowType() in (Qt.Popup, Qt.ToolTip)


def _find(actions, text: str):
    for a in actions:
        label = a.text().replace("&", "").split("\t")[0].split("  —  ")[0].rstrip("…")
        if label == text.rstrip("…") or (a.menu() is not None and a.menu().title().replace("&", "") == text):
            return a
    raise Failed(f"no {text!r} among {[a.text() for a in actions]}")


# ---- running a scenario in a process of its own ----------------------------------------------------------------
def run(name: str, corpus: Path | None, tmp: Path, timeout: float = TIMEOUT, args: tuple = (), xserver=None,
        extra_env: dict | None = None) -> subprocess.CompletedProcess:
    """`xserver` (tests/xserver.py): on that X display with the xcb plugin, as a person's desktop; else offscreen.
    `extra_env`: more of the desktop (tests/desktop_bus.py's session bus)."""
    base = xserver.env() if xserver is not None else dict(os.environ, QT_QPA_PLATFORM="offscreen")
    env = dict(base, **(extra_env or {}), PYTHONPATH=str(ROOT), HOME=str(tmp),
               XDG_CONFIG_HOME=str(tmp / "config"), XDG_DATA_HOME=str(tmp / "data"),
               XDG_CACHE_HOME=str(tmp / "cache"), XDG_STATE_HOME=str(tmp / "state"), PYTHONFAULTHANDLER="1")
    cmd = [sys.executable, "-m", "tests.gui_harness", name, "--tmp", str(tmp), *args]
    if corpus is not None:
        cmd += ["--corpus", str(corpus)]
    return subprocess.run(cmd, env=env, cwd=str(ROOT), capture_output=True, text=True, timeout=timeout)


def verdict(run_: subprocess.CompletedProcess) -> str:
    """Why a scenario's process failed, in words ("" when it passed)."""
    rc = run_.returncode
    if rc == 0:
        return ""
    steps = [line[6:] for line in run_.stdout.splitlines() if line.startswith("step: ")]
    where = steps[-1] if steps else "start-up"
    if rc < 0 or rc > 128:
        import signal
        number = -rc if rc < 0 else rc - 128
        try:
            sig = signal.Signals(number).name
        except ValueError:
            sig = str(number)
        head = f"the window's process died ({sig}) during step {where!r}"
    else:
        head = f"exit {rc} after step {where!r}"
    problems = "\n".join(line for line in run_.stdout.splitlines() if line.startswith("PROBLEM"))
    return f"{head}\n{problems}\n--- stdout tail ---\n{run_.stdout[-3000:]}\n--- stderr tail ---\n{run_.stderr[-4000:]}"


def main(argv=None) -> int:
    from tests import gui_harness, gui_scenarios  # noqa: F401  (registers the scenarios; run as __main__ here)
    scenarios = gui_harness.SCENARIOS
    ap = argparse.ArgumentParser(description="run one real-input scenario on the real window")
    ap.add_argument("name", nargs="?")
    ap.add_argument("--corpus", default=None)
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    if args.list or not args.name:
        print("\n".join(scenarios))
        return 0
    tmp = Path(args.tmp or tempfile.mkdtemp())
    fn = scenarios[args.name]
    h = gui_harness.Harness(tmp, Path(args.corpus) if args.corpus else None, **getattr(fn, "harness", {}))
    try:
        fn(h)
    except Exception:               # noqa: BLE001 - a failed assertion of the scenario is a problem like any
        h.problems.append(f"{h.step_name}: {traceback.format_exc()}")
    code = h.finish()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)                  # not the window's close: the scenario decided what closing does


if __name__ == "__main__":
    sys.exit(main())
