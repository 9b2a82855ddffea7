"""The plain-words headline of a failed open, for a file that can no longer be measured."""
from __future__ import annotations

from inspector.gui.open_failure import plain


def test_a_truncated_file_that_vanished_is_still_said_in_plain_words(tmp_path):
    """The reader said "truncated", then the file went away: the size is unknown, and the headline says the rest
    (it raised TypeError formatting None, inside the window's error handler)."""
    gone = tmp_path / "m.tflite"
    text = plain(str(gone), f"{gone}: buffers: an entry points outside the file")
    assert text == ("This file is not a complete TFLite model: it ends before parts it refers to "
                    "(truncated, or damaged in transfer?).")


def test_a_truncated_file_says_where_it_ends(tmp_path):
    f = tmp_path / "m.tflite"
    f.write_bytes(b"\0" * 1234)
    assert "it ends at 1,234 bytes, before parts it refers to" in plain(str(f), "truncated")
