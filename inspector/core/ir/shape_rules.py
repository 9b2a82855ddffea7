"""Each TFLite op's output shapes from its inputs' shapes and constant operands, as LiteRT's kernels compute them in
Prepare (TFLite layout; no layout decisions here). The table is data: opcode -> rule(op, ins) -> list of shapes
(one per output, None where the rule cannot tell), where `ins` holds per input slot its shape and its value (a
numpy array when known at conversion time: a constant, or integer arithmetic on SHAPE results; else None).

An op without a rule keeps the shapes its file declares.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

from .graph import Op

Shape = tuple[int, ...]
Array = npt.NDArray[Any]


class Operand:
    __slots__ = ("shape", "value")

    def __init__(self, shape: Shape, value: Array | None = None):
        self.shape, self.value = shape, value


Ins = Sequence["Operand | None"]        # per input slot; None: an absent optional input
Outs = list["Shape | None"]             # per output; None where the rule cannot tell
Rule = Callable[[Op, Ins], Outs]


def in_shape(ins: Ins, slot: int) -> Shape:
    """Input `slot`'s shape; an absent input is an inconsistent operand (the caller keeps the file's shapes)."""
    operand = ins[slot]
    if operand is None:
        raise ValueError(f"input {slot} is absent")
    return operand.shape


def in_value(ins: Ins, slot: int) -> Array | None:
    operand = ins[slot]
    if operand is None:
        raise ValueError(f"input {slot} is absent")
    return operand.value


def _ints(v: npt.ArrayLike) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)]


def broadcast(*shapes: Shape) -> Shape:
    return tuple(np.broadcast_shapes(*shapes))


def _axis(a: int, rank: int) -> int:
    if not -rank <= a < max(rank, 1):
        raise ValueError(f"axis {a} out of range for rank {rank}")
    return a % rank if rank else 0


def same(op: Op, ins: Ins) -> Outs:
    return [in_shape(ins, 0)]


def elementwise(op: Op, ins: Ins) -> Outs:
    return [broadcast(*(i.shape for i in ins if i is not None))]


def select(op: Op, ins: Ins) -> Outs:                # SELECT (v1): a rank-1 condition picks rows of x
    shapes = [in_shape(ins, k) for k in range(len(ins))]
    return [shapes[1] if len(shapes[0]) != len(shapes[1]) else broadcast(*shapes)]


def _window(size: int, k: int, stride: int, dilation: int, padding: str) -> int:
    if padding == "SAME":
        return -(-size // stride)
    n = size + stride - (k - 1) * dilation - 1       # LiteRT divides in C: towards zero, so a window wider than
    return n // stride if n >= 0 else -(-n // stride)    # size + stride - 1 gives 0 (an empty output), not -1


def conv2d(op: Op, ins: Ins) -> Outs:
    x, w = in_shape(ins, 0), in_shape(ins, 1)
    o = op.options
    h = _window(x[1], w[1], o.get("stride_h", 1), o.get("dilation_h_factor", 1), o.get("padding", "SAME"))
    wd = _window(x[2], w[2], o.get("stride_w", 1), o.get("dilation_w_factor", 1), o.get("padding", "SAME"))
    channels = w[3] if op.opcode == "DEPTHWISE_CONV_2D" else w[0]
    return [(x[0], h, wd, channels)]


def conv3d(op: Op, ins: Ins) -> Outs:
    x, w = in_shape(ins, 0), in_shape(ins, 1)
    o = op.options
    dims = [_window(x[1 + i], w[i], o.get(f"stride_{a}", 1), o.get(f"dilation_{a}_factor", 1),
                    o.get("padding", "SAME")) for i, a in enumerate("dhw")]
    return [(x[0], *dims, w[4])]


def pool(op: Op, ins: Ins) -> Outs:
    x, o = in_shape(ins, 0), op.options
    h = _window(x[1], o["filter_height"], o.get("stride_h", 1), 1, o.get("padding", "SAME"))
    wd = _window(x[2], o["filter_width"], o.get("stride_w", 1), 1, o.get("padding", "SAME"))
    return [(x[0], h, wd, x[3])]


def from_value(slot: int) -> Rule:
    """The output shape is the value of input `slot` (TRANSPOSE_CONV's output_shape, FILL's dims, ...)."""
    def rule(op: Op, ins: Ins) -> Outs:
        v = in_value(ins, slot)
        return [tuple(_ints(v)) if v is not None else None]
    return rule


def fully_connected(op: Op, ins: Ins) -> Outs:
    x, w = in_shape(ins, 0), in_shape(ins, 1)
    units = w[0]
    if op.options.get("keep_num_dims"):
        return [(*x[:-1], units)]
    n = math.prod(x) // w[1] if w[1] else 0
    return [(n, units)]


def batch_matmul(op: Op, ins: Ins) -> Outs:
    a, b = list(in_shape(ins, 0)), list(in_shape(ins, 1))
    if op.options.get("adj_x"):
        a[-2:] = a[-1], a[-2]
    if op.options.get("adj_y"):
        b[-2:] = b[-1], b[-2]
    if a[-1] != b[-2]:
        raise ValueError(f"BATCH_MATMUL: {a[-1]} != {b[-2]}")
    return [(*broadcast(tuple(a[:-2]), tuple(b[:-2])), a[-2], b[-1])]


def reshape(op: Op, ins: Ins) -> Outs:
    x = in_shape(ins, 0)
    operand = ins[1] if len(ins) > 1 else None
    v = operand.value if operand is not None else None
    if v is None:
        if operand is not None:
            return [None]                            # a shape known only at run time
        v = op.options.get("new_shape")
        if v is None:
            return [None]
    dims = _ints(v)                                  # (an empty shape operand: a scalar)
    total = math.prod(x)
    if dims.count(-1) == 1:
        known = math.prod(d for d in dims if d != -1)
        dims[dims.index(-1)] = total // known if known else 0
    if math.prod(dims) != total or any(d < 0 for d in dims):
        raise ValueError(f"RESHAPE of {x} to {dims}")
    return [tuple(dims)]


def squeeze(op: Op, ins: Ins) -> Outs:
    x = in_shape(ins, 0)
    axes = {_axis(a, len(x)) for a in op.options.get("squeeze_dims") or []}
    if not axes:
        axes = {i for i, d in enumerate(x) if d == 1}
    return [tuple(d for i, d in enumerate(x) if i not in axes)]


def expand_dims(op: Op, ins: Ins) -> Outs:
    x, v = in_shape(ins, 0), in_value(ins, 1)
    if v is None:
        return [None]
    a = _ints(v)[0]
    a = a + len(x) + 1 if a < 0 else a
    return [(*x[:a], 1, *x[a:])]


def transpose(op: Op, ins: Ins) -> Outs:
    x, v = in_shape(ins, 0), in_value(ins, 1)
    if v is None:
        return [None]
    perm = [_axis(p, len(x)) for p in _ints(v)]
    return [tuple(x[p] for p in perm)]


def concatenation(op: Op, ins: Ins) -> Outs:
    shapes = [in_shape(ins, k) for k in range(len(ins))]
    a = _axis(op.options.get("axis", 0), len(shapes[0]))
    out = list(shapes[0])
    if any(len(s) != len(out) or any(d != out[i] for i, d in enumerate(s) if i != a) for s in shapes):
        raise ValueError(f"CONCATENATION of {shapes}")
    out[a] = sum(s[a] for s in shapes)
    return [tuple(out)]


def pack(op: Op, ins: Ins) -> Outs:
    x = in_shape(ins, 0)
    a = op.options.get("axis", 0)
    a = a + len(x) + 1 if a < 0 else a
    return [(*x[:a], len(ins), *x[a:])]


def unpack(op: Op, ins: Ins) -> Outs:
    x = in_shape(ins, 0)
    a = _axis(op.options.get("axis", 0), len(x))
    return [x[:a] + x[a + 1:]] * len(op.outputs)


def split(op: Op, ins: Ins) -> Outs:
    v, x = in_value(ins, 0), in_shape(ins, 1)
    if v is None:
        return [None] * len(op.outputs)
    a = _axis(_ints(v)[0], len(x))
    n = len(op.outputs)
    if x[a] % n:
        raise ValueError(f"SPLIT of {x[a]} into {n}")
    part = list(x)
    part[a] = x[a] // n
    return [tuple(part)] * n


def split_v(op: Op, ins: Ins) -> Outs:
    x, given, axis = in_shape(ins, 0), in_value(ins, 1), in_value(ins, 2)
    if given is None or axis is None:
        return [None] * len(op.outputs)
    a, sizes = _axis(_ints(axis)[0], len(x)), _ints(given)
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = x[a] - sum(s for s in sizes if s != -1)
    return [x[:a] + (s,) + x[a + 1:] for s in sizes]


def pad(op: Op, ins: Ins) -> Outs:
    x, v = in_shape(ins, 0), in_value(ins, 1)
    if v is None:
        return [None]
    p = np.asarray(v).reshape(-1, 2)
    return [tuple(int(d + p[i, 0] + p[i, 1]) for i, d in enumerate(x))]


def reduce(op: Op, ins: Ins) -> Outs:
    x, v = in_shape(ins, 0), in_value(ins, 1)
    if v is None:
        return [None]
    axes = {_axis(a, len(x)) for a in _ints(v)}
    if op.options.get("keep_dims"):
        return [tuple(1 if i in axes else d for i, d in enumerate(x))]
    return [tuple(d for i, d in enumerate(x) if i not in axes)]


def arg_reduce(op: Op, ins: Ins) -> Outs:
    x, v = in_shape(ins, 0), in_value(ins, 1)
    if v is None:
        return [None]
    a = _axis(_ints(v)[0], len(x))
    return [x[:a] + x[a + 1:]]


def slice_(op: Op, ins: Ins) -> Outs:
    x, begin, size = in_shape(ins, 0), in_value(ins, 1), in_value(ins, 2)
    if begin is None or size is None:
        return [None]
    return [tuple(d - b if s == -1 else s for d, b, s in zip(x, _ints(begin), _ints(size)))]


def strided_slice(op: Op, ins: Ins) -> Outs:
    x = in_shape(ins, 0)
    vals = [in_value(ins, k) for k in range(1, 4)]
    o = op.options
    if any(v is None for v in vals) or o.get("ellipsis_mask") or o.get("new_axis_mask"):
        return [None]
    begin, end, strides = (_ints(v) for v in vals if v is not None)
    out = []
    for i, d in enumerate(x):
        if i >= len(begin):
            out.append(d)
            continue
        b, e, s = begin[i], end[i], strides[i]
        if o.get("offset"):
            e = b + e
        if o.get("shrink_axis_mask", 0) >> i & 1:
            continue
        lo = None if o.get("begin_mask", 0) >> i & 1 else b
        hi = None if o.get("end_mask", 0) >> i & 1 else e
        out.append(len(range(*slice(lo, hi, s).indices(d))))
    return [tuple(out)]


def gather(op: Op, ins: Ins) -> Outs:
    x, idx = in_shape(ins, 0), in_shape(ins, 1)
    a = _axis(op.options.get("axis", 0), len(x))
    bd = op.options.get("batch_dims", 0)
    bd = bd + len(idx) if bd < 0 else bd
    return [x[:a] + idx[bd:] + x[a + 1:]]


def gather_nd(op: Op, ins: Ins) -> Outs:
    x, idx = in_shape(ins, 0), in_shape(ins, 1)
    return [idx[:-1] + x[idx[-1]:]]


def resize(op: Op, ins: Ins) -> Outs:
    x, v = in_shape(ins, 0), in_value(ins, 1)
    if v is None:
        return [None]
    h, w = _ints(v)
    return [(x[0], h, w, x[3])]


def space_to_depth(op: Op, ins: Ins) -> Outs:
    n, h, w, c = in_shape(ins, 0)
    k = op.options["block_size"]
    return [(n, h // k, w // k, c * k * k)]


def depth_to_space(op: Op, ins: Ins) -> Outs:
    n, h, w, c = in_shape(ins, 0)
    k = op.options["block_size"]
    return [(n, h * k, w * k, c // (k * k))]


def tile(op: Op, ins: Ins) -> Outs:
    x, v = in_shape(ins, 0), in_value(ins, 1)
    return [None] if v is None else [tuple(d * m for d, m in zip(x, _ints(v)))]


def broadcast_to(op: Op, ins: Ins) -> Outs:
    v = in_value(ins, 1)
    return [None] if v is None else [broadcast(in_shape(ins, 0), tuple(_ints(v)))]


def shape_of(op: Op, ins: Ins) -> Outs:
    return [(len(in_shape(ins, 0)),)]


def rank(op: Op, ins: Ins) -> Outs:
    return [()]


def rfft2d(op: Op, ins: Ins) -> Outs:
    x, v = in_shape(ins, 0), in_value(ins, 1)
    if v is None:
        return [None]
    h, w = _ints(v)
    return [(*x[:-2], h, w // 2 + 1)]


def range_(op: Op, ins: Ins) -> Outs:
    vals = [in_value(ins, k) for k in range(3)]
    if any(v is None for v in vals):
        return [None]
    start, limit, delta = (np.asarray(v).reshape(-1)[0].item() for v in vals if v is not None)
    if delta == 0:
        raise ValueError("RANGE with a step of 0")
    # a step away from the limit gives no element (ONNX's Range and NumPy agree; LiteRT refuses such a run)
    return [(max(0, math.ceil((limit - start) / delta)),)]


def top_k(op: Op, ins: Ins) -> Outs:
    x, v = in_shape(ins, 0), in_value(ins, 1)
    if v is None:
        return [None, None]
    k = _ints(v)[0]
    return [(*x[:-1], k)] * 2


def one_hot(op: Op, ins: Ins) -> Outs:
    x, v = in_shape(ins, 0), in_value(ins, 1)
    if v is None:
        return [None]
    a = op.options.get("axis", -1)
    a = len(x) if a == -1 else a
    return [(*x[:a], _ints(v)[0], *x[a:])]


UNARY = ("ABS", "CEIL", "COS", "EXP", "FLOOR", "LOG", "LOGISTIC", "NEG", "RELU", "RELU6", "RELU_N1_TO_1",
         "RELU_0_TO_1", "ROUND", "RSQRT", "SIN", "SQRT", "SQUARE", "TANH", "ELU", "GELU", "HARD_SWISH", "LEAKY_RELU",
         "SIGN", "LOGICAL_NOT", "CAST", "QUANTIZE", "DEQUANTIZE", "ZEROS_LIKE", "L2_NORMALIZATION",
         "LOCAL_RESPONSE_NORMALIZATION", "SOFTMAX", "LOG_SOFTMAX", "CUMSUM", "REVERSE_V2", "REVERSE_SEQUENCE",
         "MATRIX_SET_DIAG", "COMPLEX_ABS", "REAL", "IMAG", "ADD_N")
BINARY = ("ADD", "SUB", "MUL", "DIV", "POW", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "FLOOR_DIV", "FLOOR_MOD",
          "EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", "LOGICAL_AND", "LOGICAL_OR",
          "ATAN2", "BITWISE_XOR", "RIGHT_SHIFT", "PRELU", "SELECT_V2")

RULES: dict[str, Rule] = {
    **dict.fromkeys(UNARY, same), **dict.fromkeys(BINARY, elementwise), "SELECT": select,
    "CONV_2D": conv2d, "DEPTHWISE_CONV_2D": conv2d, "CONV_3D": conv3d,
    "AVERAGE_POOL_2D": pool, "MAX_POOL_2D": pool, "L2_POOL_2D": pool,
    "TRANSPOSE_CONV": from_value(0), "FILL": from_value(0),
    "FULLY_CONNECTED": fully_connected, "BATCH_MATMUL": batch_matmul,
    "RESHAPE": reshape, "SQUEEZE": squeeze, "EXPAND_DIMS": expand_dims, "TRANSPOSE": transpose,
    "CONCATENATION": concatenation, "PACK": pack, "UNPACK": unpack, "SPLIT": split, "SPLIT_V": split_v,
    "PAD": pad, "PADV2": pad, "MIRROR_PAD": pad,
    **dict.fromkeys(("MEAN", "SUM", "REDUCE_PROD", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ANY", "REDUCE_ALL"), reduce),
    "ARG_MAX": arg_reduce, "ARG_MIN": arg_reduce,
    "SLICE": slice_, "STRIDED_SLICE": strided_slice, "GATHER": gather, "GATHER_ND": gather_nd,
    "RESIZE_BILINEAR": resize, "RESIZE_NEAREST_NEIGHBOR": resize,
    "SPACE_TO_DEPTH": space_to_depth, "DEPTH_TO_SPACE": depth_to_space,
    "TILE": tile, "BROADCAST_TO": broadcast_to, "SHAPE": shape_of, "RANK": rank,
    "RFFT2D": rfft2d, "TOPK_V2": top_k, "RANGE": range_, "ONE_HOT": one_hot,
}
