"""Read a .tflite flatbuffer into the neutral Graph, via the `tflite` package.

The flatbuffers runtime trusts its input, so every vector is bounds-checked before it is walked and every
constant's size is checked against its buffer before a numpy view is made: a hostile file gets a
ModelLoadError, never a huge allocation or a stray IndexError.
"""
from __future__ import annotations

import inspect
import math
import re
import struct
from functools import lru_cache
from pathlib import Path

from flatbuffers.table import Table as _FbTable
import numpy as np
import tflite
from tflite.utils import BUILTIN_OPCODE2NAME

from .errors import ModelLoadError
from .graph import Graph, Op, Quantization, SignatureDef, Subgraph, Tensor

SCHEMA_VERSION = 3
# Largest activation a shape may claim (elements); beyond this the file is refused, not allocated.
MAX_ELEMENTS = 1 << 40
SPARSE_RATIO, SPARSE_SLACK = 64, 1 << 16    # dense elements a sparse constant's stored values can justify
MAX_RANK = 32                       # TFLite kernels stop at 6-8; a longer shape is corruption, not a model

_DTYPES = {
    "FLOAT32": "float32", "FLOAT16": "float16", "INT32": "int32", "UINT8": "uint8", "INT64": "int64",
    "STRING": "string", "BOOL": "bool", "INT16": "int16", "COMPLEX64": "complex64", "INT8": "int8",
    "FLOAT64": "float64", "COMPLEX128": "complex128", "UINT64": "uint64", "RESOURCE": "resource",
    "VARIANT": "variant", "UINT32": "uint32", "UINT16": "uint16", "INT4": "int4", "BFLOAT16": "bfloat16",
}
TENSOR_TYPES = {v: _DTYPES.get(k, k.lower()) for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
_OPTION_CLASSES = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}
_OPTION2_CLASSES = {v: k for k, v in vars(tflite.BuiltinOptions2).items() if not k.startswith("_")}
# Enum-valued option fields, decoded to their schema names so the IR reads as the schema does.
_ENUMS = {
    "padding": tflite.Padding, "fused_activation_function": tflite.ActivationFunctionType,
    "mode": tflite.MirrorPadMode, "combiner": tflite.CombinerType, "type": tflite.LSHProjectionType,
    "kernel_type": tflite.LSTMKernelType, "weights_format": tflite.FullyConnectedOptionsWeightsFormat,
}
_ENUM_NAMES = {f: {v: k for k, v in vars(c).items() if not k.startswith("_")} for f, c in _ENUMS.items()}
_SKIP = re.compile(r"^(Init|GetRootAs.*|.*BufferHasIdentifier|.*Length|.*IsNone|.*AsNumpy)$")


class _Bad(Exception):
    """Internal: a structural problem found while walking the buffer."""


def _snake(name: str) -> str:
    """Schema field name from a generated accessor: DilationWFactor -> dilation_w_factor."""
    return re.sub(r"(?<=[a-z0-9])[A-Z]|(?<=[A-Z])[A-Z](?=[a-z])", lambda m: "_" + m.group(0), name).lower()


@lru_cache(maxsize=None)
def _slot(cls, accessor: str) -> int:
    """The vtable slot a generated accessor reads (schema field id * 2 + 4): the first integer constant of its
    code, the argument of the `self._tab.Offset(N)` every generated accessor opens with. (Reading the source
    instead cost ~1 ms per accessor, paid again by every CLI start.)"""
    return next(c for c in getattr(cls, accessor).__code__.co_consts if type(c) is int)


def _tables(obj, accessor: str, what: str, limit: int) -> int:
    """Length of a vector of tables, after proving every entry lies inside the file (see _table_positions)."""
    return len(_table_positions(obj, accessor, what, limit))


def _table_positions(obj, accessor: str, what: str, limit: int) -> list[int]:
    """Absolute positions of a vector of tables' entries, after proving every entry lies inside the file.

    Flatbuffers writers emit children before parents, so each entry points forward past the vector's end; an entry
    pointing back into the vector (e.g. a run of zero bytes read as a table list) would let a corrupt count make
    the reader walk millions of empty tables.
    """
    table = obj if isinstance(obj, _Table) else _Table(obj._tab.Bytes, obj._tab.Pos, type(obj))
    p = table.table(accessor)
    n = _U32(table.buf, p)[0] if p else 0
    if n == 0:
        return []
    start = p + 4
    end = start + 4 * n
    if n > limit // 4 or end > limit:
        raise _Bad(f"{what}: count {n} is more than the file can hold")
    if n <= 64:                                  # numpy's per-call cost dominates short vectors
        targets = [start + 4 * i + off for i, off in enumerate(struct.unpack_from(f"<{n}I", table.buf, start))]
        low, high = min(targets), max(targets)
    else:
        arr = np.frombuffer(table.buf, "<u4", count=n, offset=start) + (start + 4 * np.arange(n, dtype=np.int64))
        low, high, targets = int(arr.min()), int(arr.max()), arr.tolist()
    if low < end or high + 4 > limit:
        raise _Bad(f"{what}: an entry points outside the file or back into its own list")
    return targets


def _np(obj, name: str, limit: int) -> np.ndarray:
    """A scalar vector as numpy, checked against the file size."""
    n = getattr(obj, name + "Length")()
    if n < 0 or n > limit:
        raise _Bad(f"{_snake(name)}: {n} entries, more than the file can hold")
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    try:
        return getattr(obj, name + "AsNumpy")()
    except ValueError:                          # numpy refuses a view past the end of the buffer
        raise _Bad(f"{_snake(name)}: {n} entries run past the end of the file") from None


_I8, _U8, _U16, _I32, _U32, _U64 = (struct.Struct(f).unpack_from for f in ("<b", "<B", "<H", "<i", "<I", "<Q"))
_EMPTY = np.zeros(0, dtype=np.int64)
_EMPTY.flags.writeable = False


class _Table:
    """A flatbuffer table whose vtable is read once: the generated accessors re-read it on every call, which made
    walking tensors and operators most of a conversion's time. Same bounds checks as `_np`."""
    __slots__ = ("buf", "pos", "vt", "vlen", "cls")

    def __init__(self, buf: bytes, pos: int, cls):
        self.buf, self.pos, self.cls = buf, pos, cls
        self.vt = pos - _I32(buf, pos)[0]
        self.vlen = _U16(buf, self.vt)[0]

    def field(self, accessor: str) -> int:
        """Absolute position of the field the generated `accessor` reads; 0 when absent."""
        slot = _slot(self.cls, accessor)
        if slot >= self.vlen:
            return 0
        off = _U16(self.buf, self.vt + slot)[0]
        return self.pos + off if off else 0

    def scalar(self, accessor: str, unpack=_I32, default: int = 0) -> int:
        p = self.field(accessor)
        return unpack(self.buf, p)[0] if p else default

    def table(self, accessor: str) -> int:
        """Position of a sub-table; 0 when absent."""
        p = self.field(accessor)
        return p + _U32(self.buf, p)[0] if p else 0

    def string(self, accessor: str) -> bytes:
        p = self.table(accessor)
        if not p:
            return b""
        n = _U32(self.buf, p)[0]
        if p + 4 + n > len(self.buf):
            raise _Bad(f"{_snake(accessor)}: string runs past the end of the file")
        return self.buf[p + 4:p + 4 + n]

    def length(self, accessor: str) -> int:
        p = self.table(accessor)
        return _U32(self.buf, p)[0] if p else 0

    def vector(self, accessor: str, dtype: str, limit: int) -> np.ndarray:
        p = self.table(accessor)
        if not p:
            return _EMPTY
        n = _U32(self.buf, p)[0]
        if n > limit:
            raise _Bad(f"{_snake(accessor)}: {n} entries, more than the file can hold")
        if n == 0:
            return _EMPTY
        try:
            return np.frombuffer(self.buf, dtype, count=n, offset=p + 4)
        except ValueError:
            raise _Bad(f"{_snake(accessor)}: {n} entries run past the end of the file") from None

    def generated(self, accessor: str, cls):
        """A sub-table as the generated class (for the rarely present, rarely hot ones); None when absent."""
        p = self.table(accessor)
        if not p:
            return None
        obj = cls()
        obj.Init(self.buf, p)
        return obj


@lru_cache(maxsize=None)
def _fields(cls) -> tuple[tuple[str, str, bool], ...]:
    """(snake_name, accessor, is_vector) for every field of a generated options class."""
    out = []
    for name, fn in vars(cls).items():
        if not callable(fn) or name.startswith("_") or _SKIP.match(name):
            continue
        params = list(inspect.signature(fn).parameters)
        if params == ["self"]:
            out.append((_snake(name), name, False))
        elif params == ["self", "j"] and hasattr(cls, name + "AsNumpy"):
            out.append((_snake(name), name, True))
    return tuple(sorted(out))


def _decode_options(table, class_name: str | None, limit: int) -> dict:
    if table is None or not class_name or class_name == "NONE":
        return {}
    cls = getattr(tflite, class_name, None)
    if cls is None:
        return {}
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    out = {}
    for key, acc, vec in _fields(cls):
        if vec:
            out[key] = _np(obj, acc, limit).tolist()      # ints stay ints, floats (BUCKETIZE) stay floats
        else:
            val = getattr(obj, acc)()
            if isinstance(val, bytes):
                val = val.decode("utf-8", "replace")
            elif key in _ENUM_NAMES:
                val = _ENUM_NAMES[key].get(val, val)
            out[key] = val
    return out


def _name(raw) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def _check_order(k: int, tensors: list[Tensor], ops: list[Op]) -> None:
    """TFLite runs ops in stored order: an op reading what it or a later op writes is a cycle, not a model.

    Also refuses a tensor written twice, or a constant overwritten, which no converter writes.
    """
    producer: dict[int, int] = {}
    for op in ops:
        for t in op.outputs:
            if t < 0:
                continue
            if t in producer:
                raise _Bad(f"subgraph {k}: tensor {t} '{tensors[t].name}' is written by operators "
                           f"{producer[t]} and {op.index}")
            if tensors[t].data is not None:
                raise _Bad(f"subgraph {k}: operator {op.index} ({op.opcode}) writes constant tensor {t} "
                           f"'{tensors[t].name}'")
            producer[t] = op.index
    for op in ops:
        for t in op.inputs:
            if producer.get(t, -1) >= op.index:
                raise _Bad(f"subgraph {k}: operator {op.index} ({op.opcode}) reads tensor {t} '{tensors[t].name}' "
                           f"before operator {producer[t]} writes it (a cycle, or operators out of order)")


def _check_sparse(i: int, name: str, shape, elements: int, sp: dict, data) -> None:
    """A sparse constant expands to its dense shape when folded: the stored values must justify that size.

    Real sparse weights are 50-95% zeros; a dense size over SPARSE_RATIO times the stored values (plus a small
    allowance) is a small file claiming a huge tensor. Dense-format levels are walked one by one, so their sizes
    must not exceed the dense tensor either.
    """
    stored = data.size if data is not None else 0
    if elements > SPARSE_RATIO * stored + SPARSE_SLACK:
        raise _Bad(f"sparse tensor {i} '{name}' of shape {list(shape)} stores {stored} values: expanding it to "
                   f"{elements} elements is more than its file can justify (at most {SPARSE_RATIO}x)")
    dims = sp["dim_metadata"]
    if len(sp["traversal_order"]) != len(dims):
        raise _Bad(f"sparse tensor {i} '{name}': {len(sp['traversal_order'])} traversal axes but "
                   f"{len(dims)} dim metadata entries")
    walked = 1
    for d in dims:
        if d["format"] == 0:
            if d["dense_size"] < 0:
                raise _Bad(f"sparse tensor {i} '{name}': negative dense size {d['dense_size']}")
            walked *= d["dense_size"]
    if walked > max(elements, 1):
        raise _Bad(f"sparse tensor {i} '{name}': its dense dims cover {walked} positions, "
                   f"more than its {elements} elements")


class _Reader:
    def __init__(self, buf: bytes, path: str):
        self.buf = buf
        self.path = path
        self.limit = len(buf)
        self.model = tflite.Model.GetRootAsModel(buf, 0)
        self._buffers: dict[int, np.ndarray] = {}
        self._buffer_pos: list[int] | None = None

    def buffer_bytes(self, index: int) -> np.ndarray | None:
        if index in self._buffers:
            return self._buffers[index]
        if self._buffer_pos is None:
            self._buffer_pos = _table_positions(self.model, "Buffers", "buffers", self.limit)
        if index <= 0 or index >= len(self._buffer_pos):
            return None
        b = _Table(self.buf, self._buffer_pos[index], tflite.Buffer)
        off, size = b.scalar("Offset", _U64), b.scalar("Size", _U64)
        if off > 1:   # >2 GB models keep data after the flatbuffer, addressed by offset/size
            if off + size > self.limit:
                raise _Bad(f"buffer {index} points past the end of the file ({off}+{size} > {self.limit})")
            data = np.frombuffer(self.buf, np.uint8, count=size, offset=off)
        else:
            p = b.table("Data")
            n = _U32(self.buf, p)[0] if p else 0
            if n > self.limit:
                raise _Bad(f"buffer {index} claims {n} bytes, more than the file")
            try:
                data = np.frombuffer(self.buf, np.uint8, count=n, offset=p + 4) if n else None
            except ValueError:
                raise _Bad(f"buffer {index} claims {n} bytes, running past the end of the file") from None
        self._buffers[index] = data
        return data

    def opcodes(self) -> list[tuple[str, bool, int]]:
        out = []
        for pos in _table_positions(self.model, "OperatorCodes", "operator codes", self.limit):
            oc = _Table(self.buf, pos, tflite.OperatorCode)
            code = max(oc.scalar("DeprecatedBuiltinCode", _I8), oc.scalar("BuiltinCode"))
            version = oc.scalar("Version", default=1)
            if code == tflite.BuiltinOperator.CUSTOM:
                out.append((_name(oc.string("CustomCode")) or "CUSTOM", True, version))
            else:
                out.append((BUILTIN_OPCODE2NAME.get(code, f"UNKNOWN_{code}"), False, version))
        return out

    def tensor(self, i: int, pos: int) -> Tensor:
        t = _Table(self.buf, pos, tflite.Tensor)
        rank = t.length("Shape")
        if rank > MAX_RANK:
            raise _Bad(f"tensor {i} has rank {rank}, beyond any real model")
        shape = tuple(t.vector("Shape", "<i4", self.limit).tolist())
        sig = t.vector("ShapeSignature", "<i4", self.limit)
        ttype = t.scalar("Type", _I8)
        dtype = TENSOR_TYPES.get(ttype, f"type{ttype}")
        name = _name(t.string("Name"))
        if any(d < 0 for d in shape):
            raise _Bad(f"tensor {i} '{name}' has a negative dimension {shape}")
        elements = math.prod(shape)
        if elements > MAX_ELEMENTS:
            raise _Bad(f"tensor {i} '{name}' of shape {list(shape)} claims {elements} elements, beyond any real model")
        sig_list = sig.tolist()
        if sig.size and (len(sig_list) != len(shape) or any(s < -1 or 0 <= s != d for s, d in zip(sig_list, shape))):
            raise _Bad(f"tensor {i} '{name}' has shape {list(shape)} but shape signature {sig_list} "
                       "(they must agree except where the signature says -1)")
        data = None
        sparsity = self.sparsity(t.generated("Sparsity", tflite.SparsityParameters))
        buffer = t.scalar("Buffer", _U32)
        raw = self.buffer_bytes(buffer)
        if raw is not None and raw.size:
            data = self.constant(name, i, raw, shape, dtype, elements, sparse=sparsity is not None)
        if sparsity is not None:
            _check_sparse(i, name, shape, elements, sparsity, data)
        quant = None
        qpos = t.table("Quantization")         # present but empty on most float tensors: skip it cheaply
        if qpos and _Table(self.buf, qpos, tflite.QuantizationParameters).length("Scale"):
            quant = self.quantization(t.generated("Quantization", tflite.QuantizationParameters), len(shape))
        return Tensor(
            index=i, name=name, shape=shape, dtype=dtype,
            shape_signature=tuple(sig_list) if sig.size else None,
            data=data, quantization=quant,
            sparsity=sparsity, is_variable=bool(t.scalar("IsVariable", _U8)), buffer=buffer,
        )

    def constant(self, name, i, raw, shape, dtype, elements, sparse) -> np.ndarray:
        if dtype in ("string", "resource", "variant", "int4", "bfloat16") or dtype.startswith("type"):
            return raw                                  # kept as bytes; emitters decode what they support
        np_dtype = np.dtype(dtype)
        if sparse:                                      # compressed values only; DENSIFY expands them
            if raw.size % np_dtype.itemsize:
                raise _Bad(f"sparse tensor {i} '{name}' has {raw.size} bytes, not a multiple of {np_dtype}")
            return raw.view(np_dtype)
        need = elements * np_dtype.itemsize
        if raw.size != need:
            raise _Bad(f"tensor {i} '{name}' of shape {list(shape)} {dtype} needs {need} bytes "
                       f"but its buffer holds {raw.size}")
        return raw.view(np_dtype).reshape(shape)

    def quantization(self, q, rank: int) -> Quantization | None:
        if q is None:
            return None
        scales = _np(q, "Scale", self.limit)
        if scales.size == 0:
            return None
        zps = _np(q, "ZeroPoint", self.limit)
        if zps.size not in (0, scales.size):
            raise _Bad(f"quantization has {scales.size} scales but {zps.size} zero points")
        axis = q.QuantizedDimension()
        if scales.size > 1 and not 0 <= axis < max(rank, 1):
            raise _Bad(f"quantized dimension {axis} outside a rank-{rank} tensor")
        mn, mx = _np(q, "Min", self.limit), _np(q, "Max", self.limit)
        if mn.size != mx.size:
            raise _Bad(f"quantization has {mn.size} min values but {mx.size} max values")
        return Quantization(
            scales=scales.astype(np.float32), axis=axis,
            zero_points=(zps if zps.size else np.zeros(scales.size)).astype(np.int64),
            min=mn if mn.size else None, max=mx if mx.size else None,
        )

    def sparsity(self, s) -> dict | None:
        if s is None:
            return None
        dims = []
        n = _tables(s, "DimMetadata", "sparsity dims", self.limit)
        for j in range(n):
            d = s.DimMetadata(j)
            entry = {"format": d.Format(), "dense_size": d.DenseSize()}
            for part in ("ArraySegments", "ArrayIndices"):
                table = getattr(d, part)()
                kind = getattr(d, part + "Type")()
                if table is not None and kind:
                    cls = {1: tflite.Int32Vector, 2: tflite.Uint16Vector, 3: tflite.Uint8Vector}.get(kind)
                    if cls is None:
                        raise _Bad(f"sparsity {part} has unknown vector type {kind}")
                    vec = cls()
                    vec.Init(table.Bytes, table.Pos)
                    entry[_snake(part)] = _np(vec, "Values", self.limit).astype(np.int64)
            dims.append(entry)
        return {
            "traversal_order": [int(x) for x in _np(s, "TraversalOrder", self.limit)],
            "block_map": [int(x) for x in _np(s, "BlockMap", self.limit)],
            "dim_metadata": dims,
        }

    def op(self, i: int, pos: int, codes) -> Op:
        o = _Table(self.buf, pos, tflite.Operator)
        idx = o.scalar("OpcodeIndex", _U32)
        if idx >= len(codes):
            raise _Bad(f"opcode index {idx}, but the model defines {len(codes)} operator codes")
        opcode, custom, version = codes[idx]
        kind2 = o.scalar("BuiltinOptions2Type", _U8)
        if kind2:
            options = _decode_options(self._union(o, "BuiltinOptions2"), _OPTION2_CLASSES.get(kind2), self.limit)
        else:
            options = _decode_options(self._union(o, "BuiltinOptions"),
                                      _OPTION_CLASSES.get(o.scalar("BuiltinOptionsType", _U8)), self.limit)
        custom_options = None
        if custom:
            g = tflite.Operator()
            g.Init(self.buf, pos)
            if g.LargeCustomOptionsOffset() > 1:
                off, size = g.LargeCustomOptionsOffset(), g.LargeCustomOptionsSize()
                if off + size > self.limit:
                    raise _Bad(f"operator {i} custom options point past the end of the file")
                custom_options = bytes(self.buf[off:off + size])
            else:
                custom_options = _np(g, "CustomOptions", self.limit).astype(np.uint8).tobytes()
        return Op(
            index=i, opcode=opcode, custom=custom, version=version, options=options,
            inputs=o.vector("Inputs", "<i4", self.limit).tolist(),
            outputs=o.vector("Outputs", "<i4", self.limit).tolist(),
            intermediates=o.vector("Intermediates", "<i4", self.limit).tolist(),
            custom_options=custom_options,
        )

    def _union(self, o: _Table, accessor: str):
        p = o.table(accessor)
        return _FbTable(self.buf, p) if p else None

    def subgraph(self, k: int, pos: int, codes) -> Subgraph:
        sg = _Table(self.buf, pos, tflite.SubGraph)
        positions = _table_positions(sg, "Tensors", f"subgraph {k} tensors", self.limit)
        tensors = [self.tensor(i, pos) for i, pos in enumerate(positions)]
        nt = len(tensors)
        ops = []
        for i, pos in enumerate(_table_positions(sg, "Operators", f"subgraph {k} operators", self.limit)):
            try:
                ops.append(self.op(i, pos, codes))
            except _Bad as e:
                raise _Bad(f"subgraph {k} operator {i}: {e}") from None
        inputs = sg.vector("Inputs", "<i4", self.limit).tolist()
        outputs = sg.vector("Outputs", "<i4", self.limit).tolist()
        for where, idxs in [("inputs", inputs), ("outputs", outputs)] + [
            (f"operator {op.index} ({op.opcode})", op.inputs + op.outputs + op.intermediates) for op in ops
        ]:
            for t in idxs:
                if t < -1 or t >= nt:
                    raise _Bad(f"subgraph {k} {where} refers to tensor {t}, but there are {nt}")
        _check_order(k, tensors, ops)
        return Subgraph(name=_name(sg.string("Name")) or f"subgraph_{k}", tensors=tensors, ops=ops,
                        inputs=inputs, outputs=outputs)

    def read(self) -> Graph:
        m = self.model
        version = m.Version()
        if version != SCHEMA_VERSION:
            raise _Bad(f"unsupported TFLite schema version {version} (this reader knows version {SCHEMA_VERSION})")
        self._buffer_pos = _table_positions(m, "Buffers", "buffers", self.limit)
        codes = self.opcodes()
        positions = _table_positions(m, "Subgraphs", "subgraphs", self.limit)
        if not positions:
            raise _Bad("the model has no subgraph")
        subgraphs = [self.subgraph(k, pos, codes) for k, pos in enumerate(positions)]
        metadata = {}
        for j in range(_tables(m, "Metadata", "metadata", self.limit)):
            md = m.Metadata(j)
            raw = self.buffer_bytes(md.Buffer())
            metadata[_name(md.Name())] = raw.tobytes() if raw is not None else b""
        sigs = []
        for j in range(_tables(m, "SignatureDefs", "signatures", self.limit)):
            sd = m.SignatureDefs(j)
            maps = []
            for part in ("Inputs", "Outputs"):
                n = _tables(sd, part, "signature " + part, self.limit)
                maps.append({_name(getattr(sd, part)(i).Name()): getattr(sd, part)(i).TensorIndex() for i in range(n)})
            sigs.append(SignatureDef(key=_name(sd.SignatureKey()), subgraph=sd.SubgraphIndex(),
                                     inputs=maps[0], outputs=maps[1]))
        return Graph(format="tflite", subgraphs=subgraphs, version=version, description=_name(m.Description()),
                     metadata=metadata, signature_defs=sigs, path=self.path)


def read_tflite_bytes(buf: bytes, path: str = "") -> Graph:
    if len(buf) < 8:
        raise ModelLoadError(path, f"not a TFLite file: only {len(buf)} bytes")
    if buf[4:8] != b"TFL3":
        raise ModelLoadError(path, "not a TFLite file: the TFL3 identifier is missing")
    try:
        return _Reader(buf, path).read()
    except _Bad as e:
        raise ModelLoadError(path, str(e)) from None
    except (IndexError, struct.error, TypeError):   # the flatbuffers runtime followed an offset out of the buffer
        raise ModelLoadError(path, f"truncated or corrupt TFLite file: an offset points outside its {len(buf)} bytes"
                             ) from None
    except (ValueError, OverflowError, UnicodeDecodeError, MemoryError) as e:
        raise ModelLoadError(path, f"corrupt TFLite file ({type(e).__name__}: {e})") from None


def read_tflite(path: str | Path) -> Graph:
    from .loader import regular_file
    path = str(path)
    regular_file(path)
    try:
        buf = Path(path).read_bytes()
    except OSError as e:
        raise ModelLoadError(path, e.strerror or str(e)) from None
    return read_tflite_bytes(buf, path)
