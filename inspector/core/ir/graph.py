"""The neutral graph model both readers produce and every later stage reads.

Tensors are referred to by their index in `Subgraph.tensors`; an op input of -1 is an absent optional input.
Constant data is a read-only numpy view over the model file's bytes (no copy).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Quantization:
    """A tensor's affine quantization: real = scale * (q - zero_point), per tensor or per channel along `axis`."""
    scales: np.ndarray                      # float32, one per channel (or one)
    zero_points: np.ndarray                 # int64, same length as scales
    axis: int = 0                           # quantized dimension when per-channel
    min: np.ndarray | None = None
    max: np.ndarray | None = None

    @property
    def per_channel(self) -> bool:
        return self.scales.size > 1


@dataclass
class Tensor:
    """One tensor of a subgraph: its shape, type, quantization and, for a constant, its data."""
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str                              # numpy dtype name ("float32", "int8", ...) or "string"/"resource"/"variant"
    shape_signature: tuple[int, ...] | None = None   # -1 where a dim is dynamic
    data: np.ndarray | None = None          # constant contents, shaped; None for activations
    quantization: Quantization | None = None
    sparsity: dict[str, Any] | None = None  # traversal_order, block_map, dim_metadata (see TFLite schema)
    is_variable: bool = False
    buffer: int = 0                         # TFLite buffer index (0 = none); lets emitters spot shared constants
    denotation: str = ""                    # ONNX type denotation (IMAGE, TENSOR, ...) when read from ONNX
    dim_denotations: tuple[str, ...] = ()   # ONNX dimension denotations, "" where absent
    dim_params: tuple[str, ...] = ()        # ONNX symbolic dim names, "" where the dim is static

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def dims(self) -> tuple[int, ...]:
        """The shape with -1 where the dimension is dynamic."""
        sig = self.shape_signature
        if sig is None or len(sig) != len(self.shape):
            return self.shape
        return tuple(-1 if s < 0 else d for s, d in zip(sig, self.shape))

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def dynamic(self) -> bool:
        return self.shape_signature is not None and any(d < 0 for d in self.shape_signature)


@dataclass
class Op:
    """One operator: its opcode, the tensors it reads and writes (by index), its options."""
    index: int
    opcode: str                             # builtin name ("CONV_2D"), custom code, or ONNX op_type
    inputs: list[int]
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)   # decoded builtin options / ONNX attributes, snake_case
    custom: bool = False
    version: int = 1
    custom_options: bytes | None = None
    intermediates: list[int] = field(default_factory=list)
    domain: str = ""                        # ONNX node domain
    name: str = ""                          # ONNX node name (TFLite ops have none)

    @property
    def label(self) -> str:
        return self.name or f"{self.opcode}#{self.index}"


@dataclass
class Subgraph:
    """A graph of tensors and ops: the main one, or the body of an IF or WHILE."""
    name: str
    tensors: list[Tensor]
    ops: list[Op]
    inputs: list[int]
    outputs: list[int]

    def producers(self) -> dict[int, int]:
        """tensor index -> index of the op that writes it."""
        return {t: op.index for op in self.ops for t in op.outputs if t >= 0}

    def consumers(self) -> dict[int, list[int]]:
        """tensor index -> indices of the ops that read it, in op order."""
        out: dict[int, list[int]] = {}
        for op in self.ops:
            for t in op.inputs:
                if t >= 0:
                    out.setdefault(t, []).append(op.index)
        return out

    def tensor_by_name(self, name: str) -> Tensor | None:
        for t in self.tensors:
            if t.name == name:
                return t
        return None


@dataclass
class SignatureDef:
    """A named entry point of a TFLite model: its subgraph and its inputs and outputs by signature name."""
    key: str
    subgraph: int
    inputs: dict[str, int]                  # signature name -> tensor index
    outputs: dict[str, int]


@dataclass
class Graph:
    """A model read from a TFLite or ONNX file: its subgraphs (the first is the main one) and its metadata."""
    format: str                             # "tflite" or "onnx"
    subgraphs: list[Subgraph]
    version: int = 0                        # TFLite schema version or ONNX IR version
    description: str = ""
    metadata: dict[str, bytes | str] = field(default_factory=dict)   # TFLite metadata buffers / ONNX metadata_props
    signature_defs: list[SignatureDef] = field(default_factory=list)
    path: str = ""
    producer: str = ""                      # ONNX producer_name (+ version)
    opsets: dict[str, int] = field(default_factory=dict)             # ONNX opset imports, domain -> version
    notes: list[str] = field(default_factory=list)   # what reading corrected (stale shapes: ir/shapes.py)

    @property
    def main(self) -> Subgraph:
        return self.subgraphs[0]

    def op_histogram(self) -> dict[str, int]:
        hist: dict[str, int] = {}
        for sg in self.subgraphs:
            for op in sg.ops:
                key = f"CUSTOM:{op.opcode}" if op.custom and self.format == "tflite" else op.opcode
                hist[key] = hist.get(key, 0) + 1
        return dict(sorted(hist.items()))
