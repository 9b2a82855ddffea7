"""A private D-Bus session bus for a window on the test's X server, standing for the desktop's settings service: Qt's
GNOME platform theme (QT_QPA_PLATFORMTHEME=gnome) listens there for the XDG settings portal's SettingChanged signal of
org.freedesktop.appearance color-scheme (1: prefer dark, 2: prefer light) and turns it into Qt's colour scheme
(QStyleHints.colorSchemeChanged), as when a person switches their desktop to dark. `switch()` sends that signal with
gdbus, from any process on the bus. (No portal service answers Qt's first read of the setting: it starts unknown.)

`dbus-daemon --print-address` writes the address once the bus accepts connections: no sleep is needed."""
from __future__ import annotations

import os
import shutil
import subprocess

TOOLS = ("dbus-daemon", "gdbus")
PATH, INTERFACE = "/org/freedesktop/portal/desktop", "org.freedesktop.portal.Settings"


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


class Bus:
    def __init__(self):
        self.proc = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     start_new_session=True)
        self.address = self.proc.stdout.readline().strip()
        if not self.address:
            self.stop()
            raise RuntimeError("dbus-daemon gave no address")

    def env(self) -> dict:
        """What a window's process needs to hear this desktop."""
        return {"DBUS_SESSION_BUS_ADDRESS": self.address, "QT_QPA_PLATFORMTHEME": "gnome"}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def switch(scheme: str) -> None:
    """The desktop's colour scheme becomes `scheme` ("dark" or "light"), said on the session bus of this process's
    environment."""
    value = {"dark": 1, "light": 2}[scheme]
    subprocess.run(["gdbus", "emit", "--session", "--object-path", PATH, "--signal", f"{INTERFACE}.SettingChanged",
                    "org.freedesktop.appearance", "color-scheme", f"<uint32 {value}>"],
                   env=dict(os.environ), check=True, capture_output=True, timeout=30)
