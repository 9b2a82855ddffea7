"""Pinning from the graph: a tensor's (or op's outputs') context menu and the details panel's "Pin layout" bar.

Choices: Auto (no pin), "NHWC → NCHW", "keep as is", or a custom permutation typed in a dialog that shows the
resulting ONNX shape as you type and refuses what `layout.parse` refuses. Clear one pin or all. Each choice shows
the Transposes the whole graph would have under it (what_if), and a shape that hides the layout is flagged.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QApplication, QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QLineEdit, QMenu,
                               QSizePolicy, QToolButton, QToolTip, QVBoxLayout, QWidget)

from inspector.core.layout import layout as L

from .commands import AUTO, KEEP, CHANNELS_FIRST, pin_label, short
from .graph_items import EdgeItem, NodeItem
from .graph_model import shape_text
from .what_if import ambiguous
from .palette import css


def fill_menu(menu: QMenu, editor, tensors: list[int]) -> None:
    """Pin actions for each TFLite tensor index in `tensors` (a submenu each when there are several)."""
    s = editor.session
    if not s.can_pin:
        menu.setToolTipsVisible(True)
        off = menu.addAction("Pin layout: not for a pair" if s.other else "Pin layout: off")
        off.setEnabled(False)
        off.setToolTip(s.why_not["pin"])
        return
    sg = s.graph.main
    for t in tensors:
        tensor = sg.tensors[t]
        name = editor.pin_name(t)
        target = menu if len(tensors) == 1 else menu.addMenu(short(tensor.name or f"tensor {t}"))
        if len(tensors) == 1:
            target.addSection(f"Layout of {short(tensor.name or f'tensor {t}')}")
        current = s.pins.get(name)
        why = ambiguous(tensor.shape)
        if why:
            target.addAction(f"⚠ ambiguous layout: {why}").setEnabled(False)
        cost = editor.what_if(t, (AUTO, CHANNELS_FIRST, KEEP)) if len(tensors) == 1 else {}
        for layout in (AUTO, CHANNELS_FIRST, KEEP):
            text = pin_label(layout) + (f"  —  {_count(cost[layout])}" if layout in cost else "")
            a = target.addAction(text, lambda n=name, v=layout: editor.pin(n, v))
            a.setData(cost.get(layout))
            a.setCheckable(True)
            a.setChecked(current == layout)
            if layout == CHANNELS_FIRST and tensor.rank < 3:
                a.setEnabled(False)
        custom = target.addAction("Custom permutation…", lambda tt=t: CustomPinDialog.ask(editor, tt))
        custom.setCheckable(True)
        custom.setChecked(current not in (AUTO, CHANNELS_FIRST, KEEP))
        target.addSeparator()
        target.addAction("Clear this pin", lambda n=name: editor.pin(n, None)).setEnabled(current is not None)
    menu.addSeparator()
    menu.addAction(f"Clear all pins ({len(s.pins)})", editor.clear_pins).setEnabled(bool(s.pins))


def _count(n: int) -> str:
    """What the whole graph's plan would have under a choice (the solver's count, nothing applied)."""
    return f"{n} Transpose{'s' if n != 1 else ''} in the graph"


def tensors_at(graph, item) -> list[int]:
    """TFLite tensors a context menu on `item` is about: an edge's tensor, an op's outputs, a terminal's tensor."""
    if isinstance(item, EdgeItem):
        return [item.edge.tensor]
    if isinstance(item, NodeItem):
        kind, key = item.node.key
        if kind == "op":
            return [t for t in graph.main.ops[key].outputs if t >= 0]
        return [key] if kind in ("in", "out") else []           # a group's box: no tensor of its own
    return []


def install_context_menu(view, editor) -> None:
    """Right-click on a TFLite edge or node of the main graph: the pin menu."""
    view.setContextMenuPolicy(Qt.CustomContextMenu)

    def show(pos):
        if editor.session is None or view.scene() is None or view.scene().vg.subgraph != 0:
            return
        tensors = tensors_at(editor.session.graph, view.seen_item_at(pos))
        if not tensors:
            return
        menu = QMenu(view)
        fill_menu(menu, editor, tensors)
        editor.last_menu = menu
        menu.popup(view.viewport().mapToGlobal(pos))
    view.customContextMenuRequested.connect(show)


class CopyLabel(QLabel):
    """A label of elided names whose click copies them whole (`copied`) to the clipboard."""
    copied = ""

    def mousePressEvent(self, event):
        if event.button() == Qt.LeftButton and self.copied:
            QApplication.clipboard().setText(self.copied)
            QToolTip.showText(event.globalPosition().toPoint(), "Copied", self)
        super().mousePressEvent(event)


class PinBar(QWidget):
    """Shown on top of the details panel: the selected tensor's pin and a menu button to change it."""

    def __init__(self, editor, parent=None):
        super().__init__(parent)
        self.editor = editor
        self.tensors: list[int] = []
        self.label = CopyLabel()
        self.label.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)   # long names never widen the dock
        self.button = QToolButton(text="Pin layout", popupMode=QToolButton.InstantPopup)
        self.button.setToolButtonStyle(Qt.ToolButtonTextOnly)
        self.menu = QMenu(self)
        self.menu.aboutToShow.connect(self._fill)
        self.button.setMenu(self.menu)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(4, 2, 4, 2)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.button)
        self.show_tensors([])

    def show_tensors(self, tensors: list[int]) -> None:
        s = self.editor.session
        self.tensors = list(tensors) if s is not None else []
        self.setVisible(bool(self.tensors))
        if not self.tensors:
            return
        off = not s.can_pin
        self.button.setEnabled(not off)
        self.button.setToolTip(s.why_not["pin"] if off else "")
        if off:
            self.label.setText("No pins for a pair" if s.other else "No pins here")
            self.label.setToolTip(s.why_not["pin"])
            self.label.copied = ""
            return
        sg = s.graph.main
        parts, full, warnings = [], [], []
        for t in self.tensors[:3]:
            pin = s.pins.get(self.editor.pin_name(t))
            why = ambiguous(sg.tensors[t].shape)
            name = sg.tensors[t].name or f"tensor {t}"
            state = f"{'pinned ' + pin_label(pin) if pin else 'Auto'}{' ⚠' if why else ''}"
            parts.append(f"{short(name, 32)}: {state}")
            full.append(f"{name}: {state}")               # the tooltip names it whole
            warnings += [f"{sg.tensors[t].name or t}: ambiguous layout, {why}"] if why else []
        self.label.setText("; ".join(parts) + (" …" if len(self.tensors) > 3 else ""))
        self.label.copied = "\n".join(sg.tensors[t].name or f"tensor {t}" for t in self.tensors)
        self.label.setToolTip("\n".join(full + warnings + ["(click: copy the whole name)"]))

    def _fill(self) -> None:
        self.menu.clear()
        if self.tensors and self.editor.session is not None:
            fill_menu(self.menu, self.editor, self.tensors)


class CustomPinDialog(QDialog):
    """A permutation such as 0,3,1,2 or a letter order such as NCHW, checked as typed."""

    def __init__(self, editor, tensor: int, parent=None):
        super().__init__(parent or editor.window)
        self.editor, self.tensor = editor, tensor
        t = editor.session.graph.main.tensors[tensor]
        self.shape, self.rank = t.shape, t.rank
        self.setWindowTitle("Custom layout pin")
        self.field = QLineEdit(placeholderText=f"e.g. {','.join(map(str, L.channels_first(self.rank)))} "
                                               f"or a letter order")
        current = editor.session.pins.get(editor.pin_name(tensor))
        if current:
            self.field.setText(current)
        self.preview = QLabel()
        self.buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel(f"<b>{short(t.name, 60)}</b><br>TFLite shape {shape_text(self.shape)} "
                             f"(rank {self.rank}). The ONNX tensor is numpy.transpose(tflite, perm)."))
        lay.addWidget(self.field)
        lay.addWidget(self.preview)
        lay.addWidget(self.buttons)
        self.field.textChanged.connect(self._check)
        self._check(self.field.text())

    def perm(self):
        try:
            return L.parse(self.field.text(), self.rank)
        except ValueError as e:
            return str(e)

    def _check(self, _text: str) -> None:
        p = self.perm()
        ok = not isinstance(p, str) and bool(self.field.text().strip())
        self.buttons.button(QDialogButtonBox.Ok).setEnabled(ok)
        if ok:
            self.preview.setText(f"ONNX shape {shape_text(L.apply(self.shape, p))}  ({L.name(p, self.rank)})")
            self.preview.setStyleSheet("")
        else:
            self.preview.setText(p if self.field.text().strip() else "type a permutation")
            self.preview.setStyleSheet(f"color:{css('error')}")

    def accept(self) -> None:
        p = self.perm()
        if isinstance(p, str):
            return
        super().accept()
        self.editor.pin(self.editor.pin_name(self.tensor), ",".join(map(str, p)))

    @classmethod
    def ask(cls, editor, tensor: int) -> "CustomPinDialog":
        dlg = cls(editor, tensor)
        editor.last_dialog = dlg
        dlg.open()                       # window-modal, never blocks the event loop (tests drive it)
        return dlg
