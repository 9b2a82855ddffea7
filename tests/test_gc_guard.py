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
