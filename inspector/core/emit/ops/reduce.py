"""Reductions (Attribute): reduced axes are remapped through the layout; without keep_dims the output's
layout is what remains of the input's (reducing H and W of NCHW leaves [N, C], the TFLite order)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from inspector.core.layout import layout as L
from inspector.core.ir.errors import ConversionError
from inspector.core.ir.limits import check_built
from .registry import A, X, op
from .shape import const_ints, reduced_layout, static_dims


def _axes(sg_or_ctx, op) -> list[int] | None:
    t = op.inputs[1]
    tensors = sg_or_ctx.sg.tensors if hasattr(sg_or_ctx, "sg") else sg_or_ctx.tensors
    if hasattr(sg_or_ctx, "constants"):
        data = sg_or_ctx.constants.get(t)
    else:
        data = tensors[t].data
    return None if data is None else [int(a) for a in np.asarray(data).reshape(-1)]


def reduce_rule(op, sg, in_perms, out_pin):
    p = in_perms[0]
    axes = _axes(sg, op)
    if p is None or axes is None:
        return None
    return {0: p}, [reduced_layout(p, axes, bool(op.options.get("keep_dims")))]


def _reduce(onnx_type: str, via_bool: bool = False):
    def emit(ctx, op):
        axes = _axes(ctx, op)
        if axes is None:
            raise ConversionError(f"{op.opcode}#{op.index}: reduction axes must be constant")
        p = ctx.plan.inputs.get((op.index, 0), L.identity(ctx.tensor(op.inputs[0]).rank))
        onnx_axes = sorted({L.axis_to_onnx(a, p) for a in axes}) if p else []
        x = ctx.input(op, 0)
        keep = 1 if op.options.get("keep_dims") else 0
        if via_bool:                     # ReduceMax/Min over bools: through int32 and back
            x = ctx.node("Cast", [x], 1, to=TensorProto.INT32)[0]
            y = ctx.node(onnx_type, [x, ctx.i64(onnx_axes, "axes")], 1, keepdims=keep)[0]
            ctx.node("Cast", [y], [ctx.output(op)], to=TensorProto.BOOL)
            return
        ctx.node(onnx_type, [x, ctx.i64(onnx_axes, "axes")], [ctx.output(op)], keepdims=keep)
    return emit


for _tfl, _onnx in {"MEAN": "ReduceMean", "SUM": "ReduceSum", "REDUCE_MAX": "ReduceMax",
                    "REDUCE_MIN": "ReduceMin", "REDUCE_PROD": "ReduceProd"}.items():
    op(_tfl, category=A, onnx=_onnx, rule=reduce_rule, sign="keeps" if _tfl == "MEAN" else "")(_reduce(_onnx))
op("REDUCE_ANY", category=A, onnx="ReduceMax", rule=reduce_rule)(_reduce("ReduceMax", via_bool=True))
op("REDUCE_ALL", category=A, onnx="ReduceMin", rule=reduce_rule)(_reduce("ReduceMin", via_bool=True))


def arg_rule(op, sg, in_perms, out_pin):
    p = in_perms[0]
    axes = _axes(sg, op)
    if p is None or axes is None:
        return None
    return {0: p}, [reduced_layout(p, axes, False)]


def _arg(onnx_type: str):
    def emit(ctx, op):
        axes = _axes(ctx, op)
        p = ctx.plan.inputs.get((op.index, 0), L.identity(ctx.tensor(op.inputs[0]).rank))
        y = ctx.node(onnx_type, [ctx.input(op, 0)], 1, axis=L.axis_to_onnx(axes[0], p), keepdims=0)[0]
        if ctx.tensor(op.outputs[0]).dtype == "int32":
            ctx.node("Cast", [y], [ctx.output(op)], to=TensorProto.INT32)
        else:
            ctx.node("Identity", [y], [ctx.output(op)])
    return emit


op("ARG_MAX", category=A, onnx="ArgMax", rule=arg_rule)(_arg("ArgMax"))
op("ARG_MIN", category=A, onnx="ArgMin", rule=arg_rule)(_arg("ArgMin"))


# --- REDUCE_WINDOW: a pool over the windowed axes; the others are folded into the batch ------------------------
def _window_pool(ctx, x: str, kind: str, spatial_shape, kernel, strides, dilations) -> str:
    attrs = dict(kernel_shape=list(kernel), strides=list(strides), dilations=list(dilations))
    if kind == "max":
        return ctx.node("MaxPool", [x], 1, **attrs)[0]
    if kind == "min":
        return ctx.node("Neg", ctx.node("MaxPool", ctx.node("Neg", [x], 1), 1, **attrs), 1)[0]
    check_built([1, 1, *kernel], 4, "REDUCE_WINDOW window")
    ones = ctx.const(np.ones([1, 1, *kernel], np.float32), "window")                 # sum: a Conv with ones
    return ctx.node("Conv", [x, ones], 1, **attrs)[0]


WINDOW_FUNCTIONS = {1: ("sum", "Add"), 3: ("min", "Min"), 4: ("max", "Max"), 5: ("min", "And"), 6: ("max", "Or")}


@op("REDUCE_WINDOW", category=X, onnx=("MaxPool", "Conv", "Transpose", "Reshape"), notes="ADD, MINIMUM, MAXIMUM, ALL, ANY; up to 3 windowed axes")
def reduce_window(ctx, op):
    from inspector.core.ir.dtypes import onnx_dtype
    fn = op.options.get("reduce_function", 0)
    if fn not in WINDOW_FUNCTIONS:
        raise ConversionError(f"REDUCE_WINDOW#{op.index}: reduce function {fn} (MUL or unset) has no ONNX pool")
    kind, combine = WINDOW_FUNCTIONS[fn]
    shape = static_dims(ctx, op, op.inputs[0])
    r = len(shape)
    window, strides, dil = (const_ints(ctx, op, s) for s in (2, 3, 4))
    spatial = [i for i in range(r) if window[i] > 1 or strides[i] > 1]
    batch = [i for i in range(r) if i not in spatial]
    if len(spatial) > 3:
        raise ConversionError(f"REDUCE_WINDOW#{op.index}: {len(spatial)} windowed axes; ONNX pools take up to 3")
    dt = ctx.tensor(op.inputs[0]).dtype
    if kind == "sum" and not dt.startswith("float"):
        raise ConversionError(f"REDUCE_WINDOW#{op.index}: ADD over {dt} is not supported")
    x = ctx.input(op, 0)
    work = "float32" if dt in ("bool", "float32") else ("float64" if dt != "float16" else dt)
    if work != dt:
        x = ctx.node("Cast", [x], 1, to=onnx_dtype(work))[0]
    order = batch + spatial
    x = ctx.node("Transpose", [x], 1, perm=order)[0]
    x = ctx.node("Reshape", [x, ctx.i64([-1, 1] + [shape[i] for i in spatial])], 1)[0]
    y = _window_pool(ctx, x, kind, [shape[i] for i in spatial], [window[i] for i in spatial],
                     [strides[i] for i in spatial], [dil[i] for i in spatial])
    out = ctx.shape(op.outputs[0])
    y = ctx.node("Reshape", [y, ctx.i64([out[i] for i in order])], 1)[0]
    y = ctx.node("Transpose", [y], 1, perm=list(L.inverse(order)))[0]
    if work != dt:
        y = ctx.node("Cast", [y], 1, to=onnx_dtype(dt))[0]
    ctx.node(combine, [y, ctx.input(op, 1, ())], [ctx.output(op)])
