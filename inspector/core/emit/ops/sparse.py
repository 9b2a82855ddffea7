"""Expand a TFLite sparse tensor (TACO format: traversal order, block map, dense/CSR dims) to a dense array."""
from __future__ import annotations

import numpy as np

from inspector.core.ir.errors import ConversionError
from inspector.core.ir.graph import Tensor


def densify(t: Tensor) -> np.ndarray:
    sp, data = t.sparsity, t.data
    if sp is None or data is None:
        raise ConversionError(f"tensor {t.name} is not a sparse constant")
    order = sp["traversal_order"]
    block_map = sp["block_map"]
    dims = sp["dim_metadata"]
    values = data.reshape(-1)
    rank = len(t.shape)
    if len(order) != len(dims):
        raise ConversionError(f"sparse tensor {t.name}: traversal order and dim metadata disagree")
    # Size of each traversed dimension: dense dims say it; sparse ones get it from their segments.
    sizes = []
    for d in dims:
        sizes.append(d["dense_size"])
    out = np.zeros(t.shape, dtype=values.dtype)
    pos = [0]

    def walk(level: int, prev: int, coord: list[int]):
        d = dims[level]
        if d["format"] == 0:                       # dense
            n = d["dense_size"]
            idxs = [(prev * n + i, i) for i in range(n)]
        else:                                      # CSR: segments of the previous index, then indices
            seg, ind = d["array_segments"], d["array_indices"]
            idxs = [(k, int(ind[k])) for k in range(int(seg[prev]), int(seg[prev + 1]))]
        for flat, i in idxs:
            coord.append(i)
            if level + 1 == len(dims):
                dense = [0] * rank
                for lvl, c in enumerate(coord):
                    axis = order[lvl]
                    if axis < rank:
                        dense[axis] += c * (_block_size(axis, block_map, dims, rank) if lvl < rank else 1)
                    else:                          # a block dimension: offset inside its block
                        dense[block_map[axis - rank]] += c
                out[tuple(dense)] = values[pos[0]]
                pos[0] += 1
            else:
                walk(level + 1, flat, coord)
            coord.pop()

    walk(0, 0, [])
    if pos[0] != values.size:
        raise ConversionError(f"sparse tensor {t.name}: {values.size} values but {pos[0]} positions")
    return out


def _block_size(axis: int, block_map, dims, rank) -> int:
    """Dense size of the block that splits `axis` (1 when the axis is not blocked)."""
    for k, b in enumerate(block_map):
        if b == axis:
            return dims[rank + k]["dense_size"]
    return 1
