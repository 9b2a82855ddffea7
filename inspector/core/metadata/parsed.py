"""The nodes and value infos of an ONNX model as Python values, for the metadata pass, each parsed once per content.

A pin re-emits a few nodes: the rest of the new model is byte for byte the last one's. Reading a field of a protobuf
message builds new Python objects on every access (most of the pass on a 10,000-node graph), while serialising one
is C. So each node and value info is serialised and looked up by its bytes, and only what changed is read in
Python; what a lookup gives is what reading it would (the bytes are its whole content). A Memo keeps the parts of
the last model it read: an Annotator and a Linter (the metadata pass's and the checker's reuse) hold one, the
pipeline's functions read with a new one (a whole pass, as tests compare).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onnx import NodeProto, ValueInfoProto


class Node:
    """A node's fields, read from a private copy (a record may outlive its model; it must not keep it alive).
    A big node (a Constant holding weights) keeps its attributes only as `data`, the bytes that key it in the Memo
    anyway, and parses them when asked: a parsed copy kept beside the bytes was a second copy of the weights."""
    __slots__ = ("op_type", "domain", "input", "output", "_attribute", "name", "data")

    def __init__(self, data: bytes):
        n = NodeProto.FromString(data)
        self.op_type, self.domain, self.name, self.data = n.op_type, n.domain, n.name, data
        self._attribute = n.attribute if len(data) <= BIG_NODE else None
        self.input, self.output = tuple(n.input), tuple(n.output)

    @property
    def attribute(self):
        a = self._attribute
        return a if a is not None else NodeProto.FromString(self.data).attribute


BIG_NODE = 64 << 10


class Value:
    """A value info: `shape` None without a tensor shape, else one int per axis (None where symbolic);
    `dims` the raw dimension denotations; `type_key` its bytes without any denotation (what shape inference reads)."""
    __slots__ = ("name", "tensor", "denotation", "elem_type", "shape", "dims", "type_key")

    def __init__(self, data: bytes):
        vi = ValueInfoProto.FromString(data)
        self.name, self.tensor, self.denotation = vi.name, vi.type.HasField("tensor_type"), vi.type.denotation
        tt = vi.type.tensor_type
        self.elem_type = tt.elem_type
        dims = tt.shape.dim
        self.dims = tuple(d.denotation for d in dims)
        self.shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims) \
            if self.tensor and tt.HasField("shape") else None
        if vi.type.HasField("denotation") or any(d.HasField("denotation") for d in dims):
            vi.type.ClearField("denotation")        # proto2: a field set to "" is still written
            for d in dims:
                d.ClearField("denotation")
            data = vi.SerializeToString()
        self.type_key = data


@dataclass(frozen=True)
class Parts:
    nodes: list[Node]
    node_keys: list[bytes]
    inputs: list[Value]
    value_info: list[Value]
    outputs: list[Value]

    def values(self):
        """In metadata.edits.value_infos' order: inputs, outputs, value_info."""
        yield from self.inputs
        yield from self.outputs
        yield from self.value_info

    def images(self) -> list[Value]:
        """The IMAGE tensors, each name once (the first of its entries) and only those with a tensor type."""
        seen, out = set(), []
        for vi in self.values():
            if vi.name not in seen and vi.denotation.upper() == "IMAGE" and vi.tensor:
                seen.add(vi.name)
                out.append(vi)
        return out


class Memo:
    """Records of the last model read (nodes and values by their bytes), and of its shape inference (`inferred`:
    (key, shapes)). Content-keyed: any model may be read with any Memo, from any thread (a lost race is a miss)."""

    def __init__(self) -> None:
        self.nodes: dict[bytes, Node] = {}
        self.values: dict[bytes, Value] = {}
        self.inferred: Any = None    # inference.Inferred (that module imports this one)
        self.outcomes: tuple | None = None      # (what the nodes read, {(node bytes, label): outcomes}): Propagator
        self.parsed = 0              # records the last `parts` had to parse (the rest were looked up)

    def parts(self, model) -> Parts:
        """The model's nodes and value infos; afterwards the Memo keeps this model's records only."""
        g = model.graph
        self.parsed = 0
        nodes: dict[bytes, Node] = {}
        values: dict[bytes, Value] = {}
        node_list, node_keys = self._read(g.node, self.nodes, nodes, Node)
        parts = Parts(node_list, node_keys, *(self._read(vs, self.values, values, Value)[0]
                                              for vs in (g.input, g.value_info, g.output)))
        self.nodes, self.values = nodes, values
        return parts

    def reread(self, parts: Parts, model, names) -> Parts | None:
        """`parts` (read before) of `model` after edits that changed only the value infos named in `names`: those
        read again, every other record kept (serialising all of a large model's nodes and value infos again to
        look them up was a large part of the checker after each pin's metadata pass). None when `model` has
        other value infos than `parts` were read from: nothing read before applies to it."""
        g = model.graph
        now = (g.input, g.value_info, g.output)
        old = (parts.inputs, parts.value_info, parts.outputs)
        if any(len(a) != len(b) for a, b in zip(old, now)):
            return None
        return Parts(parts.nodes, parts.node_keys, *(
            [self._read([vs[i]], self.values, self.values, Value)[0][0] if v.name in names else v
             for i, v in enumerate(records)] for records, vs in zip(old, now)))

    def add_values(self, graph) -> Parts:
        """The value infos of `graph` (shape inference's output), kept beside the last model's."""
        values = self.values
        return Parts([], [], *(self._read(vs, values, values, Value)[0]
                               for vs in (graph.input, graph.value_info, graph.output)))

    def _read(self, items, old: dict, new: dict, kind) -> tuple[list, list[bytes]]:
        out, keys = [], []
        for item in items:
            data = item.SerializeToString()
            rec = new.get(data)
            if rec is None:
                rec = old.get(data)
                if rec is None:
                    rec = kind(data)
                    self.parsed += 1
                new[data] = rec
            out.append(rec)
            keys.append(data)
        return out, keys

