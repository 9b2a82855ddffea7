"""A closed group's box: its label, op count, category mix (a bar in the category colours), a badge with the
conflicts and inserted Transposes inside it, and a + control that opens it. Drawn as a small stack of cards so it
reads as "many ops" beside the single op boxes."""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPen

from .graph_items import NodeItem, Fonts, seen_lod, warning
from .lod import LOD_TEXT, MIN_TEXT_PX, PX_PER_PT, readable
from .graph_model import GROUP_BAR, LINE_H, TITLE_H
from .palette import CONFLICT, UNKNOWN, palette

CONTROL = 14                # the + square's side


def _mix(a: QColor, b: QColor, share: float) -> QColor:
    """`share` of a, the rest of b."""
    return QColor.fromRgbF(*(share * x + (1 - share) * y for x, y in zip(a.getRgbF()[:3], b.getRgbF()[:3])))


class GroupItem(NodeItem):
    def __init__(self, index, node, frame=None):
        super().__init__(index, node, frame)
        self._bounds = self.rect.adjusted(-4, -10, 12, 10)
        self._label_pt = 0.0

    @property
    def layer(self):
        return self.node.layer

    def set_category(self, category: str, marker: str = "", tooltip: str = "") -> None:
        """A group has no category of its own: its mix is drawn; its tooltip says what it holds."""
        layer = self.layer
        mix = ", ".join(f"{n} {c}" for c, n in layer.categories.items())
        tip = [f"{layer.id}  ({len(layer.ops)} ops)"] + ([mix] if mix else []) + self.node.lines[1:]
        tip.append("Double-click, Enter or + to open; Backspace inside closes it again")
        self.category, self.marker = category, ""
        pal = palette()
        main = next(iter(layer.categories), UNKNOWN)       # its commonest category, pale: a box, not an op
        self.quick_fill = pal.color(CONFLICT) if self.conflicted() else _mix(pal.color(main), pal.background, 0.3)
        self.setToolTip("\n".join(tip))
        self.update()

    def conflicted(self) -> bool:
        return bool(self.layer.conflicts or self.layer.transposes)

    def control(self) -> QRectF:
        """The + control, in item coordinates."""
        r = self.rect
        return QRectF(r.left() + 4, r.top() + (TITLE_H - CONTROL) / 2, CONTROL, CONTROL)

    def paint(self, painter, option, widget=None):
        NodeItem.paint_calls += 1
        pal = palette()
        lod = seen_lod(self, painter, option)
        r = self.rect
        if lod < LOD_TEXT:                  # zoomed out: a filled box, its label as large as the box allows
            if self.isSelected():
                painter.fillRect(r.adjusted(-6 / lod, -6 / lod, 6 / lod, 6 / lod), pal.selection)
            painter.fillRect(r, self.quick_fill)
            if lod > 0.08:
                font = QFont(Fonts.get()[0])
                if not self._label_pt:          # the size at which the whole label fits the box's width
                    self._label_pt = font.pointSizeF() * (r.width() - 10) / max(
                        QFontMetricsF(font).horizontalAdvance(self.node.title), 1.0)
                # the whole label when it fits at a readable size, else the smallest readable size (lod.py),
                # elided at the left: what tells groups apart is at the end (InvertedResidual_12, block_3,
                # part 10/21), which middle elision cut out; none when the box is too low for that
                pt = min(9.0 / lod, self._label_pt) if readable(self._label_pt, lod) else \
                    MIN_TEXT_PX / (PX_PER_PT * lod)
                pt = min(pt, r.height() * 0.6)
                if readable(pt, lod):
                    font.setPointSizeF(pt)
                    painter.setFont(font)
                    painter.setPen(pal.on(self.quick_fill))
                    text = QFontMetricsF(font).elidedText(self.node.title, Qt.ElideLeft, r.width() - 8)
                    painter.drawText(r.adjusted(4, 0, -4, 0), Qt.AlignCenter, text)
            if self.conflicted():
                self._paint_badge(painter, pal, lod)
            return
        if self.isSelected():
            painter.setPen(QPen(pal.selection, 7))
            painter.setBrush(Qt.NoBrush)
            painter.drawRoundedRect(r, 6, 6)
        painter.setPen(QPen(pal.ink, 0.8))                 # cards of the background's colour: lines and text in
        painter.setBrush(QBrush(pal.background))           # its ink (black on light, light grey on dark)
        for k in (2, 1):                                    # the cards behind: "many ops"
            painter.drawRoundedRect(r.translated(4 * k, 4 * k), 5, 5)
        painter.setPen(QPen(pal.ink, 1.8 if self.isSelected() else 1.2))
        painter.drawRoundedRect(r, 5, 5)
        title, lines = self._texts()
        painter.setPen(pal.ink)
        painter.setFont(Fonts.get()[0])
        painter.drawText(QRectF(r.left() + CONTROL + 8, r.top(), r.width() - CONTROL - 12, TITLE_H),
                         Qt.AlignLeft | Qt.AlignVCenter, title)
        c = self.control()
        painter.setPen(QPen(pal.ink, 1))
        painter.setBrush(Qt.NoBrush)
        painter.drawRect(c)
        painter.drawLine(QPointF(c.left() + 3, c.center().y()), QPointF(c.right() - 3, c.center().y()))
        painter.drawLine(QPointF(c.center().x(), c.top() + 3), QPointF(c.center().x(), c.bottom() - 3))
        painter.setFont(Fonts.get()[1])
        y = r.top() + TITLE_H
        for s in lines:
            painter.drawText(QRectF(r.left() + 6, y, r.width() - 12, LINE_H), Qt.AlignVCenter | Qt.AlignLeft, s)
            y += LINE_H
        self._paint_mix(painter, pal, QRectF(r.left() + 6, r.bottom() - GROUP_BAR + 1, r.width() - 12, 5))
        if self.conflicted():
            self._paint_badge(painter, pal, lod)

    def _paint_mix(self, painter, pal, bar: QRectF) -> None:
        """The category mix: one stretch per category, as wide as its share of the ops."""
        cats = self.layer.categories
        total = sum(cats.values())
        if not total:
            painter.fillRect(bar, pal.color("unknown"))
            return
        x = bar.left()
        for cat, n in cats.items():
            w = bar.width() * n / total
            painter.fillRect(QRectF(x, bar.top(), w, bar.height()), pal.color(cat))
            x += w

    def _paint_badge(self, painter, pal, lod: float) -> None:
        """A warning triangle with the count of conflicts (or of inserted Transposes) on the top-right corner (the
        count when it reads at lod.MIN_TEXT_PX)."""
        layer = self.layer
        font = Fonts.get()[1]
        warning(painter, pal, self.rect.right() - 4, self.rect.top() - 2, 12,
                str(layer.conflicts or layer.transposes) if readable(font.pointSizeF(), lod) else "", font)
