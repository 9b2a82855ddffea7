"""Typed errors: every failure a user can cause ends in one of these, with a sentence they can act on."""
import re

# Control characters, bidi overrides and lone surrogates: a tensor name from a hostile file must not move the
# user's cursor, recolour the terminal, reorder a line or make print() fail.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` with every unprintable character written as its escape (\\x1b, \\u202e)."""
    return _UNPRINTABLE.sub(lambda m: m.group(0).encode("unicode_escape", "backslashreplace").decode("ascii"), text)


class InspectorError(Exception):
    """Base of every error the CLI and GUI report as one line (no traceback)."""

    def __str__(self) -> str:
        return printable(super().__str__())


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
