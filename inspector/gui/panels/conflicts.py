"""The Conflicts panel: each place the converter had to insert a Transpose, and why; click to jump to it."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QTreeWidget, QTreeWidgetItem


class ConflictsPanel(QTreeWidget):
    conflictActivated = Signal(object)          # the Conflict

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setHeaderLabels(["kind", "tensor → consumer", "reason", "inserted Transpose"])
        self.setRootIsDecorated(False)
        self.setUniformRowHeights(True)
        self.setAlternatingRowColors(True)
        self.itemClicked.connect(lambda item, _col: self.conflictActivated.emit(item.data(0, Qt.UserRole)))
        self.itemActivated.connect(lambda item, _col: self.conflictActivated.emit(item.data(0, Qt.UserRole)))

    def set_document(self, doc) -> None:
        self.clear()
        if doc is None or doc.graph is None:
            return
        sg = doc.graph.main
        rows = []
        for c in doc.conflicts():
            tensor = sg.tensors[c.tensor].name if 0 <= c.tensor < len(sg.tensors) else str(c.tensor)
            where = f"{sg.ops[c.op].opcode}#{c.op}" if c.op is not None else "graph output"
            item = QTreeWidgetItem([c.kind, f"{tensor[-40:]} → {where}", c.reason, c.node or "—"])
            item.setToolTip(2, c.reason)
            item.setData(0, Qt.UserRole, c)
            rows.append(item)
        self.addTopLevelItems(rows)
        for col in range(2):
            self.resizeColumnToContents(col)
