"""The op table the emitter runs: the op families' registrations, with the kernels that take over an op where
they apply. One place says which kernel wraps which op, in which order; nothing depends on import order. A family
module is imported when a model first uses one of its ops (families.FAMILY), the whole table when asked for."""
from __future__ import annotations

import importlib
from typing import Iterable

from .families import FAMILY
from .registry import OPS, OpSpec, with_kernels

# kernel(ctx, op) -> bool, tried in this order before the op's own emitter ("module.function" in this package,
# imported with the op's family).
KERNELS = {
    "MEAN": ("exact_int.exact_mean", "hybrid.sequential_mean"),     # --exact-int; float MEAN feeding hybrid ops
    "AVERAGE_POOL_2D": ("exact_int.exact_average_pool",),
    "PRELU": ("exact_int.exact_prelu",),                               # --exact-int
    "CONV_2D": ("quant_kernels.int16_conv",),                          # int16 activations, both modes
    "DEPTHWISE_CONV_2D": ("quant_kernels.int16_conv",),
    "FULLY_CONNECTED": ("quant_kernels.int16_fully_connected",),
    "RESIZE_BILINEAR": ("quant_kernels.exact_resize_bilinear",),       # --exact-int
    "SOFTMAX": ("quant_softmax.exact_softmax", "quant_softmax.int16_softmax"),   # int8: --exact-int; int16: both
    "SQUARED_DIFFERENCE": ("quant_kernels.exact_squared_difference",),   # --exact-int
    "CAST": ("signal.complex_cast",),
}


def kernels(spec: OpSpec) -> tuple:
    """KERNELS' entry for the op, then those its spec asks for: LiteRT's int8 lookup tables
    (quant_tables.exact_table), complex tensors moved as float pairs (signal.complex_shape_op)."""
    names = (KERNELS.get(spec.name, ()) + (("quant_tables.exact_table",) if spec.int8_table else ())
             + (("signal.complex_shape_op",) if spec.complex_pairs else ()))
    return tuple(_function(name) for name in names)


def _function(name: str):
    module, function = name.split(".")
    return getattr(importlib.import_module(f"{__package__}.{module}"), function)


_TABLE: dict[str, OpSpec] = {}


def load(names: Iterable[str]) -> dict[str, OpSpec]:
    """The table holding (at least) the ops `names` that a family registers, their emitters wrapped with their
    kernels; a name no family registers stays out of it (the op is unsupported). One table, grown as asked."""
    for name in names:
        if name not in _TABLE and name in FAMILY:
            importlib.import_module(f"{__package__}.{FAMILY[name]}")
            _TABLE[name] = with_kernels(OPS[name], kernels(OPS[name]))
    return _TABLE


def load_all() -> dict[str, OpSpec]:
    """Every registered op."""
    return load(FAMILY)
