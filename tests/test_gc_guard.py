"""While a window runs, cyclic garbage is collected on the GUI thread only (a worker's collection can finalize
Qt wrappers off their thread and crash), and still collected."""
from __future__ import annotations

import gc
import threading
import weakref

import pytest
from PySide6.QtCore import QSettings

from inspector.gui.main_window import MainWindow

pytestmark = pytest.mark.gui


def test_cycles_are_collected_on_the_gui_thread_only(qtbot, tmp_path):
    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(w)
    assert not gc.isenabled()
    threads = []
    gc.callbacks.append(lambda phase, info: threads.append(threading.current_thread()))
    try:
        class Node:
            pass
        for _ in range(3):                           # garbage cycles made on a worker thread
            def make():
                for _ in range(5000):
                    a, b = Node(), Node()
                    a.b, b.a = b, a
            t = threading.Thread(target=make)
            t.start()
            t.join()
        probe = Node()
        probe.self = probe
        ref = weakref.ref(probe)
        del probe
        qtbot.waitUntil(lambda: ref() is None, timeout=10_000)      # the GUI thread's timer collected it
    finally:
        gc.callbacks.pop()
    assert threads and all(t is threading.main_thread() for t in threads)


def test_full_collections_freeze_survivors_and_opening_a_model_thaws_them(qtbot, tmp_path, monkeypatch):
    """Long-lived objects are not rescanned by every full collection (a stall on large models), and a model's
    leftovers are collected again once another model opens (open_path calls gc_guard.release)."""
    from PySide6.QtWidgets import QApplication

    from inspector.gui import gc_guard
    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(w)
    guard = QApplication.instance().findChild(gc_guard.MainThreadGC)
    guard.timer.stop()                              # this test calls check() itself
    gc.unfreeze()
    keep = [[i] for i in range(50_000)]             # long-lived, tracked objects

    class Node:
        pass
    probe = Node()
    probe.self = probe                              # a cycle that is still in use
    extra = [[i] for i in range(guard.threshold[0] + 1)]
    # Both the youngest and the oldest generation's counts past their thresholds. Set, not reached by allocating:
    # the counts are the interpreter's, shared by every thread, and with a one-object margin this failed once in CI.
    t0, _t1, t2 = guard.threshold
    monkeypatch.setattr(gc, "get_count", lambda: (t0 + 1, 0, t2 + 1))
    guard.check()                                   # a full collection: its survivors are frozen
    monkeypatch.undo()
    assert gc.get_freeze_count() >= len(keep) + len(extra)
    ref = weakref.ref(probe)
    del probe                                       # garbage now, but frozen
    gc.collect()
    assert ref() is not None
    gc_guard.release()
    gc.collect()
    assert ref() is None and gc.get_freeze_count() == 0
    guard.timer.start()


def test_a_big_burst_that_lasts_is_frozen_not_scanned_and_a_small_one_collected(qtbot, tmp_path, monkeypatch):
    """A worker making 10^6 objects (a 100,000-input ONNX read, a 50,000-op layout) is not scanned on the GUI
    thread when it lasts past WAIT_S (each such collection stalled the window 0.1-0.3 s): it is frozen, as settle()
    would. A smaller burst is still collected then."""
    import time

    from PySide6.QtWidgets import QApplication

    from inspector.gui import gc_guard
    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(w)
    guard = QApplication.instance().findChild(gc_guard.MainThreadGC)
    guard.timer.stop()                              # this test calls check() itself
    collections = []
    gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info["generation"]))
    try:
        for young, scanned in ((gc_guard.FREEZE_OVER + 1, False), (gc_guard.BURST * guard.threshold[0] + 1, True)):
            gc.unfreeze()
            made = [[i] for i in range(1000)]       # young, tracked objects the check finds
            monkeypatch.setattr(gc, "get_count", lambda y=young: (y, 0, 0))
            guard.since = None
            guard.check()                           # the burst is seen: left for now
            assert collections == [] and gc.get_freeze_count() == 0
            guard.since = time.monotonic() - gc_guard.WAIT_S - 0.1      # ... and it lasted
            guard.check()
            monkeypatch.undo()
            assert (collections != []) is scanned
            assert (gc.get_freeze_count() >= len(made)) is not scanned
            collections.clear()
    finally:
        gc.callbacks.pop()
        gc.unfreeze()
        guard.timer.start()

