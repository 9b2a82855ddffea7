"""The window as a layout debugger: the legend at real widths, live pins that keep the picture, large fan-in."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtGui import QColor

from inspector.gui.main_window import MainWindow

pytestmark = pytest.mark.gui


@pytest.fixture
def window(qtbot, tmp_path):
    w = MainWindow(QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    return w


@pytest.mark.parametrize("width", [1600, 1280, 900])
def test_legend_wraps_and_every_entry_is_drawn(qtbot, window, width):
    window.stack.setCurrentWidget(window.workspace)
    window.resize(width, 900)
    legend = window.legend
    qtbot.waitUntil(lambda: legend.height() == legend.heightForWidth(legend.width()), timeout=5000)
    image = legend.grab().toImage()
    rows = legend.rows(legend.width())
    assert legend.height() >= rows * legend._row_h()
    for (colour, label, _), (x, row) in zip(legend.entries, legend.placement(legend.width())):
        right = x + legend._widths()[legend.entries.index((colour, label, _))]
        assert right <= legend.width(), label                      # not cut at the right edge
        cy = 2 + row * legend._row_h() + legend._row_h() // 2
        swatch = QColor(image.pixel(int(x + legend.SWATCH / 2), int(cy + 3)))
        assert abs(swatch.red() - colour.red()) + abs(swatch.green() - colour.green()) < 40, label   # drawn there
    if legend.sizeHint().width() > legend.width():
        assert rows > 1
