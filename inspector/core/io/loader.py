"""Open a model file by its content, not its name."""
from __future__ import annotations

from pathlib import Path

from inspector.core.ir.errors import ModelLoadError
from inspector.core.ir.graph import Graph
from .inputs import read_head


def sniff(path: str | Path) -> str:
    """'tflite' or 'onnx' by the file's first bytes; ModelLoadError for anything else."""
    path = str(path)
    head = read_head(path, 8)
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
