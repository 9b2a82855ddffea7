"""Unary int8/uint8 ops LiteRT computes through a 256-entry table (OpSpec.int8_table; table.py adds the kernel):
the table read from LiteRT's reference kernel at conversion, or the op's float form where that matches it."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from inspector.core.ir.graph import Tensor
from .fixed_point import params, per_tensor

ONNX_INT32 = TensorProto.INT32

# Table ops whose float form (DequantizeLinear -> op -> QuantizeLinear) is used when it gives LiteRT's table on
# every input but a few: ONNX Runtime's Gather costs several times the float form per element (and
# ONNX Runtime fuses it into QLinearSigmoid), so feature maps of TWIN_MIN elements or more take it. A value closer
# than TIE_MARGIN steps to a rounding boundary counts as a mismatch (float32 kernels are far more accurate than
# that); up to PATCH_MAX mismatches are patched with Where.
FLOAT_TWINS = {"LOGISTIC": "Sigmoid", "TANH": "Tanh", "HARD_SWISH": "HardSwish"}
TIE_MARGIN, PATCH_MAX, TWIN_MIN, OFFSET_MARGIN = 0.01, 4, 1024, 1e-3


def exact_table(ctx, op) -> bool:
    """A unary int8/uint8 op as a 256-entry table of what LiteRT's reference kernel returns for every input
    value (its fixed-point approximations included). Default QDQ mode: only where the op's float form misses the
    table by more than one step or the map is small; elsewhere the float form (offset_twin: moved by a constant
    where that makes it exact, else one step off on a few of the 256 values), which ONNX Runtime fuses, where a
    Gather costs several times as much per element (every HARD_SWISH a table slows MobileNetV3Small int8). Needs
    ai-edge-litert at conversion time; without it the float path runs."""
    sg, qdq = ctx.sg, ctx.q
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = sg.tensors[x_t], sg.tensors[y_t]
    if not (len([t for t in op.inputs if t >= 0]) == 1 and x_t in qdq.q and y_t in qdq.q
            and tx.dtype in ("int8", "uint8") and ty.dtype in ("int8", "uint8")
            and params(tx.quantization) is not None and params(ty.quantization) is not None):
        return False
    table = _kernel_table(qdq.tables, op, tx, ty)
    if table is None:
        return False
    if not qdq.exact and large(tx) and (misses := float_misses(op, tx, ty, table)) <= 1:
        return bool(misses) and offset_twin(ctx, op, table)
    qdq._raw[op.index] = True
    if qdq.exact:
        if float_twin(ctx, op, table):
            return True
        if tx.dtype == "int8":                   # Gather reads index -k as n - k: int8 values index the table
            table = np.roll(table, -128)         # from its middle, without an offset
        index = ctx.node("Cast", [ctx.input(op, 0)], 1, to=ONNX_INT32)[0]
        ctx.node("Gather", [ctx.const(table, f"{qdq.short(y_t)}_table"), index], [ctx.output(op)], axis=0)
        return True
    # Default mode: read through DequantizeLinear and written through QuantizeLinear, so ONNX Runtime still pairs
    # them with the neighbouring convolutions' (it fuses an int8 convolution only through Q -> DQ pairs, not with
    # a Gather on the integers). The index x / scale + zp - min lies within 1e-4 of an integer: adding 1/2 and
    # truncating finds it; the table holds real values that QuantizeLinear turns back into LiteRT's integers.
    (sx, zx), (so, zo) = per_tensor(tx.quantization), per_tensor(ty.quantization)
    x = qdq.dequantize(x_t, ctx.input(op, 0))
    scaled = ctx.node("Mul", [x, ctx.const(np.array(1 / sx, np.float32), "k")], 1)[0]
    shift = ctx.const(np.array(zx - np.iinfo(tx.dtype).min + 0.5, np.float32), "k")
    index = ctx.node("Cast", [ctx.node("Add", [scaled, shift], 1)[0]], 1, to=ONNX_INT32)[0]
    real = ((table.astype(np.float64) - zo) * so).astype(np.float32)
    y = ctx.node("Gather", [ctx.const(real, f"{qdq.short(y_t)}_table"), index], 1, axis=0)[0]
    qdq.quantize(y_t, y, ctx.output(op))
    return True


def large(t: Tensor) -> bool:
    """A feature map of TWIN_MIN elements or more (or of dynamic size), where a Gather's cost shows."""
    return not 0 <= int(np.prod(t.shape_signature or t.shape)) < TWIN_MIN


# Real-valued forms of the table ops, as their float emitters compute them (in float64 here).
REAL_FORMS = {
    "LOGISTIC": lambda v, o: 1 / (1 + np.exp(-v)), "TANH": lambda v, o: np.tanh(v),
    "HARD_SWISH": lambda v, o: v * np.clip(v + 3, 0, 6) / 6,
    "ELU": lambda v, o: np.where(v > 0, v, np.expm1(np.minimum(v, 0))),
    "LEAKY_RELU": lambda v, o: np.where(v > 0, v, o.get("alpha", 0.2) * v),
    "GELU": lambda v, o: 0.5 * v * (1 + (np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3))
                                         if o.get("approximate") else _erf(v / np.sqrt(2)))),
    "EXP": lambda v, o: np.exp(v), "LOG": lambda v, o: np.log(v), "SQRT": lambda v, o: np.sqrt(v),
    "RSQRT": lambda v, o: 1 / np.sqrt(v),
}


def _erf(v: np.ndarray) -> np.ndarray:
    import math
    return np.vectorize(math.erf)(v)


def _float_form(op, tx: Tensor, ty: Tensor):
    """(every input value, the op's float form of each in output steps before rounding, the output's int range)."""
    (sx, zx), (so, zo) = per_tensor(tx.quantization), per_tensor(ty.quantization)
    xs = np.arange(np.iinfo(tx.dtype).min, np.iinfo(tx.dtype).max + 1)
    with np.errstate(all="ignore"):
        y = REAL_FORMS[op.opcode]((xs - zx) * sx, op.options) / so + zo
    return xs, y, np.iinfo(ty.dtype)


def float_misses(op, tx: Tensor, ty: Tensor, table: np.ndarray) -> float:
    """The most steps by which the op's float form, quantized once, misses LiteRT's table (inf: unknown)."""
    if op.opcode not in REAL_FORMS:
        return float("inf")
    _, y, out = _float_form(op, tx, ty)
    d = np.abs(np.clip(np.round(y), out.min, out.max) - table)
    return float(d.max()) if np.all(np.isfinite(d)) else float("inf")


def float_offset(op, tx: Tensor, ty: Tensor, table: np.ndarray) -> float | None:
    """c, in output steps, such that the op's float form minus c rounds to LiteRT's table on every input, with
    OFFSET_MARGIN to spare on both sides (None: no such c). LiteRT's fixed-point kernels land a hundredth of a step
    or so below the real value, so a float form rounds up a few values LiteRT rounds down."""
    _, y, out = _float_form(op, tx, ty)
    t = table.astype(np.float64)
    lo = np.max((y - t - 0.5)[t < out.max], initial=-1.0)      # saturated entries bound c on one side only
    hi = np.min((y - t + 0.5)[t > out.min], initial=1.0)
    if not np.isfinite(lo + hi) or hi - lo < 2 * OFFSET_MARGIN:
        return None
    return float(np.clip(0.0, lo + OFFSET_MARGIN, hi - OFFSET_MARGIN))


def offset_twin(ctx, op, table: np.ndarray) -> bool:
    """Default QDQ mode on a large map: the op's float form moved by float_offset before QuantizeLinear, one Add
    (cheaper than a Gather), equal to LiteRT's table on every input; False (the plain float form,
    one step off on a few values) when no offset does."""
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = ctx.sg.tensors[x_t], ctx.sg.tensors[y_t]
    # Not LOGISTIC: the Add would stop ONNX Runtime's QLinearSigmoid fusion (and its float form matched LiteRT's
    # table on every scale tried, as TANH's did).
    c = float_offset(op, tx, ty, table) if op.opcode in FLOAT_TWINS and op.opcode != "LOGISTIC" else None
    if not c:
        return False
    ctx.q._raw[op.index] = True                     # reads and writes the integers through its own Q/DQ
    real = ctx.node(FLOAT_TWINS[op.opcode], [ctx.q.dequantize(x_t, ctx.input(op, 0))], 1)[0]
    so = per_tensor(ty.quantization)[0]
    moved = ctx.node("Add", [real, ctx.const(np.array(-c * so, np.float32), "k")], 1)[0]
    ctx.q.quantize(y_t, moved, ctx.output(op))
    return True


def float_twin(ctx, op, table: np.ndarray) -> bool:
    """Emit the op's float form, patched where it misses LiteRT's table; False when it misses too often."""
    x_t, y_t = op.inputs[0], op.outputs[0]
    tx, ty = ctx.tensor(x_t), ctx.tensor(y_t)
    if op.opcode not in FLOAT_TWINS or not large(tx):
        return False
    onnx_op = FLOAT_TWINS[op.opcode]
    xs, y, out = _float_form(op, tx, ty)
    near = (np.abs(y - np.floor(y) - 0.5) < TIE_MARGIN) & (y > out.min - 1) & (y < out.max + 1)
    bad = xs[(np.clip(np.round(y), out.min, out.max) != table) | near]
    if bad.size > PATCH_MAX:
        return False
    x = ctx.input(op, 0)
    real = ctx.node(onnx_op, [ctx.q.dequantize(x_t, x)], 1)[0]
    dst = ctx.output(op)
    y = ctx.q.quantize(y_t, real, ctx.fresh(f"{ctx.q.short(y_t)}_float") if bad.size else dst)
    for i, v in enumerate(bad, 1):
        hit = ctx.node("Equal", [x, ctx.const(np.array(v, tx.dtype), "k")], 1)[0]
        patch = ctx.const(np.array(table[v - xs[0]], ty.dtype), "k")
        y = ctx.node("Where", [hit, patch, y], [dst] if i == bad.size else 1)[0]
    return True


def _kernel_table(tables: dict, op, tx: Tensor, ty: Tensor) -> np.ndarray | None:
    key = (op.opcode, op.version, repr(sorted(op.options.items())), tx.dtype, params(tx.quantization), ty.dtype,
           params(ty.quantization))
    if key not in tables:
        tables[key] = _litert_table(op, tx, ty)
    return tables[key]


def _litert_table(op, tx: Tensor, ty: Tensor) -> np.ndarray | None:
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        return None
    from inspector.core.io.tflite_builder import ModelBuilder
    info = np.iinfo(tx.dtype)
    values = np.arange(info.min, info.max + 1, dtype=tx.dtype)
    b = ModelBuilder()
    x = b.input("x", [values.size], tx.dtype, quant=params(tx.quantization))
    y = b.tensor("y", [values.size], ty.dtype, quant=params(ty.quantization))
    try:
        b.op(op.opcode, [x], [y], op.options, version=op.version)
        b.output(y)
        data = b.build()
        try:
            it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        except (RuntimeError, ValueError):   # not among the reference kernels: what validation runs then
            it = Interpreter(model_content=data,
                             experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], values)
        it.invoke()
        return np.array(it.get_tensor(it.get_output_details()[0]["index"]))
    except (ValueError, RuntimeError, IndexError, KeyError):
        return None
