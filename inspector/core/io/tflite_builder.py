"""Build .tflite flatbuffers in code: sample models, test models and single-op conformance models.

    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    w = b.const("w", weights)                      # numpy array; dtype and shape from the array
    y = b.tensor("y", [1, 3, 4, 8])
    b.op("CONV_2D", [x, w, None], [y], {"padding": "SAME", "stride_h": 2, "stride_w": 2})
    b.output(y)
    data = b.build()

Tensors are plain indices into their subgraph (None or -1 = absent input). Options use the snake_case field names
and enum names that `tflite_reader` decodes, so a model read back shows the options it was built with.
"""
from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

import flatbuffers
import numpy as np
import tflite

from inspector.core.ir.graph import Quantization
from .tflite_reader import ENUMS, option_fields, TENSOR_TYPES

_DTYPE_CODES = {name: code for code, name in TENSOR_TYPES.items()}
_BUILTIN = {k: v for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_UNION1 = {k: v for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_") and k != "NONE"}
_UNION2 = {k: v for k, v in vars(tflite.BuiltinOptions2).items() if not k.startswith("_") and k != "NONE"}

# Ops whose options table is not simply CamelCase(op name) + "Options" (see the TFLite schema's BuiltinOptions).
_OPTIONS_BY_HAND = {
    **dict.fromkeys(["AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"], "Pool2DOptions"),
    **dict.fromkeys(["MEAN", "SUM", "REDUCE_PROD", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ANY", "REDUCE_ALL"],
                    "ReducerOptions"),
    **dict.fromkeys(["MAXIMUM", "MINIMUM"], "MaximumMinimumOptions"),
    **dict.fromkeys(["RANDOM_STANDARD_NORMAL", "RANDOM_UNIFORM", "MULTINOMIAL"], "RandomOptions"),
    "L2_NORMALIZATION": "L2NormOptions", "LSH_PROJECTION": "LSHProjectionOptions", "LSTM": "LSTMOptions",
    "RNN": "RNNOptions", "SVDF": "SVDFOptions", "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "BIDIRECTIONAL_SEQUENCE_RNN": "BidirectionalSequenceRNNOptions",
    "BIDIRECTIONAL_SEQUENCE_LSTM": "BidirectionalSequenceLSTMOptions", "TOPK_V2": "TopKV2Options",
    "PADV2": "PadV2Options", "GATHER_ND": "GatherNdOptions", "SCATTER_ND": "ScatterNdOptions",
    "BATCH_MATMUL": "BatchMatMulOptions", "RFFT2D": "Rfft2dOptions", "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "ATAN2": "ATan2Options", "STABLEHLO_COMPOSITE": "StableHLOCompositeOptions",
}
# Fields whose schema default (0) no real model uses; filled in when the caller leaves them out.
_ONE_BY_DEFAULT = re.compile(r"^(stride_[hwd]|dilation_[hwd]_factor)$")


def options_class(opcode: str) -> str | None:
    """Name of the options table a builtin op takes ("Conv2DOptions"), or None when it takes none."""
    name = _OPTIONS_BY_HAND.get(opcode)
    if name is None:
        camel = "".join(p.capitalize() for p in opcode.split("_"))
        name = re.sub(r"(\d)d", r"\1D", camel).replace("Nd", "ND") + "Options"
    return name if name in _UNION1 or name in _UNION2 else None


@lru_cache(maxsize=None)
def _option_fields(class_name: str) -> dict[str, tuple[str, str, Any]]:
    """snake name -> (Camel accessor, kind, numpy dtype of a vector's elements); kind is scalar/string/vector."""
    cls = getattr(tflite, class_name)
    out: dict[str, tuple[str, str, Any]] = {}
    for snake, acc, vec in option_fields(cls):
        src = inspect.getsource(getattr(cls, acc + ("AsNumpy" if vec else "")))
        if vec:
            flags = re.search(r"GetVectorAsNumpy\(flatbuffers\.number_types\.(\w+)Flags", src)
            if flags is None:
                raise ValueError(f"tflite.{class_name}.{acc}AsNumpy: no element type found in its source")
            out[snake] = (acc, "vector", np.dtype(flags.group(1).lower()))
        elif "self._tab.String(" in src:
            out[snake] = (acc, "string", None)
        elif "Indirect" not in src:
            out[snake] = (acc, "scalar", None)
    return out


def _scalar(key: str, value):
    if isinstance(value, str):
        if key not in ENUMS or not hasattr(ENUMS[key], value):
            raise ValueError(f"option {key}: unknown value {value!r}")
        return getattr(ENUMS[key], value)
    return value


@dataclass
class _Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    buffer: int = 0
    quant: Quantization | None = None
    shape_signature: tuple[int, ...] | None = None
    variable: bool = False


@dataclass
class _Op:
    code: int                      # index into the model's operator codes
    inputs: list[int]
    outputs: list[int]
    options_class: str | None = None
    options: dict = field(default_factory=dict)
    custom_options: bytes | None = None
    intermediates: list[int] = field(default_factory=list)


def _quant(q) -> Quantization | None:
    """Accept a Quantization, a (scale, zero_point) pair of scalars or lists, or a dict of Quantization fields."""
    if q is None or isinstance(q, Quantization):
        return q
    if isinstance(q, dict):
        q = dict(q)
        scales, zps = q.pop("scales"), q.pop("zero_points", 0)
    else:
        (scales, zps), q = q, {}
    scales = np.atleast_1d(np.asarray(scales, np.float32))
    zps = np.broadcast_to(np.atleast_1d(np.asarray(zps, np.int64)), scales.shape).copy()
    return Quantization(scales=scales, zero_points=zps, **q)


class SubgraphBuilder:
    """Tensors and operators of one subgraph; make one with ModelBuilder.subgraph()."""

    def __init__(self, model: ModelBuilder, name: str, index: int):
        self.model, self.name, self.index = model, name, index
        self.tensors: list[_Tensor] = []
        self.ops: list[_Op] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def tensor(self, name: str, shape: Sequence[int], dtype: str = "float32", *, quant=None,
               shape_signature: Sequence[int] | None = None, variable: bool = False, buffer: int = 0) -> int:
        if dtype not in _DTYPE_CODES:
            raise ValueError(f"unknown tensor dtype {dtype!r}; known: {', '.join(sorted(_DTYPE_CODES))}")
        sig = tuple(int(d) for d in shape_signature) if shape_signature is not None else None
        self.tensors.append(_Tensor(name, tuple(int(d) for d in shape), dtype, buffer, _quant(quant), sig, variable))
        return len(self.tensors) - 1

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32", **kw) -> int:
        t = self.tensor(name, shape, dtype, **kw)
        self.inputs.append(t)
        return t

    def output(self, *tensors: int) -> None:
        self.outputs.extend(tensors)

    def const(self, name: str, data, dtype: str | None = None, *, shape: Sequence[int] | None = None,
              quant=None, tail: bool = False) -> int:
        """A constant from a numpy array, or from raw bytes (then give dtype and shape; the bytes are not checked).

        `tail` keeps the data after the flatbuffer, as converters do for models beyond 2 GB."""
        if isinstance(data, (bytes, bytearray, memoryview)):
            if dtype is None or shape is None:
                raise ValueError("a constant from raw bytes needs dtype and shape")
            raw = bytes(data)
        else:
            arr = np.asarray(data, dtype=dtype)
            dtype, shape = dtype or arr.dtype.name, arr.shape if shape is None else shape
            raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        return self.tensor(name, shape, dtype, quant=quant, buffer=self.model.buffer(raw, tail))

    def op(self, opcode: str, inputs: Sequence[int | None], outputs: Sequence[int], options: dict | None = None, *,
           version: int = 1, intermediates: Sequence[int] = ()) -> int:
        """A builtin operator by its schema name ("CONV_2D"); returns its index in this subgraph."""
        if opcode not in _BUILTIN or opcode == "CUSTOM":
            raise ValueError(f"unknown builtin operator {opcode!r} (use custom_op for custom operators)")
        cls = options_class(opcode)
        options = dict(options or {})
        if options and cls is None:
            raise ValueError(f"{opcode} takes no options, got {sorted(options)}")
        if cls:
            fields = _option_fields(cls)
            unknown = sorted(set(options) - set(fields))
            if unknown:
                raise ValueError(f"{opcode} ({cls}) has no option {unknown}; fields: {', '.join(sorted(fields))}")
            for key in fields:
                if _ONE_BY_DEFAULT.match(key):
                    options.setdefault(key, 1)
            options = {k: _scalar(k, v) if fields[k][1] == "scalar" else v for k, v in options.items()}
        code = self.model.opcode(_BUILTIN[opcode], "", version)
        return self._add(_Op(code, _ins(inputs), list(outputs), cls, options, None, list(intermediates)))

    def custom_op(self, code: str, inputs: Sequence[int | None], outputs: Sequence[int],
                  options: bytes = b"", *, version: int = 1) -> int:
        """A custom operator: custom_code plus opaque custom_options bytes (flexbuffers by convention)."""
        idx = self.model.opcode(_BUILTIN["CUSTOM"], code, version)
        return self._add(_Op(idx, _ins(inputs), list(outputs), custom_options=bytes(options)))

    def _add(self, op: _Op) -> int:
        self.ops.append(op)
        return len(self.ops) - 1


def _ins(inputs) -> list[int]:
    return [-1 if t is None else int(t) for t in inputs]


class ModelBuilder(SubgraphBuilder):
    """A whole model; its own tensor/op methods fill subgraph 0 (the main one)."""

    def __init__(self, description: str = "layout-inspector tflite_builder", version: int = 3):
        super().__init__(self, "main", 0)
        self.description, self.version = description, version
        self.subgraphs: list[SubgraphBuilder] = [self]
        self.buffers: list[bytes] = [b""]          # buffer 0: the empty sentinel every tensor without data uses
        self.tail: list[int] = []                  # buffers written after the flatbuffer
        self.opcodes: list[tuple[int, str, int]] = []
        self.metadata: list[tuple[str, int]] = []
        self.signatures: list[tuple[str, int, dict[str, int], dict[str, int]]] = []

    def subgraph(self, name: str) -> SubgraphBuilder:
        sg = SubgraphBuilder(self, name, len(self.subgraphs))
        self.subgraphs.append(sg)
        return sg

    def buffer(self, data: bytes, tail: bool = False) -> int:
        """A data buffer; `tail` stores it after the flatbuffer, addressed by offset and size (the >2 GB layout)."""
        self.buffers.append(bytes(data))
        if tail:
            self.tail.append(len(self.buffers) - 1)
        return len(self.buffers) - 1

    def opcode(self, builtin: int, custom_code: str, version: int) -> int:
        key = (builtin, custom_code, version)
        if key not in self.opcodes:
            self.opcodes.append(key)
        return self.opcodes.index(key)

    def add_metadata(self, name: str, data: bytes | str) -> None:
        self.metadata.append((name, self.buffer(data.encode() if isinstance(data, str) else data)))

    def signature(self, key: str, inputs: dict[str, int], outputs: dict[str, int], subgraph: int = 0) -> None:
        self.signatures.append((key, subgraph, dict(inputs), dict(outputs)))

    def build(self) -> bytes:
        if not self.tail:
            return _Writer(self, {}).write()
        # Placeholder offsets give the same layout and length as the real ones, which start past the flatbuffer.
        size = len(_Writer(self, dict.fromkeys(self.tail, 1 << 40)).write())
        offsets, pos = {}, size
        for i in self.tail:
            offsets[i] = pos = -(-pos // 16) * 16
            pos += len(self.buffers[i])
        out = bytearray(_Writer(self, offsets).write())
        for i in self.tail:
            out += bytes(offsets[i] - len(out)) + self.buffers[i]
        return bytes(out)

    def save(self, path: str | Path) -> Path:
        Path(path).write_bytes(self.build())
        return Path(path)


class _Writer:
    """Serialises a ModelBuilder bottom-up, as flatbuffers requires (children before parents)."""

    def __init__(self, m: ModelBuilder, tail_offsets: dict[int, int]):
        self.m, self.tail_offsets = m, tail_offsets
        # Tail buffers are appended after the flatbuffer, so they must not size it (nor exceed its 2 GB limit).
        self.b = flatbuffers.Builder(1024 + sum(len(x) for i, x in enumerate(m.buffers) if i not in m.tail))

    def vec(self, values, dtype) -> int:
        return self.b.CreateNumpyVector(np.asarray(values, dtype=dtype))

    def offsets(self, offs: list[int]) -> int:
        self.b.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            self.b.PrependUOffsetTRelative(o)
        return self.b.EndVector()

    def data(self, raw: bytes) -> int:
        # 16-byte aligned so interpreters may map constants in place.
        b = self.b
        b.StartVector(1, len(raw), 16)
        b.head = b.Head() - len(raw)
        b.Bytes[b.Head():b.Head() + len(raw)] = raw
        return b.EndVector()

    def table(self, cls: str, fields: Mapping[str, object], module: str | None = None) -> int:
        """Start/Add*/End of a generated table; values are already offsets or scalars."""
        mod = importlib.import_module(f"tflite.{module or cls}")
        getattr(mod, f"{cls}Start")(self.b)
        for camel, value in fields.items():
            if value is not None:
                getattr(mod, f"{cls}Add{camel}")(self.b, value)
        return getattr(mod, f"{cls}End")(self.b)

    def options(self, cls: str, options: dict) -> int:
        spec = _option_fields(cls)
        vals = {}
        for key, value in options.items():      # vectors and strings first: no nesting inside a table
            acc, kind, dtype = spec[key]
            if kind == "vector":
                vals[acc] = self.vec(value, dtype)
            elif kind == "string":
                vals[acc] = self.b.CreateString(value)
            else:
                vals[acc] = value
        return self.table(cls, vals)

    def quant(self, q: Quantization) -> int:
        f = {"Scale": self.vec(q.scales, np.float32), "ZeroPoint": self.vec(q.zero_points, np.int64),
             "Min": self.vec(q.min, np.float32) if q.min is not None else None,
             "Max": self.vec(q.max, np.float32) if q.max is not None else None}
        return self.table("QuantizationParameters", {**f, "QuantizedDimension": q.axis})

    def tensor(self, t: _Tensor) -> int:
        f = {"Name": self.b.CreateString(t.name), "Shape": self.vec(t.shape, np.int32),
             "ShapeSignature": self.vec(t.shape_signature, np.int32) if t.shape_signature is not None else None,
             "Quantization": self.quant(t.quant) if t.quant is not None else None}
        return self.table("Tensor", {**f, "Type": _DTYPE_CODES[t.dtype], "Buffer": t.buffer,
                                     "IsVariable": t.variable or None})

    def op(self, op: _Op) -> int:
        f = {"Inputs": self.vec(op.inputs, np.int32), "Outputs": self.vec(op.outputs, np.int32),
             "Intermediates": self.vec(op.intermediates, np.int32) if op.intermediates else None,
             "CustomOptions": self.vec(np.frombuffer(op.custom_options, np.uint8), np.uint8)
             if op.custom_options else None}
        if op.options_class:
            opts = self.options(op.options_class, op.options)
            if op.options_class in _UNION1:
                f.update(BuiltinOptionsType=_UNION1[op.options_class], BuiltinOptions=opts)
            else:
                f.update(BuiltinOptions2Type=_UNION2[op.options_class], BuiltinOptions2=opts)
        return self.table("Operator", {**f, "OpcodeIndex": op.code})

    def subgraph(self, sg: SubgraphBuilder) -> int:
        tensors = self.offsets([self.tensor(t) for t in sg.tensors])
        ops = self.offsets([self.op(o) for o in sg.ops])
        return self.table("SubGraph", {"Tensors": tensors, "Operators": ops, "Name": self.b.CreateString(sg.name),
                                       "Inputs": self.vec(sg.inputs, np.int32),
                                       "Outputs": self.vec(sg.outputs, np.int32)})

    def opcode(self, builtin: int, custom: str, version: int) -> int:
        name = self.b.CreateString(custom) if custom else None
        return self.table("OperatorCode", {"CustomCode": name, "DeprecatedBuiltinCode": min(builtin, 127),
                                           "BuiltinCode": builtin, "Version": version})

    def signature(self, key: str, sg: int, ins: dict, outs: dict) -> int:
        maps = [self.offsets([self.table("TensorMap", {"Name": self.b.CreateString(n), "TensorIndex": i})
                              for n, i in d.items()]) for d in (ins, outs)]
        return self.table("SignatureDef", {"Inputs": maps[0], "Outputs": maps[1],
                                           "SignatureKey": self.b.CreateString(key), "SubgraphIndex": sg})

    def write(self) -> bytes:
        m, b = self.m, self.b
        subgraphs = self.offsets([self.subgraph(sg) for sg in m.subgraphs])
        codes = self.offsets([self.opcode(*c) for c in m.opcodes])
        metadata = self.offsets([self.table("Metadata", {"Name": b.CreateString(n), "Buffer": i})
                                 for n, i in m.metadata])
        sigs = self.offsets([self.signature(*s) for s in m.signatures])
        datas = [self.data(raw) if raw and i not in self.tail_offsets else None for i, raw in enumerate(m.buffers)]
        buffers = self.offsets([self.table("Buffer", {"Data": d} if i not in self.tail_offsets else
                                           {"Offset": self.tail_offsets[i], "Size": len(m.buffers[i])})
                                for i, d in enumerate(datas)])
        desc = b.CreateString(m.description)
        model = self.table("Model", {"Version": m.version, "OperatorCodes": codes, "Subgraphs": subgraphs,
                                     "Description": desc, "Buffers": buffers, "Metadata": metadata,
                                     "SignatureDefs": sigs})
        b.Finish(model, file_identifier=b"TFL3")
        return bytes(b.Output())
