"""Open a model file by its content, not its name."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import ModelLoadError
from .graph import Graph


def regular_file(path: str) -> int:
    """The file's size; ModelLoadError for a missing file, a device, a pipe or a folder (reading /dev/zero or a
    FIFO named model.onnx would never end)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise ModelLoadError(path, e.strerror or str(e)) from None
    if not stat.S_ISREG(st.st_mode):
        raise ModelLoadError(path, "not a regular file (a device, pipe or folder cannot be a model)")
    return st.st_size


def sniff(path: str | Path) -> str:
    """'tflite' or 'onnx' by the file's first bytes; ModelLoadError for anything else."""
    path = str(path)
    regular_file(path)
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        raise ModelLoadError(path, e.strerror or str(e)) from None
    if head[4:8] == b"TFL3":
        return "tflite"
    if head[:1] == b"\x08":          # ONNX ModelProto starts with field 1 (ir_version), varint
        return "onnx"
    if path.lower().endswith(".onnx"):
        return "onnx"
    raise ModelLoadError(path, "not a TFLite or ONNX model (unrecognised file header)")


def load_model(path: str | Path) -> Graph:
    kind = sniff(path)
    if kind == "tflite":
        from .tflite_reader import read_tflite
        return read_tflite(path)
    from .onnx_reader import read_onnx
    return read_onnx(path)
