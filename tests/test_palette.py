"""Both colour schemes are readable and colour-blind safe, and the level-of-detail rule draws no label below 7 px
(issue 35).

Thresholds enforced, in each scheme: every box is set off from the background by 3:1 (WCAG's non-text contrast,
its fill or its outline), text on every fill and on the background 4.5:1 (WCAG AA), the edges 3:1; the six node
fills (four categories, conflict, no category) and the graph inputs' fill are CIE76 dE >= 12 apart for normal
vision and under simulated protanopia and deuteranopia (Machado, Oliveira & Fernandes 2009, severity 1)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("PySide6")

from inspector.gui.lod import LOD_DETAIL, MIN_TEXT_PX, PX_PER_PT, label_size, screen_px  # noqa: E402
from inspector.gui.palette import CATEGORIES, CONFLICT, DARK, LIGHT, UNKNOWN, contrast, palette  # noqa: E402

MACHADO = {
    "normal": np.eye(3),
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
}
MIN_DE, BOX, TEXT = 12.0, 3.0, 4.5


def _linear(c) -> np.ndarray:
    v = np.array([c.redF(), c.greenF(), c.blueF()])
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def _lab(rgb: np.ndarray) -> np.ndarray:
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ rgb
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _fills(pal) -> dict:
    return {**{k: pal.color(k) for k in (*CATEGORIES, CONFLICT, UNKNOWN)}, "terminal": pal.terminal}


def test_the_simulation_is_a_real_one():
    """Red and green, far apart for normal vision, come close under both deficiencies; blue and orange (the
    palette's choice) stay apart: the matrices do what they are for."""
    from PySide6.QtGui import QColor

    def de(a, b, kind):
        m = MACHADO[kind]
        return float(np.linalg.norm(_lab(np.clip(m @ _linear(QColor(a)), 0, 1)) -
                                    _lab(np.clip(m @ _linear(QColor(b)), 0, 1))))
    assert de("#FF0000", "#00A000", "normal") > 80
    assert de("#D03000", "#6F8000", "deuteranopia") < MIN_DE and de("#D03000", "#6F8000", "protanopia") < 2 * MIN_DE
    assert de("#0072B2", "#E69F00", "deuteranopia") > 50


@pytest.mark.parametrize("scheme", [LIGHT, DARK])
@pytest.mark.parametrize("vision", sorted(MACHADO))
def test_fills_stay_apart(scheme, vision):
    fills = _fills(palette(scheme))
    lab = {k: _lab(np.clip(MACHADO[vision] @ _linear(c), 0, 1)) for k, c in fills.items()}
    worst = min((float(np.linalg.norm(lab[a] - lab[b])), a, b) for a, b in itertools.combinations(lab, 2))
    assert worst[0] >= MIN_DE, f"{scheme}, {vision}: {worst[1]} and {worst[2]} are dE {worst[0]:.1f} apart"


@pytest.mark.parametrize("scheme", [LIGHT, DARK])
def test_boxes_text_and_edges_read_on_the_background(scheme):
    pal = palette(scheme)
    bg = pal.background
    for name, fill in _fills(pal).items():
        assert max(contrast(fill, bg), contrast(pal.outline, bg)) >= BOX, f"{scheme}: the {name} box"
        assert contrast(pal.on(fill), fill) >= TEXT, f"{scheme}: text on {name} ({fill.name()})"
    assert contrast(pal.text_on_pinned, pal.pinned) >= TEXT
    assert contrast(pal.ink, bg) >= TEXT and contrast(pal.error, bg) >= TEXT
    assert contrast(pal.edge, bg) >= BOX and contrast(pal.edge_conflict, bg) >= BOX
    assert contrast(pal.pinned, bg) >= BOX and contrast(pal.viewport, bg) >= BOX
    assert pal.dark == (scheme == DARK)


def test_dark_widgets_are_dark_and_readable():
    from PySide6.QtGui import QPalette
    for scheme in (LIGHT, DARK):
        w = palette(scheme).widgets()
        base, text = w.color(QPalette.ColorRole.Base), w.color(QPalette.ColorRole.Text)
        window, wtext = w.color(QPalette.ColorRole.Window), w.color(QPalette.ColorRole.WindowText)
        assert contrast(base, text) >= TEXT and contrast(window, wtext) >= TEXT
        assert (base.lightness() < 60) == (scheme == DARK)


@pytest.mark.parametrize("lod", [0.2, 0.35, 0.45, 0.5, 0.6, 0.75, 1.0, 2.0])
@pytest.mark.parametrize("base, fit", [(9.0, 30.0), (9.0, 10.6), (9.0, 6.0), (7.5, 4.9), (7.5, 12.0)])
def test_a_label_is_readable_or_not_drawn(lod, base, fit):
    size, whole = label_size(base, fit, lod)
    assert whole == (fit >= base)
    if size:
        assert screen_px(size, lod) >= MIN_TEXT_PX - 1e-6
        assert size <= max(base, fit)              # never bigger than its box allows (or its normal size)
    else:                                          # nothing: even the largest size it may take reads too small
        assert screen_px(max(base, min(fit, base * LOD_DETAIL / lod)) if whole else base, lod) < MIN_TEXT_PX


def test_zoomed_out_a_label_keeps_the_size_it_has_at_detail_zoom():
    assert label_size(9.0, 30.0, 0.5) == (9.0 * LOD_DETAIL / 0.5, True)
    assert label_size(9.0, 30.0, 1.0) == (9.0, True)
    assert label_size(9.0, 6.0, 0.5) == (0.0, False)         # elided at 9 pt: 6 px, a smudge
    assert label_size(9.0, 6.0, 0.6)[0] == 9.0               # 7.2 px: drawn


def test_a_group_box_s_label_too_long_is_elided_at_the_smallest_readable_size_its_room_allows():
    """One rule for every box (graph_group's boxes had a zoomed-out rule of their own): a box given room (its
    height's) draws a label that does not fit at the smallest readable size, elided, rather than none."""
    smallest = MIN_TEXT_PX / (PX_PER_PT * 0.3)
    assert label_size(9.0, 6.0, 0.3) == (0.0, False)                    # an op's: elided at 9 pt, 3.6 px: none
    assert label_size(9.0, 6.0, 0.3, room_pt=30.0) == (smallest, False)     # a group's: elided, readable
    assert label_size(9.0, 6.0, 0.3, room_pt=12.0) == (0.0, False)      # its box too low for that: none
    assert label_size(9.0, 30.0, 0.5, room_pt=30.0) == label_size(9.0, 30.0, 0.5)      # readable: as any box's
    smallest = MIN_TEXT_PX / (PX_PER_PT * 0.2)                          # whole it fits at 20 pt: 5.3 px, a smudge
    assert label_size(9.0, 20.0, 0.2) == (0.0, True) and label_size(9.0, 20.0, 0.2, 30.0) == (smallest, False)

