"""Cyclic garbage collection on the GUI thread only.

Python starts a collection in whichever thread happens to allocate past the threshold. When that is a worker
(the loader reading a model), the collection can finalize Qt wrappers that belong to the GUI thread, and Qt
crashes (seen: a segfault "Garbage-collecting" inside the TFLite reader on a loader thread). So the automatic
collector is off while the window runs and a timer on the GUI thread collects as the thresholds would.
Child processes (forkserver) start with their own, enabled collector.

Survivors of a full collection are frozen (gc.freeze): a model's graphs, scene items and results live as long as it
is open, and rescanning them in every later full collection stalled the window on a big model (the
timer cannot apply CPython's rule that skips most full collections), and what a model's opening or a re-run made
is frozen at once (settle(); check() leaves such a burst of new objects to it, and freezes a big one that
lasts, unscanned). Opening another
model thaws them (release()), so what it left behind is collected again.
"""
from __future__ import annotations

import gc
import time

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

INTERVAL_MS = 250
BURST, WAIT_S = 20, 2.0     # young objects past BURST times the threshold (a model or a result arriving) are left
                            # for settle() to freeze for up to WAIT_S, not scanned
FREEZE_OVER = 100_000       # young objects past which a burst that lasts is frozen, not scanned (scanning them
                            # each time is a visible stall under load)


class MainThreadGC(QObject):
    def __init__(self, parent: QObject):
        super().__init__(parent)
        self.threshold = gc.get_threshold()
        self.since: float | None = None     # when a burst of young objects was first seen
        gc.disable()
        self.timer = QTimer(self, interval=INTERVAL_MS, timeout=self.check)
        self.timer.start()

    def check(self) -> None:
        c0, c1, c2 = gc.get_count()
        t0, t1, t2 = self.threshold
        if c0 > BURST * t0:             # a worker is building a model's graph or a result: scanning its ~10^5 new
            now = time.monotonic()      # objects stalled the window, and settle() freezes them when shown
            self.since = self.since or now
            if now - self.since < WAIT_S:
                return
            if c0 > FREEZE_OVER:        # a worker reading 100,000 inputs or laying out 50,000 ops: what it made
                self.since = None       # lives on, as settle() would find it (scanning its 10^5-10^6 objects
                gc.freeze()             # stalled the window again and again); its cyclic garbage, if
                return                  # any, waits for release()
        self.since = None
        if c0 > t0:
            gen = 2 if c2 > t2 else 1 if c1 > t1 else 0
            if gen and _building():     # its items are frozen when it completes (settle): an older generation's
                gen = 0                 # collection meanwhile scanned every item made so far (a stall on a big
                                        # model); they wait in generation 1, unscanned
            gc.collect(gen)
            if gen == 2:
                gc.freeze()


def _building() -> bool:
    """Whether a graph scene is still being built (or re-indexed, or recoloured) from the event loop."""
    from .graph_view import TURNS
    return bool(TURNS.queue)


def settle() -> None:
    """A model, or a re-run's result, has just been shown: what lives now (graphs, results, scene items) mostly
    lives on, so it is frozen, not scanned by the next collections (a stall at the first full one after an open
    or a pin; even a young one scanned a re-run's 10^5 new objects). A replaced
    result is still freed by its reference counts; only cyclic garbage frozen with it waits for release(): twelve
    pin/undo cycles on MobileNetV3Small leave ~50 KB, the closures of the json module's encoders (each re-run's
    Recorder was in a cycle too until incremental.Cursor; tests/test_incremental.py checks it)."""
    gc.freeze()


def release() -> None:
    """The open model is being replaced: what was frozen may be garbage now, so full collections look at it again."""
    gc.unfreeze()


def install() -> None:
    """Once per QApplication (the guard lives as its child)."""
    app = QApplication.instance()
    if app is not None and app.findChild(MainThreadGC) is None:
        MainThreadGC(app)


def uninstall() -> None:
    """Back to Python's automatic collector (tests, between windows)."""
    app = QApplication.instance()
    guard = app.findChild(MainThreadGC) if app is not None else None
    if guard is not None:
        guard.timer.stop()
        guard.setParent(None)
        guard.deleteLater()
    gc.unfreeze()
    gc.enable()
