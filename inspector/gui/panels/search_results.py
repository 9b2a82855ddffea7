"""The Search results panel: every match of the search (both panes), a click on a row selects and centres it."""
from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from ..palette import palette

MAX_ROWS = 1000            # rows listed; F3 still walks every match
ATTRIBUTE = 5              # the column of the attributes a row matched by (hidden when none did)


class SearchResults(QWidget):
    rowActivated = Signal(int)          # the match's index in the window's list
    regexToggled = Signal(bool)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.regex = QCheckBox("Regular expression", toolTip="Match names, op types and attributes (read as "
                                                            "name=value) with a Python regular expression "
                                                            "(case-insensitive)")
        self.regex.toggled.connect(self.regexToggled)
        self.status = QLabel(wordWrap=True, textInteractionFlags=Qt.TextSelectableByMouse)
        self.tree = QTreeWidget(rootIsDecorated=False, alternatingRowColors=True, uniformRowHeights=True)
        self.tree.setHeaderLabels(["name", "op type", "category", "shape", "pane", "attribute"])
        self.tree.header().moveSection(ATTRIBUTE, 1)    # shown beside the name, when a row matched by attribute
        self.tree.setTextElideMode(Qt.ElideMiddle)      # long scoped names keep their start and their op
        for col, width in enumerate((150, 125, 70, 80, 50, 150)):
            self.tree.setColumnWidth(col, width)
        self.tree.itemClicked.connect(self._activate)
        self.tree.itemActivated.connect(self._activate)
        top = QHBoxLayout()
        top.addWidget(self.regex)
        top.addWidget(self.status, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.tree, 1)

    def _activate(self, item, _column=0) -> None:
        self.rowActivated.emit(item.data(0, Qt.UserRole))

    def show_rows(self, rows: list[tuple[str, ...]], status: str) -> None:
        """rows: (name, op type, category, shape, pane[, attributes matched]) of each match in order."""
        self.tree.clear()
        items = []
        for i, row in enumerate(rows[:MAX_ROWS]):
            item = QTreeWidgetItem(list(row))
            item.setToolTip(0, row[0])
            if len(row) > ATTRIBUTE:
                item.setToolTip(ATTRIBUTE, row[ATTRIBUTE])
            item.setData(0, Qt.UserRole, i)
            items.append(item)
        self.tree.addTopLevelItems(items)
        self.tree.setColumnHidden(ATTRIBUTE, not any(len(r) > ATTRIBUTE and r[ATTRIBUTE] for r in rows[:MAX_ROWS]))
        if len(rows) > MAX_ROWS:
            status += f" (the first {MAX_ROWS} listed)"
        self.status.setText(status)

    def show_error(self, text: str) -> None:
        self.tree.clear()
        self.status.setText(f"<span style='color:{palette().error.name()}'>{html.escape(text)}</span>")

    def set_current(self, i: int) -> None:
        """The row of the match F3 went to (no signal: the window did the going)."""
        item = self.tree.topLevelItem(i) if 0 <= i < MAX_ROWS else None
        if item is not None:
            self.tree.blockSignals(True)
            self.tree.setCurrentItem(item)
            self.tree.blockSignals(False)
            self.tree.scrollToItem(item)
