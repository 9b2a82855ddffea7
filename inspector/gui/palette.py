"""Category colours from inspector/resources/palette.json (Okabe-Ito: safe for the common colour-vision
deficiencies)."""
from __future__ import annotations

import json
from functools import lru_cache

from PySide6.QtGui import QColor

from inspector.resources import PALETTE, path as resource

from .graph_model import CONFLICT as CONFLICT, UNKNOWN   # CONFLICT: re-exported for the legend and items

CATEGORIES = ("Implicit", "Transparent", "Attribute", "Terminate")


class Palette:
    def __init__(self, data: dict):
        self.data = data
        self.fill = {k: QColor(v["fill"]) for k, v in data["categories"].items()}
        self.labels = {k: v["label"] for k, v in data["categories"].items()}
        self.text_dark, self.text_light = QColor(data["text_dark"]), QColor(data["text_light"])
        self.terminal, self.edge = QColor(data["terminal"]), QColor(data["edge"])
        self.edge_conflict, self.selection = QColor(data["edge_conflict"]), QColor(data["selection"])
        self.outline, self.background = QColor(data["outline"]), QColor(data["background"])
        self.pinned = QColor(data.get("pinned", data["outline"]))     # a pinned tensor's marker
        self.text_on = {k: self._contrast(c) for k, c in self.fill.items()}

    def _contrast(self, c: QColor) -> QColor:
        # WCAG relative luminance threshold: dark text on light fills, white on dark ones
        lum = 0.2126 * c.redF() ** 2.2 + 0.7152 * c.greenF() ** 2.2 + 0.0722 * c.blueF() ** 2.2
        return self.text_dark if lum > 0.18 else self.text_light

    def color(self, category: str) -> QColor:
        return self.fill.get(category, self.fill[UNKNOWN])

    def text(self, category: str) -> QColor:
        return self.text_on.get(category, self.text_dark)


@lru_cache(maxsize=1)
def palette() -> Palette:
    with open(resource(PALETTE), encoding="utf-8") as f:
        return Palette(json.load(f))
