"""Read a .tflite flatbuffer into the neutral Graph, walking the tables itself.

Field slots, types and defaults come from tflite_schema.py (derived from the `tflite` package, which is not
imported here: its 188 modules were a sixth of every CLI start). Every vector is bounds-checked before it is walked
and every constant's size is checked against its buffer before a numpy view is made: a hostile file gets a
ModelLoadError, never a huge allocation or a stray IndexError.
"""
from __future__ import annotations

import math
import re
import struct
from functools import lru_cache
from operator import add
from pathlib import Path
from typing import Any

import numpy as np

from . import tflite_schema as S
from .inputs import read_input
from inspector.core.ir.errors import ModelLoadError
from inspector.core.ir import shapes
from inspector.core.ir.graph import Graph, Op, Quantization, SignatureDef, Subgraph, Tensor

SCHEMA_VERSION = 3
# Largest activation a shape may claim (elements); beyond this the file is refused, not allocated.
MAX_ELEMENTS = 1 << 40
SPARSE_RATIO, SPARSE_SLACK = 64, 1 << 16    # dense elements a sparse constant's stored values can justify
MAX_RANK = 32                       # TFLite kernels stop at 6-8; a longer shape is corruption, not a model

TENSOR_TYPES = S.TENSOR_TYPES
_ENUM_NAMES = S.ENUM_NAMES          # enum-valued option fields, decoded to their schema names as the schema reads
_SPARSE_VECTORS = {1: "<i4", 2: "<u2", 3: "<u1"}     # SparseIndexVector union: Int32/Uint16/Uint8Vector


def _field_ids(table: str) -> dict[str, int]:
    """Accessor name -> field id (vtable slot 4 + 2 * id) of a schema table; "" -> how many fields it has."""
    ids = {k: (slot - 4) >> 1 for k, slot in S.SLOTS[table].items()}
    ids[""] = max(ids.values()) + 1
    return ids


_M, _SG, _T, _OP, _OC, _BUF = (_field_ids(k) for k in ("Model", "SubGraph", "Tensor", "Operator", "OperatorCode",
                                                     "Buffer"))
_Q, _SP, _DM, _MD, _SD, _TM, _VEC = (_field_ids(k) for k in (
    "QuantizationParameters", "SparsityParameters", "DimensionMetadata", "Metadata", "SignatureDef", "TensorMap",
    "Int32Vector"))
# Field ids of the two tables read most (once per tensor, once per operator), as plain names for speed.
_T_SHAPE, _T_TYPE, _T_BUFFER, _T_NAME, _T_QUANT, _T_VARIABLE, _T_SPARSITY, _T_SIG = (
    _T[k] for k in ("Shape", "Type", "Buffer", "Name", "Quantization", "IsVariable", "Sparsity", "ShapeSignature"))
_TENSOR_N = max(_T_SHAPE, _T_TYPE, _T_BUFFER, _T_NAME, _T_QUANT, _T_VARIABLE, _T_SPARSITY, _T_SIG) + 1
(_O_OPCODE, _O_INPUTS, _O_OUTPUTS, _O_KIND, _O_OPTIONS, _O_CUSTOM, _O_INTERMEDIATES, _O_LARGE_OFFSET, _O_LARGE_SIZE,
 _O_KIND2, _O_OPTIONS2) = (_OP[k] for k in (
    "OpcodeIndex", "Inputs", "Outputs", "BuiltinOptionsType", "BuiltinOptions", "CustomOptions", "Intermediates",
    "LargeCustomOptionsOffset", "LargeCustomOptionsSize", "BuiltinOptions2Type", "BuiltinOptions2"))
_OP_N = max(_O_OPCODE, _O_INPUTS, _O_OUTPUTS, _O_KIND, _O_OPTIONS, _O_CUSTOM, _O_INTERMEDIATES, _O_LARGE_OFFSET,
            _O_LARGE_SIZE, _O_KIND2, _O_OPTIONS2) + 1
_Q_SCALE = _Q["Scale"]
_OC_DEPRECATED, _OC_CUSTOM, _OC_VERSION, _OC_CODE = (_OC[k] for k in (
    "DeprecatedBuiltinCode", "CustomCode", "Version", "BuiltinCode"))


def __getattr__(name: str):
    """What the test-model builder shares with the reader's past (`ENUMS`: the generated enum classes); it needs
    the `tflite` package, so it is imported only when asked for."""
    if name == "ENUMS":
        import tflite
        return {"padding": tflite.Padding, "fused_activation_function": tflite.ActivationFunctionType,
                "mode": tflite.MirrorPadMode, "combiner": tflite.CombinerType, "type": tflite.LSHProjectionType,
                "kernel_type": tflite.LSTMKernelType, "weights_format": tflite.FullyConnectedOptionsWeightsFormat}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Bad(Exception):
    """Internal: a structural problem found while walking the buffer."""


def _snake(name: str) -> str:
    """Schema field name from a generated accessor: DilationWFactor -> dilation_w_factor."""
    return re.sub(r"(?<=[a-z0-9])[A-Z]|(?<=[A-Z])[A-Z](?=[a-z])", lambda m: "_" + m.group(0), name).lower()


@lru_cache(maxsize=None)
def _slot(cls, accessor: str) -> int:
    """The vtable slot a `tflite` generated accessor reads (for tests that patch files built with that package):
    the first integer constant of its code, the argument of the `self._tab.Offset(N)` every accessor opens with."""
    return next(c for c in getattr(cls, accessor).__code__.co_consts if type(c) is int)


@lru_cache(maxsize=None)
def option_fields(cls) -> tuple[tuple[str, str, bool], ...]:
    """(snake_name, accessor, is_vector) for every field of a `tflite` generated options class (the test-model
    builder's view; the reader itself uses tflite_schema.OPTIONS)."""
    import inspect
    skip = re.compile(r"^(Init|GetRootAs.*|.*BufferHasIdentifier|.*Length|.*IsNone|.*AsNumpy)$")
    out = []
    for name, fn in vars(cls).items():
        if not callable(fn) or name.startswith("_") or skip.match(name):
            continue
        params = list(inspect.signature(fn).parameters)
        if params == ["self"]:
            out.append((_snake(name), name, False))
        elif params == ["self", "j"] and hasattr(cls, name + "AsNumpy"):
            out.append((_snake(name), name, True))
    return tuple(sorted(out))


_I8, _U8, _U16, _I32, _U32, _U64 = (struct.Struct(f).unpack_from for f in ("<b", "<B", "<H", "<i", "<I", "<Q"))
_UNPACK: dict = {}                  # struct format -> unpack_from (option scalars, vtables, short vectors)
_EMPTY = np.zeros(0, dtype=np.int64)
_EMPTY.flags.writeable = False


def _unpacker(fmt: str):
    u = _UNPACK.get(fmt)
    if u is None:
        u = _UNPACK[fmt] = struct.Struct(fmt).unpack_from
    return u


def _offsets(buf: bytes, pos: int, n: int) -> list[int]:
    """Absolute positions of the first n fields of the table at pos (0 = absent), its vtable read in one call:
    reading field by field was most of the reader's time on small models."""
    vt = pos - _I32(buf, pos)[0]
    if vt < 0:                      # struct would read from the end of the buffer
        raise struct.error("vtable before the start of the file")
    k = (_U16(buf, vt)[0] - 3) >> 1             # fields whose slot 4 + 2 * id lies inside the vtable
    if k > n:
        k = n
    elif k <= 0:
        return [0] * n
    offs = _VTABLES[k](buf, vt + 4) if k < 64 else struct.unpack_from(f"<{k}H", buf, vt + 4)   # (no cache growth)
    out = [pos + o if o else 0 for o in offs]
    return out + [0] * (n - k) if k < n else out


_VTABLES = [struct.Struct(f"<{k}H").unpack_from for k in range(64)]      # k vtable entries at once
_TABLE_LISTS = [struct.Struct(f"<{k}I").unpack_from for k in range(65)]  # k table offsets at once
_INT32S = [struct.Struct(f"<{k}i").unpack_from for k in range(65)]      # k int32s: a shape, an op's inputs


def _field(buf: bytes, pos: int, fid: int) -> int:
    """Absolute position of field `fid` of the table at pos (0 = absent), for a table of which one field is read."""
    vt = pos - _I32(buf, pos)[0]
    if vt < 0:
        raise struct.error("vtable before the start of the file")
    slot = 4 + 2 * fid
    if slot >= _U16(buf, vt)[0]:
        return 0
    off = _U16(buf, vt + slot)[0]
    return pos + off if off else 0


def _int_vector(buf: bytes, p: int, limit: int, what: str, fmt: str = "i") -> list:
    """The scalar vector whose offset field is at p (0: absent) as a list, bounds-checked like _vector."""
    if not p:
        return []
    v = p + _U32(buf, p)[0]
    n = _U32(buf, v)[0]
    if n > 64 or n > limit:
        return _vector(buf, v, "<" + fmt, limit, what).tolist()
    try:
        return list(_INT32S[n](buf, v + 4) if fmt == "i" else _unpacker(f"<{n}{fmt}")(buf, v + 4))
    except struct.error:
        raise _Bad(f"{_snake(what)}: {n} entries run past the end of the file") from None


def _string(buf: bytes, p: int, what: str) -> str:
    """The string whose offset field is at p (0: absent, read as ''), checked against the file."""
    if not p:
        return ""
    s = p + _U32(buf, p)[0]
    n = _U32(buf, s)[0]
    if s + 4 + n > len(buf):
        raise _Bad(f"{what}: string runs past the end of the file")
    return buf[s + 4:s + 4 + n].decode("utf-8", "replace") if n else ""


def _table_positions(table: "_Table", accessor: str, what: str, limit: int) -> list[int]:
    """Absolute positions of a vector of tables' entries, after proving every entry lies inside the file.

    Flatbuffers writers emit children before parents, so each entry points forward past the vector's end; an entry
    pointing back into the vector (e.g. a run of zero bytes read as a table list) would let a corrupt count make
    the reader walk millions of empty tables.
    """
    p = table.table(accessor)
    n = _U32(table.buf, p)[0] if p else 0
    if n == 0:
        return []
    start = p + 4
    end = start + 4 * n
    if n > limit // 4 or end > limit:
        raise _Bad(f"{what}: count {n} is more than the file can hold")
    if n <= 64:                                  # numpy's per-call cost dominates short vectors
        targets = list(map(add, _TABLE_LISTS[n](table.buf, start), range(start, end, 4)))
        low, high = min(targets), max(targets)
    else:
        arr = np.frombuffer(table.buf, "<u4", count=n, offset=start) + (start + 4 * np.arange(n, dtype=np.int64))
        low, high, targets = int(arr.min()), int(arr.max()), arr.tolist()
    if low < end or high + 4 > limit:
        raise _Bad(f"{what}: an entry points outside the file or back into its own list")
    return targets


class _Table:
    """A flatbuffer table whose vtable is read once (see _offsets); `ids` maps the schema's accessor names to field
    ids (from _field_ids)."""
    __slots__ = ("buf", "pos", "at", "ids")

    def __init__(self, buf: bytes, pos: int, ids: dict[str, int]):
        self.buf, self.pos, self.ids = buf, pos, ids
        self.at = _offsets(buf, pos, ids[""])

    def field(self, accessor: str) -> int:
        """Absolute position of the field; 0 when absent."""
        return self.at[self.ids[accessor]]

    def scalar(self, accessor: str, unpack=_I32, default: int = 0) -> int:
        p = self.at[self.ids[accessor]]
        return unpack(self.buf, p)[0] if p else default

    def table(self, accessor: str) -> int:
        """Position of a sub-table, vector or string; 0 when absent."""
        p = self.at[self.ids[accessor]]
        return p + _U32(self.buf, p)[0] if p else 0

    def string(self, accessor: str, checked: bool = True) -> bytes:
        """A string's bytes; unchecked ones end where the file does (names that were always read that way)."""
        p = self.table(accessor)
        if not p:
            return b""
        n = _U32(self.buf, p)[0]
        if checked and p + 4 + n > len(self.buf):
            raise _Bad(f"{_snake(accessor)}: string runs past the end of the file")
        return self.buf[p + 4:p + 4 + n]

    def vector(self, accessor: str, dtype: str, limit: int) -> np.ndarray:
        return _vector(self.buf, self.table(accessor), dtype, limit, accessor)

    def tables(self, accessor: str, what: str, limit: int, slots: dict[str, int]) -> list["_Table"]:
        return [_Table(self.buf, p, slots) for p in _table_positions(self, accessor, what, limit)]


def _vector(buf: bytes, p: int, dtype: str, limit: int, accessor: str) -> np.ndarray:
    """The scalar vector at position p (0: absent, read as empty) as a numpy view, checked against the file."""
    if not p:
        return _EMPTY
    n = _U32(buf, p)[0]
    if n > limit:
        raise _Bad(f"{_snake(accessor)}: {n} entries, more than the file can hold")
    if n == 0:
        return _EMPTY
    try:
        return np.frombuffer(buf, dtype, count=n, offset=p + 4)
    except ValueError:
        raise _Bad(f"{_snake(accessor)}: {n} entries run past the end of the file") from None


_OPTION_WIDTH: dict[int, int] = {}  # id of an options table's fields (schema constants) -> vtable entries to read


def _decode_options(buf: bytes, pos: int, fields, limit: int) -> dict:
    """An options table as {snake_name: value}, enum fields by name; `fields` from tflite_schema.OPTIONS."""
    if not pos or not fields:
        return {}
    n = _OPTION_WIDTH.get(id(fields))
    if n is None:
        n = _OPTION_WIDTH[id(fields)] = max(slot for _, slot, _, _ in fields) // 2 - 1
    at = _offsets(buf, pos, n)
    out = {}
    for key, slot, kind, default in fields:
        p = at[(slot - 4) >> 1]
        if kind[0] == "v":          # ints stay ints, floats (BUCKETIZE) stay floats
            out[key] = _vector(buf, p + _U32(buf, p)[0] if p else 0, kind[1:], limit, key).tolist()
        elif kind == "s":
            if p:
                s = p + _U32(buf, p)[0]
                out[key] = bytes(buf[s + 4:s + 4 + _U32(buf, s)[0]]).decode("utf-8", "replace")
            else:
                out[key] = None
        else:
            val = _unpacker(kind)(buf, p)[0] if p else default
            names = _ENUM_NAMES.get(key)
            out[key] = names.get(val, val) if names is not None else val
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
        self.model = _Table(buf, _U32(buf, 0)[0], _M)
        self._buffers: dict[int, np.ndarray | None] = {}
        self._buffer_pos: list[int] | None = None

    def buffer_bytes(self, index: int) -> np.ndarray | None:
        if index in self._buffers:
            return self._buffers[index]
        span = self._buffer_span(index)
        data = None if span is None else np.frombuffer(self.buf, np.uint8, count=span[1], offset=span[0])
        self._buffers[index] = data
        return data

    def _buffer_span(self, index: int) -> tuple[int, int] | None:
        """(start, size) of buffer `index`'s bytes, checked against the file; None when it has none."""
        if self._buffer_pos is None:
            self._buffer_pos = _table_positions(self.model, "Buffers", "buffers", self.limit)
        if index <= 0 or index >= len(self._buffer_pos):
            return None
        buf = self.buf
        data_p, off_p, size_p = _offsets(buf, self._buffer_pos[index], _BUF[""])
        off = _U64(buf, off_p)[0] if off_p else 0
        size = _U64(buf, size_p)[0] if size_p else 0
        if off > 1:   # >2 GB models keep data after the flatbuffer, addressed by offset/size
            if off + size > self.limit:
                raise _Bad(f"buffer {index} points past the end of the file ({off}+{size} > {self.limit})")
            return off, size
        p = data_p + _U32(buf, data_p)[0] if data_p else 0
        n = _U32(buf, p)[0] if p else 0
        if n > self.limit:
            raise _Bad(f"buffer {index} claims {n} bytes, more than the file")
        if not n:
            return None
        if p + 4 + n > self.limit:
            raise _Bad(f"buffer {index} claims {n} bytes, running past the end of the file")
        return p + 4, n

    def opcodes(self) -> list[tuple[str, bool, int]]:
        """(name, custom, version) of each operator code, its vtable read once (as tensor and op do)."""
        buf, out = self.buf, []
        for pos in _table_positions(self.model, "OperatorCodes", "operator codes", self.limit):
            f = _offsets(buf, pos, _OC[""])
            code = max(_I8(buf, f[_OC_DEPRECATED])[0] if f[_OC_DEPRECATED] else 0,
                       _I32(buf, f[_OC_CODE])[0] if f[_OC_CODE] else 0)
            version = _I32(buf, f[_OC_VERSION])[0] if f[_OC_VERSION] else 1
            if code == S.CUSTOM:
                out.append((_string(buf, f[_OC_CUSTOM], "custom_code") or "CUSTOM", True, version))
            else:
                out.append((S.BUILTIN_OPERATORS.get(code, f"UNKNOWN_{code}"), False, version))
        return out

    def tensor(self, i: int, pos: int) -> Tensor:
        buf = self.buf
        f = _offsets(buf, pos, _TENSOR_N)
        p = f[_T_SHAPE]
        if p:
            v = p + _U32(buf, p)[0]
            rank = _U32(buf, v)[0]
            if rank > MAX_RANK:
                raise _Bad(f"tensor {i} has rank {rank}, beyond any real model")
            try:                                    # (rank <= 32: one struct call, no numpy)
                shape = _INT32S[rank](buf, v + 4) if rank <= self.limit else tuple(_int_vector(buf, p, self.limit,
                                                                                              "Shape"))
            except struct.error:
                raise _Bad(f"shape: {rank} entries run past the end of the file") from None
        else:
            shape = ()
        sig_list = _int_vector(buf, f[_T_SIG], self.limit, "ShapeSignature") if f[_T_SIG] else []
        ttype = _I8(buf, f[_T_TYPE])[0] if f[_T_TYPE] else 0
        dtype = TENSOR_TYPES.get(ttype) or f"type{ttype}"
        name = _string(buf, f[_T_NAME], "name")
        if shape and min(shape) < 0:
            raise _Bad(f"tensor {i} '{name}' has a negative dimension {shape}")
        elements = math.prod(shape)
        if elements > MAX_ELEMENTS:
            raise _Bad(f"tensor {i} '{name}' of shape {list(shape)} claims {elements} elements, beyond any real model")
        if sig_list and (len(sig_list) != len(shape) or any(s < -1 or 0 <= s != d for s, d in zip(sig_list, shape))):
            raise _Bad(f"tensor {i} '{name}' has shape {list(shape)} but shape signature {sig_list} "
                       "(they must agree except where the signature says -1)")
        data = None
        p = f[_T_SPARSITY]
        sparsity = self.sparsity(_Table(buf, p + _U32(buf, p)[0], _SP)) if p else None
        buffer = _U32(buf, f[_T_BUFFER])[0] if f[_T_BUFFER] else 0
        raw = self.buffer_bytes(buffer)
        if raw is not None and raw.size:
            data = self.constant(name, i, raw, shape, dtype, elements, sparse=sparsity is not None)
        if sparsity is not None:
            _check_sparse(i, name, shape, elements, sparsity, data)
        quant = None
        p = f[_T_QUANT]                  # present but empty on most float tensors: skip it cheaply
        if p:
            p += _U32(buf, p)[0]
            scale = _field(buf, p, _Q_SCALE)
            if scale and _U32(buf, scale + _U32(buf, scale)[0])[0]:
                quant = self.quantization(_Table(buf, p, _Q), len(shape))
        return Tensor(
            index=i, name=name, shape=shape, dtype=dtype,
            shape_signature=tuple(sig_list) if sig_list else None,
            data=data, quantization=quant,
            sparsity=sparsity, is_variable=bool(_U8(buf, f[_T_VARIABLE])[0]) if f[_T_VARIABLE] else False,
            buffer=buffer,
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

    def quantization(self, q: _Table, rank: int) -> Quantization | None:
        scales = q.vector("Scale", "<f4", self.limit)
        if scales.size == 0:
            return None
        zps = q.vector("ZeroPoint", "<i8", self.limit)
        if zps.size not in (0, scales.size):
            raise _Bad(f"quantization has {scales.size} scales but {zps.size} zero points")
        axis = q.scalar("QuantizedDimension")
        if scales.size > 1 and not 0 <= axis < max(rank, 1):
            raise _Bad(f"quantized dimension {axis} outside a rank-{rank} tensor")
        mn, mx = q.vector("Min", "<f4", self.limit), q.vector("Max", "<f4", self.limit)
        if mn.size != mx.size:
            raise _Bad(f"quantization has {mn.size} min values but {mx.size} max values")
        return Quantization(
            scales=scales.astype(np.float32), axis=axis,
            zero_points=(zps if zps.size else np.zeros(scales.size)).astype(np.int64),
            min=mn if mn.size else None, max=mx if mx.size else None,
        )

    def sparsity(self, s: _Table) -> dict[str, Any]:
        dims = []
        for d in s.tables("DimMetadata", "sparsity dims", self.limit, _DM):
            entry: dict[str, Any] = {"format": d.scalar("Format", _I8), "dense_size": d.scalar("DenseSize")}
            for part in ("ArraySegments", "ArrayIndices"):
                p = d.table(part) if d.field(part) else None
                kind = d.scalar(part + "Type", _U8)
                if p is not None and kind:
                    dtype = _SPARSE_VECTORS.get(kind)
                    if dtype is None:
                        raise _Bad(f"sparsity {part} has unknown vector type {kind}")
                    values = _Table(self.buf, p, _VEC).vector("Values", dtype, self.limit)
                    entry[_snake(part)] = values.astype(np.int64)
            dims.append(entry)
        return {
            "traversal_order": [int(x) for x in s.vector("TraversalOrder", "<i4", self.limit)],
            "block_map": [int(x) for x in s.vector("BlockMap", "<i4", self.limit)],
            "dim_metadata": dims,
        }

    def op(self, i: int, pos: int, codes) -> Op:
        buf, limit = self.buf, self.limit
        f = _offsets(buf, pos, _OP_N)
        idx = int(_U32(buf, f[_O_OPCODE])[0]) if f[_O_OPCODE] else 0
        if idx >= len(codes):
            raise _Bad(f"opcode index {idx}, but the model defines {len(codes)} operator codes")
        opcode, custom, version = codes[idx]
        kind2 = _U8(buf, f[_O_KIND2])[0] if f[_O_KIND2] else 0
        fields: tuple[Any, ...] | None
        if kind2:
            fields, p = S.OPTIONS2.get(kind2, (None, None))[1], f[_O_OPTIONS2]
        else:
            kind = _U8(buf, f[_O_KIND])[0] if f[_O_KIND] else 0
            fields, p = S.OPTIONS.get(kind, (None, None))[1], f[_O_OPTIONS]
        options = _decode_options(buf, p + _U32(buf, p)[0], fields, limit) if p and fields else {}
        custom_options = None
        if custom:
            off = _U64(buf, f[_O_LARGE_OFFSET])[0] if f[_O_LARGE_OFFSET] else 0
            size = _U64(buf, f[_O_LARGE_SIZE])[0] if f[_O_LARGE_SIZE] else 0
            if off > 1:
                if off + size > limit:
                    raise _Bad(f"operator {i} custom options point past the end of the file")
                custom_options = bytes(buf[off:off + size])
            else:
                p = f[_O_CUSTOM]
                custom_options = _vector(buf, p + _U32(buf, p)[0] if p else 0, "<u1", limit, "CustomOptions"
                                         ).astype(np.uint8).tobytes()
        return Op(
            index=i, opcode=opcode, custom=custom, version=version, options=options,
            inputs=_int_vector(buf, f[_O_INPUTS], limit, "Inputs"),
            outputs=_int_vector(buf, f[_O_OUTPUTS], limit, "Outputs"),
            intermediates=_int_vector(buf, f[_O_INTERMEDIATES], limit, "Intermediates"),
            custom_options=custom_options,
        )

    def subgraph(self, k: int, sg: _Table, codes) -> Subgraph:
        positions = _table_positions(sg, "Tensors", f"subgraph {k} tensors", self.limit)
        tensors = [self.tensor(i, pos) for i, pos in enumerate(positions)]
        nt = len(tensors)
        ops = []
        for i, pos in enumerate(_table_positions(sg, "Operators", f"subgraph {k} operators", self.limit)):
            try:
                ops.append(self.op(i, pos, codes))
            except _Bad as e:
                raise _Bad(f"subgraph {k} operator {i}: {e}") from None
        inputs = _int_vector(self.buf, sg.field("Inputs"), self.limit, "Inputs")
        outputs = _int_vector(self.buf, sg.field("Outputs"), self.limit, "Outputs")
        lists = [("inputs", inputs), ("outputs", outputs)] + [(op, op.inputs + op.outputs + op.intermediates)
                                                              for op in ops]
        for where, idxs in lists:
            if idxs and (min(idxs) < -1 or max(idxs) >= nt):
                t = next(t for t in idxs if t < -1 or t >= nt)
                where = where if isinstance(where, str) else f"operator {where.index} ({where.opcode})"
                raise _Bad(f"subgraph {k} {where} refers to tensor {t}, but there are {nt}")
        _check_order(k, tensors, ops)
        return Subgraph(name=_name(sg.string("Name")) or f"subgraph_{k}", tensors=tensors, ops=ops,
                        inputs=inputs, outputs=outputs)

    def read(self) -> Graph:
        m = self.model
        version = m.scalar("Version", _U32)
        if version != SCHEMA_VERSION:
            raise _Bad(f"unsupported TFLite schema version {version} (this reader knows version {SCHEMA_VERSION})")
        self._buffer_pos = _table_positions(m, "Buffers", "buffers", self.limit)
        codes = self.opcodes()
        tables = m.tables("Subgraphs", "subgraphs", self.limit, _SG)
        if not tables:
            raise _Bad("the model has no subgraph")
        subgraphs = [self.subgraph(k, sg, codes) for k, sg in enumerate(tables)]
        metadata: dict[str, bytes | str] = {}
        for md in m.tables("Metadata", "metadata", self.limit, _MD):
            span = self._buffer_span(md.scalar("Buffer", _U32))
            metadata[_name(md.string("Name", checked=False))] = \
                bytes(self.buf[span[0]:span[0] + span[1]]) if span is not None else b""
        sigs = []
        for sd in m.tables("SignatureDefs", "signatures", self.limit, _SD):
            maps = [{_name(tm.string("Name", checked=False)): tm.scalar("TensorIndex", _U32)
                     for tm in sd.tables(part, "signature " + part, self.limit, _TM)} for part in ("Inputs", "Outputs")]
            sigs.append(SignatureDef(key=_name(sd.string("SignatureKey", checked=False)),
                                     subgraph=sd.scalar("SubgraphIndex", _U32), inputs=maps[0], outputs=maps[1]))
        return Graph(format="tflite", subgraphs=subgraphs, version=version,
                     description=_name(m.string("Description", checked=False)),
                     metadata=metadata, signature_defs=sigs, path=self.path)


def read_tflite_bytes(buf: bytes, path: str = "") -> Graph:
    if len(buf) < 8:
        raise ModelLoadError(path, f"not a TFLite file: only {len(buf)} bytes")
    if buf[4:8] != b"TFL3":
        raise ModelLoadError(path, "not a TFLite file: the TFL3 identifier is missing")
    try:
        graph = _Reader(buf, path).read()
    except _Bad as e:
        raise ModelLoadError(path, str(e)) from None
    except (IndexError, struct.error, TypeError):   # the flatbuffers runtime followed an offset out of the buffer
        raise ModelLoadError(path, f"truncated or corrupt TFLite file: an offset points outside its {len(buf)} bytes"
                             ) from None
    except (ValueError, OverflowError, UnicodeDecodeError, MemoryError) as e:
        raise ModelLoadError(path, f"corrupt TFLite file ({type(e).__name__}: {e})") from None
    _litert_verify(buf, path)
    graph.notes += shapes.correct(graph)             # LiteRT's shapes where the file's are stale
    return graph


FLATBUFFER_MAX = 2**31 - 1        # flatbuffers' verifier stops here; beyond it our own checks stand alone
_OP_RESOLUTION = re.compile(r"find op|unresolved|custom op|Registration", re.I)


def _litert_verify(buf: bytes, path: str) -> None:
    """LiteRT's own flatbuffer verifier and model checks (building an interpreter resolves no kernels and
    allocates no tensors: tens of microseconds), when LiteRT is installed. A file it refuses is refused here with
    its reason; before, `convert` wrote an ONNX file and `validate` then failed with a traceback."""
    if len(buf) > FLATBUFFER_MAX:
        return
    build = _LITERT[0] if _LITERT else _litert_builder()
    if build is None:
        return
    try:
        build(buf)
    except (ValueError, RuntimeError) as e:
        reason = (str(e).strip().splitlines() or ["no reason given"])[0]
        if not _OP_RESOLUTION.search(reason):     # a kernel this LiteRT build lacks is no fault of the file
            raise ModelLoadError(path, f"LiteRT refuses this file: {reason}") from None


_LITERT: list = []


def _litert_builder():
    """What builds an interpreter from bytes, looked up once: the wrapper the public Interpreter calls, without the
    Interpreter's own work around it (signature list, usage metrics: ~15 % of the check) nor its module's imports
    (ctypes, metrics: part of every cold start); the public class when this LiteRT's wrapper is elsewhere or takes
    other arguments. None without LiteRT."""
    try:
        from ai_edge_litert import _pywrap_litert_interpreter_wrapper as wrapper
        create = wrapper.CreateWrapperFromBuffer
    except (ImportError, AttributeError):
        create = None

    def public(buf):
        from ai_edge_litert import interpreter as lite
        lite.Interpreter(model_content=buf,
                         experimental_op_resolver_type=lite.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)

    if create is None:
        try:
            import ai_edge_litert.interpreter  # noqa: F401
        except ImportError:
            _LITERT.append(None)
            return None
        _LITERT.append(public)
        return public

    def build(buf):
        try:
            # The arguments Interpreter(model_content=buf) passes: LiteRT's op resolver without default delegates
            # (its id in interpreter_wrapper.cc, as interpreter._get_op_resolver_id gives it), no custom ops, no
            # preserved tensors, delegate clustering on, 1 thread, default delegate features, no zero-point
            # compression, fusion, profiling.
            create(buf, _RESOLVER_WITHOUT_DEFAULT_DELEGATES, [], [], False, False, 1, False, False, False, False)
        except TypeError:                    # this LiteRT's wrapper takes other arguments: the public class
            _LITERT[0] = public
            public(buf)

    _LITERT.append(build)
    return build


_RESOLVER_WITHOUT_DEFAULT_DELEGATES = 3


def read_tflite(path: str | Path) -> Graph:
    path = str(path)
    return read_tflite_bytes(_read_file(path), path)


def op_count(path: str | Path) -> int:
    """The main subgraph's op count from the file's root tables alone (a window starts converting a big model in
    its child before it has read the model itself); 0 when they cannot be read (read_tflite then says why)."""
    try:
        buf = _read_file(str(path))
        if buf[4:8] != b"TFL3":
            return 0
        subgraphs = _Table(buf, _U32(buf, 0)[0], _M).tables("Subgraphs", "subgraphs", len(buf), _SG)
        p = subgraphs[0].table("Operators") if subgraphs else 0
        return _U32(buf, p)[0] if p else 0
    except Exception:       # noqa: BLE001 - any damage: the full read reports it
        return 0


def _read_file(path: str) -> bytes:
    """The file's bytes, with one open and one read, through the guarded opener (a FIFO or device is refused)."""
    return read_input(path, what="model")
