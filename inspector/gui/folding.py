"""Layers in the panes: a graph with its closed groups drawn as one box each, and the open groups shared by both.

Qt-free (built in the loader's thread). A pane's whole graph stays as graph_model made it; what the scene shows is
`fold(whole, tree, open)`: every node inside a closed group replaced by that group's box (kind "group", key
("group", id): the same in both panes, so selection maps a box to its twin), edges to and from a closed group
drawn to its box, one edge per tensor, edges inside it left out. Only the boxes shown are laid out, so a big model
opened collapsed lays out its forty boxes, not its 50,000 ops.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import Hashable

import numpy as np

from inspector.core.session.layers import Layer, LayerTree, recount

from . import graph_layout
from .graph_model import GROUP, Edge, Node, ViewGraph

FOLD_OPS = 2000             # from this many ops in the main graph a model opens collapsed to the tree's default depth
KEPT_FOLDS = 4              # folds of a pane's graph kept (by the groups open)


def group_key(layer_id: str) -> tuple[str, str]:
    return (GROUP, layer_id)


def is_group(key: Hashable) -> bool:
    return isinstance(key, tuple) and len(key) == 2 and key[0] == GROUP


def homes(vg: ViewGraph, tree: LayerTree) -> list[str]:
    """The innermost group of each of vg's nodes ("" for terminals and nodes of no group)."""
    if vg.source == "onnx":
        where = tree.node_layer
        out = [where.get(n.key, "") if not isinstance(n.key, tuple) else "" for n in vg.nodes]
        unknown = {i for i, n in enumerate(vg.nodes) if n.kind == "op" and n.key not in where}
        for e in vg.edges if unknown else ():      # a Transpose a pin inserted: in the group of its producer
            if e.dst in unknown:
                out[e.dst] = out[e.src]
                unknown.discard(e.dst)
        return out
    where = tree.op_layer
    return [where.get(n.key[1], "") if n.kind == "op" else "" for n in vg.nodes]


def group_lines(layer: Layer) -> list[str]:
    """What a group's box says under its label: its size, and what the conversion inserted or found in it."""
    lines = [f"{len(layer.ops)} ops" + (f" · {len(layer.children)} groups" if layer.children else "")]
    marks = []
    if layer.conflicts:
        marks.append(f"{layer.conflicts} conflict{'s' if layer.conflicts != 1 else ''}")
    if layer.transposes:
        marks.append(f"{layer.transposes} Transpose{'s' if layer.transposes != 1 else ''}")
    if marks:
        lines.append(" · ".join(marks))
    return lines


@dataclass
class Folded:
    """A pane's whole graph and what of it is shown."""
    whole: ViewGraph
    shown: ViewGraph
    rep: list[int] = field(default_factory=list)        # whole node index -> shown node index
    boxes: dict[str, int] = field(default_factory=dict)     # closed group -> its box's shown node index
    counted: int = -1                                   # Layers.counts its boxes' lines say (-1: not known)


def fold(vg: ViewGraph, tree: LayerTree, open_: set[str], where: list[str] | None = None) -> Folded:
    """vg with each group not in `open_` (or inside one that is not) drawn as one box."""
    where = homes(vg, tree) if where is None else where
    layers = tree.layers
    shown_as: dict[str, str] = {"": ""}           # layer id -> the closed group standing for it ("": none)

    def closed(layer_id: str) -> str:
        got = shown_as.get(layer_id)
        if got is None:
            layer = layers[layer_id]
            outer = closed(layer.parent or "")
            got = shown_as[layer_id] = outer or ("" if layer_id in open_ else layer_id)
        return got

    nodes: list[Node] = []
    rep: list[int] = []
    box: dict[str, int] = {}
    for i, n in enumerate(vg.nodes):
        g = closed(where[i])
        if not g:
            rep.append(len(nodes))
            nodes.append(n)
        elif g in box:
            rep.append(box[g])
        else:
            layer = layers[g]
            box[g] = len(nodes)
            rep.append(len(nodes))
            nodes.append(Node(group_key(g), GROUP, layer.label, group_lines(layer), search=g, layer=layer))
    if not box:
        return Folded(vg, vg, rep)
    boxes = set(box.values())
    edges: list[Edge] = []
    seen: dict[tuple, int] = {}               # (src, dst) -> index of the edge drawn to or from a box
    between: dict[tuple, set] = {}            # (src, dst) -> the tensors that edge stands for
    tensors_seen: set = set()
    for e in vg.edges:
        s, d = rep[e.src], rep[e.dst]
        if s == d:
            continue                            # inside a closed group
        if s in boxes or d in boxes:
            k = seen.get((s, d))
            if k is not None:                   # more tensors between the same two boxes: one edge, counted
                carried = between[(s, d)]
                if e.tensor not in carried:     # (a tensor read by two ops inside a box is one tensor)
                    carried.add(e.tensor)
                    old = edges[k]
                    edges[k] = Edge(s, d, old.tensor, f"{len(carried)} tensors", old.first, old.count)
                continue
            seen[(s, d)] = len(edges)
            between[(s, d)] = {e.tensor}
        first = e.tensor not in tensors_seen
        tensors_seen.add(e.tensor)
        edges.append(Edge(s, d, e.tensor, e.label, first, e.count))
    shown = ViewGraph(vg.source, nodes, edges, vg.tensor_names, vg.subgraph, vg.shapes, vg.folded)
    return Folded(vg, shown, rep, box)


def relabelled(f: Folded) -> Folded:
    """f with each box saying its group's counts as they are now (after a re-run's recount): the boxes whose lines
    changed are new nodes, the rest of the graph is f's (folding a big graph again was a walk of every node)."""
    nodes = None
    for i in f.boxes.values():
        n = f.shown.nodes[i]
        lines = group_lines(n.layer)
        if lines != n.lines:
            if nodes is None:
                nodes = list(f.shown.nodes)
            nodes[i] = Node(n.key, GROUP, n.title, lines, search=n.search, layer=n.layer)
    if nodes is None:
        return f
    s = f.shown
    return Folded(f.whole, ViewGraph(s.source, nodes, s.edges, s.tensor_names, s.subgraph, s.shapes, s.folded), f.rep,
                  f.boxes)


class Layers:
    """The open groups of one model's tree, shared by both panes (the pair kept in step), and each pane's whole
    graph with where its nodes live."""

    def __init__(self, tree: LayerTree, open_: set[str] | None = None):
        self.tree = tree
        self.open: set[str] = set(open_) if open_ is not None else opened_at(tree, tree.default_depth)
        self.whole: dict[str, ViewGraph] = {}
        self._where: dict[str, list[str]] = {}
        self._ahead: dict[str, tuple] = {}    # pane -> (a graph it is to show next, where its nodes live, {open
                                              # groups: Folded} of it)
        self._shown: dict[str, tuple] = {}    # pane -> (whole graph, {open groups: Folded}) of its last folds
        self._laid: dict[str, tuple] = {}     # pane -> (open groups, whole graph, Folded, Geometry) last laid out
        self.counted = None                   # the trace whose conflicts and Transposes the groups count
        self.counts = 0                       # bumped by each recount (a Folded's boxes say the counts of one)
        self._index: dict[str, tuple] = {}    # pane -> (whole graph, its node key -> index)

    @classmethod
    def of(cls, tree: LayerTree, ops: int) -> "Layers":
        """A model's layers as it opens: a big one collapsed to the tree's default depth, a small one all open."""
        return cls(tree, None if ops >= FOLD_OPS else set(g for g in tree.layers if g))

    def set_whole(self, which: str, vg: ViewGraph) -> None:
        if self.whole.get(which) is not vg:
            self.whole[which] = vg
            ahead = self._ahead.pop(which, None)
            if ahead is not None and ahead[0] is vg and ahead[3] is self.tree:
                self._where[which] = ahead[1]
                self._shown[which] = (vg, ahead[2])     # (its fold, made ahead)
            else:
                self._where[which] = homes(vg, self.tree)

    def fold_of(self, which: str, vg: ViewGraph) -> Folded:
        """A graph the pane is to show next (a re-run's), folded as the pane would show it; it stays the pane's
        whole graph until set_whole (where its nodes live, and this fold, are kept for that)."""
        ahead = self._ahead.get(which)
        if ahead is None or ahead[0] is not vg or ahead[3] is not self.tree:
            ahead = self._ahead[which] = (vg, homes(vg, self.tree), {}, self.tree)
        return self._kept(ahead[2], frozenset(self.open), vg, ahead[1])

    def ahead(self, which: str):
        """What fold_of(which, vg) works out, as a function of vg to run in a re-run's worker while it waits for the
        child (the groups open now; a group opened or closed meanwhile is folded again when shown)."""
        tree, open_ = self.tree, frozenset(self.open)

        def run(vg: ViewGraph) -> None:
            counts = self.counts                # (read first: a recount meanwhile relabels the boxes when shown)
            where = homes(vg, tree)
            folded = fold(vg, tree, open_, where)
            folded.counted = counts
            self._ahead[which] = (vg, where, {open_: folded}, tree)
        return run

    def _kept(self, folds: dict, open_: frozenset, vg: ViewGraph, where: list[str]) -> Folded:
        """The fold of vg by `open_` kept in `folds` (its boxes relabelled if counts changed since), else made."""
        got = folds.get(open_)
        if got is None:
            if len(folds) >= KEPT_FOLDS:
                del folds[next(iter(folds))]
            got = folds[open_] = fold(vg, self.tree, open_, where)
        elif got.counted != self.counts:
            got = folds[open_] = relabelled(got)
        got.counted = self.counts
        return got

    @property
    def folds(self) -> bool:
        """Some group is closed."""
        return len(self.open) < len(self.tree.layers) - 1

    def laid_out(self, which: str, folded: Folded | None = None):
        """(Folded, Geometry) of the pane: only the boxes shown laid out (graph_layout caches by topology).
        `folded`: the pane's shown(), if made already."""
        vg = self.whole[which]
        got = self._laid.get(which)
        if got is not None and got[0] == self.open and got[1] is vg:
            return got[2], got[3]
        folded = self.shown(which) if folded is None else folded
        layout = graph_layout.compute(folded.shown)
        self._laid[which] = (frozenset(self.open), vg, folded, layout)
        return folded, layout

    def set_tree(self, tree: LayerTree) -> None:
        """The conversion's tree (the same groups, with ONNX nodes and conflicts): the open groups stay open."""
        self.tree = tree
        self.open = {g for g in self.open if g in tree.layers}
        self._laid.clear()
        self._shown.clear()
        self._ahead.clear()
        for which, vg in self.whole.items():
            self._where[which] = homes(vg, tree)

    def recount(self, result, sg) -> bool:
        """Count a new result's conflicts and Transposes into the groups (a re-run after a pin); whether it is
        another result's than the groups counted (the boxes then say it: folded anew)."""
        if result is None or result.trace is self.counted:
            return False
        recount(self.tree, result, sg)
        self.counted = result.trace
        self.counts += 1                      # (the boxes' lines say the new counts: relabelled when shown)
        self._laid.clear()
        return True

    def shown(self, which: str) -> Folded:
        """The pane's whole graph folded by the open groups; the last few folds of the same graph are kept (a fold
        laid out by a worker is not folded again when shown, nor the overview again after Expand All)."""
        vg, open_ = self.whole[which], frozenset(self.open)
        vg_was, folds = self._shown.get(which, (None, {}))
        if vg_was is not vg:
            folds = {}
            self._shown[which] = (vg, folds)
        return self._kept(folds, open_, vg, self._where[which])

    def frames(self, which: str, vg: ViewGraph, corner: np.ndarray, size: np.ndarray) -> list[tuple]:
        """(Layer, (left, top, right, bottom)) of each open group around its nodes in `vg`, the pane's graph as
        shown, whose boxes are at `corner` and of `size` (arrays, by node; a closed box inside counts as a node)."""
        at, where, layers = self._at(which), self._where[which], self.tree.layers
        spans: dict[str, list[int]] = {}
        for i, n in enumerate(vg.nodes):
            if n.layer is not None:
                g = n.layer.parent or ""
            else:
                j = at.get(n.key)
                g = where[j] if j is not None else ""
            while g:
                spans.setdefault(g, []).append(i)
                g = layers[g].parent or ""
        if not spans:
            return []
        counts = [len(nodes) for nodes in spans.values()]
        every = np.fromiter(chain.from_iterable(spans.values()), np.intp, sum(counts))     # group after group
        starts = np.cumsum([0] + counts[:-1])
        low = np.minimum.reduceat(corner[every], starts).tolist()
        high = np.maximum.reduceat((corner + size)[every], starts).tolist()
        return [(layers[g], (*a, *b)) for g, a, b in zip(spans, low, high)]

    def group_of(self, which: str, key: Hashable) -> str:
        """The innermost group of a node of the whole graph ("" when none)."""
        if is_group(key):
            layer = self.tree.layers.get(key[1])
            return layer.parent or "" if layer is not None else ""
        i = self._at(which).get(key)
        return self._where[which][i] if i is not None else ""

    def _at(self, which: str) -> dict:
        """Node key -> index in the pane's whole graph (made on first use, kept while the graph is the same)."""
        vg = self.whole.get(which)
        got = self._index.get(which)
        if got is None or got[0] is not vg:
            got = self._index[which] = (vg, vg.index() if vg is not None else {})
        return got[1]

    def toggle(self, layer_id: str) -> bool:
        """Open a closed group or close an open one; whether anything changed."""
        if layer_id not in self.tree.layers or not layer_id:
            return False
        if layer_id in self.open:
            self.close(layer_id)
        else:
            self.open.add(layer_id)
        return True

    def close(self, layer_id: str) -> bool:
        """Close a group (what is open inside it stays so: opened again, it shows as it was)."""
        if not layer_id or layer_id not in self.open:
            return False
        self.open.discard(layer_id)
        return True

    def reveal(self, which: str, keys, tensors=()) -> bool:
        """Open every group that hides one of these nodes of the whole graph, or the producer of one of these
        tensors; whether any was opened."""
        vg = self.whole.get(which)
        if vg is None:
            return False
        wanted = {k for k in keys if not is_group(k)}
        if tensors:
            tensors = set(tensors)
            wanted |= {vg.nodes[e.src].key for e in vg.edges if e.tensor in tensors}
        wanted |= {vg.folded[k] for k in list(wanted) if k in vg.folded}
        if not wanted:
            return False
        before = len(self.open)
        where, at = self._where[which], self._at(which)
        for i in [at[k] for k in wanted if k in at]:
            if where[i]:
                self.open.update(self.tree.ancestors(where[i]))
        return len(self.open) != before


def opened_at(tree: LayerTree, depth: int) -> set[str]:
    return {g for g, layer in tree.layers.items() if g and layer.depth <= depth}
