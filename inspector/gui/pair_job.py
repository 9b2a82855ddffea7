"""Opening a pair off the GUI thread: the TFLite model on the left, an ONNX model made elsewhere on the right.

The right pane is the usual ONNX pane; its document's result is the pair seen as a conversion (Pair.as_result):
the mapping stands in for the trace, so selection, colours and the conflicts list work through it unchanged.
"""
from __future__ import annotations

from .loader_job import LoadJob


class PairJob(LoadJob):
    def __init__(self, path: str, other: str):
        super().__init__(path)
        self.other = other

    def _run(self) -> None:
        from inspector.core.pairing.pair import make_pair, read_other
        s = self.signals
        self._emit(s.stage, "Reading model…")
        model = read_other(self.other)      # first: a file that cannot be read leaves the window's model shown
        shown = self._tflite_pane()
        if shown is None:
            return
        graph, doc = shown
        self._emit(s.stage, "Pairing with the ONNX model…")
        pair = make_pair(graph, model, self.other)
        if self.cancelled:
            return
        doc.result, doc.model = pair.as_result(), model
        self._onnx(doc)
