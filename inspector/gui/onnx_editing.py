"""The window's editing half for an ONNX model opened alone: an OnnxSession (metadata edits only), with the same
undo commands, Metadata dock, session files, autosave and Export as a conversion; pins and validation are off."""
from __future__ import annotations

from inspector.core.session.onnx_session import OnnxSession

REASON = ("Pins and validation need a TFLite model. An ONNX model opened alone is never converted: only its "
          "metadata and denotations can be edited here.")


def is_onnx_alone(session) -> bool:
    return isinstance(session, OnnxSession)
