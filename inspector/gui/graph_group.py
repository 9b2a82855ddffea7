"""A closed group's box: its label, op count, category mix (a bar in the category colours), a badge with the
conflicts and inserted Transposes inside it, and a + control that opens it. Drawn as a small stack of cards so it
reads as "many ops" beside the single op boxes. An open group's frame: a light outline around its nodes with a tab,
"−" and its label, whose click closes it."""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem

from .graph_items import NodeItem, Fonts, seen_lod, warning
from .lod import LOD_TEXT, label_size, readable
from .graph_model import GROUP_BAR, LINE_H, TITLE_H
from .palette import CONFLICT, UNKNOWN, palette

CONTROL = 14                # the + and − squares' side
FRAME_PAD = 12              # scene px between an open group's nodes and its frame
TAB_H = 18                  # its tab's height


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
        tip.append("Double-click, Enter or + to open; once open, its frame's − (or Backspace inside) closes it")
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
        lod = seen_lod(self, painter, option)
        if not lod:
            return
        pal = palette()
        r = self.rect
        if lod < LOD_TEXT:                  # zoomed out: a filled box, its label as large as the box allows
            if self.isSelected():
                painter.fillRect(r.adjusted(-6 / lod, -6 / lod, 6 / lod, 6 / lod), pal.selection)
            painter.fillRect(r, self.quick_fill)
            font = QFont(Fonts.get()[0])
            if not self._label_pt:              # the size at which the whole label fits the box's width
                self._label_pt = font.pointSizeF() * (r.width() - 10) / max(
                    QFontMetricsF(font).horizontalAdvance(self.node.title), 1.0)
            # lod.py's rule, with the box's height as room: a label too long is elided at the left, at the smallest
            # readable size (what tells groups apart is at the end: InvertedResidual_12, block_3, part 10/21)
            room = r.height() * 0.6
            pt, _ = label_size(font.pointSizeF(), min(self._label_pt, room), lod, room)
            if pt:
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
        painter.setPen(QPen(pal.ink, 1))
        _control(painter, self.control(), plus=True)
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


def _control(painter, c: QRectF, plus: bool) -> None:
    """A + or − in a square (the pen set)."""
    painter.setBrush(Qt.NoBrush)
    painter.drawRect(c)
    painter.drawLine(QPointF(c.left() + 3, c.center().y()), QPointF(c.right() - 3, c.center().y()))
    if plus:
        painter.drawLine(QPointF(c.center().x(), c.top() + 3), QPointF(c.center().x(), c.bottom() - 3))


_METRICS: list = []


def _small_metrics() -> QFontMetricsF:
    """The small font's metrics, made once (an expanded big model has hundreds of frames)."""
    if not _METRICS:
        _METRICS.append(QFontMetricsF(Fonts.get()[1]))
    return _METRICS[0]


def levels(layers) -> dict[str, int]:
    """How many open groups deep each of `layers` (the open ones, every ancestor of one among them) holds: 0 for
    one with none open inside. Nested groups often start at the same node; their frames are spaced by it."""
    parent = {layer.id: layer.parent for layer in layers}
    level = dict.fromkeys(parent, 0)
    for g in parent:
        d, p = 1, parent[g]
        while p in parent:
            if level[p] >= d:
                break                                  # (a deeper path already went up from here)
            level[p], d, p = d, d + 1, parent[p]
    return level


class GroupFrame(QGraphicsItem):
    """An open group's frame around the nodes it shows (`rect`, scene coordinates), under every node and edge; its
    tab at the top-left, "−" and the group's label, is what the mouse hits (GraphView: a click closes the group)."""

    def __init__(self, layer, rect: QRectF, frame=None, level: int = 0):
        super().__init__()
        self.layer, self.frame, self.around = layer, frame, rect
        pad = FRAME_PAD + level * (TAB_H + 4)      # `level` open groups inside: its tab above theirs, not on them
        self.rect = rect.adjusted(-pad, -pad, pad, pad)
        text_w = _small_metrics().horizontalAdvance(layer.label)
        self.tab = QRectF(self.rect.left(), self.rect.top() - TAB_H, min(CONTROL + 12 + text_w, 260), TAB_H)
        self._bounds = self.rect.united(self.tab).adjusted(-1, -1, 1, 1)
        self.setZValue(-1)
        self.setToolTip(f"{layer.id}  ({len(layer.ops)} ops)\nClick − to close it (or Backspace on one of its nodes)")

    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        path = QPainterPath()                   # only the tab: clicks inside the frame reach what is under it
        path.addRect(self.tab)
        return path

    def control(self) -> QRectF:
        return QRectF(self.tab.left() + 3, self.tab.center().y() - CONTROL / 2, CONTROL, CONTROL)

    def paint(self, painter, option, widget=None):
        lod = seen_lod(self, painter, option)
        if not lod:
            return
        pal = palette()
        line = QColor(pal.ink)
        line.setAlphaF(0.35)
        painter.setPen(QPen(line, 1.0 if lod >= LOD_TEXT else 0))     # zoomed out: a hairline
        painter.setBrush(Qt.NoBrush)
        painter.drawRoundedRect(self.rect, 8, 8)
        fill = QColor(pal.ink)
        fill.setAlphaF(0.08)
        painter.fillRect(self.tab, fill)
        if lod < LOD_TEXT:
            return
        painter.setPen(QPen(pal.ink, 1))
        _control(painter, self.control(), plus=False)
        font = Fonts.get()[1]
        if readable(font.pointSizeF(), lod):
            painter.setFont(font)
            text = QRectF(self.tab.left() + CONTROL + 8, self.tab.top(), self.tab.width() - CONTROL - 10, TAB_H)
            painter.drawText(text, Qt.AlignLeft | Qt.AlignVCenter,
                             QFontMetricsF(font).elidedText(self.layer.label, Qt.ElideLeft, text.width()))
