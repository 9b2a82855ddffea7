"""A graph pane: the scene of node and edge items, the zoomable view over it, and a minimap overlay.

The scene keeps Qt's default BSP index: with one item per edge, hit-testing and partial repaints stay cheap.
"""
from __future__ import annotations

import time
from typing import Hashable

from PySide6.QtCore import QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QPen
from PySide6.QtWidgets import QFrame, QGraphicsScene, QGraphicsView, QStyleOptionGraphicsItem, QWidget

from .graph_items import EdgeItem, Frame, NodeItem
from .graph_layout import Layout
from .graph_model import ViewGraph
from .palette import UNKNOWN, palette
from .raster import raster

MARGIN = 40


class GraphScene(QGraphicsScene):
    """Items are created top-down in chunks: the first chunk covers where the view starts (the top), the rest is
    added from the event loop, so a 10k-node graph paints at once and the window stays responsive."""
    FIRST_CHUNK, SLICE_S = 600, 0.03            # items before the first paint (the top of the graph); seconds per
                                                # later slice: each a short event-loop pause, never a stall
    completed = Signal()

    def __init__(self, vg: ViewGraph, layout: Layout, parent=None):
        super().__init__(parent)
        self.vg, self.layout = vg, layout
        self.setBackgroundBrush(palette().background)
        self.frame = Frame()
        self.nodes: list[NodeItem] = []
        self.edges: list[EdgeItem] = []
        self.node_by_key: dict[Hashable, NodeItem] = {}
        self.edges_by_tensor: dict[Hashable, list[EdgeItem]] = {}
        self._colours: tuple[dict, dict, dict] = ({}, {}, {})
        self._fresh: set = set()                      # node items apply() made: colour() must paint them
        self.version = 0                              # bumped when colours change: cached pictures redraw
        self.setSceneRect(QRectF(-MARGIN, -MARGIN, layout.width + 2 * MARGIN, layout.height + 2 * MARGIN))
        order = [(y - vg.nodes[i].height / 2, 0, i) for i, (_, y) in enumerate(layout.pos)]
        order += [(route[0][1], 1, i) for i, route in enumerate(layout.routes)]
        order.sort()
        self._todo = iter(order)
        self._timer = QTimer(self, interval=0, timeout=self._step)
        self.complete = False
        self.populate(self.FIRST_CHUNK)

    def populate(self, limit: int | None = None, seconds: float | None = None) -> None:
        """Create up to `limit` more items, or as many as fit in `seconds` (all when both are None)."""
        vg, layout, frame = self.vg, self.layout, self.frame
        cats, markers, conflicts = self._colours
        made = 0
        deadline = time.perf_counter() + seconds if seconds is not None else None
        for _, kind, i in self._todo:
            if kind == 0:
                node = vg.nodes[i]
                item = NodeItem(i, node, frame)
                item.setPos(*layout.pos[i])
                self._colour_node(item, cats, markers)
                self.addItem(item)
                self.nodes.append(item)
                self.node_by_key[node.key] = item
            else:
                edge = vg.edges[i]
                item = EdgeItem(i, edge, layout.routes[i], frame)
                if conflicts:
                    item.set_conflict(conflicts.get((edge.tensor, vg.nodes[edge.dst].key), ""))
                self.addItem(item)
                self.edges.append(item)
                self.edges_by_tensor.setdefault(edge.tensor, []).append(item)
            made += 1
            if (limit is not None and made >= limit) or \
                    (deadline is not None and made % 16 == 0 and time.perf_counter() > deadline):
                if not self._timer.isActive():
                    self._timer.start()
                return
        self._timer.stop()
        if not self.complete:
            self.complete = True
            self.completed.emit()

    def apply(self, vg: ViewGraph, layout: Layout) -> None:
        """Show a re-converted graph in place: items whose node or edge key is in both graphs stay (relabelled,
        moved only if the layout moved them), the others are removed or added. Colours follow with colour()."""
        from .live_layout import edge_keys
        self.finish()
        old_nodes = {it.node.key: it for it in self.nodes}
        keys = edge_keys(self.vg)
        old_edges = {keys[it.index]: it for it in self.edges}
        old_pos = self.layout.pos
        self.vg, self.layout = vg, layout
        self.nodes, self.edges, self.node_by_key, self.edges_by_tensor = [], [], {}, {}
        for i, node in enumerate(vg.nodes):
            item = old_nodes.pop(node.key, None)
            if item is None or (item.node.width, item.node.height) != (node.width, node.height):
                if item is not None:
                    self.removeItem(item)
                item = NodeItem(i, node, self.frame)
                item.setPos(*layout.pos[i])
                self.addItem(item)
                self._fresh.add(item)
            else:
                if item.node != node:
                    item.node, item._elided, item._fit_pt = node, None, 0.0     # new labels: re-elide on paint
                    item.update()
                if old_pos[item.index] != layout.pos[i]:
                    item.setPos(*layout.pos[i])
            item.index = i
            self.nodes.append(item)
            self.node_by_key[node.key] = item
        for item in old_nodes.values():
            self.removeItem(item)
        for i, (edge, key) in enumerate(zip(vg.edges, edge_keys(vg))):
            item = old_edges.pop(key, None)
            if item is None or item.points != layout.routes[i]:
                if item is not None:
                    self.removeItem(item)
                item = EdgeItem(i, edge, layout.routes[i], self.frame)
                self.addItem(item)
            elif item.edge != edge:
                item.edge = edge
                item.update()
            item.index = i
            self.edges.append(item)
            self.edges_by_tensor.setdefault(edge.tensor, []).append(item)
        for item in old_edges.values():
            self.removeItem(item)
        self.setSceneRect(QRectF(-MARGIN, -MARGIN, layout.width + 2 * MARGIN, layout.height + 2 * MARGIN))
        self.version += 1

    def _step(self) -> None:
        self.populate(seconds=self.SLICE_S)

    def finish(self) -> None:
        """Everything created: before a search or a selection by key."""
        if not self.complete:
            self.populate()

    def drawBackground(self, painter, rect):
        self.frame.lod = QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        super().drawBackground(painter, rect)

    @staticmethod
    def _colour_node(item, categories, markers) -> None:
        key = item.node.key
        cat = categories.get(key, UNKNOWN)
        marker = markers.get(key, "")
        tip = f"{item.node.title}  ({cat})" if item.node.kind == "op" else item.node.title
        item.set_category(cat, marker, tip + ("\n" + marker if marker else ""))

    def colour(self, categories: dict[Hashable, str], markers: dict[Hashable, str],
               edge_conflicts: dict[Hashable, str]) -> None:
        """Recolour in place: categories and marker texts by node key, conflict reasons by (tensor, consumer key).
        Items created later take the same colours."""
        self._colours = (categories, markers, edge_conflicts)
        self.version += 1
        fresh, self._fresh = self._fresh, set()
        for item in self.nodes:         # after a pin most keep their colour: touch only what changed
            k = item.node.key
            if item in fresh or item.category != categories.get(k, UNKNOWN) or item.marker != markers.get(k, ""):
                self._colour_node(item, categories, markers)
        nodes = self.vg.nodes
        for e in self.edges:
            e.set_conflict(edge_conflicts.get((e.edge.tensor, nodes[e.edge.dst].key), ""))

    def selected_keys(self) -> tuple[list[Hashable], list[Hashable]]:
        """(node keys, tensor keys) of the selection."""
        nodes, tensors = [], []
        for it in self.selectedItems():
            if isinstance(it, NodeItem):
                nodes.append(it.node.key)
            elif isinstance(it, EdgeItem) and it.edge.tensor not in tensors:
                tensors.append(it.edge.tensor)
        return nodes, tensors

    def select(self, node_keys=(), tensor_keys=()) -> QRectF:
        """Replace the selection; returns the bounding rect of what got selected (empty if nothing)."""
        self.finish()
        self.blockSignals(True)
        self.clearSelection()
        rect = QRectF()
        for k in node_keys:
            it = self.node_by_key.get(k) or self.node_by_key.get(self.vg.folded.get(k))
            if it is not None:
                it.setSelected(True)
                rect = rect.united(it.sceneBoundingRect())
        for t in tensor_keys:
            for it in self.edges_by_tensor.get(t, ()):
                it.setSelected(True)
                rect = rect.united(it.sceneBoundingRect())
        self.blockSignals(False)
        self.selectionChanged.emit()
        return rect


class GraphView(QGraphicsView):
    """Until the user zooms or pans, the view keeps its opening placement through resizes: panes and docks settle
    their sizes after the graph is first shown, and a placement computed for the old size would show empty space."""
    nodeActivated = Signal(object)          # NodeItem double-clicked
    zoomChanged = Signal()
    MIN_ZOOM, MAX_ZOOM = 0.01, 4.0
    MAX_FIT = 1.25                          # a tiny graph opens at about its natural size, not blown up
    READABLE = 0.25                         # below this scale the opening view shows the top of the graph instead

    def __init__(self, scene: GraphScene | None = None, parent=None):
        super().__init__(parent)
        self.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
        self.setDragMode(QGraphicsView.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.AnchorUnderMouse)
        self.setViewportUpdateMode(QGraphicsView.SmartViewportUpdate)
        self.setOptimizationFlags(QGraphicsView.DontSavePainterState | QGraphicsView.DontAdjustForAntialiasing)
        self.setFrameShape(QFrame.NoFrame)
        # panning is by drag, minimap and arrow keys; scrollbars popping in and out would shift a fitted view
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self._overview_key = self._overview_image = None
        self.auto = False                   # True while the opening placement stands (re-applied on resize)
        # re-applied from the event loop: inside resizeEvent the scroll ranges are still the old size's
        self._replace = QTimer(self, singleShot=True, interval=0, timeout=lambda: self.auto and self.initial())
        self.minimap = Minimap(self)
        self.horizontalScrollBar().valueChanged.connect(self.minimap.sync)
        self.verticalScrollBar().valueChanged.connect(self.minimap.sync)
        if scene is not None:
            self.setScene(scene)

    OVERVIEW_SCALE, OVERVIEW_ITEMS = 0.12, 3000   # below this scale, for scenes this big, paint with numpy

    def setScene(self, scene):
        super().setScene(scene)
        self.minimap.invalidate()
        self._overview_key = self._overview_image = None

    def overview(self) -> bool:
        sc = self.scene()
        return (sc is not None and sc.complete and len(sc.nodes) + len(sc.edges) >= self.OVERVIEW_ITEMS
                and self.transform().m11() < self.OVERVIEW_SCALE)

    def paintEvent(self, event):
        if not self.overview():
            super().paintEvent(event)
            return
        scene, vp = self.scene(), self.viewport()
        k = self.transform().m11()
        top_left = self.mapToScene(0, 0)
        key = (round(top_left.x(), 3), round(top_left.y(), 3), k, vp.width(), vp.height(), scene.version)
        if key != self._overview_key:
            self._overview_image = raster(scene, (top_left.x(), top_left.y()), k, vp.width(), vp.height())
            self._overview_key = key
        p = QPainter(vp)
        p.drawImage(0, 0, self._overview_image)
        p.setPen(QPen(palette().selection, 3))
        p.setBrush(Qt.NoBrush)
        for item in scene.selectedItems():          # selection stays visible: a ring at least 8 px wide
            r = self.mapFromScene(item.sceneBoundingRect()).boundingRect()
            p.drawRect(r.adjusted(-4, -4, 4, 4) if r.width() > 8 else r.adjusted(-6, -6, 6, 6))
        p.end()

    def zoom(self, factor: float) -> None:
        self.auto = False
        scale = self.transform().m11()
        factor = max(self.MIN_ZOOM / scale, min(factor, self.MAX_ZOOM / scale))
        self.scale(factor, factor)
        self.zoomChanged.emit()
        self.minimap.sync()

    def fit(self) -> None:
        """The whole graph, centred, at no more than MAX_FIT."""
        scene = self.scene()
        if scene is not None:
            r, vp = scene.sceneRect(), self.viewport().rect()
            k = min(vp.width() / max(r.width(), 1), vp.height() / max(r.height(), 1), self.MAX_FIT)
            self.resetTransform()
            self.scale(max(k, self.MIN_ZOOM), max(k, self.MIN_ZOOM))
            self.centerOn(r.center())
            self.zoomChanged.emit()
            self.minimap.sync()

    def initial(self) -> None:
        """Fit when the whole graph is still legible; otherwise start readable at the top, like a document.
        Kept through resizes until the user moves the view."""
        scene = self.scene()
        if scene is None:
            return
        self.auto = True
        r, vp = scene.sceneRect(), self.viewport().rect()
        if min(vp.width() / max(r.width(), 1), vp.height() / max(r.height(), 1)) >= self.READABLE:
            self.fit()
            return
        self.resetTransform()
        self.scale(0.8, 0.8)
        first = self.start_item()
        top = first.pos().y() if first is not None else r.top()
        x = first.pos().x() if first is not None else r.center().x()
        self.centerOn(x, top + vp.height() / 2 / 0.8 - 40)
        self.zoomChanged.emit()
        self.minimap.sync()

    def start_item(self):
        """The node a big graph opens on: the topmost of the first ones created."""
        nodes = self.scene().nodes[:50] if self.scene() is not None else []
        return min(nodes, key=lambda it: it.pos().y()) if nodes else None

    def reveal(self, rect: QRectF) -> None:
        """Centre on rect, zooming in to a readable scale if the view is zoomed far out."""
        if rect.isEmpty():
            return
        self.auto = False
        if self.transform().m11() < 0.6:
            self.resetTransform()
            self.scale(0.9, 0.9)
            self.zoomChanged.emit()
        self.centerOn(rect.center())
        self.minimap.sync()

    def mouseMoveEvent(self, event):
        if event.buttons() & Qt.LeftButton:
            self.auto = False                  # the user drags the view: their placement from now on
        super().mouseMoveEvent(event)

    def keyPressEvent(self, event):
        self.auto = False
        super().keyPressEvent(event)

    def wheelEvent(self, event):
        d = event.angleDelta().y()
        if d:
            self.zoom(1.0015 ** d)
        event.accept()

    def mouseDoubleClickEvent(self, event):
        item = self.itemAt(event.position().toPoint())
        if isinstance(item, NodeItem):
            self.nodeActivated.emit(item)
        super().mouseDoubleClickEvent(event)

    def resizeEvent(self, event):
        super().resizeEvent(event)
        if self.auto:
            self._replace.start()
        self.minimap.place()
        self.minimap.sync()


class Minimap(QWidget):
    """An overview in the view's corner: a cached picture of the whole scene and the visible area on top. At most
    SIZE px, and a small part of the pane (AREA of it, WIDTH and HEIGHT of its sides), so it never hides the graph."""
    SIZE, AREA, WIDTH, HEIGHT = 180, 0.12, 0.3, 0.5

    def __init__(self, view: GraphView):
        super().__init__(view)
        self.view = view
        self.image: QImage | None = None
        self.enabled = True                  # the user's choice; shown only when part of the graph is off-screen
        self._timer = QTimer(self, singleShot=True, interval=120, timeout=self._render)
        self.setCursor(Qt.CrossCursor)
        self.setToolTip("Overview: click or drag to move the view")

    def invalidate(self) -> None:
        self.image = None
        self._timer.start()

    def sync(self) -> None:
        scene = self.view.scene()
        vis = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        whole = scene.sceneRect().adjusted(MARGIN, MARGIN, -MARGIN, -MARGIN) if scene is not None else None
        self.setVisible(bool(self.enabled and scene is not None and not vis.contains(whole)))
        self.update()

    def place(self) -> None:
        scene = self.view.scene()
        if scene is None:
            return
        r = scene.sceneRect()
        vp = self.view.viewport().geometry()
        rw, rh = max(r.width(), 1), max(r.height(), 1)
        k = min(self.SIZE / max(rw, rh), self.WIDTH * vp.width() / rw, self.HEIGHT * vp.height() / rh,
                (self.AREA * vp.width() * vp.height() / (rw * rh)) ** 0.5)
        w, h = max(int(rw * k), 12), max(int(rh * k), 12)
        if (w, h) != (self.width(), self.height()) and self.image is not None:
            self.invalidate()                      # its picture was drawn for the old size
        self.setGeometry(vp.right() - w - 10, vp.bottom() - h - 10, w, h)
        self.raise_()

    def _render(self) -> None:
        scene = self.view.scene()
        if scene is None or not scene.complete:     # the scene signals completion, which invalidates again
            return
        self.place()
        k, r = self._k()
        self.image = raster(scene, (r.left(), r.top()), k, self.width(), self.height(), alpha=235)
        self.sync()

    def _k(self) -> tuple[float, QRectF]:
        r = self.view.scene().sceneRect()
        return min(self.width() / r.width(), self.height() / r.height()), r

    def paintEvent(self, event):
        if self.view.scene() is None:
            return
        p = QPainter(self)
        if self.image is not None:
            p.drawImage(0, 0, self.image)
        p.setPen(QPen(QColor(0, 0, 0), 1))
        p.drawRect(self.rect().adjusted(0, 0, -1, -1))
        k, r = self._k()
        vis = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        box = QRectF((vis.left() - r.left()) * k, (vis.top() - r.top()) * k, vis.width() * k, vis.height() * k)
        p.setPen(QPen(QColor(213, 94, 0), 2))
        p.setBrush(QColor(213, 94, 0, 40))
        p.drawRect(box.intersected(QRectF(self.rect())))
        p.end()

    def _goto(self, pos) -> None:
        self.view.auto = False
        k, r = self._k()
        self.view.centerOn(QPointF(r.left() + pos.x() / k, r.top() + pos.y() / k))
        self.update()

    def mousePressEvent(self, event):
        self._goto(event.position())

    def mouseMoveEvent(self, event):
        if event.buttons() & Qt.LeftButton:
            self._goto(event.position())
