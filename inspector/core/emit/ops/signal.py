"""Signal ops: RFFT2D and the complex accessors REAL, IMAG, COMPLEX_ABS (Terminate: they address the last axes).

ONNX Runtime has no complex tensors, so a complex64 TFLite tensor lives in the ONNX graph as float pairs
[..., 2] (ONNX DFT's own output). It is internal: the pair is handed from producer to consumer here and never
declared as the complex tensor; a complex graph input or output is refused.
"""
from __future__ import annotations

import numpy as np

from inspector.core.ir.dtypes import onnx_dtype
from inspector.core.ir.errors import ConversionError
from inspector.core.layout import layout as L
from .registry import X, op

INT64_MAX = np.iinfo(np.int64).max


def _pairs(ctx) -> dict[int, str]:
    return ctx.__dict__.setdefault("complex_pairs", {})


def complex_pair(ctx, op, slot: int) -> str:
    """The float-pair value of complex input `slot`."""
    t = op.inputs[slot]
    pairs = _pairs(ctx)
    if t in pairs:
        return pairs[t]
    if ctx.is_const(t):
        data = np.asarray(ctx.data(t))
        pairs[t] = ctx.const(np.stack([data.real, data.imag], axis=-1).astype(np.float32), "complex")
        return pairs[t]
    raise ConversionError(f"{op.opcode}#{op.index}: complex input {ctx.tensor(t).name} must come from RFFT2D "
                          "(through shape ops) or a constant (ONNX Runtime has no complex tensors)")


def _dft(ctx, x: str, axis: int, onesided: int) -> str:
    if ctx.opset >= 20:                                  # axis became an input in opset 20
        return ctx.node("DFT", [x, "", ctx.const(np.array(axis, np.int64), "axis")], 1, onesided=onesided)[0]
    return ctx.node("DFT", [x], 1, axis=axis, onesided=onesided)[0]


@op("RFFT2D", category=X, onnx=("MatMul", "DFT"), notes="complex result kept as float pairs [..., 2] inside the graph")
def rfft2d(ctx, op):
    out_t = op.outputs[0]
    if out_t in ctx.sg.outputs:
        raise ConversionError(f"RFFT2D#{op.index}: a complex graph output has no ONNX Runtime type; "
                              "end the graph with REAL/IMAG/COMPLEX_ABS")
    fl = ctx.data(op.inputs[1]) if ctx.is_const(op.inputs[1]) else None
    if fl is None:
        raise ConversionError(f"RFFT2D#{op.index}: fft_length must be constant")
    fh, fw = (int(v) for v in np.asarray(fl).reshape(-1))
    shape = ctx.shape(op.inputs[0])
    r = len(shape)
    sig = ctx.tensor(op.inputs[0]).shape_signature
    if sig is not None and any(d < 0 for d in sig[-2:]):
        raise ConversionError(f"RFFT2D#{op.index}: the transformed axes must be static")
    x = ctx.input(op, 0)
    if shape[-2] > fh or shape[-1] > fw:                 # TFLite crops to fft_length...
        x = ctx.node("Slice", [x, ctx.i64([0, 0], "starts"), ctx.i64([fh, fw], "ends"),
                               ctx.i64([r - 2, r - 1], "axes")], 1)[0]
    if shape[-2] < fh:                                   # ...and zero-pads up to it (over W: _real_dft's rows)
        x = ctx.node("Pad", [x, ctx.i64([0] * (2 * r - 2) + [fh - shape[-2], 0], "pads")], 1)[0]
    y = _real_dft(ctx, x, r, min(shape[-1], fw), fw)    # over W, one-sided
    _pairs(ctx)[out_t] = y if fh == 1 else _dft(ctx, y, r - 2, 0)        # then over H (of length 1: itself)


def _real_dft(ctx, x: str, r: int, n: int, fw: int) -> str:
    """The one-sided DFT of length `fw` over the last axis of real `x` (rank r, `n` <= fw samples: the rest are
    the zeros TFLite pads with), as float pairs [..., fw // 2 + 1, 2]: a MatMul by the DFT matrix, whose rows past
    `n` would only multiply zeros. ONNX Runtime's DFT kernel ran a 512-point transform 3x slower than this MatMul
    and a length-1 one as slowly as that. The matrix [n, 2K] is cos/-sin interleaved, gathered from a table of the
    fw twiddles by (i*k) mod fw, so the file holds n + K + 2*fw numbers, not 2*n*K; ONNX Runtime folds it once."""
    k = fw // 2 + 1
    angle = 2 * np.pi * np.arange(fw) / fw
    table = ctx.const(np.stack([np.cos(angle), -np.sin(angle)], axis=-1).astype(np.float32), "dft_twiddles")
    i = ctx.const(np.arange(n, dtype=np.int64).reshape(n, 1), "dft_rows")
    j = ctx.const(np.arange(k, dtype=np.int64), "dft_columns")
    index = ctx.node("Mod", [ctx.node("Mul", [i, j], 1)[0], ctx.const(np.array(fw, np.int64), "dft_length")], 1)[0]
    matrix = ctx.node("Reshape", [ctx.node("Gather", [table, index], 1, axis=0)[0], ctx.i64([n, 2 * k])], 1)[0]
    y = ctx.node("MatMul", [x, matrix], 1)[0]
    return ctx.node("Reshape", [y, ctx.i64([0] * (r - 1) + [k, 2])], 1)[0]


def _part(index: int):
    def emit(ctx, op):
        pair = complex_pair(ctx, op, 0)
        ctx.node("Gather", [pair, ctx.const(np.array(index, np.int64), "part")], [ctx.output(op)],
                 axis=ctx.tensor(op.inputs[0]).rank)
    return emit


op("REAL", category=X, onnx="Gather")(_part(0))
op("IMAG", category=X, onnx="Gather")(_part(1))


@op("COMPLEX_ABS", category=X, onnx=("Split", "Mul", "Add", "Sqrt", "Squeeze"))
def complex_abs(ctx, op):
    """sqrt(re * re + im * im) on the pair's two halves: ONNX Runtime's ReduceL2 over an axis of 2 ran at a
    third of this speed."""
    r = ctx.tensor(op.inputs[0]).rank
    re, im = ctx.node("Split", [complex_pair(ctx, op, 0)], 2, axis=r, num_outputs=2)
    squares = ctx.node("Add", [ctx.node("Mul", [re, re], 1)[0], ctx.node("Mul", [im, im], 1)[0]], 1)[0]
    ctx.node("Squeeze", [ctx.node("Sqrt", [squares], 1)[0], ctx.i64([r], "axes")], [ctx.output(op)])


def complex_cast(ctx, op) -> bool:
    """CAST of a complex tensor: its real part, as LiteRT's cast kernel takes it. (A kernel: False otherwise.)"""
    if not ctx.tensor(op.inputs[0]).dtype.startswith("complex"):
        return False
    out_t = op.outputs[0]
    perm = ctx.plan.produced.get((op.index, 0), ctx.perm(out_t))      # what ctx.output(op) is written in
    dtype, out = ctx.tensor(out_t).dtype, ctx.output(op)
    cast, move = dtype != "float32", not L.is_identity(perm)       # (pairs live in TFLite's layout)
    real = ctx.node("Gather", [complex_pair(ctx, op, 0), ctx.const(np.array(0, np.int64), "part")],
                    [out] if not (cast or move) else 1, axis=ctx.tensor(op.inputs[0]).rank)[0]
    if cast:
        real = ctx.node("Cast", [real], [out] if not move else 1, to=onnx_dtype(dtype))[0]
    if move:
        ctx.node("Transpose", [real], [out], perm=list(perm))
    return True


def complex_operand(ctx, op) -> bool:
    """Is this data-movement op moving a complex tensor? Then complex_shape_op emits it on the float pairs."""
    return any(t >= 0 and ctx.tensor(t).dtype.startswith("complex") for t in list(op.inputs[:1]) + list(op.outputs))


def complex_shape_op(ctx, op) -> bool:
    """SQUEEZE, EXPAND_DIMS, RESHAPE, TRANSPOSE, SLICE, STRIDED_SLICE, CONCATENATION of a complex tensor, on its
    float pairs [..., 2] in TFLite's layout: axes and shapes as TFLite's, the trailing real/imaginary axis kept
    last. (A kernel: False for real tensors, whose emitter then runs.)"""
    if not complex_operand(ctx, op):
        return False
    from .shape import const_ints, sliced
    out_t = op.outputs[0]
    if out_t in ctx.sg.outputs:
        raise ConversionError(f"{op.opcode}#{op.index}: a complex graph output has no ONNX Runtime type; "
                              "end the graph with REAL/IMAG/COMPLEX_ABS")
    r = ctx.tensor(op.inputs[0]).rank
    x, dst = complex_pair(ctx, op, 0), ctx.fresh(f"{ctx.tensor(out_t).name}_complex")
    if op.opcode == "SQUEEZE":
        dims = op.options.get("squeeze_dims") or [i for i, d in enumerate(ctx.shape(op.inputs[0])) if d == 1]
        ctx.node("Squeeze", [x, ctx.i64(sorted(int(a) % r for a in dims), "axes")], [dst])
    elif op.opcode == "EXPAND_DIMS":
        a = const_ints(ctx, op, 1)[0]
        ctx.node("Unsqueeze", [x, ctx.i64([a % (r + 1)], "axes")], [dst])
    elif op.opcode == "RESHAPE":
        sig = ctx.tensor(out_t).shape_signature or ctx.shape(out_t)
        if sum(d < 0 for d in sig) <= 1:
            shape = ctx.i64([int(d) if d >= 0 else -1 for d in sig] + [2])
        else:                                       # several unknown dims: the run-time shape operand, + 2
            shape = ctx.node("Concat", [ctx.node("Cast", [ctx.input(op, 1)], 1, to=7)[0], ctx.i64([2])], 1,
                             axis=0)[0]
        ctx.node("Reshape", [x, shape], [dst])
    elif op.opcode == "TRANSPOSE":
        perm = [int(a) % r for a in const_ints(ctx, op, 1)]
        ctx.node("Transpose", [x], [dst], perm=perm + [r])
    elif op.opcode == "CONCATENATION":           # (LiteRT has no complex kernel for it: tested against numpy)
        parts = [x] + [complex_pair(ctx, op, s) for s in range(1, len(op.inputs))]
        ctx.node("Concat", parts, [dst], axis=op.options.get("axis", 0) % r)
    else:                                           # SLICE, STRIDED_SLICE: on TFLite's axes, pair axis untouched
        sliced(ctx, op, x, dst, tuple(range(r)))
    _pairs(ctx)[out_t] = dst
    return True

