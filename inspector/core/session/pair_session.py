"""PairSession: a TFLite model beside an ONNX model made elsewhere (core/pairing), edited like a conversion.

A Session (the views hear its events like any other), with what the Metadata dock, the undo commands, Export ONNX
and the Validation dock read. Its decisions are metadata edits only: "re-running" applies them
to a copy of the other model, export writes that model through pair.write_with_metadata (nodes and initializers
untouched), and validation is pair.validate_pair, whose per-tensor errors colour the other model's nodes through
the mapping. Pins steer our own conversion, so they are off for a pair.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import onnx

from inspector.core.ir.errors import InspectorError
from inspector.core.pairing.mapping import node_label
from .session import Session
from .events import Exported

PIN_REASON = ("Pins steer our own conversion. A pair shows an ONNX model made elsewhere, which is never "
              "re-converted: only its metadata can be edited here.")


class PairSession(Session):
    """The user's metadata edits on the other model; `result` is the pair's ConversionResult with them applied. A
    Session, so its edits, re-runs, validation and export reach the views as the same events."""
    can_pin = converts = can_save_session = False   # the other model is never re-converted; its edits are exported
    why_not = {"pin": PIN_REASON, "save_session": "a pair's metadata edits are kept by exporting the ONNX model"}

    def __init__(self, doc):
        super().__init__(path=doc.path, graph=doc.graph, result=doc.result)   # the TFLite side, as Document wants it
        self.pair = doc.result.pair
        self.other: str = self.pair.path                     # the file export starts from and protects
        self.base = doc.result
        self.notes = [self._header()]

    def _header(self) -> str:
        return (f"These are the denotations and metadata of {Path(self.other).name}, made elsewhere. Export ONNX "
                "writes that model with these edits only: its nodes and initializers stay as they are.")

    # ---- what the undo commands and the editor call -----------------------------------------------------------
    def check_pin(self, tensor: str, layout: str | None) -> None:      # set_pin checks first
        raise InspectorError(PIN_REASON)

    def convert(self, check: bool = False):
        """The other model with the edits applied (a copy: their model as read stays what export starts from)."""
        model = onnx.ModelProto()
        model.CopyFrom(self.pair.model)
        notes = self.metadata.apply(model)
        self.result = dataclasses.replace(self.base, model=model)
        self.notes, self.validation = [self._header()] + notes, None

    def measure(self, cancel=None, progress=None, input_shapes=None):
        return self.pair.validate(cancel=cancel, progress=progress, input_shapes=input_shapes)

    def export(self, path: str, overwrite_source: bool = False, out=None) -> None:
        from inspector.core.pairing.pair import write_with_metadata
        protect = [self.path] + ([] if overwrite_source else [self.other])
        write_with_metadata(self.pair.model, self.metadata, path, protect=protect, target=self.target, out=out)
        if out is None:
            self.publish(Exported(path))

    def report(self) -> dict:
        model = self.result.model
        return {"model": self.other, "paired_with": self.path, "graph": "unchanged (metadata edits only)",
                "transposes": self.result.transposes, "nodes": len(model.graph.node),
                "metadata": self.metadata.to_dict(), "notes": list(self.notes[1:])}

    # ---- what the Metadata and Validation docks ask a pair for ------------------------------------------------
    def metadata_sources(self) -> dict[str, str]:
        """Field -> where the value shown comes from: the other file (edited fields are marked by the dock)."""
        from .onnx_session import file_sources
        return file_sources(self.pair.model, self.other)

    def node_errors(self, v) -> dict[str, float]:
        return node_errors(v, self.pair.mapping, self.pair.model)


def node_errors(v, mapping, model) -> dict[str, float]:
    """Their node -> relative error: a node writing a value a TFLite tensor maps to takes that tensor's error; the
    op's other nodes (a Conv before its fused Relu, weights transposed at run time) take the op's worst. Nodes the
    mapping gives no op stay out (drawn as not compared)."""
    producer = {o: node_label(n, i) for i, n in enumerate(model.graph.node) for o in n.output}
    by_tensor: dict[int, float] = {}
    by_op: dict[int, float] = {}
    for e in v.outputs + v.tensors:
        by_tensor[e.tensor] = max(by_tensor.get(e.tensor, 0.0), e.max_rel)
        if e.op is not None:
            by_op[e.op] = max(by_op.get(e.op, 0.0), e.max_rel)
    out: dict[str, float] = {}
    for t, err in by_tensor.items():
        for value in mapping.tensor_values.get(t, []):
            node = producer.get(value)
            if node is not None:
                out[node] = max(out.get(node, 0.0), err)
    for node, op in mapping.node_op.items():
        if node not in out and op in by_op:
            out[node] = by_op[op]
    return out
