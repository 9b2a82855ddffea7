"""Export the visible part of a graph view, or the whole scene, as PNG or SVG."""
from __future__ import annotations

import math

from PySide6.QtCore import QBuffer, QIODevice, QRectF, QSize, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgGenerator

from .palette import LIGHT, palette, using

MAX_PIXELS = 40_000_000        # ~160 MB of ARGB: big graphs are scaled down to fit
MAX_SIDE = 16_000


def source_rect(view, whole: bool) -> QRectF:
    scene = view.scene()
    if whole:
        return scene.itemsBoundingRect().adjusted(-20, -20, 20, 20)
    return view.mapToScene(view.viewport().rect()).boundingRect()


def export(view, path: str, whole: bool = False, scheme: str = LIGHT) -> str:
    """Writes PNG or SVG (by extension) atomically, like every other write (core/io/atomic.py): a failed write leaves
    the old file untouched. In the light palette unless `scheme` says otherwise, whatever the window shows (a
    picture goes into documents and slides). Returns the path; OSError when it cannot be written."""
    from inspector.core.io.atomic import WriteError, write_atomic
    try:
        write_atomic(path, render(view, whole, path.lower().endswith(".svg"), scheme))
    except WriteError as e:
        raise OSError(str(e)) from None
    return path


def render(view, whole: bool, svg: bool, scheme: str = LIGHT) -> bytes:
    """The picture's bytes in `scheme`: the scene is restyled for it and back (the items cache their fills)."""
    scene = view.scene()
    if scheme == palette().name:
        return _render(view, whole, svg)
    try:
        with using(scheme):
            scene.restyle()
            return _render(view, whole, svg)
    finally:
        scene.restyle()


def _render(view, whole: bool, svg: bool) -> bytes:
    """The view (or whole scene) rendered to PNG or SVG bytes."""
    src = source_rect(view, whole)
    scale = 1.0 if whole else view.transform().m11()
    w, h = src.width() * scale, src.height() * scale
    k = min(1.0, math.sqrt(MAX_PIXELS / max(w * h, 1)), MAX_SIDE / max(w, h, 1))
    size = QSize(max(1, int(w * k)), max(1, int(h * k)))
    target = QRectF(0, 0, size.width(), size.height())
    buf = QBuffer()
    buf.open(QIODevice.WriteOnly)
    if svg:
        gen = QSvgGenerator()
        gen.setOutputDevice(buf)
        gen.setSize(size)
        gen.setViewBox(target)
        gen.setTitle("Layout Inspector graph")
        p = QPainter(gen)
        view.scene().render(p, target, src, Qt.KeepAspectRatio)
        if not p.end():
            raise OSError("cannot render the SVG")
        return bytes(buf.data())
    img = QImage(size, QImage.Format_ARGB32)
    img.fill(view.scene().backgroundBrush().color())
    p = QPainter(img)
    p.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
    view.scene().render(p, target, src, Qt.KeepAspectRatio)
    p.end()
    if not img.save(buf, "PNG"):
        raise OSError("cannot encode the PNG")
    return bytes(buf.data())
