"""Folded graphs too big to lay out on the GUI thread (every group of a big model opened) are laid out here, in a
worker that sends them to the loader's child (igraph's Sugiyama holds the GIL: on 10,000 boxes a visible stall
per pane). graph_layout caches the result by topology: the window then folds again and finds it laid out."""
from __future__ import annotations

from PySide6.QtCore import QObject, QRunnable, Signal

from . import graph_layout
from .loader_job import in_the_child

BIG = 1000          # boxes from which a folded graph is laid out off the GUI thread (and shown afresh after a re-run):
                    # Sugiyama on a few thousand boxes there was the longest stall of Expand All


class _Signals(QObject):
    done = Signal()


class LayOut(QRunnable):
    """Lays out folded graphs off the GUI thread; `panes`, `initial` and `then` are the window's _refold arguments
    to show them with once done."""

    def __init__(self, graphs: list, panes: tuple = (), initial: bool = False, then=None):
        super().__init__()
        self.graphs, self.panes, self.initial, self.then = graphs, panes, initial, then
        self.signals = _Signals()
        self.setAutoDelete(False)

    def run(self) -> None:
        try:
            for vg in self.graphs:
                graph_layout.compute(vg, in_the_child)
        finally:
            self.signals.done.emit()


def wanted(vg) -> bool:
    """This folded graph is to be laid out by a LayOut first."""
    return len(vg.nodes) >= BIG and not graph_layout.cached(vg)
