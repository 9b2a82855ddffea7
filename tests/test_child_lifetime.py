"""The loader's child process ends with the window's: a window killed by a signal never shuts its pool down."""
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
