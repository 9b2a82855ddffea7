"""What a conversion produces: the plan, the ONNX model, and the trace that links both graphs."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .layout import Perm


class Category(str, Enum):
    """How an operator treats layout (see README: Layout categories)."""
    IMPLICIT = "Implicit"          # its tensors carry NHWC meaning (Conv, pools, resize)
    TRANSPARENT = "Transparent"    # layout-insensitive; the layout flows through (Abs, Add, Relu)
    ATTRIBUTE = "Attribute"        # flows through, axis-like attributes remapped (Concat, Pad, Mean, Softmax)
    TERMINATE = "Terminate"        # stops the layout (Reshape, FullyConnected)


@dataclass
class Conflict:
    """A place where a Transpose had to be inserted, and why."""
    tensor: int                    # TFLite tensor index (in its subgraph)
    op: int | None                 # consuming TFLite op index, None for a graph output
    kind: str                      # "meet" | "rank" | "terminate" | "no-rule" | "io" | "pin"
    reason: str                    # one human sentence
    from_perm: Perm = ()
    to_perm: Perm = ()
    subgraph: int = 0
    node: str = ""                 # name of the ONNX Transpose node inserted for it


@dataclass
class LayoutPlan:
    """Each tensor's layout in the converted model, and each op's accepted input layouts."""
    perms: dict[int, Perm] = field(default_factory=dict)          # tensor -> perm (absent = as TFLite)
    why: dict[int, str] = field(default_factory=dict)             # tensor -> why it has that layout
    inputs: dict[tuple[int, int], Perm] = field(default_factory=dict)   # (op, input slot) -> perm it is read in
    produced: dict[tuple[int, int], Perm] = field(default_factory=dict)  # (op, output slot) -> perm the op emits
    outputs: dict[int, Perm] = field(default_factory=dict)         # graph output tensor -> perm it is presented in
    conflicts: list[Conflict] = field(default_factory=list)
    pins: dict[int, Perm] = field(default_factory=dict)           # tensor -> pinned perm

    def perm(self, tensor: int, rank: int) -> Perm:
        return self.perms.get(tensor, tuple(range(rank)))


@dataclass
class ConversionTrace:
    """TFLite op/tensor <-> ONNX nodes/values (one-to-many), for syncing selection and mapping errors."""
    op_nodes: dict[int, list[str]] = field(default_factory=dict)       # tflite op -> onnx node names
    tensor_values: dict[int, list[str]] = field(default_factory=dict)  # tflite tensor -> onnx value names (first = its image)
    node_op: dict[str, int] = field(default_factory=dict)              # onnx node name -> tflite op
    value_tensor: dict[str, int] = field(default_factory=dict)         # onnx value name -> tflite tensor
    inserted: dict[str, Conflict] = field(default_factory=dict)        # onnx node inserted for a conflict -> conflict


@dataclass
class ConversionResult:
    graph: Any                      # the source inspector.core.graph.Graph
    plan: LayoutPlan                # of the main subgraph
    model: Any                      # onnx.ModelProto
    trace: ConversionTrace
    categories: dict[int, Category]  # tflite op index (main subgraph) -> category
    options: dict[str, Any] = field(default_factory=dict)   # keep_io_layout, opset, pins as given
    warnings: list[str] = field(default_factory=list)
    # Other TFLite subgraphs emitted (WHILE cond/body, IF branches, CALL_ONCE init): index -> (plan, trace).
    subgraphs: dict[int, tuple[LayoutPlan, ConversionTrace]] = field(default_factory=dict)
    # Resource variables exposed as state inputs/outputs: one dict per variable (name, input, output, shape,
    # dtype, initial value source); see ops/variables.py.
    state: list[dict[str, Any]] = field(default_factory=list)
    # Each quantized tensor of the main subgraph: scale/zero_point lists, TFLite axis, axis in the ONNX layout.
    quantization: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def transposes(self) -> int:
        return sum(1 for n in self.model.graph.node if n.op_type == "Transpose")
