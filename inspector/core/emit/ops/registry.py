"""The op table: for each TFLite op, its layout Category, its ONNX emitter, and (for Attribute ops) its layout rule.

Op family modules register their ops with `@op(...)`; `OPS` is the table everything else reads.
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


def specialise(opcode: str, kernel) -> None:
    """Let `kernel(ctx, op) -> bool` emit a registered op when it applies (quantized integer arithmetic, LiteRT's
    summation order...); the op's own emitter runs when it returns False. The table keeps one row per op."""
    rule = OPS[opcode]
    plain = rule.emit

    def emit(ctx, op):
        if not kernel(ctx, op):
            plain(ctx, op)
    OPS[opcode] = replace(rule, emit=emit)


def load_all() -> dict[str, OpRule]:
    """Import every op family module so the table is complete."""
    from . import conv, elementwise, indexing, nn, pool, reduce, shape, signal, spatial  # noqa: F401
    from . import control_flow, custom_mediapipe, sequence, variables  # noqa: F401
    from . import quant  # noqa: F401
    return OPS
