"""Scene items: one NodeItem per op or graph input/output, one EdgeItem per (tensor, consumer).

Both paint by level of detail: zoomed out a node is a filled rectangle and an edge a thin line; text, attributes,
folded constants, shapes and arrowheads appear only when they are big enough to read.
"""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QFont, QFontMetrics, QPainterPath, QPainterPathStroker, QPen, QPolygonF
from PySide6.QtWidgets import QGraphicsItem

from .graph_model import LINE_H, TITLE_H, Edge, Node
from .lod import LOD_DETAIL, LOD_TEXT, label_size, readable
from .palette import CONFLICT, UNKNOWN, palette
_SELECTABLE = QGraphicsItem.ItemIsSelectable   # looked up once: PySide6's enum access is slow, once per item


class Fonts:
    """The boxes' two fonts (bold title, small detail lines), made once a QApplication exists; shared by every item
    that draws a box (op nodes, group boxes)."""
    title = small = None

    @classmethod
    def get(cls):
        if cls.title is None:
            cls.title = QFont()
            cls.title.setPointSizeF(9.0)
            cls.title.setBold(True)
            cls.small = QFont()
            cls.small.setPointSizeF(7.5)
        return cls.title, cls.small


class Frame:
    """Shared by a scene's items: the level of detail of the frame being painted, set once per frame by the scene
    (GraphScene.drawBackground) instead of once per item: Python work per item is what costs when zoomed out."""
    lod = 1.0
    gone = False                  # the scene shows another graph: these items paint nothing until removed


def seen_lod(item, painter, option) -> float:
    """The scale `item` is being painted at: its scene's Frame's, else worked out from the painter; 0.0 when it
    is not to be painted (its graph replaced)."""
    frame = item.frame
    if frame is None:
        return option.levelOfDetailFromTransform(painter.worldTransform())
    return 0.0 if frame.gone else frame.lod


class NodeItem(QGraphicsItem):
    paint_calls = 0               # counted for the paint-stress test (guards a PySide6 6.12 crash)

    def __init__(self, index: int, node: Node, frame: Frame | None = None):
        super().__init__()
        self.index, self.node, self.frame = index, node, frame
        self.category, self.marker = UNKNOWN, ""
        self._fills()
        w, h = node.width, node.height
        self.rect = QRectF(-w / 2, -h / 2, w, h)
        self._bounds = self.rect.adjusted(-4, -8, 8, 4)
        self._elided: tuple[str, list[str]] | None = None
        self._fit_pt = 0.0                  # largest title size that fits the box, for reading when zoomed out
        self._wrapped = False
        self.setFlag(_SELECTABLE)
        self.setZValue(1)

    def boundingRect(self) -> QRectF:
        return self._bounds

    def set_category(self, category: str, marker: str = "", tooltip: str = "") -> None:
        self.category, self.marker = category, marker
        self._fills()
        self.setToolTip(tooltip)
        self.update()

    def restyle(self) -> None:
        """The colour scheme switched: the cached fills again, by set_category (which a kind of box may override).
        An overlay's colours (validation errors: a category of its own) are the same in both schemes."""
        if self.node.kind == "op" and self.category not in palette().fill:
            self.update()
            return
        self.set_category(self.category, self.marker, self.toolTip())

    def _fills(self) -> None:
        pal = palette()
        self.fill = pal.terminal if self.node.kind != "op" else pal.color(self.category)
        self.quick_fill = pal.edge_conflict if self.marker else self.fill

    def relabelled(self) -> None:
        """New labels (a re-run changed the node): elided again on the next paint."""
        self._elided, self._fit_pt = None, 0.0
        self.update()

    def _texts(self):
        if self._elided is None:
            title_font, small_font = Fonts.get()
            w = int(self.rect.width()) - 10
            t = QFontMetrics(title_font).elidedText(self.node.title, Qt.ElideMiddle, w)
            fm = QFontMetrics(small_font)
            self._elided = (t, [fm.elidedText(s, Qt.ElideRight, w) for s in self.node.lines])
        return self._elided

    def _title_font(self, lod: float) -> tuple[QFont | None, str]:
        """Zoomed out, the title grows (up to what fits the box, wrapping at underscores) so it stays legible; None
        when it would still read below lod.MIN_TEXT_PX: no text rather than a smudge."""
        base = Fonts.get()[0] if self.node.kind == "op" else Fonts.get()[1]
        pt = base.pointSizeF()
        if not self._fit_pt:
            tw = QFontMetrics(base).horizontalAdvance(self.node.title) or 1
            room_w, room_h = self.rect.width() - 10, self.rect.height() - 4
            one = min(pt * room_w / tw, room_h / 1.7)
            two = min(pt * room_w / (tw * 0.62), room_h / 3.4) if "_" in self.node.title else 0.0
            self._fit_pt = min(max(one, two), 30.0)
            self._wrapped = two > one
        size, whole = label_size(pt, self._fit_pt, lod)
        if not size:
            return None, ""
        if not whole:                            # does not fit even at the normal size: elided, normal size
            return base, self._texts()[0]
        font = QFont(base)
        font.setPointSizeF(size)
        return font, self.node.title.replace("_", "_\u200b") if self._wrapped else self.node.title

    def paint(self, painter, option, widget=None):
        NodeItem.paint_calls += 1
        lod = seen_lod(self, painter, option)
        if not lod:
            return
        if lod < LOD_TEXT:                      # cheap: one filled rectangle
            if self.isSelected():
                painter.fillRect(self.rect.adjusted(-6 / lod, -6 / lod, 6 / lod, 6 / lod), palette().selection)
            painter.fillRect(self.rect, self.quick_fill)
            return
        pal, fill, selected = palette(), self.fill, self.isSelected()
        if selected:
            painter.setPen(QPen(pal.selection, 7))
            painter.setBrush(Qt.NoBrush)
            painter.drawRoundedRect(self.rect, 6, 6)
        painter.setPen(QPen(pal.outline, 1.6 if selected else 0.8))
        painter.setBrush(QBrush(fill))
        radius = self.rect.height() / 2 if self.node.kind != "op" else 5
        painter.drawRoundedRect(self.rect, min(radius, 11), min(radius, 11))
        title, lines = self._texts()
        small_font = Fonts.get()[1]
        text_color = pal.text_on_terminal if self.node.kind != "op" else pal.text(self.category)
        painter.setPen(text_color)
        r = self.rect
        if lod < LOD_DETAIL:                    # title only, centred in the whole box, as large as fits
            font, text = self._title_font(lod)
            if font is not None:
                painter.setFont(font)
                painter.drawText(r.adjusted(4, 0, -4, 0), Qt.AlignCenter | Qt.TextWordWrap, text)
        else:
            painter.setFont(Fonts.get()[0] if self.node.kind == "op" else small_font)
            painter.drawText(QRectF(r.left() + 4, r.top(), r.width() - 8, TITLE_H), Qt.AlignCenter, title)
        if lod >= LOD_DETAIL and lines:
            painter.setFont(small_font)
            y = r.top() + TITLE_H
            for s in lines:
                painter.drawText(QRectF(r.left() + 6, y, r.width() - 12, LINE_H), Qt.AlignVCenter | Qt.AlignLeft, s)
                y += LINE_H
        if self.marker:
            self._paint_marker(painter, pal, lod)

    def _paint_marker(self, painter, pal, lod: float):
        # a warning triangle on the top-right corner: shape, not just colour, marks a conflict
        font = Fonts.get()[0]
        warning(painter, pal, self.rect.right() - 2, self.rect.top() - 2, 9,
                "!" if readable(font.pointSizeF(), lod) else "", font)


def warning(painter, pal, x: float, y: float, half: float, text: str, font) -> None:
    """A warning triangle `2 * half` wide, its apex above (x, y), with `text` in it ("": none, too small to read)."""
    tri = QPolygonF([QPointF(x - half, y + half * 0.8), QPointF(x, y - half * 0.9), QPointF(x + half, y + half * 0.8)])
    painter.setPen(QPen(pal.outline, 1.2))
    painter.setBrush(QBrush(pal.color(CONFLICT)))
    painter.drawPolygon(tri)
    if text:
        painter.setPen(pal.text(CONFLICT))
        painter.setFont(font)
        painter.drawText(QRectF(x - half, y - half * 0.6, 2 * half, half * 1.4), Qt.AlignCenter, text)


def route_path(points: list[tuple[float, float]]) -> QPainterPath:
    """Vertical runs through layer bands, smooth S-bends in the gaps between layers."""
    path = QPainterPath(QPointF(*points[0]))
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if abs(x0 - x1) < 0.5:
            path.lineTo(x1, y1)
        else:
            my = (y0 + y1) / 2
            path.cubicTo(x0, my, x1, my, x1, y1)
    return path


class EdgeItem(QGraphicsItem):
    """A polyline edge; its path and hit shape are built on first use, so only painted edges pay for them."""
    pin = ""                                      # the layout its tensor is pinned to ("": none; few edges have one)

    def __init__(self, index: int, edge: Edge, points: list[tuple[float, float]], frame: Frame | None = None):
        super().__init__()
        self.index, self.edge, self.points, self.frame = index, edge, points, frame
        self.conflict = ""
        self._path: QPainterPath | None = None
        self._shape: QPainterPath | None = None
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        x0, y0 = min(xs), min(ys)
        # room for the pen, the selection halo and the shape label beside the start
        self._bounds = QRectF(x0 - 8, y0 - 8, max(xs) - x0 + 136, max(ys) - y0 + 22)
        self._start, self._end = QPointF(*points[min(1, len(points) - 1)]), QPointF(*points[-1])  # label in the gap
        self.setFlag(_SELECTABLE)
        if edge.count > 1:
            self.setToolTip(f"{edge.count} inputs drawn as one edge")

    def path(self) -> QPainterPath:
        if self._path is None:
            self._path = route_path(self.points)
        return self._path

    def set_conflict(self, reason: str) -> None:
        self._mark("conflict", reason)

    def set_pin(self, layout: str) -> None:
        self._mark("pin", layout)

    def _mark(self, attr: str, value: str) -> None:
        """A conflict or pin mark changed: its tooltip and picture follow (nothing when it is the same)."""
        if value != getattr(self, attr):
            setattr(self, attr, value)
            self._tip()
            self.update()

    def _tip(self) -> None:
        tips = ([f"Pinned to {self.pin}"] if self.pin else []) + ([f"Conflict: {self.conflict}"] if self.conflict
                                                                  else [])
        self.setToolTip("\n".join(tips) or (f"{self.edge.count} inputs drawn as one edge" if self.edge.count > 1
                                             else ""))

    def pin_marker(self) -> QPointF:
        """Where the pin's marker sits: on the edge, a quarter of the way down (the conflict diamond is halfway, the
        shape label beside the start)."""
        return self.path().pointAtPercent(0.25)

    def shape(self) -> QPainterPath:
        if self._shape is None:
            stroker = QPainterPathStroker()
            stroker.setWidth(8)
            self._shape = stroker.createStroke(self.path())
        return self._shape

    def boundingRect(self) -> QRectF:
        return self._bounds

    def paint(self, painter, option, widget=None):
        lod = seen_lod(self, painter, option)
        if not lod:
            return
        pal = palette()
        color = pal.edge_conflict if self.conflict else pal.edge
        if self.isSelected():
            painter.setPen(QPen(pal.selection, 7 if lod >= LOD_TEXT else 7 / lod))
            painter.setBrush(Qt.NoBrush)         # the view keeps no painter state between items: an arrowhead's
            painter.drawPath(self.path())        # brush would fill the curve's hull
        if lod < LOD_TEXT:
            pen = QPen(color, 0)                 # cosmetic hairline
            painter.setPen(pen)
            painter.setBrush(Qt.NoBrush)
            painter.drawPath(self.path())
            if self.pin:
                self._paint_pin(painter, pal, min(4 / lod, 40), lod)
            return
        pen = QPen(color, 2.6 if self.conflict or self.edge.count > 1 else 1.2)     # a bundle is drawn heavy
        if self.conflict:
            pen.setStyle(Qt.DashLine)
        painter.setPen(pen)
        painter.setBrush(Qt.NoBrush)
        painter.drawPath(self.path())
        e = self._end                            # arrowhead
        painter.setPen(Qt.NoPen)
        painter.setBrush(color)
        painter.drawPolygon(QPolygonF([e, QPointF(e.x() - 4, e.y() - 8), QPointF(e.x() + 4, e.y() - 8)]))
        if self.conflict:                        # a diamond marker mid-edge
            m = self.path().pointAtPercent(0.5)
            painter.setPen(QPen(pal.outline, 1))
            painter.setBrush(pal.color(CONFLICT))
            painter.drawPolygon(QPolygonF([QPointF(m.x(), m.y() - 7), QPointF(m.x() + 7, m.y()),
                                           QPointF(m.x(), m.y() + 7), QPointF(m.x() - 7, m.y())]))
        if self.pin:
            self._paint_pin(painter, pal, 6.5, lod)
        if lod >= LOD_DETAIL and self.edge.first and self.edge.label:
            painter.setPen(pal.ink)
            painter.setFont(Fonts.get()[1])
            s = self._start
            painter.drawText(QRectF(s.x() + 5, s.y() + 1, 115, 12), Qt.AlignLeft | Qt.AlignVCenter, self.edge.label)

    def _paint_pin(self, painter, pal, r: float, lod: float) -> None:
        """A pinned tensor's marker: a round head with P on the edge; shape, not just colour, says "pinned"."""
        m = self.pin_marker()
        painter.setPen(QPen(pal.outline, 1))
        painter.setBrush(pal.pinned)
        painter.drawEllipse(m, r, r)
        if r >= 5 and readable(Fonts.get()[0].pointSizeF(), lod):
            painter.setPen(pal.text_on_pinned)
            painter.setFont(Fonts.get()[0])
            painter.drawText(QRectF(m.x() - r, m.y() - r, 2 * r, 2 * r), Qt.AlignCenter, "P")
