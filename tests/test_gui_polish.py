"""Small things a person sees in the window, each driven by real input (QTest mouse and key events on the real
widgets) and read from what is painted or shown: issue 36, items 4-6."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QPainterPathStroker
from PySide6.QtTest import QTest

from inspector.gui.graph_items import EdgeItem
from inspector.gui.main_window import ONNX
from inspector.gui.palette import palette
from inspector.resources import path as resource

from .test_gui_edit import open_model, settle, window  # noqa: F401  (fixture)

pytestmark = pytest.mark.gui
SAMPLE = "sample.tflite"


def sample_path():
    return resource(SAMPLE)


def click(view, scene_point: QPointF, button=Qt.LeftButton, modifier=Qt.NoModifier) -> None:
    QTest.mouseClick(view.viewport(), button, modifier, view.mapFromScene(scene_point))


def test_a_selected_curved_edge_is_a_line_not_a_filled_shape(qtbot, window):  # noqa: F811
    """The edge painted before a selected edge leaves its arrowhead's brush on the painter (the view does not save
    painter state per item): the selection halo must not fill the region between the curve and its chord."""
    w = window
    open_model(qtbot, w, sample_path())
    scene, view = w.scenes[ONNX], w.panes[ONNX].main_view
    scene.finish()

    def bulge(e: EdgeItem) -> float:
        r = e.path().boundingRect()
        return min(r.width(), r.height())
    edge = max(scene.edges, key=bulge)
    assert bulge(edge) > 30                                 # a curve with room inside its hull
    view.resetTransform()
    view.centerOn(edge.path().boundingRect().center())
    mid = edge.path().pointAtPercent(0.5)
    assert scene.itemAt(mid, view.transform()) is edge
    click(view, mid)
    assert scene.selectedItems() == [edge]
    image = view.viewport().grab().toImage()

    fill = edge.path()                                      # a painter filling the open path closes it: this region
    stroker = QPainterPathStroker()
    stroker.setWidth(24)                                    # the halo (7 px) and the antialiased line, with margin
    near = stroker.createStroke(edge.path())
    r = fill.boundingRect()
    background, checked = palette().background, 0
    for i in range(1, 40):
        for j in range(1, 40):
            p = QPointF(r.left() + r.width() * i / 40, r.top() + r.height() * j / 40)
            if not fill.contains(p) or near.contains(p) or scene.items(p):     # only where nothing else is
                continue
            v = view.mapFromScene(p)
            if not image.rect().contains(v):
                continue
            checked += 1
            assert image.pixelColor(v).name() == background.name(), (p, image.pixelColor(v).name())
    assert checked > 20
