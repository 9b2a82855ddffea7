"""What the window shows before a model is open: Open, the bundled sample, recent files, and where to drop one."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QPushButton, QVBoxLayout,
                               QWidget)

from inspector import __version__
from inspector.resources import ICON, SAMPLE, path as resource
from .palette import css


class StartPage(QWidget):
    openRequested = Signal()            # the file dialog
    pathRequested = Signal(str)         # a recent file or the sample

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("startPage")
        title = QLabel(f"<h2>Layout Inspector</h2><p style='color:{css('muted')}'>version {__version__} · convert TFLite to "
                       "ONNX, see every layout decision, pin a tensor's layout, prove the result.</p>",
                       wordWrap=True)
        icon = QLabel()
        icon.setPixmap(QIcon(str(resource(ICON))).pixmap(72, 72))
        head = QHBoxLayout()
        head.addWidget(icon)
        head.addWidget(title, 1)

        self.open_button = QPushButton("Open a model…", clicked=lambda: self.openRequested.emit())   # not `checked`
        self.sample_button = QPushButton("Open the sample model",
                                         clicked=lambda: self.pathRequested.emit(str(resource(SAMPLE))))
        self.open_button.setDefault(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.open_button)
        buttons.addWidget(self.sample_button)
        buttons.addStretch(1)

        self.recent_list = QListWidget()
        self.recent_list.setObjectName("recentFiles")
        self.recent_list.setTextElideMode(Qt.ElideMiddle)
        self.recent_list.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.recent_list.setMaximumHeight(260)
        self.recent_list.itemActivated.connect(lambda item: self.pathRequested.emit(item.data(Qt.UserRole)))
        self.recent_empty = QLabel("No recent files yet.", styleSheet=f"color:{css('muted')}")
        drop = QLabel("…or drop a .tflite or .onnx file anywhere on this window. "
                      "Ctrl+O opens a model; F1 lists the shortcuts.", wordWrap=True, styleSheet=f"color:{css('muted')}")

        box = QVBoxLayout()
        box.addLayout(head)
        box.addSpacing(12)
        box.addLayout(buttons)
        box.addSpacing(16)
        box.addWidget(QLabel("<b>Recent files</b>"))
        box.addWidget(self.recent_list)
        box.addWidget(self.recent_empty)
        box.addSpacing(8)
        box.addWidget(drop)
        box.addStretch(1)
        column = QWidget()
        column.setLayout(box)
        column.setMaximumWidth(760)
        outer = QHBoxLayout(self)
        outer.addStretch(1)
        outer.addWidget(column, 4)
        outer.addStretch(1)

    def set_recent(self, paths: list[str]) -> None:
        """Recent files, newest first; ones that no longer exist are listed greyed out and cannot be opened."""
        self.recent_list.clear()
        for p in paths:
            item = QListWidgetItem(f"{Path(p).name}  —  {Path(p).parent}")
            item.setData(Qt.UserRole, p)
            item.setToolTip(p)
            if not Path(p).is_file():
                item.setFlags(Qt.NoItemFlags)
            self.recent_list.addItem(item)
        self.recent_list.setVisible(bool(paths))
        self.recent_empty.setVisible(not paths)
