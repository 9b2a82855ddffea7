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


_LITE: dict = {}        # message name -> a class reading only some fields of a NodeProto / ValueInfoProto (_lite)


def _lite(name: str):
    """A proto2 message class with NodeProto's (NodeFields) or ValueInfoProto's (ValueFields) field numbers for
    what a record needs; bytes fields where the record keeps the wire form (a node's attributes, a value's type).
    Reading the full message's fields built a Python object per nested message and most of the pass's time."""
    cls = _LITE.get(name)
    if cls is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        F = descriptor_pb2.FieldDescriptorProto
        fd = descriptor_pb2.FileDescriptorProto(name="inspector_parsed_fields.proto", package="inspector_parsed")
        for message, fields in (("NodeFields", (("input", 1, F.TYPE_STRING), ("output", 2, F.TYPE_STRING),
                                                ("name", 3, F.TYPE_STRING), ("op_type", 4, F.TYPE_STRING),
                                                ("attribute", 5, F.TYPE_BYTES), ("domain", 7, F.TYPE_STRING))),
                                ("ValueFields", (("name", 1, F.TYPE_STRING), ("type", 2, F.TYPE_BYTES)))):
            m = fd.message_type.add(name=message)
            for field, number, kind in fields:
                repeated = field in ("input", "output", "attribute", "type")   # (type: to see a repeated one)
                m.field.add(name=field, number=number, type=kind,
                            label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(fd)
        for message in ("NodeFields", "ValueFields"):
            _LITE[message] = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"inspector_parsed.{message}"))
        cls = _LITE[name]
    return cls


class Node:
    """A node's fields, read from a private copy (a record may outlive its model; it must not keep it alive).
    Its attributes are parsed from `data`, the bytes that key it in the Memo anyway, when first asked for (few
    rules read any); a big node (a Constant holding weights) parses them each time: a parsed copy kept beside the
    bytes was a second copy of the weights."""
    __slots__ = ("op_type", "domain", "input", "output", "_attribute", "name", "data")

    def __init__(self, data: bytes):
        n = _lite("NodeFields").FromString(data)
        self.op_type, self.domain, self.name, self.data = n.op_type, n.domain, n.name, data
        self._attribute = None if n.attribute else ()
        self.input, self.output = tuple(n.input), tuple(n.output)

    @property
    def attribute(self):
        a = self._attribute
        if a is None:
            a = NodeProto.FromString(self.data).attribute
            if len(self.data) <= BIG_NODE:
                self._attribute = a
        return a


BIG_NODE = 64 << 10


class Value:
    """A value info: `shape` None without a tensor shape, else one int per axis (None where symbolic);
    `dims` the raw dimension denotations; `type_key` its bytes without any denotation (what shape inference reads).
    What it says of its type is read once per distinct type (a model's values share a few)."""
    __slots__ = ("name", "tensor", "denotation", "elem_type", "shape", "dims", "type_key")

    def __init__(self, data: bytes):
        v = _lite("ValueFields").FromString(data)
        types = v.type
        read = _TYPES.get(types[0]) if len(types) == 1 else None
        if read is None:
            read = _type_of(data)
            if len(types) == 1:
                if len(_TYPES) > 100_000:
                    _TYPES.clear()
                _TYPES[types[0]] = read
        self.name = v.name
        self.tensor, self.denotation, self.elem_type, self.dims, self.shape, marked = read
        self.type_key = data if not marked else _undenoted(data)


_TYPES: dict[bytes, tuple] = {}     # a value's TypeProto bytes -> what Value reads of it (_type_of)


def _type_of(data: bytes) -> tuple:
    """(tensor, denotation, elem_type, dims, shape, whether any denotation is set) of a ValueInfoProto's type."""
    vi = ValueInfoProto.FromString(data)
    tensor, denotation = vi.type.HasField("tensor_type"), vi.type.denotation
    tt = vi.type.tensor_type
    dims = tt.shape.dim
    shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims) \
        if tensor and tt.HasField("shape") else None
    marked = vi.type.HasField("denotation") or any(d.HasField("denotation") for d in dims)
    return tensor, denotation, tt.elem_type, tuple(d.denotation for d in dims), shape, marked


def _undenoted(data: bytes) -> bytes:
    """A ValueInfoProto's bytes without its type's and dimensions' denotations."""
    vi = ValueInfoProto.FromString(data)
    vi.type.ClearField("denotation")        # proto2: a field set to "" is still written
    for d in vi.type.tensor_type.shape.dim:
        d.ClearField("denotation")
    return vi.SerializeToString()


@dataclass(frozen=True)
class Parts:
    """A model's nodes and value infos as records (Node, Value)."""
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

