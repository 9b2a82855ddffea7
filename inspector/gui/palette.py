"""Every colour the window paints with, from inspector/resources/palette.json: a light and a dark scheme (Okabe-Ito
category fills: safe for the common colour-vision deficiencies; tests/test_palette.py checks both).

One scheme is in use at a time (`use`); items, the legend, the minimap and the overview read `palette()` when they
paint, so a switch is a repaint plus the node items' cached fills (GraphScene.restyle). Exports and Model
Explorer's colours take the light scheme unless asked (`palette(LIGHT)`, `using`).
"""
from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from functools import lru_cache

from PySide6.QtGui import QColor, QPalette

from inspector.resources import PALETTE, path as resource

from .graph_model import CONFLICT as CONFLICT, UNKNOWN   # CONFLICT: re-exported for the legend and items

CATEGORIES = ("Implicit", "Transparent", "Attribute", "Terminate")
LIGHT, DARK = "light", "dark"
SYSTEM = "system"                    # the preference that follows the desktop's colour scheme


def luminance(c: QColor) -> float:
    """WCAG relative luminance."""
    def lin(v: float) -> float:
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4
    return 0.2126 * lin(c.redF()) + 0.7152 * lin(c.greenF()) + 0.0722 * lin(c.blueF())


def contrast(a: QColor, b: QColor) -> float:
    """WCAG contrast ratio, 1 to 21."""
    x, y = sorted((luminance(a), luminance(b)))
    return (y + 0.05) / (x + 0.05)


class Palette:
    def __init__(self, name: str, data: dict):
        self.name, self.data = name, data
        self.fill = {k: QColor(v["fill"]) for k, v in data["categories"].items()}
        self.labels = {k: v["label"] for k, v in data["categories"].items()}
        self.text_dark, self.text_light = QColor(data["text_dark"]), QColor(data["text_light"])
        self.terminal, self.edge = QColor(data["terminal"]), QColor(data["edge"])
        self.edge_conflict, self.selection = QColor(data["edge_conflict"]), QColor(data["selection"])
        self.outline, self.background = QColor(data["outline"]), QColor(data["background"])
        self.ink = QColor(data["ink"])            # text and lines on the background (shape labels, the legend)
        self.rule, self.viewport = QColor(data["rule"]), QColor(data["viewport"])   # separators; the minimap's box
        self.error = QColor(data["error"])        # an error said in a panel
        self.muted, self.good, self.warn = QColor(data["muted"]), QColor(data["good"]), QColor(data["warn"])
        self.banner, self.banner_edge = QColor(data["banner"]), QColor(data["banner_edge"])
        self.pinned = QColor(data.get("pinned", data["outline"]))     # a pinned tensor's marker
        self.text_on = {k: self.on(c) for k, c in self.fill.items()}
        self.text_on_terminal, self.text_on_pinned = self.on(self.terminal), self.on(self.pinned)
        self.dark = luminance(self.background) < 0.2

    def on(self, c: QColor) -> QColor:
        """Text on a fill: black or white, whichever contrasts more."""
        return self.text_dark if contrast(c, self.text_dark) >= contrast(c, self.text_light) else self.text_light

    def color(self, category: str) -> QColor:
        return self.fill.get(category, self.fill[UNKNOWN])

    def text(self, category: str) -> QColor:
        return self.text_on.get(category, self.text_dark)

    def widgets(self) -> QPalette:
        """The docks', menus' and fields' palette in this scheme (used when the desktop's differs)."""
        pal = QPalette()
        roles = self.data["widgets"]
        for group, values in ((None, roles), (QPalette.Disabled, roles.get("disabled", {}))):
            for role, colour in values.items():
                if isinstance(colour, str):
                    r = getattr(QPalette.ColorRole, role)
                    if group is None:
                        pal.setColor(r, QColor(colour))
                    else:
                        pal.setColor(group, r, QColor(colour))
        return pal


def _merged(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@lru_cache(maxsize=1)
def _schemes() -> dict[str, Palette]:
    with open(resource(PALETTE), encoding="utf-8") as f:
        data = json.load(f)
    dark = data.pop(DARK)
    return {LIGHT: Palette(LIGHT, data), DARK: Palette(DARK, _merged(data, dark))}


_active = [LIGHT]


def palette(scheme: str | None = None) -> Palette:
    """The scheme in use (or the one named)."""
    return _schemes()[scheme or _active[0]]


def use(scheme: str) -> bool:
    """Paint with `scheme` (LIGHT or DARK) from now on; whether that changed anything."""
    changed = scheme != _active[0]
    _active[0] = scheme
    return changed


def css(role: str) -> str:
    """A text colour of the scheme in use for a style sheet or rich text: "muted" (notes), "error", "warn",
    "good" (edited) or "ink"."""
    return getattr(palette(), role).name()


@contextmanager
def using(scheme: str):
    """`scheme` for what is painted inside (an export), the one in use again after."""
    before = _active[0]
    _active[0] = scheme
    try:
        yield palette()
    finally:
        _active[0] = before
