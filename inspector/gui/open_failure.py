"""What a file that cannot be opened has wrong, in plain words: the headline of the window's error (the reader's own
message goes under Details)."""
from __future__ import annotations

import os
from pathlib import Path


def plain(path: str, message: str) -> str:
    name = Path(path).name or "The file"
    try:
        size = os.path.getsize(path)
    except OSError:
        size = None
    low = message.lower()
    kind = "ONNX" if path.lower().endswith(".onnx") or "onnx model" in low else "TFLite"
    if size == 0 or "file is empty" in low or "only 0 bytes" in low:
        return f"{name} is empty: it holds no model."
    if "truncated" in low or "outside" in low or "ends before" in low:
        at = f"at {size:,} bytes, " if size is not None else ""      # (None: it could not even be measured again)
        return (f"This file is not a complete {kind} model: it ends {at}before parts it refers to "
                f"(truncated, or damaged in transfer?).")
    if "identifier is missing" in low or "unrecognised file header" in low or "not an onnx model" in low:
        return f"{name} is not a {kind} model (nor any model this tool reads)."
    if "refuses this file" in low or "corrupt" in low:
        return f"{name} is a damaged {kind} model: its contents contradict each other."
    reason = message.split(": ", 1)[1] if message.startswith(str(path)) and ": " in message else message
    return f"{name} could not be opened as a {kind} model: {reason.splitlines()[0]}"
