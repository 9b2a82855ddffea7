"""Layered top-to-bottom layout (igraph's Sugiyama with our own layering), cached by topology.

Layers: longest path from the sources, then each source is pulled down to just above its first consumer, so
inputs and constant-only ops sit next to where they are used. Sugiyama's dummy vertices become the bend points of
long edges. Edges run vertically through a layer's band and bend only in the gap between layers, so they never
cross a node box. Positions depend only on topology and node sizes: recolouring reuses the cached layout.
"""
from __future__ import annotations

import gc
import hashlib
import math
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from itertools import chain

import igraph
import numpy as np

from .graph_model import ViewGraph

H_GAP, V_GAP = 28, 60            # pixels between node slots / between layer bands (room for an inserted
                                  # Transpose, 40 px, with a gap above and below it: live_layout.MIN_GAP)
_CACHE: OrderedDict[str, "Geometry"] = OrderedDict()
_CACHE_SIZE = 16
_LOCK = threading.Lock()
_KEYS: dict[int, tuple] = {}        # id(graph) -> (a weak reference to it, its topology_key): a graph is not changed


@dataclass
class Geometry:
    """Where a drawn graph's nodes and edges go (not a tensor's layout: that is core.layout.Layout)."""
    pos: list[tuple[float, float]]                 # node centre
    routes: list[list[tuple[float, float]]]        # per edge: polyline points, start at src bottom, end at dst top
    width: float
    height: float
    _segments: tuple[np.ndarray, np.ndarray] | None = None
    _boxes: tuple[np.ndarray, np.ndarray] | None = None
    _order: list | None = None

    def segments(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of every straight piece of every edge route, for drawing overviews with numpy."""
        if self._segments is None:        # all points in one flat pass (lists of tuples to numpy: 2x slower)
            self._segments = _segments(_points(chain.from_iterable(self.routes)),
                                       np.fromiter(map(len, self.routes), np.intp, len(self.routes)))
        return self._segments

    def boxes(self, vg: ViewGraph) -> tuple[np.ndarray, np.ndarray]:
        """(top-left corners, sizes) of vg's nodes in node order, for drawing overviews with numpy (the layout
        fits vg's node sizes: its cache key holds them)."""
        if self._boxes is None or len(self._boxes[0]) != len(vg.nodes):
            size = _points([(n.width, n.height) for n in vg.nodes])
            self._boxes = (_points(self.pos) - size / 2, size)
        return self._boxes

    def order(self, vg: ViewGraph) -> list[tuple[float, int, int]]:
        """(top, 0, node) and (start, 1, edge) sorted top-down: the order a scene creates its items in."""
        if self._order is None or len(self._order) != len(vg.nodes) + len(vg.edges):
            order = [(y - vg.nodes[i].height / 2, 0, i) for i, (_, y) in enumerate(self.pos)]
            order += [(route[0][1], 1, i) for i, route in enumerate(self.routes)]
            order.sort()
            self._order = order
        return self._order

    def arrays(self) -> tuple:
        """(positions, every route's points in a row, each route's length, width, height): what from_arrays takes."""
        lens = np.fromiter(map(len, self.routes), np.intp, len(self.routes))
        return _points(self.pos), _points(chain.from_iterable(self.routes)), lens, self.width, self.height

    @classmethod
    def from_arrays(cls, pos: np.ndarray, points: np.ndarray, lens: np.ndarray, width: float, height: float):
        pts = list(zip(*points.T.tolist()))
        ends = np.cumsum(lens).tolist()
        routes = [pts[a:b] for a, b in zip([0] + ends[:-1], ends)]
        return cls(list(zip(*pos.T.tolist())), routes, width, height, _segments(points, lens))

    def prepare(self, vg: ViewGraph, order: bool = True) -> "Geometry":
        """Compute the overview arrays and (with `order`: a new scene builds its items in it) the item order now, in
        a worker, not on the GUI thread."""
        self.segments()
        self.boxes(vg)
        if order:
            self.order(vg)
        return self


def _segments(pts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the straight pieces of routes whose points are `pts`, route after route, `lens` each."""
    lens = lens[lens > 0]
    last = np.cumsum(lens) - 1
    starts, ends = np.ones(len(pts), bool), np.ones(len(pts), bool)
    starts[last] = False                    # a segment starts at any point but its route's last
    ends[last - lens + 1] = False           # and ends at any but its first
    return pts[starts], pts[ends]


def _points(pairs) -> np.ndarray:
    """An n×2 float array of (x, y) pairs."""
    return np.fromiter(chain.from_iterable(pairs), float).reshape(-1, 2)


def topology_key(vg: ViewGraph) -> str:
    """What vg's layout depends on (a hash); worked out once per graph (a fold asks whether it is laid out, then
    lays it out, then again once the worker has: each a walk of every node and edge)."""
    got = _KEYS.get(id(vg))
    if got is not None and got[0]() is vg:
        return got[1]
    h = hashlib.sha1()
    h.update(repr([(n.width, n.height) for n in vg.nodes]).encode())
    h.update(repr([(e.src, e.dst) for e in vg.edges]).encode())
    key = h.hexdigest()
    if len(_KEYS) > 64:
        _KEYS.clear()
    _KEYS[id(vg)] = (weakref.ref(vg), key)
    return key


def layers_of(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Longest path from the sources (Kahn order); cycles, if any, are broken by ignoring back edges."""
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for s, d in edges:
        succ[s].append(d)
        indeg[d] += 1
    layer = [0] * n
    order, queue = [], [i for i in range(n) if indeg[i] == 0]
    remaining = indeg[:]
    while queue:
        v = queue.pop()
        order.append(v)
        for w in succ[v]:
            layer[w] = max(layer[w], layer[v] + 1)
            remaining[w] -= 1
            if remaining[w] == 0:
                queue.append(w)
    if len(order) < n:                      # a cycle: place the rest below what was ordered
        top, done = max(layer, default=0) + 1, set(order)
        for v in range(n):
            if v not in done:
                layer[v] = top
    for v in range(n):                      # pull sources down next to their first consumer
        if indeg[v] == 0 and succ[v]:
            layer[v] = max(0, min(layer[w] for w in succ[v]) - 1)
    return layer


def compute(vg: ViewGraph, elsewhere=None) -> Geometry:
    """vg's layout, cached by topology. `elsewhere(sizes, edges)`, when given, runs `placed` in another process and
    returns what it returned (the window's loader sends a big graph to its child process: igraph's Sugiyama is one
    C call that holds the GIL, and the window froze while a thread of it ran it)."""
    key = topology_key(vg)
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    if elsewhere is None:
        layout = _compute(vg)
    else:
        layout = Geometry.from_arrays(*elsewhere(np.array([(n.width, n.height) for n in vg.nodes]).reshape(-1, 2),
                                                 np.array([(e.src, e.dst) for e in vg.edges], np.intp).reshape(-1, 2)))
    layout.prepare(vg)                      # in the worker, not at first overview
    with _LOCK:
        _CACHE[key] = layout
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return layout


def placed(sizes: np.ndarray, edges: np.ndarray) -> tuple:
    """In a child process: the layout of nodes of these (width, height) joined by these (src, dst), as arrays
    (Geometry.arrays: one short unpickling where 100,000 tuples were a long one). No automatic collection meanwhile:
    the collections its many short-lived objects set off scanned the child's whole heap again and again."""
    was = gc.isenabled()
    gc.disable()
    try:
        return _place(sizes.tolist(), edges.tolist()).arrays()
    finally:
        if was:
            gc.enable()


def cached(vg: ViewGraph) -> bool:
    with _LOCK:
        return topology_key(vg) in _CACHE


def _compute(vg: ViewGraph) -> Geometry:
    return _place([(n.width, n.height) for n in vg.nodes], [(e.src, e.dst) for e in vg.edges])


def _place(sizes: list, edges: list) -> Geometry:
    """Nodes of these (width, height) joined by these (src, dst) edges, laid out."""
    n = len(sizes)
    if n == 0:
        return Geometry([], [], 0.0, 0.0)
    layer = layers_of(n, edges)
    # Edges must point down a layer; a back edge (from a cycle) is laid out reversed.
    ig_edges = [(s, d) if layer[s] < layer[d] else (d, s) for s, d in edges]
    g = igraph.Graph(n=n, edges=ig_edges, directed=True)
    maxiter = 100 if n < 1000 else (30 if n < 3000 else 10)
    lay, extended = g.layout_sugiyama(layers=layer, hgap=1, vgap=1, maxiter=maxiter, return_extended_graph=True)
    slot = max(w for w, _ in sizes) + H_GAP
    nlayers = max(layer) + 1
    band = [0.0] * nlayers
    for i, (_, h) in enumerate(sizes):
        band[layer[i]] = max(band[layer[i]], h)
    top = [0.0] * nlayers
    for k in range(1, nlayers):
        top[k] = top[k - 1] + band[k - 1] + V_GAP
    # igraph's x placement can put vertices of one layer closer than hgap: keep its order, space them ourselves.
    # Vertices: the n nodes, then every edge's dummies in order (numbered so edge ei's start at first_dummy[ei]).
    coords = lay.coords                     # a copy per access in igraph: take it once
    routing = _routing(extended, coords, ig_edges)
    want = [c[0] for c in coords[:n]]
    routing = [_sane_route(r, want, layer, s, d) for r, (s, d) in zip(routing, ig_edges)]
    row = list(layer)
    first_dummy = []
    for r in routing:
        first_dummy.append(len(want))
        for cx, cy in r:
            want.append(cx)
            row.append(int(round(cy)))
    x = _spaced_rows(np.asarray(row), np.asarray(want, dtype=float))
    x = (x - x.min()) * slot + slot / 2
    xs = x.tolist()
    pos = [(xs[i], top[layer[i]] + band[layer[i]] / 2) for i in range(n)]
    routes = []
    for ei, (s, d) in enumerate(edges):
        if layer[s] >= layer[d]:            # back edge: drawn straight, it is rare
            routes.append([(pos[s][0], pos[s][1] + sizes[s][1] / 2), (pos[d][0], pos[d][1] - sizes[d][1] / 2)])
            continue
        sx, sy = pos[s]
        pts = [(sx, sy + sizes[s][1] / 2), (sx, top[layer[s]] + band[layer[s]])]
        for k, (_, cy) in enumerate(routing[ei]):
            dx, lk = xs[first_dummy[ei] + k], int(round(cy))
            pts += [(dx, top[lk]), (dx, top[lk] + band[lk])]
        dx, dy = pos[d]
        pts += [(dx, top[layer[d]]), (dx, dy - sizes[d][1] / 2)]
        routes.append(pts)
    width = max(xs) + slot / 2
    height = top[-1] + band[-1]
    return Geometry(pos, routes, width, height)


def _routing(extended, coords, ig_edges) -> list:
    """Each edge's bends: the dummy vertices igraph put on it, in order from its source (its extended graph chains
    them, each link naming the edge it stands for; igraph 0.11 has no edge_routing, and 1.0 crashes)."""
    step = {}
    for (u, v), e in zip(extended.get_edgelist(), extended.es["_original_eid"]):
        step[e, u] = v
    routing = []
    for e, (s, d) in enumerate(ig_edges):
        route, u = [], s
        while (v := step.get((e, u))) is not None and v != d and len(route) <= len(coords):
            route.append(tuple(coords[v]))
            u = v
        routing.append(route)
    return routing


def _sane_route(route, want, layer, s: int, d: int) -> list:
    """igraph's bends of edge s -> d, one per layer crossed; rebuilt on a straight line when they are not. A test
    run once got a bend on a row past 2**63 from igraph (an index error, not reproduced in 300 runs): a picture with
    one straight edge is better than no picture."""
    rows = list(range(layer[s] + 1, layer[d]))
    if len(route) == len(rows) and all(math.isfinite(cx) and math.isfinite(cy) and round(cy) == k
                                       for (cx, cy), k in zip(route, rows)):
        return route
    span = max(1, layer[d] - layer[s])
    return [(want[s] + (want[d] - want[s]) * (k - layer[s]) / span, float(k)) for k in rows]


def _spaced_rows(row: np.ndarray, want: np.ndarray) -> np.ndarray:
    """x per vertex: in each row the order of `want`, neighbours at least 1 apart, as close to `want` as a
    left-to-right and a right-to-left sweep allow (their mean keeps both constraints and removes the drift)."""
    order = np.lexsort((want, row))
    r, w = row[order], want[order]
    starts = np.r_[0, np.flatnonzero(np.diff(r)) + 1]
    rank = np.arange(len(r)) - np.repeat(starts, np.diff(np.r_[starts, len(r)]))
    big = (np.abs(w).max() + len(r) + 1) * 4
    lift = r * big                         # keeps the running max/min from leaking across rows
    fwd = np.maximum.accumulate(w - rank + lift) - lift + rank
    bwd = np.minimum.accumulate((w - rank + lift)[::-1])[::-1] - lift + rank
    out = np.empty_like(w)
    out[order] = (fwd + bwd) / 2
    return out
