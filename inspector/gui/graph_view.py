"""A graph pane: the scene of node and edge items, the zoomable view over it, and a minimap overlay.

The scene keeps Qt's default BSP index: with one item per edge, hit-testing and partial repaints stay cheap.
"""
from __future__ import annotations

import bisect
import math
import time
import weakref
from typing import Hashable

import shiboken6
from PySide6.QtCore import QObject, QPointF, QRectF, QRunnable, Qt, QThreadPool, QTimer, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QPen
from PySide6.QtWidgets import QFrame, QGraphicsScene, QGraphicsView, QStyleOptionGraphicsItem, QWidget

from .graph_group import GroupFrame, GroupItem, levels
from .graph_items import EdgeItem, Frame, NodeItem
from .graph_layout import Geometry
from .graph_model import ViewGraph
from .palette import UNKNOWN, palette
from .raster import arrays, draw, raster

MARGIN = 40


class Turns:
    """One timer for every scene's work left (building, re-indexing, recolouring), each call one scene's slice, in
    turn: with a timer per scene, both panes' slices ran back to back in one event-loop pass (a big model opening:
    the TFLite pane's recolour and the ONNX pane's building, before anything else of that pass)."""

    def __init__(self):
        self.queue: list[weakref.ref] = []      # scenes with work left, the next to run first (a scene nothing
        self.timer: QTimer | None = None        # else holds is not kept alive); the timer is made on first use

    def want(self, scene) -> None:
        if not any(r() is scene for r in self.queue):
            self.queue.append(weakref.ref(scene))
        if self.timer is None:
            self.timer = QTimer(interval=0, timeout=self.step)
        if not self.timer.isActive():
            self.timer.start()

    def drop(self, scene) -> None:
        self.queue = [r for r in self.queue if r() is not scene]

    def step(self) -> None:
        """One slice of the first scene waiting (a scene left unfinished queues again, after the others)."""
        while self.queue:
            scene = self.queue.pop(0)()
            if scene is not None and shiboken6.isValid(scene):     # one closed meanwhile is gone
                scene.populate(scene.SLICE_ITEMS, scene.SLICE_S)
                break
        if not self.queue and self.timer is not None:
            self.timer.stop()


TURNS = Turns()


class GraphScene(QGraphicsScene):
    """Items are created top-down in chunks: the first chunk covers where the view starts (the top), the rest is
    added from the event loop, so a 10k-node graph paints at once and the window stays responsive. A re-converted
    graph (apply) and a recolour of many items are finished from the event loop too, in slices.

    `built`: every item exists (the overview picture can be drawn); `complete`: built, re-indexed after the last
    apply() and every colour painted (the minimap's picture shows colours: it waits for `completed`)."""
    FIRST_CHUNK, SLICE_S = 600, 0.012           # items before the first paint (the top of the graph); seconds per
                                                # later slice (TURNS: one scene's per event-loop pass): each a short
                                                # pause, never a stall (a worker busy in Python can double its time)
    SLICE_ITEMS = 400                           # and at most this many items made per slice, however fast
    FIRST_SPAN = 4000                           # scene px: the opening view at 0.8 on a 3,200 px high pane
    PAINT_NOW = 2000                            # recoloured at once; more (a first conversion's 10,000) in slices
    completed = Signal()

    def __init__(self, vg: ViewGraph, layout: Geometry, parent=None):
        super().__init__(parent)
        self.setBackgroundBrush(palette().background)
        self.frame = Frame()
        self._colours: tuple[dict, dict, dict] = ({}, {}, {})     # the latest colours asked for
        self.pins: dict[Hashable, str] = {}           # tensor -> the layout it is pinned to (its edges marked)
        self._dropping: list = []                     # a replaced graph's items, still to be removed (slices)
        self.group_frames: list[GroupFrame] = []      # the open groups' frames (set_frames)
        self._kept: Frame | None = None               # a replaced graph's, seen while the new one is made
        self.version = 0                              # bumped when colours change: cached pictures redraw
        self._start(vg, layout)

    def replace(self, vg: ViewGraph, layout: Geometry, keep: bool = False) -> None:
        """Show another graph in this scene, made afresh in slices like a new scene's (a change too big for
        apply(): opening every group of 10,000 ops made 20,000 items in one event-loop turn). The colours and
        pins asked for stay; the selection does not. `keep` (a re-run of the graph shown): the old items stay
        seen, and selected, until the new ones are all made (then shown in one turn, the selection moved to them
        by key): built top-down in slices, a pin's new graph left the view blank until the slices reached it."""
        TURNS.drop(self)                              # the old graph's work left is dropped with its items
        keep = keep and (self._kept is not None or (self.built and self._update is None))
        selected = [] if keep else self.selectedItems()
        self.blockSignals(True)                       # its items go: said once below, if any was selected
        for item in selected:
            item.setSelected(False)
        self.blockSignals(False)
        # the old items paint nothing from now on (with `keep`: once the new ones are made) and are removed in
        # slices (Collapse Groups after Expand All on 10,000 ops: 20,000 items cleared, and their Python objects
        # freed, in one event-loop turn)
        if keep and self._kept is None:
            self._kept = self.frame                   # what is seen until the new graph is made
        elif not keep:
            self.frame.gone = True
            if self._kept is not None:
                self._kept.gone = True
                self._kept = None
        self.frame = Frame()
        self.frame.gone = keep                        # unseen while it is made
        if self._update is not None:                 # an apply() under way: its lookups are not what is shown
            self._dropping.extend(self.items())
        else:                                         # (asking Qt for them all re-reads each one's bounds)
            # the top of the old graph last, so removed first: the new graph opens there, where each item not yet
            # removed still costs a paint call
            self._dropping += [it for it in reversed(self._edge_at) if it is not None]
            self._dropping += [it for it in reversed(self._node_at) if it is not None]
            self._dropping += self.group_frames
        self.group_frames = []
        self.version += 1
        self._start(vg, layout)
        if selected:
            self.selectionChanged.emit()

    @property
    def keeping(self) -> bool:
        """A replaced graph's items are what is seen while the new graph is made (replace's `keep`)."""
        return self._kept is not None

    def _swap(self) -> None:
        """The new graph made: it is seen from now on, the kept one not (its items removed in slices); what was
        selected of the kept one is selected in the new one, by key."""
        kept, self._kept = self._kept, None
        nodes, tensors = [], set()
        for item in self.selectedItems():
            if isinstance(item, NodeItem) and item.frame is kept:
                nodes.append(item.node.key)
            elif isinstance(item, EdgeItem) and item.frame is kept:
                tensors.add(item.edge.tensor)
        kept.gone = True
        self.frame.gone = False
        self.version += 1
        lost = False                                  # a key the new graph lacks: the selection changed
        if nodes or tensors:
            self.blockSignals(True)                   # the same keys selected: nothing to tell
            try:
                self.clearSelection()
                for k in nodes:
                    it = self.node_by_key.get(k) or self.node_by_key.get(self.vg.folded.get(k))
                    lost = lost or it is None
                    if it is not None:
                        it.setSelected(True)
                for t in tensors:
                    lost = lost or t not in self.edges_by_tensor
                    for it in self.edges_by_tensor.get(t, ()):
                        it.setSelected(True)
            finally:
                self.blockSignals(False)
        if lost:
            self.selectionChanged.emit()
        self.update()

    def _start(self, vg: ViewGraph, layout: Geometry) -> None:
        self.vg, self.layout = vg, layout
        self.nodes: list[NodeItem] = []
        self.edges: list[EdgeItem] = []
        self.node_by_key: dict[Hashable, NodeItem] = {}
        self.edges_by_tensor: dict[Hashable, list[EdgeItem]] = {}
        self._node_at: list = [None] * len(vg.nodes)  # the items by index (nodes and edges are in creation order)
        self._edge_at: list = [None] * len(vg.edges)
        self._shown: tuple[dict, dict, dict] = self._colours      # what the items are painted with (or queued to)
        self._fresh: set = set()                      # items apply() made: colour() must paint them
        self._stale = False                           # items painted by other colours than _colours (overlay)
        self._repaint: list = []                      # items colour() left to the event loop's slices
        self._sliced = False                          # _repaint was painted in slices: cached pictures redraw
        self._update = None                           # apply()'s re-indexing still to do (a generator)
        self._deadline: float | None = None           # when the running slice ends (None: no end)
        self.raster_cache: dict = {}                  # raster.node_arrays' arrays (node geometry, colours)
        self.bounds = QRectF(-MARGIN, -MARGIN, layout.width + 2 * MARGIN, layout.height + 2 * MARGIN)
        if not self._dropping:          # (a new scene rect or depth re-indexes every item: once the old ones went)
            self._size_index()
        self._todo = iter(layout.order(vg))
        self.built = False
        self._announced = False                       # completed emitted since the scene last had work left
        self.populate(self._first_chunk())

    def _first_chunk(self) -> int:
        """Items made before the first paint: a big graph opens on its top (GraphView.initial), so those of its top
        FIRST_SPAN px suffice (far fewer than FIRST_CHUNK, which held the GUI thread as the ONNX pane first
        showed); a small graph all of its first FIRST_CHUNK, as it may open fitted."""
        order = self.layout.order(self.vg)
        if len(order) <= self.FIRST_CHUNK:
            return self.FIRST_CHUNK
        return min(self.FIRST_CHUNK, bisect.bisect_left(order, (order[0][0] + self.FIRST_SPAN,)))

    @property
    def reindexing(self) -> bool:
        """apply()'s re-indexing (after a pin) is still under way."""
        return self._update is not None

    @property
    def complete(self) -> bool:
        return self.built and self._update is None and not self._repaint and not self._dropping

    def populate(self, limit: int | None = None, seconds: float | None = None) -> None:
        """Create up to `limit` more items, or do as much of the work left (re-indexing, creating, recolouring) as
        fits in `seconds` (all of it when both are None)."""
        deadline = self._deadline = time.perf_counter() + seconds if seconds is not None else None
        if self._update is not None and next(self._update) is not True:
            self._later()
            return
        if self._dropping and deadline is not None and self._kept is None and not self._drop(deadline):
            self._later()                           # (finish(): left to slices)
            return
        if not self.built and not self._create(limit, deadline):
            self._later()
            return
        if self._kept is not None:
            self._swap()
        if not self._paint(deadline) or self._dropping:
            self._later()
            return
        TURNS.drop(self)
        if self._sliced:                # the colours painted in slices: overview and minimap pictures redraw
            self._sliced = False
            self.version += 1
            self.update()
        if not self._announced:
            self._announced = True
            self.completed.emit()

    def _later(self) -> None:
        self._announced = False
        TURNS.want(self)

    def _create(self, limit: int | None, deadline: float | None) -> bool:
        """Items of the graph not made yet; True when all are."""
        vg, layout, frame = self.vg, self.layout, self.frame
        cats, markers, conflicts = self._colours
        made = 0
        for _, kind, i in self._todo:
            if kind == 0:
                node = vg.nodes[i]
                item = _node_item(i, node, frame)
                item.setPos(*layout.pos[i])
                self._colour_node(item, cats, markers)
                self.addItem(item)
                self.nodes.append(item)
                self._node_at[i] = item
                self.node_by_key[node.key] = item
            else:
                edge = vg.edges[i]
                item = EdgeItem(i, edge, layout.routes[i], frame)
                if conflicts:
                    self._colour_edge(item, conflicts, vg.nodes)
                if self.pins and edge.tensor in self.pins:
                    item.set_pin(self.pins[edge.tensor])
                self.addItem(item)
                self.edges.append(item)
                self._edge_at[i] = item
                self.edges_by_tensor.setdefault(edge.tensor, []).append(item)
            made += 1
            if (limit is not None and made >= limit) or \
                    (deadline is not None and made % 16 == 0 and time.perf_counter() > deadline):
                self._index()
                return False
        self.built = True
        self._index()
        return True

    def set_frames(self, frames) -> None:
        """The open groups' frames, (Layer, rect of the nodes it shows) each, in place of the last ones."""
        frames, old = list(frames), self.group_frames
        if len(frames) == len(old) and all(f.layer is layer and f.around == rect for f, (layer, rect) in
                                           zip(old, frames)):
            return                                  # (a re-run that moved nothing: the same frames)
        for item in self.group_frames:
            self.removeItem(item)
        level = levels([layer for layer, _ in frames])
        self.group_frames = [GroupFrame(layer, rect, self.frame, level[layer.id]) for layer, rect in frames]
        for item in self.group_frames:
            self.addItem(item)

    def _drop(self, deadline: float) -> bool:
        """Remove a replaced graph's items (the last made first) until `deadline`; True when none is left."""
        dropping, remove = self._dropping, self.removeItem
        n = 0
        while dropping:
            remove(dropping.pop())              # its last reference: the item is deleted
            n += 1
            if n % 64 == 0 and time.perf_counter() > deadline:
                return False
        self._size_index()
        return True

    def _size_index(self) -> None:
        self.setSceneRect(self.bounds)
        self.setBspTreeDepth(_depth(len(self.vg.nodes) + len(self.vg.edges)))

    def _index(self) -> None:
        """Index the items just made, in this slice: Qt indexes new items at its next query or after 2 s, and 2 s of
        slices' items indexed at once was a stall on a big model."""
        self.items(QRectF(0, 0, 1, 1))

    def apply(self, vg: ViewGraph, layout: Geometry, diff=None) -> None:
        """Show a re-converted graph in place: items whose node or edge key is in both graphs stay (relabelled,
        moved only if the layout moved them), the others are removed or added. Colours follow with colour().
        `diff` (live_layout.Diff, made in the worker) says which; without one for the shown graph it is made here.

        What is seen changes at once; re-indexing the kept items (all of a big model's) follows
        in slices from the event loop, and the lookups (nodes, node_by_key, edges_by_tensor) and colour() wait
        for it: finish() first to read them."""
        from .live_layout import diff as make_diff
        self.finish()
        if diff is None or diff.old is not self.vg:
            diff = make_diff(self.vg, self.layout, vg, layout)
        self._update = self._updating(vg, layout, diff)
        next(self._update)                          # the visible change, now
        self.populate(seconds=self.SLICE_S)         # a small graph (NASNet) all of it; a big one in slices

    def _updating(self, vg: ViewGraph, layout: Geometry, diff):
        """apply()'s work: first what is seen (items removed, added, moved, relabelled), then, yielding whenever a
        slice's time is up, every kept item re-indexed and the lookups rebuilt; yields True when done."""
        old_nodes, old_edges = self._node_at, self._edge_at
        selected = set()        # keys of selected items going: their replacements are selected (same keys)
        gone: list = []
        for items, kept in ((old_nodes, diff.nodes), (old_edges, diff.edges)):    # what the new graph no longer has
            for j in set(range(len(items))).difference(kept):
                if items[j].isSelected():
                    selected.add(_key(items[j]))
                self.removeItem(items[j])
                gone.append(items[j])
        frame, fresh = self.frame, self._fresh
        new_nodes: dict[int, NodeItem] = {}
        new_edges: dict[int, EdgeItem] = {}
        for i, j in enumerate(diff.nodes):
            if j < 0:
                item = new_nodes[i] = _node_item(i, vg.nodes[i], frame)
                item.setPos(*layout.pos[i])
                self.addItem(item)
                fresh.add(item)
        for i, j in enumerate(diff.edges):
            if j < 0:
                item = new_edges[i] = EdgeItem(i, vg.edges[i], layout.routes[i], frame)
                self.addItem(item)
                fresh.add(item)
        for item in fresh if selected else ():
            if _key(item) in selected:
                item.setSelected(True)
        for i in diff.relabelled | diff.moved:
            item = old_nodes[diff.nodes[i]]
            item.index, item.node = i, vg.nodes[i]
            if i in diff.relabelled:
                item.relabelled()
            if i in diff.moved:
                item.setPos(*layout.pos[i])
        for i in diff.restyled:
            item = old_edges[diff.edges[i]]
            item.index, item.edge = i, vg.edges[i]
            item.update()
        self.vg, self.layout = vg, layout
        self.bounds = QRectF(-MARGIN, -MARGIN, layout.width + 2 * MARGIN, layout.height + 2 * MARGIN)
        if not self._dropping:
            self.setSceneRect(self.bounds)
        self.version += 1
        yield False
        nodes = yield from self._reindexed(vg.nodes, diff.nodes, new_nodes, old_nodes, "node")
        edges = yield from self._reindexed(vg.edges, diff.edges, new_edges, old_edges, "edge")
        # the lookups as they were, less what went and plus what came: a kept item keeps its key and tensor
        by_key = dict(self.node_by_key)
        by_tensor = dict(self.edges_by_tensor)
        out = set(gone)
        for t in {it.edge.tensor for it in gone if isinstance(it, EdgeItem)} | {it.edge.tensor for it in
                                                                                new_edges.values()}:
            by_tensor[t] = [it for it in by_tensor.get(t, ()) if it not in out]
        for item in gone:
            if isinstance(item, NodeItem) and by_key.get(item.node.key) is item:
                del by_key[item.node.key]
        for item in new_nodes.values():
            by_key[item.node.key] = item
        for item in new_edges.values():
            by_tensor[item.edge.tensor].append(item)
        for t in {item.edge.tensor for item in new_edges.values()}:
            by_tensor[t].sort(key=lambda it: it.index)              # in the graph's order, as a new scene's
        for t in [t for t in by_tensor if not by_tensor[t]] if gone else ():
            del by_tensor[t]
        self.nodes, self.edges, self.node_by_key, self.edges_by_tensor = nodes, edges, by_key, by_tensor
        self._node_at, self._edge_at = nodes, edges         # in index order
        self._update = None
        self._recolour()                        # the colours asked for meanwhile
        self.update()                           # an overview picture kept meanwhile (GraphView.paintEvent) redraws
        yield True

    def _reindexed(self, values, kept, new, old, field: str):
        """_updating's items of `values` (nodes or edges) in the new graph's order, each told its index and value:
        the new one made for it, or the old one `kept` says it keeps; yields False whenever a slice's time is up."""
        items = [new[i] if j < 0 else old[j] for i, j in enumerate(kept)]
        # only the items whose index or value changed: those before an inserted node keep both (and the window
        # gets unchanged nodes and edges as the very objects it shows: rerun_child.view_in)
        todo = [i for i, (j, item, value) in enumerate(zip(kept, items, values))
                if j != i or getattr(item, field) is not value]
        for n, i in enumerate(todo):
            item = items[i]
            item.index = i
            setattr(item, field, values[i])
            if n % 64 == 63 and self._out_of_time():
                yield False
        return items

    def _colour_item(self, item, colours: tuple, nodes) -> None:
        """A node or an edge in `colours` ((categories, markers, edge conflicts), as colour() keeps them)."""
        if isinstance(item, NodeItem):
            self._colour_node(item, colours[0], colours[1])
        else:
            self._colour_edge(item, colours[2], nodes)

    def _out_of_time(self) -> bool:
        return self._deadline is not None and time.perf_counter() > self._deadline

    def _paint(self, deadline: float | None) -> bool:
        """Recolour what colour() queued, with the latest colours, until `deadline`; True when none is left."""
        todo = self._repaint
        colours, nodes = self._colours, self.vg.nodes
        n = 0
        while todo:
            self._colour_item(todo.pop(), colours, nodes)
            n += 1
            if deadline is not None and n % 32 == 0 and time.perf_counter() > deadline:
                return not todo
        return True

    def finish(self) -> None:
        """Everything created, re-indexed and coloured: before a search or a selection by key."""
        if not self.complete:
            self.populate()

    def drawBackground(self, painter, rect):
        self.frame.lod = QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        if self._kept is not None:
            self._kept.lod = self.frame.lod
        super().drawBackground(painter, rect)

    @staticmethod
    def _colour_node(item, categories, markers) -> None:
        key = item.node.key
        cat = categories.get(key, UNKNOWN)
        marker = markers.get(key, "")
        node = item.node                    # the whole name: the box shows it elided, if at all
        tip = f"{node.title}  ({cat})\n{_clip(node.name)}" if node.kind == "op" else _clip(node.name)
        item.set_category(cat, marker, tip + ("\n" + marker if marker else ""))

    @staticmethod
    def _colour_edge(item, conflicts, nodes) -> None:
        """The conflict (if any) on the tensor this edge carries into its consumer."""
        item.set_conflict(conflicts.get((item.edge.tensor, nodes[item.edge.dst].key), ""))

    def colour(self, categories: dict[Hashable, str], markers: dict[Hashable, str],
               edge_conflicts: dict[Hashable, str]) -> bool:
        """Recolour in place: categories and marker texts by node key, conflict reasons by (tensor, consumer key).
        Items created later take the same colours. Only items whose colours changed are touched (a pin changes a
        few of 10,000); returns whether any was (or may be: while apply()'s re-indexing runs, its end recolours)."""
        self._colours = (categories, markers, edge_conflicts)
        if self._update is not None:        # the items apply() made now (not grey until it ends), the rest then
            for item in self._fresh:
                self._colour_item(item, self._colours, self.vg.nodes)
            return True
        return self._recolour()

    def _recolour(self) -> bool:
        """Paint the items whose colours differ between what they show and the latest colours."""
        old, new = self._shown, self._colours
        categories, markers, edge_conflicts = self._shown = new
        fresh, self._fresh = self._fresh, set()
        stale, self._stale = self._stale, False
        if not fresh and not stale and old == new:
            return False
        self.version += 1
        if stale:                       # painted by something else (the validation overlay): all of it again
            nodes, edges = self.nodes, self.edges
        else:
            if not old[0] and not old[1]:           # the first colours (a first conversion): every node, not
                nodes = list(self.nodes)            # the keys of 10,000 compared first
            else:
                keys = _changed(old[0], categories) | _changed(old[1], markers)
                nodes = [it for it in map(self.node_by_key.get, keys) if it is not None]
                nodes += [it for it in fresh if isinstance(it, NodeItem)]
            ends = _changed(old[2], edge_conflicts)
            edges = [it for t in {t for t, _ in ends} for it in self.edges_by_tensor.get(t, ())]
            edges += [it for it in fresh if isinstance(it, EdgeItem)]
        if len(nodes) + len(edges) > self.PAINT_NOW:        # in slices from the event loop: not a stall
            self._repaint += edges
            self._repaint += nodes                          # popped from the end: nodes first
            self._sliced = True
            self._later()
            return True
        for item in nodes:
            self._colour_node(item, categories, markers)
        for e in edges:
            self._colour_edge(e, edge_conflicts, self.vg.nodes)
        return True

    def restyle(self) -> None:
        """The colour scheme switched: the background, the nodes' cached fills, and the pictures drawn of them."""
        self.setBackgroundBrush(palette().background)
        for item in self.nodes:
            item.restyle()
        self.version += 1
        self.update()

    def mark_pins(self, pins: dict[Hashable, str]) -> None:
        """Mark the edges of pinned tensors (tensor -> layout text); edges made later are marked as they are made."""
        old, self.pins = self.pins, dict(pins)
        for t in set(old) | set(pins):
            if old.get(t) != pins.get(t):
                for item in self.edges_by_tensor.get(t, ()):
                    item.set_pin(pins.get(t, ""))

    def repainted(self) -> None:
        """Items were painted with other colours (the validation overlay): the next colour() repaints them all."""
        self._stale = True
        self.version += 1

    def selected_keys(self) -> tuple[list[Hashable], list[Hashable]]:
        """(node keys, tensor keys) of the selection."""
        nodes, tensors = [], []
        for it in self.selectedItems():
            if isinstance(it, NodeItem):
                nodes.append(it.node.key)
            elif isinstance(it, EdgeItem) and it.edge.tensor not in tensors:
                tensors.append(it.edge.tensor)
        return nodes, tensors

    def selects(self, node_keys, tensor_keys) -> bool:
        """Whether these keys are what is selected (apply() keeps the selection: no select() needed after it)."""
        nodes, tensors = self.selected_keys()
        return set(nodes) == set(node_keys) and set(tensors) == set(tensor_keys)

    def select(self, node_keys=(), tensor_keys=()) -> QRectF:
        """Replace the selection; returns the bounding rect of what got selected (empty if nothing)."""
        if node_keys or tensor_keys:                # (nothing to find: the items may stay on their way)
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


def _node_item(i: int, node, frame) -> NodeItem:
    return GroupItem(i, node, frame) if node.layer is not None else NodeItem(i, node, frame)


def _clip(name: str, most: int = 400) -> str:
    """A name for a tooltip: whole, but not a screenful (fused TFLite names run to thousands of characters)."""
    return name if len(name) <= most else name[:most] + "…"


def _depth(items: int) -> int:
    """The BSP index's depth for a scene of this many items, set once: left to Qt, it is recomputed as items are
    added and the whole index rebuilt each time it grows (a stall over the whole scene's items)."""
    return max(5, math.ceil(math.log2(max(items, 1))))


def _gone(item) -> bool:
    """One of a replaced graph's items, unseen while it waits for its removal."""
    frame = getattr(item, "frame", None)
    return frame is not None and frame.gone


def _key(item) -> Hashable:
    return item.node.key if isinstance(item, NodeItem) else item.edge.tensor


def _changed(old: dict, new: dict) -> set:
    """Keys whose values differ between two dicts."""
    if old is new or old == new:
        return set()
    return {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}


class GraphView(QGraphicsView):
    """Until the user zooms or pans, the view keeps its opening placement through resizes: panes and docks settle
    their sizes after the graph is first shown, and a placement computed for the old size would show empty space."""
    nodeActivated = Signal(object)          # NodeItem double-clicked
    groupToggled = Signal(str)              # a group's box double-clicked, its + clicked, or Enter on it: open it
    groupClosed = Signal(object)            # Backspace on a node: close the group it is in (its key)
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
        self.paints = 0                     # paint events so far
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
        return (sc is not None and (sc.built or sc.keeping) and len(sc.nodes) + len(sc.edges) >= self.OVERVIEW_ITEMS
                and self.transform().m11() < self.OVERVIEW_SCALE)

    def paintEvent(self, event):
        self.paints += 1                    # (a re-run's worker waits for the first paint of its result)
        if not self.overview():
            super().paintEvent(event)
            return
        scene, vp = self.scene(), self.viewport()
        key = self._key()
        if scene.keeping:                       # a re-run's graph being made: the picture of before, if it fits
            if self._overview_key is None or key[:-1] != self._overview_key[:-1]:
                super().paintEvent(event)       # (the kept items paint themselves)
                return
            key = self._overview_key
        if key != self._overview_key:
            if scene.reindexing:                # re-indexing after a pin: the picture of before, if it fits, until
                if self._overview_key is not None and key[:-1] == self._overview_key[:-1]:     # it ends (redraws)
                    key = self._overview_key
                else:
                    scene.finish()              # the picture reads the lookups: they are finished first
                    key = self._key()
        if key != self._overview_key:
            top_left = self.mapToScene(0, 0)
            self._overview_image = raster(scene, (top_left.x(), top_left.y()), key[2], vp.width(), vp.height())
            self._overview_key = key
        p = QPainter(vp)
        p.drawImage(0, 0, self._overview_image)
        p.setPen(QPen(palette().selection, 3))
        p.setBrush(Qt.NoBrush)
        for item in scene.selectedItems():          # selection stays visible: a ring at least 8 px wide
            r = self.mapFromScene(item.sceneBoundingRect()).boundingRect()
            p.drawRect(r.adjusted(-4, -4, 4, 4) if r.width() > 8 else r.adjusted(-6, -6, 6, 6))
        p.end()

    def _key(self) -> tuple:
        """What the overview picture depends on: place, scale, size, the scene's colours."""
        top_left, vp = self.mapToScene(0, 0), self.viewport()
        return (round(top_left.x(), 3), round(top_left.y(), 3), self.transform().m11(), vp.width(), vp.height(),
                self.scene().version)

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
            r, vp = scene.bounds, self.viewport().rect()
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
        r, vp = scene.bounds, self.viewport().rect()
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
        if event.key() == Qt.Key_Escape and self.scene() is not None and self.scene().selectedItems():
            self.scene().clearSelection()           # (the other pane and Details follow the selection)
            event.accept()
            return
        selected = [it for it in self.scene().selectedItems() if isinstance(it, NodeItem)] \
            if self.scene() is not None else []
        if event.key() in (Qt.Key_Return, Qt.Key_Enter) and selected:
            if isinstance(selected[0], GroupItem):
                self.groupToggled.emit(selected[0].layer.id)
            else:
                self.nodeActivated.emit(selected[0])     # a WHILE/IF or Loop/If: its bodies open
            event.accept()
            return
        if event.key() == Qt.Key_Backspace and selected:
            self.groupClosed.emit(selected[0].node.key)
            event.accept()
            return
        self.auto = False
        super().keyPressEvent(event)

    def wheelEvent(self, event):
        d = event.angleDelta().y()
        if d:
            self.zoom(1.0015 ** d)
        event.accept()

    def seen_item_at(self, pos):
        """The item at `pos` that a person sees: None over a replaced graph's item waiting for its removal."""
        item = self.itemAt(pos)
        return None if _gone(item) else item

    def mousePressEvent(self, event):
        item = self.itemAt(event.position().toPoint())
        if _gone(item):                             # nothing seen there: not selected, but a drag pans as on
            self.setInteractive(False)              # an empty spot (the view alone handles the press)
            try:
                super().mousePressEvent(event)
            finally:
                self.setInteractive(True)
            return
        if isinstance(item, GroupItem) and event.button() == Qt.LeftButton and \
                item.control().contains(item.mapFromScene(self.mapToScene(event.position().toPoint()))) or \
                isinstance(item, GroupFrame) and event.button() == Qt.LeftButton:     # an open group's tab: −
            self.groupToggled.emit(item.layer.id)
            event.accept()
            return
        super().mousePressEvent(event)

    def mouseDoubleClickEvent(self, event):
        item = self.itemAt(event.position().toPoint())
        if _gone(item):
            event.accept()
            return
        if isinstance(item, GroupItem):
            self.groupToggled.emit(item.layer.id)
            event.accept()
            return
        if isinstance(item, NodeItem):
            self.nodeActivated.emit(item)
        super().mouseDoubleClickEvent(event)

    def resizeEvent(self, event):
        super().resizeEvent(event)
        if self.auto:
            self._replace.start()
        self.minimap.place()
        self.minimap.sync()


class _Drawn(QObject):
    done = Signal(object, object)          # (what was drawn, QImage)


class _DrawJob(QRunnable):
    """The minimap's picture, drawn off the GUI thread (on a big model, a stall each time colours change)."""

    def __init__(self, inputs: tuple, args: tuple, key, signals: _Drawn):
        super().__init__()
        self.inputs, self.args, self.key, self.signals = inputs, args, key, signals

    def run(self) -> None:
        self.signals.done.emit(self.key, draw(self.inputs, *self.args))


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
        self._want = None                    # the picture being drawn; an older one arriving late is dropped
        self._drawn = _Drawn()               # not a child: a job may still hold it after this widget is gone
        self._drawn.done.connect(self._rendered)
        self.setCursor(Qt.CrossCursor)
        self.setToolTip("Overview: click or drag to move the view")

    def invalidate(self, keep: bool = False) -> None:
        """Draw the picture again; `keep`: the old one stays shown until then (the same graph, changed)."""
        if not keep:
            self.image = None
        self._want = None
        self._timer.start()

    def redraw(self) -> None:
        """The scene is complete: its picture drawn again, the last one shown until then."""
        self.invalidate(keep=True)

    def sync(self) -> None:
        scene = self.view.scene()
        vis = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        whole = scene.bounds.adjusted(MARGIN, MARGIN, -MARGIN, -MARGIN) if scene is not None else None
        self.setVisible(bool(self.enabled and scene is not None and not vis.contains(whole)))
        self.update()

    def place(self) -> None:
        scene = self.view.scene()
        if scene is None:
            return
        r = scene.bounds
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
        key = self._want = (id(scene), scene.version, self.width(), self.height())
        QThreadPool.globalInstance().start(_DrawJob(arrays(scene), ((r.left(), r.top()), k, self.width(),
                                                                    self.height(), 235), key, self._drawn))

    def _rendered(self, key, image: QImage) -> None:
        if key == self._want:
            self.image = image
            self.sync()

    def _k(self) -> tuple[float, QRectF]:
        r = self.view.scene().bounds
        return min(self.width() / r.width(), self.height() / r.height()), r

    def paintEvent(self, event):
        if self.view.scene() is None:
            return
        p = QPainter(self)
        if self.image is not None:
            p.drawImage(0, 0, self.image)
        pal = palette()
        p.setPen(QPen(pal.ink, 1))
        p.drawRect(self.rect().adjusted(0, 0, -1, -1))
        k, r = self._k()
        vis = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        box = QRectF((vis.left() - r.left()) * k, (vis.top() - r.top()) * k, vis.width() * k, vis.height() * k)
        tint = QColor(pal.viewport)
        tint.setAlpha(40)
        p.setPen(QPen(pal.viewport, 2))
        p.setBrush(tint)
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
