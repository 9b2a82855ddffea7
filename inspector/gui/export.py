"""Export the visible part of a graph view, or the whole scene, as PNG or SVG."""
from __future__ import annotations

import math
import os
import tempfile

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
    """Writes PNG or SVG (by extension) atomically: rendered to a temporary file beside it, then renamed into
    place, so a failed write leaves the old file untouched. Returns the path; OSError when it cannot be written."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=os.path.splitext(path)[1])
    os.close(fd)
    try:
        _render(view, tmp, whole)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _render(view, path: str, whole: bool) -> None:
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
        return
    img = QImage(size, QImage.Format_ARGB32)
    img.fill(view.scene().backgroundBrush().color())
    p = QPainter(img)
    p.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
    view.scene().render(p, target, src, Qt.KeepAspectRatio)
    p.end()
    if not img.save(path, "PNG"):
        raise OSError(f"cannot write {path}")
