"""Application start-up: the QApplication, a global exception hook that reports in a dialog, the main window."""
from __future__ import annotations

import sys
import traceback

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QMessageBox

from inspector import __version__
from inspector.core.ir.errors import InspectorError
from inspector.resources import ICON, path as resource


def _hook(window_getter):
    showing = []

    def hook(exc_type, exc, tb):
        if issubclass(exc_type, KeyboardInterrupt):
            QApplication.quit()
            return
        print(f"error: {exc_type.__name__}: {exc}", file=sys.stderr)
        if showing:                     # an error while showing the dialog: do not stack dialogs
            return
        showing.append(True)
        try:
            text = str(exc) if isinstance(exc, InspectorError) else f"Unexpected error: {exc_type.__name__}: {exc}"
            box = QMessageBox(QMessageBox.Critical, "Layout Inspector", text, QMessageBox.Ok, window_getter())
            if not isinstance(exc, InspectorError):
                box.setInformativeText("The application keeps running; the details help a bug report.")
                box.setDetailedText("".join(traceback.format_exception(exc_type, exc, tb)))
            box.exec()
        finally:
            showing.clear()
    return hook


def application(argv: list[str] | None = None) -> QApplication:
    # PySide6 drops the GIL around Qt calls; with a worker thread busy in Python each re-take can wait a whole
    # switch interval (5 ms). A shorter one keeps the window responsive while a model converts.
    sys.setswitchinterval(0.0005)
    app = QApplication.instance() or QApplication(argv or sys.argv[:1])
    app.setApplicationName("Layout Inspector")
    app.setOrganizationName("layout-inspector")
    app.setApplicationVersion(__version__)
    app.setWindowIcon(QIcon(str(resource(ICON))))
    app.setDesktopFileName("layout-inspector")      # matches the .desktop entry `install-desktop` writes
    return app


def main(model: str | None = None, other: str | None = None) -> int:
    from .main_window import MainWindow
    app = application()
    window = MainWindow()
    sys.excepthook = _hook(lambda: window)
    window.show()
    if model:
        window.open_path(model, other)
    return app.exec()
