"""The op table: for each TFLite op, its layout Category, its ONNX emitter, and (for Attribute ops) its layout rule.

Op family modules register their ops with `@op(...)` into `OPS` (categories and layout rules are read from it);
table.py assembles the complete table the emitter runs, with the kernels that take over an op where they apply.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from inspector.core.layout.plan import Category

I, T, A, X = Category.IMPLICIT, Category.TRANSPARENT, Category.ATTRIBUTE, Category.TERMINATE


@dataclass(frozen=True)
class OpRule:
    name: str
    category: Category
    emit: Callable                       # emit(ctx, op) -> None
    onnx: tuple[str, ...] = ()           # ONNX op types it becomes (for the support table)
    layout_inputs: tuple[int, ...] = (0,)   # Implicit: input slots carrying the NHWC activation
    rule: Callable | None = None         # Attribute: rule(op, sg, in_perms, out_pin) -> (want, outs) or None
    notes: str = ""


OPS: dict[str, OpRule] = {}


def op(*names: str, category: Category, onnx: tuple[str, ...] | str = (), layout_inputs=(0,), rule=None, notes=""):
    """Register an emitter for one or more TFLite op names."""
    onnx_t = (onnx,) if isinstance(onnx, str) else tuple(onnx)

    def deco(fn):
        for n in names:
            if n in OPS:
                raise RuntimeError(f"{n} registered twice")
            OPS[n] = OpRule(n, category, fn, onnx_t, tuple(layout_inputs), rule, notes)
        return fn
    return deco


def with_kernels(rule: OpRule, kernels) -> OpRule:
    """`rule` whose emitter first offers the op to each `kernel(ctx, op) -> bool` in turn (quantized integer
    arithmetic, LiteRT's summation order...); the op's own emitter runs when every kernel declines."""
    if not kernels:
        return rule
    plain = rule.emit

    def emit(ctx, op):
        if not any(kernel(ctx, op) for kernel in kernels):
            plain(ctx, op)
    return replace(rule, emit=emit)
