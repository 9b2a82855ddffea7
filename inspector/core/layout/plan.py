"""What a conversion produces, part one: the layout plan (Categories, layouts, Conflicts); the rest is in
emit/result.py (the ONNX model and the trace that links both graphs)."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Mapping, Protocol

from .layout import Perm


class Category(str, Enum):
    """How an operator treats layout (see docs/layouts.md)."""
    IMPLICIT = "Implicit"          # its tensors carry NHWC meaning (Conv, pools, resize)
    TRANSPARENT = "Transparent"    # layout-insensitive; the layout flows through (Abs, Add, Relu)
    ATTRIBUTE = "Attribute"        # flows through, axis-like attributes remapped (Concat, Pad, Mean, Softmax)
    TERMINATE = "Terminate"        # stops the layout (Reshape, FullyConnected)


class OpLayout(Protocol):
    """What the planner reads of an op's spec (emit/ops/registry.OpSpec, which this layer cannot import)."""
    @property
    def category(self) -> Category: ...
    @property
    def layout_inputs(self) -> tuple[int, ...]: ...
    @property
    def rule(self) -> Callable[..., Any] | None: ...
    @property
    def reframes(self) -> bool: ...


OpTable = Mapping[str, OpLayout]          # TFLite op name -> its spec


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
    io_rules: dict[int, str] = field(default_factory=dict)        # graph input/output -> rule that decided its layout
    optimality: Any = None                                        # assign.Optimality: Transposes, bound, method

    def perm(self, tensor: int, rank: int) -> Perm:
        return self.perms.get(tensor, tuple(range(rank)))
