"""Dynamic-range (hybrid) ops: float activations, int8 weights. TFLite's CONV_2D, DEPTHWISE_CONV_2D and
FULLY_CONNECTED quantize their float input to int8 per batch row on the fly and run integer arithmetic."""
from __future__ import annotations

HYBRID = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"})   # float input x int8 weights kernels
ONNX_FLOAT, ONNX_DOUBLE = 1, 11


def is_hybrid(qdq, op) -> bool:
    sg = qdq.em.sg
    if op is None or op.opcode not in HYBRID or len(op.inputs) < 2 or op.inputs[1] < 0:
        return False
    w = sg.tensors[op.inputs[1]]
    return sg.tensors[op.inputs[0]].dtype == "float32" and w.dtype == "int8" and op.inputs[1] in qdq.q


def read(qdq, op, x: str) -> str:
    """What a hybrid op reads for its float input 0 (value `x`); other ops read `x` itself."""
    return _quantized_input(qdq, op, x) if is_hybrid(qdq, op) else x


def _round_away(em, x: str, dtype: str) -> str:
    """std::round (ties away from zero); ONNX Round rounds ties to even."""
    mag = em.node("Floor", [em.node("Add", [em.node("Abs", [x], 1)[0], em.scalar(0.5, dtype)], 1)[0]], 1)[0]
    return em.node("Mul", [em.node("Sign", [x], 1)[0], mag], 1)[0]


def _quantized_input(qdq, op, x: str) -> str:
    """The input quantized per batch row as TFLite does (asymmetrically for per-channel convolutions and when
    FULLY_CONNECTED asks for it, else symmetrically), as real values."""
    em, sg = qdq.em, qdq.em.sg
    shape = sg.tensors[op.inputs[0]].shape
    w = sg.tensors[op.inputs[1]]
    if op.opcode == "FULLY_CONNECTED":
        k = sg.tensors[op.inputs[1]].shape[1]
        axes = [len(shape) - 1] if shape[-1] == k else list(range(1, len(shape)))
        asym = bool(op.options.get("asymmetric_quantize_inputs"))
    else:
        axes = list(range(1, len(shape)))
        asym = w.quantization.per_channel
    f, d = "float32", "double"
    lo = em.node("ReduceMin", [x, em.i64(axes, "axes")], 1, keepdims=1)[0]
    hi = em.node("ReduceMax", [x, em.i64(axes, "axes")], 1, keepdims=1)[0]
    zero = em.scalar(0.0, f)
    if asym:                                 # the scale and zero point in double, as TFLite computes them
        lo = em.node("Cast", [em.node("Min", [lo, zero], 1)[0]], 1, to=ONNX_DOUBLE)[0]
        hi = em.node("Cast", [em.node("Max", [hi, zero], 1)[0]], 1, to=ONNX_DOUBLE)[0]
        scale_d = em.node("Div", [em.node("Sub", [hi, lo], 1)[0], em.scalar(255.0, d)], 1)[0]
    else:
        rng = em.node("Max", [em.node("Abs", [lo], 1)[0], em.node("Abs", [hi], 1)[0]], 1)[0]
        scale_d = em.node("Div", [em.node("Cast", [rng], 1, to=ONNX_DOUBLE)[0], em.scalar(127.0, d)], 1)[0]
    scale = em.node("Cast", [scale_d], 1, to=ONNX_FLOAT)[0]
    # An all-zero row: TFLite uses scale 1 (every value quantizes to 0 either way).
    empty = em.node("Equal", [scale, zero], 1)[0]
    scale = em.node("Where", [empty, em.scalar(1.0, f), scale], 1)[0]
    scaled = em.node("Mul", [x, em.node("Reciprocal", [scale], 1)[0]], 1)[0]
    if asym:
        safe_d = em.node("Where", [empty, em.scalar(1.0, d), scale_d], 1)[0]
        zp = em.node("Sub", [em.scalar(-128.0, d), em.node("Div", [lo, safe_d], 1)[0]], 1)[0]
        zp = em.node("Cast", [_round_away(em, zp, d)], 1, to=ONNX_FLOAT)[0]
        zp = em.node("Clip", [zp, em.scalar(-128.0, f), em.scalar(127.0, f)], 1)[0]
        q = em.node("Clip", [em.node("Add", [_round_away(em, scaled, f), zp], 1)[0],   # round, then offset
                             em.scalar(-128.0, f), em.scalar(127.0, f)], 1)[0]
        q = em.node("Sub", [q, zp], 1)[0]
    else:
        q = em.node("Clip", [_round_away(em, scaled, f), em.scalar(-127.0, f), em.scalar(127.0, f)], 1)[0]
    return em.node("Mul", [q, scale], 1)[0]
