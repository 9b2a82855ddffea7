"""Read an .onnx file into the neutral Graph, so an existing ONNX model can be shown and edited too.

Shapes follow the TFLite reader's convention: a symbolic or unknown dim is 1 in `shape` and -1 in
`shape_signature`, with its name in `dim_params` ("?" when the dim has no name). A graph-valued attribute
(If/Loop/Scan bodies) becomes an extra Subgraph and the attribute's option holds that subgraph's index.
External data is read only from files inside the model's own folder, and never before its size is checked.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from inspector.core.ir.errors import ModelLoadError
from inspector.core.ir.graph import Graph, Op, Subgraph, Tensor

PROTOBUF_LIMIT = 2**31 - 1
PROTOBUF_DEPTH = 100                # upb's default message nesting limit
# Each If/Loop body adds 3 message levels (NodeProto, AttributeProto, GraphProto) below ModelProto and the main
# GraphProto, and a body's shaped value 5 more (ValueInfo, Type, Tensor, Shape, Dimension): protobuf parses 31
# bodies nested inside one another, or 32 when the deepest has no shaped value. The reader refuses the 32nd in
# every case, so the limit does not depend on what the deepest body holds.
MAX_BODY_NESTING = (PROTOBUF_DEPTH - 2 - 5) // 3
_NAMES = {"FLOAT": "float32", "DOUBLE": "float64", "FLOAT16": "float16", "STRING": "string"}
DTYPES = {v: _NAMES.get(k, k.lower()) for k, v in onnx.TensorProto.DataType.items()}
_PACKED_BITS = {"int4": 4, "uint4": 4, "float4e2m1": 4, "int2": 2, "uint2": 2}


_NESTING = (f"If/Loop bodies nested over {MAX_BODY_NESTING} deep (protobuf parses {PROTOBUF_DEPTH} levels of "
            "messages, 3 per body and 5 for a shaped value): refused rather than parsed")


class _Bad(Exception):
    """Internal: a structural problem found while reading."""


def _dtype_name(elem_type: int) -> str:
    return DTYPES.get(elem_type, f"type{elem_type}")


class _Reader:
    def __init__(self, model: onnx.ModelProto, folder: Path | None):
        self.model = model
        self.folder = folder
        self.subgraphs: list[Subgraph] = []

    def external(self, t: onnx.TensorProto) -> onnx.TensorProto:
        """A copy of `t` with its external bytes loaded inline."""
        inline = onnx.TensorProto()
        inline.CopyFrom(t)
        _inline(inline, self.folder)
        return inline

    def constant(self, t: onnx.TensorProto) -> np.ndarray:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            t = self.external(t)
        if any(d < 0 for d in t.dims):
            raise _Bad(f"initializer '{t.name}' has a negative dimension {list(t.dims)}")
        elements = math.prod(t.dims)               # exact (Python ints), and cheap for thousands of initializers
        if t.HasField("raw_data") and t.data_type != onnx.TensorProto.STRING:
            bits = _PACKED_BITS.get(DTYPES.get(t.data_type, ""))
            need = (-(-elements * bits // 8) if bits else
                    elements * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize)
            if need != len(t.raw_data):    # refuse before numpy allocates for the claimed shape
                raise _Bad(f"initializer '{t.name}' of shape {list(t.dims)} needs {need} bytes "
                           f"but holds {len(t.raw_data)}")
        arr = numpy_helper.to_array(t)
        arr.flags.writeable = False
        return arr

    def value_tensor(self, index: int, name: str, vtype: onnx.TypeProto | None) -> Tensor:
        t = Tensor(index=index, name=name, shape=(), dtype="")
        if vtype is None:
            return t
        t.denotation = vtype.denotation
        kind = vtype.WhichOneof("value")
        if kind == "tensor_type":
            tt = vtype.tensor_type
            t.dtype = _dtype_name(tt.elem_type) if tt.elem_type else ""
            if tt.HasField("shape"):
                dims = list(tt.shape.dim)
                sig = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
                t.shape = tuple(max(d, 1) if d < 0 else d for d in sig)
                t.shape_signature = sig
                t.dim_params = tuple(d.dim_param if d.HasField("dim_param") else
                                     ("" if d.HasField("dim_value") else "?") for d in dims)
                if not any(t.dim_params):
                    t.dim_params = ()
                t.dim_denotations = tuple(d.denotation for d in dims) if any(d.denotation for d in dims) else ()
        elif kind:
            t.dtype = kind.removesuffix("_type")     # sequence / map / optional: shown, not converted
        return t

    def attribute(self, a: onnx.AttributeProto, depth: int):
        A = onnx.AttributeProto
        if a.type == A.GRAPH:
            return self.graph(a.g, depth + 1)
        if a.type == A.GRAPHS:
            return [self.graph(g, depth + 1) for g in a.graphs]
        if a.type == A.TENSOR:
            return self.constant(a.t)
        if a.type == A.TENSORS:
            return [self.constant(t) for t in a.tensors]
        if a.type in (A.SPARSE_TENSOR, A.SPARSE_TENSORS, A.TYPE_PROTO, A.TYPE_PROTOS):
            return str(onnx.helper.get_attribute_value(a))
        value = onnx.helper.get_attribute_value(a)
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        if isinstance(value, list):
            return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
        return value

    def graph(self, g: onnx.GraphProto, depth: int = 0) -> int:
        """Read one graph into self.subgraphs (bodies after their parent's slot); returns its index."""
        if depth > MAX_BODY_NESTING:
            raise _Bad(_NESTING)
        k = len(self.subgraphs)
        self.subgraphs.append(None)      # type: ignore[arg-type]  # the slot reserved: nested bodies come after
        tensors: list[Tensor] = []
        index: dict[str, int] = {}

        def add(name: str, vtype=None) -> int:
            if name in index:
                old = tensors[index[name]]
                if vtype is not None and not old.dtype:
                    new = self.value_tensor(old.index, name, vtype)
                    new.data = old.data
                    tensors[old.index] = new
                return index[name]
            index[name] = len(tensors)
            tensors.append(self.value_tensor(len(tensors), name, vtype))
            return index[name]

        for v in g.input:
            add(v.name, v.type)
        for init in g.initializer:
            i = add(init.name)
            t = tensors[i]
            t.data = self.constant(init)
            if not t.dtype:
                t.dtype = _dtype_name(init.data_type)
                t.shape = tuple(int(d) for d in init.dims)
        for sp in g.sparse_initializer:          # listed, not densified: a view shows them, emitters refuse them
            t = tensors[add(sp.values.name)]
            t.shape, t.dtype = tuple(int(d) for d in sp.dims), _dtype_name(sp.values.data_type)
            t.sparsity = {"format": "onnx_sparse", "nnz": len(sp.values.dims) and int(sp.values.dims[0])}
        for v in list(g.value_info) + list(g.output):
            add(v.name, v.type)
        ops = []
        for n, node in enumerate(g.node):
            ins = [add(x) if x else -1 for x in node.input]
            outs = [add(x) if x else -1 for x in node.output]
            options = {a.name: self.attribute(a, depth) for a in node.attribute}
            ops.append(Op(index=n, opcode=node.op_type, inputs=ins, outputs=outs, options=options,
                          domain=node.domain, name=node.name))
        initialized = {i.name for i in g.initializer}      # a set: inputs x initializers was quadratic
        inputs = [index[v.name] for v in g.input if v.name not in initialized]
        outputs = [index[v.name] for v in g.output]
        self.subgraphs[k] = Subgraph(name=g.name or f"graph_{k}", tensors=tensors, ops=ops,
                                     inputs=inputs, outputs=outputs)
        return k

    def check_main(self) -> None:
        """Every tensor the main graph reads must be defined in it: a dangling name means a cut-off file."""
        sg = self.subgraphs[0]
        defined = set(sg.inputs) | {t.index for t in sg.tensors if t.data is not None or t.sparsity}
        for op in sg.ops:
            for t in op.inputs:
                if t >= 0 and t not in defined:
                    raise _Bad(f"node {op.label} ({op.opcode}) reads '{sg.tensors[t].name}', which no input, "
                               "initializer or earlier node defines (truncated or not topologically sorted)")
            defined.update(t for t in op.outputs if t >= 0)
        for t in sg.outputs:
            if t not in defined:
                raise _Bad(f"graph output '{sg.tensors[t].name}' is never computed")


def _inline(t: onnx.TensorProto, folder: Path | None) -> None:
    """Load `t`'s external bytes into it, after proving the file lies in the model's folder and is a regular file
    (through inputs.read_range: a FIFO or a folder named as the location is refused, never opened blocking)."""
    from .inputs import read_range
    info = {e.key: e.value for e in t.external_data}
    loc = info.get("location", "")
    if folder is None:
        raise _Bad(f"initializer '{t.name}' keeps its data in '{loc}', but the model was given without a folder")
    if not loc or os.path.isabs(loc) or Path(loc).drive or ".." in Path(loc.replace("\\", "/")).parts:
        raise _Bad(f"initializer '{t.name}': refusing external data location '{loc}' outside the model's folder")
    try:
        target = (folder / loc).resolve()
    except (OSError, RuntimeError) as e:                  # a symlink loop
        raise _Bad(f"initializer '{t.name}': external data '{loc}': {e}") from None
    if not target.is_relative_to(folder.resolve()):
        raise _Bad(f"initializer '{t.name}': external data '{loc}' resolves outside the model's folder")
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else None
    except ValueError as e:
        raise _Bad(f"initializer '{t.name}': external data '{loc}': {e}") from None

    def refuse(_path: str, reason: str) -> _Bad:
        return _Bad(f"initializer '{t.name}': external data '{loc}' {reason}")
    raw = read_range(str(target), offset, length, refuse)
    del t.external_data[:]
    t.data_location = onnx.TensorProto.DEFAULT
    t.raw_data = raw


def _tensors(g: onnx.GraphProto):
    """Every TensorProto a graph holds, its bodies' included (where external data can hide)."""
    yield from g.initializer
    for sp in g.sparse_initializer:
        yield sp.values
        yield sp.indices
    for node in g.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            if a.HasField("g"):
                yield from _tensors(a.g)
            for sub in a.graphs:
                yield from _tensors(sub)


def _read(model: onnx.ModelProto, path: str, folder: Path | None) -> Graph:
    if not model.HasField("graph") or model.ir_version <= 0:
        raise _Bad("not an ONNX model (no graph or IR version)")
    r = _Reader(model, folder)
    r.graph(model.graph)
    r.check_main()
    producer = " ".join(x for x in (model.producer_name, model.producer_version) if x)
    return Graph(format="onnx", subgraphs=r.subgraphs, version=model.ir_version, description=model.doc_string,
                 metadata={text_of(p.key): text_of(p.value) for p in model.metadata_props}, path=path, producer=producer,
                 opsets={o.domain or "ai.onnx": o.version for o in model.opset_import})


def text_of(value: str | bytes) -> str:
    """A string field as text: protobuf returns bytes when the file's bytes are not UTF-8 (ONNX's proto2 strings are
    not checked), shown with the bad bytes escaped."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


def _too_big(path: str, size: int) -> ModelLoadError:
    return ModelLoadError(path, f"{size} bytes is beyond protobuf's 2 GB limit for one ONNX file; "
                                "keep the weights as external data beside the model")


def read_onnx_bytes(buf: bytes, path: str = "", folder: str | Path | None = None) -> Graph:
    """`folder` is where external data may be read from; without it a model with external data is refused."""
    if len(buf) > PROTOBUF_LIMIT:
        raise _too_big(path, len(buf))
    if not buf:
        raise ModelLoadError(path, "not an ONNX model: the file is empty")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(buf)
    except (DecodeError, RuntimeError, ValueError) as e:
        if "MaxDepth" in str(e) or "recursion" in str(e).lower():
            raise ModelLoadError(path, _NESTING) from None
        raise ModelLoadError(path, f"not an ONNX model, or truncated ({e})") from None
    try:
        return _read(model, path, Path(folder) if folder is not None else None)
    except _Bad as e:
        raise ModelLoadError(path, str(e)) from None
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, MemoryError, DecodeError) as e:
        raise ModelLoadError(path, f"corrupt ONNX model ({type(e).__name__}: {e})") from None


def _file(path: str) -> bytes:
    from .inputs import file_size, read_input
    size = file_size(path)
    if size > PROTOBUF_LIMIT:
        raise _too_big(path, size)
    return read_input(path, what="model")


def read_onnx(path: str | Path) -> Graph:
    path = str(path)
    return read_onnx_bytes(_file(path), path, Path(path).resolve().parent)


def load_proto(path: str | Path) -> onnx.ModelProto:
    """The model as an onnx.ModelProto with its external data inlined, every byte read through the guards
    read_onnx uses (onnx.load would open a FIFO named as external data and block). Call read_onnx first: this
    does not repeat its structural checks."""
    path = str(path)
    model = onnx.ModelProto()
    try:
        model.ParseFromString(_file(path))
        folder = Path(path).resolve().parent
        for t in _tensors(model.graph):
            if t.data_location == onnx.TensorProto.EXTERNAL:
                _inline(t, folder)
    except _Bad as e:
        raise ModelLoadError(path, str(e)) from None
    except (DecodeError, RuntimeError, ValueError) as e:
        raise ModelLoadError(path, f"not a readable ONNX model ({e})") from None
    return model
