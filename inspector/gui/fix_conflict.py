"""The Conflicts list's "fix" action: right-click a conflict, and the cheapest single pin that removes it with fewer
Transposes than now (found by the layout solver, what_if.cheapest_fix) is offered with the Transposes the graph would then have; choosing it
pushes that pin like any other (undoable)."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QSize, Qt
from PySide6.QtWidgets import QMenu

from .commands import short
from .what_if import cheapest_fix


def fix_action_text(fix) -> str:
    name, text, n = fix
    return f"Fix: pin {short(name, 40)} to {text}  —  {n} Transpose{'s' if n != 1 else ''} in the graph"


def install(editor, panel) -> None:
    panel.setContextMenuPolicy(Qt.CustomContextMenu)

    def show(pos):
        item = panel.itemAt(pos)
        c = item.data(0, Qt.UserRole) if item is not None else None
        if c is None or editor.session is None:
            return
        menu = QMenu(panel)
        fill(menu, editor, c)
        editor.last_menu = menu
        menu.popup(inside(editor.window, panel.viewport().mapToGlobal(pos), menu.sizeHint()))
    panel.customContextMenuRequested.connect(show)


def inside(window, at: QPoint, size: QSize) -> QPoint:
    """Where a menu opened at `at` stays inside the window: the Conflicts dock sits at its right edge, and a long
    fix ran past it."""
    r = window.frameGeometry()
    return QPoint(max(r.left(), min(at.x(), r.right() + 1 - size.width())),
                  max(r.top(), min(at.y(), r.bottom() + 1 - size.height())))


def fill(menu: QMenu, editor, c) -> None:
    fix = cheapest_fix(editor.session, c) if editor.session.can_pin else None
    if fix is None:
        menu.addAction("No single pin removes this conflict with fewer Transposes").setEnabled(False)
        return
    menu.addAction(fix_action_text(fix), lambda: editor.pin(fix[0], fix[1]))
