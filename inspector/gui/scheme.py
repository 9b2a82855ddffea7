"""The colour scheme the window paints with: View › Colour scheme (System, Light, Dark), remembered in QSettings.
System follows the desktop's scheme (QStyleHints.colorScheme, and its colorSchemeChanged when the desktop switches);
a desktop that says nothing (no platform theme) counts as light. The graph panes take the palette module's scheme;
the docks, menus and fields the desktop's own palette when it is of the scheme shown, else the palette module's."""
from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from . import palette as colours
from .palette import DARK, LIGHT, SYSTEM

CHOICES = ((SYSTEM, "&System (follow the desktop)"), (LIGHT, "&Light"), (DARK, "&Dark"))
KEY = "view/scheme"


def desktop() -> str:
    """The desktop's colour scheme: DARK or LIGHT."""
    hints = QGuiApplication.styleHints()
    return DARK if hints is not None and hints.colorScheme() == Qt.ColorScheme.Dark else LIGHT


class Scheme(QObject):
    changed = Signal(str)            # the scheme now painted (LIGHT or DARK)

    def __init__(self, settings, parent=None):
        super().__init__(parent)
        self.settings = settings
        choice = str(settings.value(KEY, SYSTEM))
        self.choice = choice if choice in dict(CHOICES) else SYSTEM
        self.group = QActionGroup(self, exclusive=True)
        self.actions: dict[str, QAction] = {}
        for key, text in CHOICES:
            a = QAction(text, self.group, checkable=True, checked=key == self.choice)
            a.triggered.connect(lambda _=False, k=key: self.choose(k))
            self.actions[key] = a
        # a bound method: disconnected when this object (the window's) is destroyed
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._desktop_changed)
        self.apply()

    def _desktop_changed(self, _scheme) -> None:
        self.apply()

    def add_to(self, menu) -> None:
        """The three choices, into the View menu's Colour scheme submenu."""
        menu.addActions(list(self.actions.values()))

    @property
    def shown(self) -> str:
        return desktop() if self.choice == SYSTEM else self.choice

    def choose(self, choice: str) -> None:
        self.choice = choice
        self.actions[choice].setChecked(True)
        self.settings.setValue(KEY, choice)
        self.apply()

    def apply(self) -> None:
        scheme = self.shown
        # the desktop's own widget palette when it is of this scheme (an empty palette resolves to the platform's;
        # a desktop may say dark and still give a light palette), else the palette module's
        QApplication.setPalette(QPalette())
        if (QApplication.palette().color(QPalette.ColorRole.Window).lightness() < 128) != (scheme == DARK):
            QApplication.setPalette(colours.palette(scheme).widgets())
        if colours.use(scheme):
            self.changed.emit(scheme)
