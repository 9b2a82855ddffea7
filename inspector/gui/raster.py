"""Drawing a whole graph with numpy instead of item paint() calls: for the minimap and far-zoomed-out views.

Below a few pixels per node nothing but colour and position is visible, and 20k Python paint() calls cost far
more than one array fill. Edges are sampled once per screen pixel of their length.
"""
from __future__ import annotations

import numpy as np
from PySide6.QtGui import QColor, QImage

from .palette import palette


def raster(scene, origin: tuple[float, float], k: float, w: int, h: int, alpha: int = 255) -> QImage:
    """The scene's nodes and edges seen from scene point `origin` at scale `k`, as a w×h image."""
    return draw(arrays(scene), origin, k, w, h, alpha)


def arrays(scene) -> tuple:
    """What draw() reads of the scene, taken on the GUI thread (the items' colours): arrays nobody changes later,
    so draw() may run in another thread."""
    return scene.layout.segments(), node_arrays(scene) if scene.nodes else None


def draw(inputs: tuple, origin: tuple[float, float], k: float, w: int, h: int, alpha: int = 255) -> QImage:
    """raster() from arrays(scene): numpy and a QImage only, so any thread can run it."""
    bg = palette().background
    buf = np.empty((h, w, 4), np.uint8)
    buf[:] = (bg.red(), bg.green(), bg.blue(), alpha)
    o = np.asarray(origin, float)
    (a, b), nodes = inputs
    if len(a):
        a, b = (a - o) * k, (b - o) * k
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        seen = (hi[:, 0] >= 0) & (lo[:, 0] < w) & (hi[:, 1] >= 0) & (lo[:, 1] < h)   # only what is on screen
        a, b = a[seen], b[seen]
        steps = np.minimum(np.ceil(np.abs(b - a).max(axis=1)).astype(np.int64) + 1, 4 * (w + h))
        seg = np.repeat(np.arange(len(a)), steps)
        t = (np.arange(len(seg)) - np.repeat(np.cumsum(steps) - steps, steps)) / np.maximum(steps[seg] - 1, 1)
        pts = (a[seg] + (b - a)[seg] * t[:, None]).astype(np.int64)
        _put(buf, pts[:, 0], pts[:, 1], _rgba(palette().edge))
    if nodes is not None:
        _nodes(buf, nodes, o, k)
    return QImage(buf.data, w, h, 4 * w, QImage.Format_RGBA8888).copy()


def _rgba(c: QColor) -> tuple[int, int, int, int]:
    return c.red(), c.green(), c.blue(), 255


def _put(buf, x, y, colour) -> None:
    h, w = buf.shape[:2]
    ok = (x >= 0) & (x < w) & (y >= 0) & (y < h)
    buf[y[ok], x[ok]] = colour if not isinstance(colour, np.ndarray) else colour[ok]


def node_arrays(scene) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(top-left corners, sizes, RGBA colours) of the scene's node items; cached until the colours change."""
    cached = scene.raster_cache.get("nodes")
    if cached is not None and cached[0] == (scene.version, len(scene.nodes)):
        return cached[1]
    items = scene.nodes
    fills = [it.quick_fill for it in items]
    distinct = {id(c): c for c in fills}                     # a handful of colours: a table and an index each
    code = {k: i for i, k in enumerate(distinct)}
    table = np.array([_rgba(c) for c in distinct.values()], np.uint8).reshape(-1, 4)
    colours = table[np.fromiter((code[id(c)] for c in fills), np.int64, len(fills))]
    geometry = scene.raster_cache.get("geometry")           # positions and sizes change only with the layout
    if geometry is None or geometry[0] is not scene.layout or geometry[1] != len(items):
        corner, size = scene.layout.boxes(scene.vg)          # usually made by the worker that laid it out
        order = np.fromiter((it.index for it in items), np.int64, len(items))
        geometry = scene.raster_cache["geometry"] = (scene.layout, len(items), corner[order], size[order])
    arrays = (geometry[2], geometry[3], colours)
    scene.raster_cache["nodes"] = ((scene.version, len(items)), arrays)
    return arrays


def _nodes(buf, nodes, o, k) -> None:
    corner, size, colours = nodes
    corner = ((corner - o) * k).astype(np.int64)
    extent = np.maximum((size * k).astype(np.int64), 1)
    h, w = buf.shape[:2]
    seen = (corner[:, 0] + extent[:, 0] >= 0) & (corner[:, 0] < w) & (corner[:, 1] + extent[:, 1] >= 0) & \
        (corner[:, 1] < h)
    corner, extent, colours = corner[seen], extent[seen], colours[seen]
    if not len(corner):
        return
    if len(corner) < int(extent[:, 0].max()) * int(extent[:, 1].max()):   # few big boxes: one slice each
        for (x, y), (ew, eh), c in zip(corner.tolist(), extent.tolist(), colours):
            buf[max(y, 0):max(y + eh, 0), max(x, 0):max(x + ew, 0)] = c
        return
    for dy in range(int(extent[:, 1].max())):           # boxes are a few pixels here: loop over offsets
        for dx in range(int(extent[:, 0].max())):
            m = (dx < extent[:, 0]) & (dy < extent[:, 1])
            _put(buf, corner[m, 0] + dx, corner[m, 1] + dy, colours[m])
