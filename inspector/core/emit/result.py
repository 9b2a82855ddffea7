"""What a conversion produces: the ONNX model, its LayoutPlan, and the trace that links both graphs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inspector.core.layout.plan import Category, Conflict, LayoutPlan


@dataclass
class ConversionTrace:
    """TFLite op/tensor <-> ONNX nodes/values (one-to-many), for syncing selection and mapping errors."""
    op_nodes: dict[int, list[str]] = field(default_factory=dict)       # tflite op -> onnx node names
    tensor_values: dict[int, list[str]] = field(default_factory=dict)  # tflite tensor -> onnx value names (first = its image)
    node_op: dict[str, int] = field(default_factory=dict)              # onnx node name -> tflite op
    value_tensor: dict[str, int] = field(default_factory=dict)         # onnx value name -> tflite tensor
    inserted: dict[str, Conflict] = field(default_factory=dict)        # onnx node inserted for a conflict -> conflict


@dataclass(frozen=True)
class ConversionResult:
    """One conversion, never changed once made: a later stage (the metadata pass, the checker, the window) derives
    a new one with dataclasses.replace. (Its model's protobuf is shared, not copied: the metadata pass annotates
    it in place, changing no node, value name or shape.)"""
    graph: Any                      # the source inspector.core.ir.graph.Graph (None while sent from the child)
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
    pair: Any = None                # pairing.pair.Pair when this shows an ONNX model made elsewhere (as_result)
    # What each TFLite metadata field became in the ONNX model (metadata.tflite.field_mapping), by the metadata pass.
    metadata_mapping: list[dict[str, Any]] = field(default_factory=list)
    # Initializers over a size were written without their data (convert's weights_over, the window's child
    # process): export and validation convert again.
    weights_left_out: bool = False
    # The metadata checker's findings on `model` (metadata.lint), once the window has them; None: not yet.
    findings: list[Any] | None = None
    checking: bool = False          # the window's re-run: the metadata pass and its findings follow
    # (the model counted, its Transposes): a count walks every node, which the window's worker
    # or child does before the GUI thread asks; kept by dataclasses.replace while the model stays the same.
    counted: tuple | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.counted is not None and self.counted[0] is not self.model:
            object.__setattr__(self, "counted", None)     # another model: counted again (the old one not kept)

    @property
    def transposes(self) -> int:
        """Transpose nodes in the model, its If and Loop bodies included."""
        if self.counted is not None:
            return self.counted[1]
        count, graphs = 0, [self.model.graph]
        while graphs:
            for n in graphs.pop().node:
                if n.op_type == "Transpose":
                    count += 1
                elif n.op_type in ("If", "Loop", "Scan"):
                    graphs.extend(a.g for a in n.attribute if a.HasField("g"))
        object.__setattr__(self, "counted", (self.model, count))     # (frozen: a cache, not a field's change)
        return count
