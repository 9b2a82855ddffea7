"""The reference cut at the first op LiteRT cannot run: the TFLite model rewritten with only the ops before it,
every tensor at its old index, so what LiteRT can compute is still compared (a custom op without a kernel in
LiteRT, e.g. MediaPipe's Landmarks2TransformMatrix, then costs the comparison of what follows it, not all of it).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.ir.graph import Graph


@dataclass
class Cut:
    """Where the reference stopped: the op LiteRT cannot run, why, and the model of the ops before it."""
    op: int
    opcode: str
    reason: str                                     # LiteRT's refusal in one line
    model: bytes = field(repr=False, default=b"")   # the cut model, which the noise-floor runs use too

    def note(self, compared: int) -> str:
        return (f"{self.reason}: the reference is cut before op {self.op} ({self.opcode}); {compared} tensors "
                "before it compared, the outputs not")

    def to_json(self) -> dict:
        return {"op": self.op, "opcode": self.opcode, "reason": self.reason}


def first_op(graph: Graph, opcode: str) -> int | None:
    """Index of the first main-subgraph op with this (custom) opcode."""
    return next((op.index for op in graph.main.ops if op.opcode == opcode), None)


def cut_before(graph: Graph, k: int) -> bytes:
    """A model of the main subgraph's ops [0, k) (other subgraphs kept, for control flow), whose outputs are
    the activations op k reads. Raises ValueError (or KeyError) for what the builder cannot write (sparsity)."""
    b = ModelBuilder()
    subs = [b] + [b.subgraph(sg.name) for sg in graph.subgraphs[1:]]
    for sb, sg in zip(subs, graph.subgraphs):
        ops = sg.ops[:k] if sb is b else sg.ops
        for t in sg.tensors:
            if t.sparsity is not None:
                raise ValueError("sparse tensors are not rewritten")
            sig = t.shape_signature if t.shape_signature is not None and len(t.shape_signature) == t.rank else None
            if t.data is not None:
                raw = np.ascontiguousarray(t.data).tobytes() if t.dtype != "string" else bytes(t.data)
                sb.tensor(t.name, t.shape, t.dtype, quant=t.quantization, shape_signature=sig,
                          buffer=b.buffer(raw))
            else:
                sb.tensor(t.name, t.shape, t.dtype, quant=t.quantization, shape_signature=sig,
                          variable=t.is_variable)
        for op in ops:
            if op.custom:
                sb.custom_op(op.opcode, op.inputs, op.outputs, op.custom_options or b"", version=op.version)
            else:
                sb.op(op.opcode, op.inputs, op.outputs, op.options, version=op.version,
                      intermediates=op.intermediates)
        sb.inputs = list(sg.inputs)
        if sb is b:
            made = {t for op in ops for t in op.outputs} | set(sg.inputs)
            sb.outputs = [t for t in sg.ops[k].inputs if t in made] or sorted(made - set(sg.inputs))[-1:]
        else:
            sb.outputs = list(sg.outputs)
    return b.build()
