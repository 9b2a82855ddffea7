"""The loader's child process ends with the window's: a window killed by a signal never shuts its pool down, and
a window process that ends while its child is still starting neither hangs nor dies noisily."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

KILLED_WINDOW = """
import os, signal
from inspector.gui import loader_job
print(loader_job.executor().submit(os.getpid).result(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""

# the window's process ends while the warm-up is starting the child: the start is held before the forkserver
EXIT_DURING_WARM_UP = """
import multiprocessing, multiprocessing.forkserver as forkserver, sys, threading, time
def finish(path):                   # a child of the script's own: it is joined at exit, not killed
    time.sleep(0.5)
    open(path, "w").write("finished")
multiprocessing.get_context("fork").Process(target=finish, args=(sys.argv[2],)).start()
asked, connect = threading.Event(), forkserver.connect_to_new_process
def held(fds):
    asked.set()
    time.sleep(float(sys.argv[1]))
    return connect(fds)
forkserver.connect_to_new_process = held
from inspector.gui import loader_job
loader_job.warm()
asked.wait()
print("ending", flush=True)
"""


def _running(pid: int) -> bool:
    """Alive and not a zombie (a container's init may never reap an orphan)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_the_child_ends_when_the_window_is_killed(tmp_path):
    root, out = Path(__file__).resolve().parents[1], tmp_path / "out"
    with out.open("w") as f:        # a file, not a pipe: an orphaned child would hold a pipe open
        done = subprocess.run([sys.executable, "-c", KILLED_WINDOW], cwd=root, stdout=f, stderr=subprocess.STDOUT,
                              timeout=120)
    assert done.returncode == -9, out.read_text()
    worker = int(out.read_text().split()[0])
    assert worker != os.getpid()
    deadline = time.monotonic() + 60        # a bound on waiting, not a speed target: it ends within a second
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(worker), f"the child {worker} outlived the killed window"


def test_a_process_that_ends_while_its_child_starts_exits_cleanly(tmp_path):
    """It hung for ever (CI: the installed-wheel test's window script, 300 s) or printed tracebacks: at exit the
    pool's weakref callback waited for the lock the warm-up's spawn held in a daemon thread, frozen by finalization,
    or the child read semaphores the exit had already removed. loader_job._end_child ends the child first."""
    root = Path(__file__).resolve().parents[1]
    for i, held in enumerate(("0", "0.5", "0.5", "1.5")):
        out = tmp_path / f"out{i}"
        with out.open("w") as f:
            try:        # a bound on waiting, not a speed target: it ends within a second or two
                done = subprocess.run([sys.executable, "-c", EXIT_DURING_WARM_UP, held, str(tmp_path / f"own{i}")],
                                      cwd=root, stdout=f, stderr=subprocess.STDOUT, timeout=60)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"held {held} s: the process hung at exit\n{out.read_text()}") from None
        text = out.read_text()
        assert done.returncode == 0 and text.strip() == "ending", f"held {held} s:\n{text}"
        assert (tmp_path / f"own{i}").read_text() == "finished"
