"""Files the application reads at run time (category palette, sample model, icon). They ship inside the package,
so an installed wheel finds them where the source tree does."""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path

PALETTE, SAMPLE, ICON = "palette.json", "sample.tflite", "layout-inspector.svg"


def path(name: str) -> Path:
    """The file's path on disk (the package is installed as plain files: setuptools wheels are never zipped)."""
    return Path(str(files(__name__).joinpath(name)))
