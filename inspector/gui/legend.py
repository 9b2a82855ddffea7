"""The colour key shown above both graphs: layout categories, conflicts, graph inputs/outputs."""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import QWidget

from .palette import CATEGORIES, CONFLICT, UNKNOWN, palette


class Legend(QWidget):
    SWATCH, GAP = 14, 18

    def __init__(self, parent=None):
        super().__init__(parent)
        pal = palette()
        self.entries = [(pal.color(c), pal.labels[c], False) for c in CATEGORIES]
        self.entries += [(pal.color(CONFLICT), pal.labels[CONFLICT], True), (pal.color(UNKNOWN), pal.labels[UNKNOWN],
                                                                              False),
                         (pal.terminal, "Graph input / output", False)]
        self.font_ = QFont()
        self.font_.setPointSizeF(9)
        self.setToolTip("Nodes are coloured by the layout category of their TFLite op. "
                        "A triangle marks a conflict; dashed edges need a Transpose.")

    def sizeHint(self) -> QSize:
        fm = QFontMetrics(self.font_)
        w = sum(self.SWATCH + 6 + fm.horizontalAdvance(label) + self.GAP for _, label, _ in self.entries)
        return QSize(w + 16, max(fm.height(), self.SWATCH) + 10)

    def minimumSizeHint(self) -> QSize:
        return QSize(200, self.sizeHint().height())

    def paintEvent(self, event):
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing)
        p.fillRect(self.rect(), palette().background)
        p.setFont(self.font_)
        fm = QFontMetrics(self.font_)
        x, h = 10.0, self.height()
        for color, label, marker in self.entries:
            box = QRectF(x, (h - self.SWATCH) / 2, self.SWATCH, self.SWATCH)
            p.setPen(QPen(palette().outline, 0.8))
            p.setBrush(color)
            if marker:
                p.drawPolygon(QPolygonF([box.bottomLeft(), QPointF(box.center().x(), box.top()), box.bottomRight()]))
            else:
                p.drawRoundedRect(box, 3, 3)
            x += self.SWATCH + 6
            p.setPen(palette().text_dark)
            p.drawText(QRectF(x, 0, fm.horizontalAdvance(label) + 2, h), Qt.AlignVCenter, label)
            x += fm.horizontalAdvance(label) + self.GAP
        p.setPen(QPen(Qt.gray, 1))
        p.drawLine(0, h - 1, self.width(), h - 1)
        p.end()
