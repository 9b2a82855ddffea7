"""The layout category an ONNX op type implies, for a model that was not converted here (no trace to say which
TFLite op a node came from): its denotation rule tells how it treats its input's axes."""
from __future__ import annotations

from .denotation_rules import CONCAT, ELEMENTWISE, FORMAT_OPS, KEEP, REDUCE, RESIZE

# Ops that read an axis, permutation or slice attribute: they carry a layout but must be told where its axes are.
AXIS_OPS = KEEP | CONCAT | REDUCE | {"Transpose", "Gather", "Softmax", "LogSoftmax", "Hardmax", "CumSum", "Shape",
                                    "DepthToSpace", "SpaceToDepth"}
IMPLICIT = (FORMAT_OPS | RESIZE) - {"DepthToSpace", "SpaceToDepth"}
# Ops whose result depends on memory order or that end the axes' meaning.
TERMINATE = {"Reshape", "Flatten", "MatMul", "Gemm", "Squeeze", "Unsqueeze", "Einsum", "MatMulInteger",
             "QLinearMatMul"}


def category_of(op_type: str) -> str | None:
    """"Implicit", "Transparent", "Attribute", "Terminate", or None when the op type implies none."""
    if op_type in IMPLICIT:
        return "Implicit"
    if op_type in AXIS_OPS:
        return "Attribute"
    if op_type in ELEMENTWISE:
        return "Transparent"
    if op_type in TERMINATE:
        return "Terminate"
    return None


def onnx_categories(model) -> dict[int, str]:
    """Node index -> category, for the nodes whose op type implies one."""
    return {i: c for i, n in enumerate(model.graph.node) if (c := category_of(n.op_type)) is not None}
