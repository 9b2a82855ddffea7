"""Where Open and Export dialogs start: the first usable candidate, never the package's own folder, else home."""
from __future__ import annotations

import os
from pathlib import Path

from inspector.gui.folders import first_folder
from inspector.resources import SAMPLE, path as resource


def test_the_sample_folder_and_missing_folders_are_passed_over(tmp_path):
    package = str(resource(SAMPLE).parent)
    assert first_folder([package, "", str(tmp_path / "gone"), str(tmp_path)]) == str(tmp_path)
    assert first_folder([package]) == str(Path.home())


def test_export_passes_over_a_folder_it_cannot_write(tmp_path, monkeypatch):
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir()
    rw.mkdir()
    real = os.access
    # as a user without write permission sees it (CI runs as root, which writes anywhere)
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == ro and mode & os.W_OK else real(p, mode))
    assert first_folder([str(ro), str(rw)], writable=True) == str(rw)
    assert first_folder([str(ro), str(rw)]) == str(ro)          # Open only reads
