"""Placements that survive re-conversions: after a pin, nodes the new graph shares with the old (same key) keep
their positions and edges their routes; only nodes that appear (inserted Transposes) are placed, on the edge they
split. The user keeps their mental map of the graph, and nothing is laid out again.

A Placement remembers every position and route it has ever handed out, so undoing a pin brings back exactly the
picture from before it. Qt-free (runs in the re-run worker).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter, is_not, itemgetter, ne, or_
from typing import Hashable

from .graph_layout import H_GAP, V_GAP, Geometry
from .graph_model import ViewGraph

_key, _SRC, _DST = attrgetter("key"), attrgetter("src"), attrgetter("dst")
_X, _Y = itemgetter(0), itemgetter(1)
_NEG = -1


def _touching(near: set, srcs: list, dsts: list):
    """Indices of the edges with an end in `near` (in C: the edges are many, `near` few)."""
    return compress(range(len(srcs)), map(or_, map(near.__contains__, srcs), map(near.__contains__, dsts)))


def _joins_ends(route, src: tuple, dst: tuple, src_half: float, dst_half: float) -> bool:
    """The route still starts at its producer's bottom and ends at its consumer's top (to half a pixel)."""
    (x0, y0), (x1, y1) = route[0], route[-1]
    return -0.5 < x0 - src[0] < 0.5 and -0.5 < y0 - src[1] - src_half < 0.5 and -0.5 < x1 - dst[0] < 0.5 \
        and -0.5 < y1 - dst[1] + dst_half < 0.5


# Past this share of new nodes the old picture says little about the new graph: lay it out afresh.
MAX_NEW_SHARE = 0.25
MIN_GAP = 8.0           # px kept clear around a placed node: an inserted Transpose 2 px from its neighbours read as
                        # drawn on top of them


def edge_keys(vg: ViewGraph) -> list[tuple[Hashable, Hashable, Hashable]]:
    """(producer key, consumer key, tensor) per edge: what names an edge across re-conversions. Kept on the graph
    while its edge list is the same (a re-run's layout and diff ask for the new graph's, the next re-run's diff
    for it again)."""
    got = vg.__dict__.get("_edge_keys")
    if got is None or got[0] is not vg.edges or got[1] != len(vg.edges):
        nodes = vg.nodes
        got = vg.__dict__["_edge_keys"] = (vg.edges, len(vg.edges),
                                           [(nodes[e.src].key, nodes[e.dst].key, e.tensor) for e in vg.edges])
    return got[2]


def _edge_key(vg: ViewGraph, e) -> tuple:
    return vg.nodes[e.src].key, vg.nodes[e.dst].key, e.tensor


class Placement:
    def __init__(self, vg: ViewGraph, layout: Geometry, later: bool = False):
        """`later`: read vg and layout when first used (`made`), in the re-run's worker: on a big model it held
        the GUI thread before the first pin's re-run could even start."""
        self._from = (vg, layout) if later else None
        self._last = None               # (weak reference to the graph laid out last, its layout, node widths, heights)
        if not later:
            self._read(vg, layout)
        self.scene = None               # the window's scene these positions belong to (set by the window)
        self._by_ends = None            # _joins(), made when first asked for, then updated with every route

    def _read(self, vg: ViewGraph, layout: Geometry) -> None:
        self.pos: dict[Hashable, tuple[float, float]] = {n.key: layout.pos[i] for i, n in enumerate(vg.nodes)}
        self.routes: dict[tuple, list[tuple[float, float]]] = dict(zip(edge_keys(vg), layout.routes))
        self.width, self.height = layout.width, layout.height
        if len(self.pos) == len(vg.nodes) and len(self.routes) == len(vg.edges):     # keys name one each
            w, h = [n.width for n in vg.nodes], [n.height for n in vg.nodes]
            pos = layout.pos
            for e, route in zip(vg.edges, layout.routes):
                if not _joins_ends(route, pos[e.src], pos[e.dst], h[e.src] / 2, h[e.dst] / 2):
                    return
            # layout() would keep every node and route of it as they are: it counts as the last one laid out
            self._last = (weakref.ref(vg), layout, w, h)

    def made(self) -> "Placement":
        """Itself, with what `later` left to read read now."""
        if self._from is not None:
            self._read(*self._from)
            self._from = None
            self._joins()               # (here, while the child converts, not on the way)
        return self

    def new_share(self, vg: ViewGraph) -> float:
        self.made()
        n = len(vg.nodes)
        return (n - sum(map(self.pos.__contains__, map(_key, vg.nodes)))) / max(n, 1)

    def layout(self, vg: ViewGraph) -> Geometry:
        """Positions for vg: remembered ones kept, new nodes put where the edge they split ran.

        A graph that crossed from the child against the one this placement laid out last (rerun_child.view_in
        says which of its nodes and edges each one is) takes the last layout's sizes, positions and routes for
        those: only what is new is looked at (all of a big model's nodes and edges were a large part of a pin)."""
        self.made()
        nodes, edges = vg.nodes, vg.edges
        last, was = self._last, vg.__dict__.get("_was")
        if last is not None and was is not None and last[0]() is was[0]() is not None:
            _, old, w, h = last
            wn, we = was[1], was[2]
            w, h = list(map(w.__getitem__, wn)), list(map(h.__getitem__, wn))     # (-1: fixed below)
            new = list(compress(range(len(nodes)), map(_NEG.__eq__, wn)))
            for i in new:
                w[i], h[i] = nodes[i].width, nodes[i].height
            old_edges = we
        else:
            old, old_edges = None, None
            w, h = [n.width for n in nodes], [n.height for n in nodes]    # (properties: asked for once per node)
            new = range(len(nodes))
        keys = list(map(_key, nodes))
        placed = self.pos
        fresh = [i for i in new if keys[i] not in placed]
        if fresh:
            # the links of the new nodes and of their neighbours (what placing them reads), not of all
            srcs, dsts = list(map(_SRC, edges)), list(map(_DST, edges))
            near = set(fresh)
            near.update(*[(srcs[k], dsts[k]) for k in _touching(near, srcs, dsts)])
            ins: dict[int, list[int]] = {i: [] for i in near}
            outs: dict[int, list[int]] = {i: [] for i in near}
            tensor = {}
            for k in _touching(near, srcs, dsts):
                e = edges[k]
                ins.setdefault(e.dst, []).append(e.src)
                outs.setdefault(e.src, []).append(e.dst)
                tensor[(e.src, e.dst)] = e.tensor
            there = list(map(placed.__contains__, keys))
            at = list(map(placed.__getitem__, compress(keys, there)))
            boxes = list(zip(map(_X, at), map(_Y, at), compress(w, there), compress(h, there)))
            for i in fresh:                 # in graph order: a new node's new producer is placed before it
                n = nodes[i]
                if n.key in placed:         # placed with the chain it belongs to
                    continue
                if self._on_route(vg, i, ins, outs, tensor, boxes):
                    continue
                x, y = _clear(boxes, *self._place(vg, i, ins[i], outs[i]), n.width, n.height)
                placed[n.key] = (x, y)
                boxes.append((x, y, n.width, n.height))
        pos = list(map(placed.__getitem__, keys))
        half = [x / 2 for x in h]
        if old_edges is None:
            routes = [None] * len(edges)
            todo = range(len(edges))
        else:
            routes = list(map(old.routes.__getitem__, old_edges))              # (-1: made below)
            todo = compress(range(len(edges)), map(_NEG.__eq__, old_edges))
        known = self.routes.get
        ekeys = edge_keys(vg) if old_edges is None else None
        for k in todo:
            e = edges[k]
            key = ekeys[k] if ekeys is not None else (keys[e.src], keys[e.dst], e.tensor)
            route, s, d = known(key), e.src, e.dst
            (sx, sy), (dx, dy) = pos[s], pos[d]
            if route is not None and _joins_ends(route, pos[s], pos[d], half[s], half[d]):
                routes[k] = route
                continue
            a, b = sy + half[s], dy - half[d]
            route = self.routes[key] = [(sx, a), (sx, (a + b) / 2), (dx, (a + b) / 2), (dx, b)]
            if self._by_ends is not None:   # kept up to date: rebuilding it was part of each pin on a big model
                self._by_ends.setdefault(key[:2], {})[key[2]] = route
            routes[k] = route
        # the extent: nodes kept from the last layout are inside it already
        xs = [pos[i][0] + w[i] / 2 for i in new] or [0.0]
        ys = [pos[i][1] + half[i] for i in new] or [0.0]
        self.width, self.height = max(self.width, max(xs)), max(self.height, max(ys))
        layout = Geometry(pos, routes, self.width, self.height)
        self._last = (weakref.ref(vg), layout, w, h)
        return layout

    def _on_route(self, vg: ViewGraph, i: int, ins: list, outs: list, tensor: dict, boxes: list) -> bool:
        """Nodes inserted on an edge (a Transpose, or two, between a producer and a consumer that were joined) go
        on that edge's old route, in order: the free places nearest the consumer, in a layer band the edge
        crossed (the layout kept its slot free) or in the gap between two bands, else beside one in that gap.
        False when `i` is not on such an edge or its route is not known."""
        new = lambda j: vg.nodes[j].key not in self.pos                                 # noqa: E731
        first = i
        while len(ins[first]) == 1 and new(ins[first][0]) and len(outs[ins[first][0]]) == 1:
            first = ins[first][0]
        chain, last = [first], first
        while len(outs[last]) == 1 and new(outs[last][0]) and len(ins[outs[last][0]]) == 1:
            last = outs[last][0]
            chain.append(last)
        if len(ins[first]) != 1 or len(outs[last]) != 1 or new(ins[first][0]) or new(outs[last][0]):
            return False
        src, dst = vg.nodes[ins[first][0]], vg.nodes[outs[last][0]]
        route = self.routes.get((src.key, dst.key, tensor.get((ins[first][0], first))))
        if route is None:                   # the value was renamed (x -> x_NCHW): the one edge that joined them
            joined = list(self._joins().get((src.key, dst.key), {}).values())
            route = joined[0] if len(joined) == 1 else None
        if not route:
            return False
        w, h = max(vg.nodes[j].width for j in chain), max(vg.nodes[j].height for j in chain)
        top, bottom = min(y for _, y in route) - h, max(y for _, y in route) + h
        taken = [b for b in boxes if top - b[3] < b[1] < bottom + b[3]]   # only boxes beside the route can be hit
        spots: list[tuple[int, float, float]] = []            # (segment, x, y)
        segments = list(enumerate(zip(route, route[1:])))
        for k, ((x0, y0), (x1, y1)) in reversed(segments):
            if len(spots) == len(chain):
                break
            x, y = (x0 + x1) / 2, (y0 + y1) / 2
            if abs(y1 - y0) >= h + 2 * MIN_GAP and not _hits(taken, x, y, w, h, MIN_GAP):
                spots.append((k, x, y))
                taken.append((x, y, w, h))
        if not spots:
            return False
        while len(spots) < len(chain):                        # beside the one nearest the producer, in its gap
            k, x, y = spots[-1]
            x, y = _clear(taken, x, y, w, h)
            spots.append((k, x, y))
            taken.append((x, y, w, h))
        spots.sort(key=lambda p: (p[0], p[1]))                # along the route, from the producer
        for j, (_, x, y) in zip(chain, spots):
            self.pos[vg.nodes[j].key] = (x, y)
            boxes.append((x, y, vg.nodes[j].width, vg.nodes[j].height))
        return True

    def _joins(self) -> dict:
        """(producer key, consumer key) -> {tensor: route} of every route handed out."""
        if self._by_ends is None:
            self._by_ends = {}
            for (a, b, t), r in self.routes.items():
                self._by_ends.setdefault((a, b), {})[t] = r
        return self._by_ends

    def _place(self, vg: ViewGraph, i: int, ins: list[int], outs: list[int]) -> tuple[float, float]:
        srcs = [j for j in ins if vg.nodes[j].key in self.pos]
        dsts = [j for j in outs if vg.nodes[j].key in self.pos]
        me = vg.nodes[i]
        if srcs and dsts:                   # in the gap above its consumers, where the split edge ran
            s, d = vg.nodes[srcs[0]], vg.nodes[dsts[0]]
            (sx, sy), (dx, dy) = self.pos[s.key], self.pos[d.key]
            top = sy + s.height / 2
            bottom = min(self.pos[vg.nodes[j].key][1] - vg.nodes[j].height / 2 for j in dsts)
            if bottom - top >= me.height + 2 * V_GAP:       # as far from both as bands are from each other
                return dx, bottom - V_GAP - me.height / 2
            if bottom > top:                # less room: as far from both as it has (moving the graph below down
                return dx, (top + bottom) / 2               # to make room stalled a pin on NASNet)
            return dx, bottom - min(V_GAP, bottom - top) / 2       # _clear moves it aside if it overlaps
        if srcs:
            (sx, sy), s = self.pos[vg.nodes[srcs[0]].key], vg.nodes[srcs[0]]
            return sx + me.width + H_GAP, sy + s.height / 2 + V_GAP + me.height / 2
        if dsts:
            (dx, dy), d = self.pos[vg.nodes[dsts[0]].key], vg.nodes[dsts[0]]
            return dx + me.width + H_GAP, dy - d.height / 2 - V_GAP - me.height / 2
        self.width += me.width + H_GAP      # unconnected to anything placed: a new column on the right
        return self.width - me.width / 2, me.height / 2


def _clear(boxes, x: float, y: float, w: float, h: float, margin: float = MIN_GAP) -> tuple[float, float]:
    """(x, y), or the nearest position sideways (alternating right and left, one slot at a time) where a w×h box
    overlaps none of `boxes` (centre x, centre y, width, height) by `margin`."""
    near = [b for b in boxes if abs(b[1] - y) < (b[3] + h) / 2 + margin]    # only boxes in this band can collide
    step = w + H_GAP / 2
    for k in range(0, 2 * len(near) + 2):
        cx = x + (k + 1) // 2 * step * (1 if k % 2 else -1)
        if cx - w / 2 < 0:              # the scene starts at 0: never left of it
            continue
        if not _hits(near, cx, y, w, h, margin):
            return cx, y
    return x, y


def _hits(boxes, x: float, y: float, w: float, h: float, margin: float = 1.0) -> bool:
    return any(abs(bx - x) < (bw + w) / 2 + margin and abs(by - y) < (bh + h) / 2 + margin for bx, by, bw, bh in boxes)


@dataclass
class Diff:
    """How a re-converted graph and its layout map onto the graph shown, worked out with the layout (in the
    worker), so that the GUI thread touches only the items that change: one pass comparing every item's keys,
    labels and routes there was a stall after every pin on a big model."""
    old: ViewGraph                  # the shown graph it was computed against
    nodes: list[int]                # per new node: the index of the shown node whose item it keeps, or -1
    edges: list[int]                # per new edge: the same for edges (same key and route), or -1
    relabelled: set[int] = field(default_factory=set)    # new nodes whose texts changed
    moved: set[int] = field(default_factory=set)         # new nodes kept at another position
    restyled: set[int] = field(default_factory=set)      # new edges whose label, first flag or bundle changed


def diff(old: ViewGraph, old_layout: Geometry, vg: ViewGraph, layout: Geometry) -> Diff:
    was = vg.__dict__.get("_was")
    if was is not None and was[0]() is old:
        return _diff_from(old, old_layout, vg, layout, was[1], was[2])
    index = {n.key: i for i, n in enumerate(old.nodes)}
    d = Diff(old, [], [])
    for i, n in enumerate(vg.nodes):
        j = index.get(n.key, -1)
        if j >= 0:
            o = old.nodes[j]
            if o is not n:                      # (from_onnx hands back the same node for an unchanged one)
                if o.width != n.width or o.height != n.height:      # another box: a new item
                    j = -1
                elif o != n:
                    d.relabelled.add(i)
            if j >= 0 and old_layout.pos[j] != layout.pos[i]:
                d.moved.add(i)
        d.nodes.append(j)
    edges: dict[tuple, list[int]] = {}             # a key names several edges when an op reads a tensor twice
    for i, k in enumerate(edge_keys(old)):
        edges.setdefault(k, []).append(i)
    for k in edges.values():
        k.reverse()
    for i, (e, k) in enumerate(zip(vg.edges, edge_keys(vg))):
        same = edges.get(k)
        j = same.pop() if same else -1
        if j >= 0:
            o = old.edges[j]
            if old_layout.routes[j] != layout.routes[i]:
                j = -1
            elif (o.label, o.first, o.count) != (e.label, e.first, e.count):
                d.restyled.add(i)
        d.edges.append(j)
    return d


def _diff_from(old: ViewGraph, old_layout: Geometry, vg: ViewGraph, layout: Geometry, nodes: list, edges: list) -> Diff:
    """diff() of a view that crossed from the child against `old` (rerun_child.view_in): `nodes` and `edges` say
    which old node and edge each new one is (-1: a new object). Only those new objects are matched by key, as
    diff() matches all; the others are the same nodes, and edges with the same ends, tensor and label. The
    positions and routes of all are compared in C (not a Python loop over every item)."""
    d = Diff(old, list(nodes), list(edges))
    opos, pos = old_layout.pos, layout.pos
    index = None
    for i in compress(range(len(nodes)), map(_NEG.__eq__, nodes)):
        n = vg.nodes[i]
        if index is None:               # keys of the old nodes no new one is: a new object with an old key
            index = {old.nodes[k].key: k for k in sorted(set(range(len(old.nodes))).difference(nodes))}
        j = index.get(n.key, -1)
        if j >= 0:
            o = old.nodes[j]
            if o.width != n.width or o.height != n.height:
                j = -1
            elif o != n:
                d.relabelled.add(i)
        d.nodes[i] = j
    dn = d.nodes                        # (an index of -1 compares the last: such entries are skipped)
    d.moved.update(i for i in compress(range(len(dn)), map(ne, map(opos.__getitem__, dn), pos)) if dn[i] >= 0)
    ends = None
    oroutes, routes = old_layout.routes, layout.routes
    de = d.edges
    for i in compress(range(len(de)), map(is_not, map(oroutes.__getitem__, de), routes)):
        j = de[i]
        if j >= 0 and oroutes[j] != routes[i]:
            de[i] = -1
    for i in compress(range(len(edges)), map(_NEG.__eq__, edges)):
        if ends is None:                # the old edges no new one is, by key, last first (a tensor read twice)
            ends = {}
            for k in sorted(set(range(len(old.edges))).difference(edges), reverse=True):
                ends.setdefault(_edge_key(old, old.edges[k]), []).append(k)
        same = ends.get(_edge_key(vg, vg.edges[i]))
        j = same.pop() if same else -1
        if j >= 0:
            o, e = old.edges[j], vg.edges[i]
            if oroutes[j] != routes[i]:
                j = -1
            elif (o.label, o.first, o.count) != (e.label, e.first, e.count):
                d.restyled.add(i)
        de[i] = j
    return d
