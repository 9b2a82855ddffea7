"""Typed errors: every failure a user can cause ends in one of these, with a sentence they can act on."""


class InspectorError(Exception):
    """Base of every error the CLI and GUI report as one line (no traceback)."""


class ModelLoadError(InspectorError):
    """The file is not a readable model: wrong format, truncated, offsets or sizes beyond the file."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


class ConversionError(InspectorError):
    """The model was read but cannot be converted as asked."""


class UnsupportedOpsError(ConversionError):
    def __init__(self, ops: list[str]):
        self.ops = ops
        super().__init__("unsupported operators (no ONNX emitter):\n  " + "\n  ".join(ops))


class MetadataError(InspectorError):
    """An invalid denotation or metadata value; the message lists the allowed values."""
