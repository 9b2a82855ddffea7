"""The Conflicts panel: each place the converter had to insert a Transpose, and why; click to jump to it."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHeaderView, QTreeWidget, QTreeWidgetItem


NO_TRANSPOSE = "no Transpose"
WIDEST = (64, 100, 90)                                   # px for kind, tensor → consumer, inserted Transpose


class ConflictsPanel(QTreeWidget):
    conflictActivated = Signal(object, str)     # the Conflict, the name of the Transpose inserted for it ("" if none)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setHeaderLabels(["kind", "tensor → consumer", "inserted Transpose", "reason"])
        header = self.header()                         # the reason is shown second and takes the room left
        header.moveSection(3, 1)
        header.setStretchLastSection(False)
        header.setSectionResizeMode(3, QHeaderView.Stretch)
        self.setRootIsDecorated(False)
        self.setWordWrap(True)                         # (the whole reason is in each row's tooltip)
        self.setUniformRowHeights(False)
        self.setAlternatingRowColors(True)
        self.itemClicked.connect(self._activate)
        self.itemActivated.connect(self._activate)

    def _activate(self, item, _column=0) -> None:
        self.conflictActivated.emit(item.data(0, Qt.UserRole), item.data(1, Qt.UserRole) or "")

    def set_document(self, doc) -> None:
        self.clear()
        if doc is None or doc.graph is None:
            return
        sg = doc.graph.main
        rows = []
        conflicts = doc.conflicts()
        node_of = {id(c): name for name, c in doc.inserted().items()}
        # Transposes the trace records as inserted but whose conflict the plan does not list get a row too
        extra = [c for c in doc.inserted().values() if not any(c is d for d in conflicts)]
        for c in conflicts + extra:
            node = c.node or node_of.get(id(c), "")
            tensor = sg.tensors[c.tensor].name if 0 <= c.tensor < len(sg.tensors) else str(c.tensor)
            where = f"{sg.ops[c.op].opcode}#{c.op}" if c.op is not None else "graph output"
            # a conflict whose layouts differ only in size-1 axes is fixed by a Reshape, or by nothing at all
            item = QTreeWidgetItem([c.kind, f"{tensor[-40:]} → {where}", node or NO_TRANSPOSE, c.reason])
            item.setToolTip(1, f"{tensor} → {where}")
            item.setToolTip(2, node or "no Transpose was inserted for this conflict")
            item.setToolTip(3, c.reason)
            item.setData(0, Qt.UserRole, c)
            item.setData(1, Qt.UserRole, node)
            rows.append(item)
        self.addTopLevelItems(rows)
        for col, most in enumerate(WIDEST):            # sized to contents, capped: the reason stays on screen
            self.resizeColumnToContents(col)
            self.setColumnWidth(col, min(self.columnWidth(col), most))
