"""Level of detail: what a box in a graph pane shows at the zoom it is seen at. One rule for every box that carries
a label (op nodes, graph inputs and outputs, and any box standing for several), so none shrinks its text into an
unreadable smudge: a label is drawn at MIN_TEXT_PX on screen or more, or not at all."""
from __future__ import annotations

LOD_TEXT, LOD_DETAIL = 0.35, 0.75     # scale above which the title / attributes and shapes are drawn
MIN_TEXT_PX = 7.0                     # on-screen pixels: the smallest label drawn
PX_PER_PT = 96 / 72                   # Qt's logical DPI: a point is 4/3 of a logical pixel


def screen_px(pt: float, lod: float) -> float:
    """The on-screen size of text of `pt` points in a scene seen at scale `lod`."""
    return pt * PX_PER_PT * lod


def readable(pt: float, lod: float) -> bool:
    return screen_px(pt, lod) >= MIN_TEXT_PX - 1e-9


def label_size(base_pt: float, fit_pt: float, lod: float, room_pt: float = 0.0) -> tuple[float, bool]:
    """(point size, whole) of a box's label seen at `lod`: `base_pt` its size when zoomed in, `fit_pt` the largest at
    which it fits its box. Zoomed out it grows (up to fit_pt) to keep the size it has at LOD_DETAIL; a label that
    does not fit at base_pt is elided at that size (whole False). Given `room_pt` (the most its box's height allows:
    a group's box, told apart by its label's end), a label too small to read that way is elided at the smallest
    readable size instead, up to room_pt. Size 0.0: nothing is drawn, the text would read below MIN_TEXT_PX."""
    if fit_pt >= base_pt:
        pt, whole = max(base_pt, min(fit_pt, base_pt * LOD_DETAIL / max(lod, 1e-6))), True
    else:
        pt, whole = base_pt, False
    if room_pt and not readable(pt, lod):
        pt, whole = min(max(base_pt, MIN_TEXT_PX / (PX_PER_PT * max(lod, 1e-6))), room_pt), False
    return (pt if readable(pt, lod) else 0.0), whole
