"""Tensor shapes as LiteRT computes them, not as the file declares them.

LiteRT resizes every op's outputs in Prepare from its inputs, so the static shapes a converter writes for
intermediate and output tensors are never used; some converters write stale ones (an RFFT2D output declared 2048
wide where LiteRT computes 1025). `correct(graph)` walks each subgraph in op order and, where an op's rule
(shape_rules.RULES) computes another shape than the file's, uses the computed one and says so in a note (none where
only a dynamic dim differs: the file holds a placeholder there, not a stale size). Small integer values known at
conversion time (constants, SHAPE of a static tensor and arithmetic on it) are carried along, so a RESHAPE to a
computed shape is known too. A dynamic dimension (-1 in the shape signature) stays dynamic.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .graph import Graph, Op, Subgraph
from .shape_rules import RULES, Array, Ins, Operand, Outs, Shape, in_shape

VALUE_LIMIT = 64                 # elements: shape arithmetic, not data


def correct(graph: Graph) -> list[str]:
    """Correct `graph`'s shapes in place; one note per tensor changed."""
    notes: list[str] = []
    for k, sg in enumerate(graph.subgraphs):
        notes += _subgraph(sg, f" in subgraph {k} ({sg.name})" if k else "")
    return notes


def _subgraph(sg: Subgraph, where: str) -> list[str]:
    tensors, notes = sg.tensors, []
    values: dict[int, np.ndarray] = {}
    # Tensors whose declared dims may be placeholders: dynamic ones (-1 in the signature) no rule computed, except
    # the main graph's inputs, whose stored dims are what LiteRT allocates by default.
    unsure: set[int] = set()
    for tensor in tensors:                           # (one pass: this runs on every model read)
        data = tensor.data
        if data is None:
            if tensor.shape_signature is not None and min(tensor.shape_signature, default=0) < 0:
                unsure.add(tensor.index)
        elif data.dtype.kind in "iu" and data.size <= VALUE_LIMIT and tensor.sparsity is None:
            values[tensor.index] = data
    n = len(tensors)
    if not where:
        unsure.difference_update(sg.inputs)
    for op in sg.ops:
        rule = RULES.get(op.opcode)
        if rule is None or op.custom or not unsure.isdisjoint(op.inputs):
            continue
        try:
            ins = [Operand(tensors[i].shape, values.get(i)) if 0 <= i < n else None for i in op.inputs]
            outs = rule(op, ins)
            value = _value(op, ins, outs)
        except (ValueError, KeyError, IndexError, TypeError, ArithmeticError, AttributeError, MemoryError):
            continue                                 # inconsistent operands: the file's shapes stand
        for t, shape in zip(op.outputs, outs):
            if not 0 <= t < n or shape is None:
                continue
            unsure.discard(t)
            ten = tensors[t]
            if ten.data is None and tuple(ten.shape) != shape and all(d >= 0 for d in shape):
                sig = ten.shape_signature
                if not _placeholders(ten.shape, sig, shape):
                    notes.append(f"tensor '{ten.name}'{where}: the file declares shape {list(ten.shape)}, LiteRT "
                                 f"computes {list(shape)} from {op.label}'s inputs; the computed shape is used")
                ten.shape = shape
                if sig is not None:
                    ten.shape_signature = tuple(-1 if g < 0 else d for g, d in zip(sig, shape)) \
                        if len(sig) == len(shape) else None
        if value is not None and op.outputs and 0 <= op.outputs[0] < n and value.size <= VALUE_LIMIT:
            values[op.outputs[0]] = value
    return notes


def _placeholders(declared: Shape, sig: Shape | None, shape: Shape) -> bool:
    """Whether the declared shape differs from the computed one only in dynamic dims (-1 in the signature): those
    hold a placeholder (the converter writes 1), not a stale size, so the file is not wrong there."""
    return sig is not None and len(sig) == len(shape) == len(declared) and \
        all(d == c or g < 0 for d, g, c in zip(declared, sig, shape))


def _value(op: Op, ins: Ins, outs: Outs) -> Array | None:
    """The output's value when it is integer arithmetic on known values (None otherwise)."""
    if op.opcode == "SHAPE":
        return np.array(in_shape(ins, 0), np.int64 if op.options.get("out_type") == 4 else np.int32)
    fn = VALUES.get(op.opcode)
    if fn is None:
        return None
    if outs and outs[0] is not None and math.prod(outs[0]) > VALUE_LIMIT:
        return None                                  # (FILL of a large shape: data, not shape arithmetic)
    vals = [i.value if i is not None else None for i in ins]
    if any(v is None for v in vals[:ARITY.get(op.opcode, len(vals))]):
        return None
    out = np.asarray(fn(op, vals, outs))
    return out if out.dtype.kind in "iu" else None


def _strided(op: Op, v: list[Any]) -> Any:
    x, begin, end, strides = v
    o, idx = op.options, []
    if o.get("ellipsis_mask") or o.get("new_axis_mask"):
        raise ValueError("not a plain strided slice")
    for i, (b, e, s) in enumerate(zip(begin.tolist(), end.tolist(), strides.tolist())):
        if o.get("offset"):
            e = b + e
        if o.get("shrink_axis_mask", 0) >> i & 1:
            idx.append(b)
            continue
        idx.append(slice(None if o.get("begin_mask", 0) >> i & 1 else b,
                         None if o.get("end_mask", 0) >> i & 1 else e, s))
    return x[tuple(idx)]


def _binary(fn: Callable[[Any, Any], Any]) -> ValueRule:
    return lambda op, v, outs: fn(v[0], v[1]).astype(np.result_type(v[0], v[1]))


# The value of an op's output from its inputs' values (arrays for the first ARITY[op] inputs, else maybe None).
ValueRule = Callable[[Op, list[Any], Outs], Any]
VALUES: dict[str, ValueRule] = {
    "CAST": lambda op, v, outs: v[0],
    "STRIDED_SLICE": lambda op, v, outs: _strided(op, v),
    "SLICE": lambda op, v, outs: v[0][tuple(slice(b, None if s == -1 else b + s)
                                            for b, s in zip(v[1].tolist(), v[2].tolist()))],
    "GATHER": lambda op, v, outs: np.take(v[0], v[1], axis=op.options.get("axis", 0)),
    "PACK": lambda op, v, outs: np.stack(v, axis=op.options.get("axis", 0)),
    "RANGE": lambda op, v, outs: np.arange(v[0].item(), v[1].item(), v[2].item(),
                                           np.result_type(*v[:3])),     # type: ignore[call-overload]
    "CONCATENATION": lambda op, v, outs: np.concatenate(v, axis=op.options.get("axis", 0)),
    "RESHAPE": lambda op, v, outs: v[0].reshape(outs[0]),
    "SQUEEZE": lambda op, v, outs: v[0].reshape(outs[0]),
    "EXPAND_DIMS": lambda op, v, outs: v[0].reshape(outs[0]),
    "FILL": lambda op, v, outs: np.full(outs[0], v[1]),
    "REDUCE_PROD": lambda op, v, outs: np.prod(v[0], axis=tuple(v[1].reshape(-1).tolist()), dtype=v[0].dtype
                                               ).reshape(outs[0]),
    "ADD": _binary(np.add), "SUB": _binary(np.subtract), "MUL": _binary(np.multiply),
    "FLOOR_DIV": _binary(np.floor_divide), "MAXIMUM": _binary(np.maximum), "MINIMUM": _binary(np.minimum),
}
# How many leading inputs the value needs (the rest are ignored; CAST, RESHAPE and SQUEEZE need only the first).
ARITY: dict[str, int] = {"CAST": 1, "RESHAPE": 1, "SQUEEZE": 1, "EXPAND_DIMS": 1}
for _op in ("ADD", "SUB", "MUL", "FLOOR_DIV", "MAXIMUM", "MINIMUM"):
    ARITY[_op] = 2
