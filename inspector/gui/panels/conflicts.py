"""The Conflicts panel: each place the converter had to insert a Transpose, and why; click to jump to it."""
from __future__ import annotations

import re

from PySide6.QtCore import QRect, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (QApplication, QHeaderView, QStyledItemDelegate, QStyleOptionViewItem, QTreeWidget,
                               QTreeWidgetItem)

NO_TRANSPOSE = "no Transpose"
SHARE = (0.2, 0.17, 0.24)           # at most this share of the width for kind, (tensor → op, hidden), Transpose: the
                                    # reason keeps over half (1280x800: a 360 px dock, 3-4 lines for a long reason)


def breakable(name: str) -> str:
    """A long tensor or node name may wrap after its separators (a zero-width space there) instead of being elided."""
    return re.sub(r"([/;_#:.])", "\\1\u200b", name)


class WrappingDelegate(QStyledItemDelegate):
    """Row heights that fit the wrapped text: a tree view asks its delegate for sizes without the column's width,
    so the text would be measured as one line and elided."""

    def sizeHint(self, option, index):
        opt = QStyleOptionViewItem(option)
        opt.rect = QRect(0, 0, max(self.parent().columnWidth(index.column()), 1), 1 << 16)
        return super().sizeHint(opt, index)


class ConflictsPanel(QTreeWidget):
    conflictActivated = Signal(object, str)     # the Conflict, the name of the Transpose inserted for it ("" if none)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setHeaderLabels(["kind", "tensor → op", "Transpose", "reason"])
        header = self.header()                         # the reason is shown second and takes the room left
        header.moveSection(3, 1)
        header.setStretchLastSection(False)
        header.setSectionResizeMode(3, QHeaderView.Stretch)
        self.setRootIsDecorated(False)
        self.setWordWrap(True)                         # every column wraps; the rows grow to fit
        self.setUniformRowHeights(False)
        self.setItemDelegate(WrappingDelegate(self))
        self.setColumnHidden(1, True)                  # the reason names the tensor and its consumer already
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self._widest: dict[int, int] = {}
        self._relayout = QTimer(self, singleShot=True, interval=0, timeout=self.doItemsLayout)
        header.sectionResized.connect(lambda *_: self._relayout.start())   # narrower: more lines per row
        self.setAlternatingRowColors(True)
        self.itemClicked.connect(self._activate)
        self.itemActivated.connect(self._activate)

    def keyPressEvent(self, event):
        """Ctrl+C: the current row's names whole (tensor → op, and the Transpose inserted), the row wraps them."""
        item = self.currentItem()
        if event.matches(QKeySequence.Copy) and item is not None:
            QApplication.clipboard().setText("\n".join(t for t in (item.toolTip(0), item.data(1, Qt.UserRole)) if t))
            event.accept()
            return
        super().keyPressEvent(event)

    def _activate(self, item, _column=0) -> None:
        self.conflictActivated.emit(item.data(0, Qt.UserRole), item.data(1, Qt.UserRole) or "")

    def set_document(self, doc) -> None:
        self.clear()
        self._widest: dict[int, int] = {}             # column -> its longest line's width (fit_columns)
        if doc is None or doc.graph is None:
            return
        sg = doc.graph.main
        rows = []
        conflicts = doc.conflicts()
        node_of = {id(c): name for name, c in doc.inserted().items()}
        # Transposes the trace records as inserted but whose conflict the plan does not list get a row too
        extra = [c for c in doc.inserted().values() if not any(c is d for d in conflicts)]
        # one Transpose serves every consumer that wants the tensor in the same layout: the trace names it for one
        shared = {(c.tensor, c.subgraph, tuple(c.to_perm)): c.node or node_of[id(c)] for c in conflicts + extra
                  if c.to_perm and (c.node or id(c) in node_of)}
        for c in conflicts + extra:
            node = c.node or node_of.get(id(c), "") or shared.get((c.tensor, c.subgraph, tuple(c.to_perm)), "")
            tensor = sg.tensors[c.tensor].name if 0 <= c.tensor < len(sg.tensors) else str(c.tensor)
            where = f"{sg.ops[c.op].opcode}#{c.op}" if c.op is not None else "graph output"
            # a conflict whose layouts differ only in size-1 axes is fixed by a Reshape, or by nothing at all
            item = QTreeWidgetItem([c.kind, f"{tensor} → {where}", breakable(node) or NO_TRANSPOSE, c.reason])
            for col in range(4):                       # a tall row reads from its top line
                item.setTextAlignment(col, Qt.AlignLeft | Qt.AlignTop)
            for col in (0, 1, 3):
                item.setToolTip(col, f"{tensor} → {where}")
            item.setToolTip(2, node or "no Transpose was inserted for this conflict")     # (Ctrl+C copies both)
            item.setData(0, Qt.UserRole, c)
            item.setData(1, Qt.UserRole, node)
            rows.append(item)
        self.addTopLevelItems(rows)
        self.fit_columns()

    def fit_columns(self) -> None:
        """Each column as wide as its longest line, capped at its share of the width; the reason (stretched) takes
        the rest, and every column wraps what does not fit. The longest lines are measured once per document (a
        resize only moves the caps)."""
        room = self.viewport().width()
        for col, share in enumerate(SHARE):
            if self.isColumnHidden(col):
                continue
            if col not in self._widest:
                fm = self.fontMetrics()
                pad = 2 * self.style().pixelMetric(self.style().PixelMetric.PM_FocusFrameHMargin) + 12
                lines = [self.headerItem().text(col)] + [self.topLevelItem(i).text(col)
                                                           for i in range(self.topLevelItemCount())]
                self._widest[col] = max(fm.horizontalAdvance(t) for t in lines) + pad
            self.setColumnWidth(col, max(40, min(self._widest[col], int(room * share))))

    def resizeEvent(self, event):
        super().resizeEvent(event)
        self.fit_columns()
