"""The colour key shown above both graphs: layout categories, conflicts, graph inputs/outputs.

Entries flow onto further rows when the window is too narrow for one (heightForWidth), never cut off."""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

from .palette import CATEGORIES, CONFLICT, UNKNOWN, palette


class Legend(QWidget):
    SWATCH, GAP, PAD, ROW_GAP = 14, 18, 10, 2

    def __init__(self, parent=None):
        super().__init__(parent)
        self.restyle()
        self.font_ = QFont()
        self.font_.setPointSizeF(9)
        policy = QSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self.setToolTip("Nodes are coloured by the layout category of their TFLite op. "
                        "A triangle marks a conflict; dashed edges need a Transpose.")

    def restyle(self) -> None:
        """(colour, label, marker) of each entry in the palette in use (again when the colour scheme switches)."""
        pal = palette()
        self.entries = [(pal.color(c), pal.labels[c], False) for c in CATEGORIES]
        self.entries += [(pal.color(CONFLICT), pal.labels[CONFLICT], True),
                         (pal.color(UNKNOWN), pal.labels[UNKNOWN], False),
                         (pal.terminal, "Graph input / output", False)]
        self.update()

    def _widths(self) -> list[float]:
        fm = QFontMetrics(self.font_)
        return [self.SWATCH + 6 + fm.horizontalAdvance(label) + 2 for _, label, _ in self.entries]

    def _row_h(self) -> int:
        return max(QFontMetrics(self.font_).height(), self.SWATCH) + 6

    def placement(self, width: int) -> list[tuple[float, int]]:
        """(x, row) of each entry when the legend is `width` pixels wide: rows fill left to right."""
        out, x, row = [], float(self.PAD), 0
        for w in self._widths():
            if x > self.PAD and x + w > width - self.PAD:
                x, row = float(self.PAD), row + 1
            out.append((x, row))
            x += w + self.GAP
        return out

    def rows(self, width: int) -> int:
        return 1 + max((r for _, r in self.placement(width)), default=0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self.rows(width) * self._row_h() + 4

    def sizeHint(self) -> QSize:
        w = sum(self._widths()) + self.GAP * (len(self.entries) - 1) + 2 * self.PAD
        return QSize(int(w), self.heightForWidth(int(w)))

    def minimumSizeHint(self) -> QSize:
        return QSize(200, self.heightForWidth(200))

    def resizeEvent(self, event):
        super().resizeEvent(event)
        if self.height() != self.heightForWidth(self.width()):
            self.setFixedHeight(self.heightForWidth(self.width()))   # layouts of a QMainWindow ignore hfw

    def paintEvent(self, event):
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing)
        pal = palette()
        p.fillRect(self.rect(), pal.background)
        p.setFont(self.font_)
        fm = QFontMetrics(self.font_)
        rh = self._row_h()
        for (color, label, marker), (x, row) in zip(self.entries, self.placement(self.width())):
            top = 2 + row * rh
            box = QRectF(x, top + (rh - self.SWATCH) / 2, self.SWATCH, self.SWATCH)
            p.setPen(QPen(pal.outline, 0.8))
            p.setBrush(color)
            if marker:
                p.drawPolygon(QPolygonF([box.bottomLeft(), QPointF(box.center().x(), box.top()), box.bottomRight()]))
            else:
                p.drawRoundedRect(box, 3, 3)
            p.setPen(pal.ink)
            p.drawText(QRectF(x + self.SWATCH + 6, top, fm.horizontalAdvance(label) + 2, rh), Qt.AlignVCenter, label)
        p.setPen(QPen(pal.rule, 1))
        p.drawLine(0, self.height() - 1, self.width(), self.height() - 1)
        p.end()
