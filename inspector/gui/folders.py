"""Where a file dialog starts: the first usable folder of a few candidates, else home."""
from __future__ import annotations

import os
from pathlib import Path

from inspector.resources import SAMPLE, path as resource


def first_folder(candidates, writable: bool = False) -> str:
    """The first candidate that is a folder (writable, when asked), never the package's own folder: the bundled
    sample lives there, and a dialog started there leads the user into the installation."""
    package = resource(SAMPLE).parent.resolve()
    for folder in candidates:
        if (folder and os.path.isdir(folder) and (not writable or os.access(folder, os.W_OK))
                and Path(folder).resolve() != package):
            return str(folder)
    return str(Path.home())
