"""Opening a model off the GUI thread: read, lay out the TFLite graph (shown at once), convert, lay out the ONNX graph.

Python cannot interrupt a running conversion: cancel marks the job stale and its results are dropped.
"""
from __future__ import annotations

import traceback

from PySide6.QtCore import QObject, QRunnable, Signal

from inspector.core.errors import InspectorError
from inspector.core.loader import sniff
from inspector.core.tflite_reader import read_tflite

from . import graph_layout, graph_model
from .document import Document


class JobSignals(QObject):
    stage = Signal(str)
    tfliteReady = Signal(object, object, object)    # Document, ViewGraph, Layout
    onnxReady = Signal(object, object, object)
    failed = Signal(str, str)                        # message, details
    conversionFailed = Signal(str)
    done = Signal()


class LoadJob(QRunnable):
    def __init__(self, path: str, convert: bool = True):
        super().__init__()
        self.path, self.convert = path, convert
        self.signals = JobSignals()
        self.cancelled = False
        self.setAutoDelete(False)

    def cancel(self) -> None:
        self.cancelled = True

    def _emit(self, signal, *args) -> bool:
        if not self.cancelled:
            signal.emit(*args)
        return not self.cancelled

    def run(self) -> None:
        try:
            self._run()
        except InspectorError as e:
            self._emit(self.signals.failed, str(e), "")
        except Exception as e:  # the dialog shows the message; details carry the traceback for a bug report
            self._emit(self.signals.failed, f"{type(e).__name__}: {e}", traceback.format_exc())
        finally:
            self._emit(self.signals.done)

    def _run(self) -> None:
        s = self.signals
        self._emit(s.stage, "Reading model…")
        if sniff(self.path) == "onnx":
            import onnx
            try:
                model = onnx.load(self.path)
            except Exception as e:
                raise InspectorError(f"{self.path}: not a readable ONNX model ({e})") from None
            doc = Document(self.path, model=model)
            self._onnx(doc)
            return
        graph = read_tflite(self.path)
        doc = Document(self.path, graph=graph)
        if self.cancelled:
            return
        self._emit(s.stage, "Laying out…")
        vg = graph_model.from_tflite(graph)
        if not self._emit(s.tfliteReady, doc, vg, graph_layout.compute(vg)) or not self.convert:
            return
        self._emit(s.stage, "Converting to ONNX…")
        try:
            from inspector.core.convert import convert
        except ImportError:
            self._emit(s.conversionFailed, "the converter is not available in this build")
            return
        try:
            result = convert(graph)
        except InspectorError as e:
            self._emit(s.conversionFailed, str(e))
            return
        if self.cancelled:
            return
        doc.result, doc.model = result, result.model
        self._onnx(doc)

    def _onnx(self, doc: Document) -> None:
        self._emit(self.signals.stage, "Laying out the ONNX graph…")
        vg = graph_model.from_onnx(doc.model)
        doc.onnx_shapes = dict(vg.shapes)
        self._emit(self.signals.onnxReady, doc, vg, graph_layout.compute(vg))
