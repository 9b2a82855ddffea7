"""A private X server (Xvfb) for tests that need a real desktop: the xcb platform plugin, mapped windows, real key
and mouse events (xdotool).

`Xvfb -displayfd` picks a free display number itself and writes it to a pipe once the server accepts connections,
so parallel test runs never race for a number and no sleep is needed. Used through the `xserver` fixture
(tests/conftest.py); `XServer.env()` is the environment a child process needs to show a window there.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

# What Qt's xcb plugin and the tests need on Debian (the Makefile's `debs` target installs them).
TOOLS = ("Xvfb", "xdotool")


@dataclass
class XServer:
    display: str
    proc: subprocess.Popen

    def env(self, base: dict | None = None) -> dict:
        env = dict(os.environ if base is None else base)
        env.update(DISPLAY=self.display, QT_QPA_PLATFORM="xcb")
        env.pop("WAYLAND_DISPLAY", None)
        return env

    def xdotool(self, *args: str, timeout: float = 10) -> subprocess.CompletedProcess:
        return subprocess.run(["xdotool", *args], env=self.env(), capture_output=True, text=True, timeout=timeout)

    def visible_windows(self, pid: int | None = None, name: str = "") -> list[str]:
        """Ids of mapped (viewable) windows, of process `pid` when given, whose title matches `name` (a regex)."""
        args = ["search", "--onlyvisible"]
        if pid is not None:
            args += ["--pid", str(pid)]
        out = self.xdotool(*args, "--name", name or ".")
        return out.stdout.split()

    def wait_for_window(self, pid: int | None = None, name: str = "", timeout: float = 60,
                        alive: subprocess.Popen | None = None) -> list[str]:
        """Poll until a visible window appears; [] on timeout or when `alive` (the app's process) has exited."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            found = self.visible_windows(pid, name)
            if found or (alive is not None and alive.poll() is not None):
                return found
            time.sleep(0.2)
        return []

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


def start(width: int = 1600, height: int = 1000, timeout: float = 30) -> XServer:
    """Start Xvfb on a display number of its choosing; returns once it accepts connections."""
    read, write = os.pipe()
    log = tempfile.TemporaryFile()      # a file, not a pipe: a chatty server never blocks on a full pipe
    try:
        proc = subprocess.Popen(
            ["Xvfb", "-displayfd", str(write), "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp",
             "-noreset"],
            pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    finally:
        os.close(write)
    with os.fdopen(read) as pipe:
        number = _read_line(pipe, proc, timeout)
    if not number:
        proc.kill()
        proc.wait()
        log.seek(0)
        err = log.read().decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"Xvfb did not start: {err[-1] if err else 'no display number'}")
    log.close()
    return XServer(f":{number}", proc)


def _read_line(pipe, proc: subprocess.Popen, timeout: float) -> str:
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(pipe, selectors.EVENT_READ)
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        if sel.select(0.2):
            return pipe.readline().strip()
    return ""
