"""Export the visible part of a graph view, or the whole scene, as PNG or SVG."""
from __future__ import annotations

import math

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgGenerator

MAX_PIXELS = 40_000_000        # ~160 MB of ARGB: big graphs are scaled down to fit
MAX_SIDE = 16_000


def source_rect(view, whole: bool) -> QRectF:
    scene = view.scene()
    if whole:
        return scene.itemsBoundingRect().adjusted(-20, -20, 20, 20)
    return view.mapToScene(view.viewport().rect()).boundingRect()


def export(view, path: str, whole: bool = False) -> str:
    """Writes PNG or SVG (by extension); returns the path. Raises OSError when the file cannot be written."""
    src = source_rect(view, whole)
    scale = 1.0 if whole else view.transform().m11()
    w, h = src.width() * scale, src.height() * scale
    k = min(1.0, math.sqrt(MAX_PIXELS / max(w * h, 1)), MAX_SIDE / max(w, h, 1))
    size = QSize(max(1, int(w * k)), max(1, int(h * k)))
    target = QRectF(0, 0, size.width(), size.height())
    if path.lower().endswith(".svg"):
        gen = QSvgGenerator()
        gen.setFileName(path)
        gen.setSize(size)
        gen.setViewBox(target)
        gen.setTitle("Layout Inspector graph")
        p = QPainter(gen)
        view.scene().render(p, target, src, Qt.KeepAspectRatio)
        if not p.end():
            raise OSError(f"cannot write {path}")
        return path
    img = QImage(size, QImage.Format_ARGB32)
    img.fill(view.scene().backgroundBrush().color())
    p = QPainter(img)
    p.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
    view.scene().render(p, target, src, Qt.KeepAspectRatio)
    p.end()
    if not img.save(path):
        raise OSError(f"cannot write {path}")
    return path
