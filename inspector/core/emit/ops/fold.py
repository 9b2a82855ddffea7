"""Ops evaluated once at conversion time: their outputs become initializers (float16 weights, sparse weights)."""
from __future__ import annotations

import numpy as np

from inspector.core.ir.graph import Op, Subgraph


def _dequantize(op: Op, sg: Subgraph, constants) -> np.ndarray | None:
    src = op.inputs[0]
    if src not in constants or sg.tensors[src].dtype != "float16":
        return None                        # int8 DEQUANTIZE is the quantization pass's business
    return constants[src].astype(np.float32)


def _densify(op: Op, sg: Subgraph, constants) -> np.ndarray | None:
    t = sg.tensors[op.inputs[0]]
    if t.sparsity is None or t.data is None:
        return None
    from .sparse import densify
    return densify(t)


FOLDERS = {"DEQUANTIZE": _dequantize, "DENSIFY": _densify}
