"""The complete op table the emitter runs: every op family's registrations, with the kernels that take over an op
where they apply. One place says which kernel wraps which op, in which order; nothing depends on import order."""
from __future__ import annotations

from . import (control_flow, conv, custom_mediapipe, elementwise, exact_int, hybrid, indexing, nn,  # noqa: F401
               pool, quant, quant_kernels, quant_softmax, quant_tables, reduce, sequence, shape, signal, spatial,
               variables)
from .registry import OPS, OpSpec, with_kernels

# kernel(ctx, op) -> bool, tried in this order before the op's own emitter.
KERNELS = {
    "MEAN": (exact_int.exact_mean, hybrid.sequential_mean),     # --exact-int; float MEAN feeding hybrid ops
    "AVERAGE_POOL_2D": (exact_int.exact_average_pool,),
    "PRELU": (exact_int.exact_prelu,),                           # --exact-int
    "CONV_2D": (quant_kernels.int16_conv,),                      # int16 activations, both modes
    "DEPTHWISE_CONV_2D": (quant_kernels.int16_conv,),
    "FULLY_CONNECTED": (quant_kernels.int16_fully_connected,),
    "RESIZE_BILINEAR": (quant_kernels.exact_resize_bilinear,),   # --exact-int
    "SOFTMAX": (quant_softmax.exact_softmax, quant_softmax.int16_softmax),   # int8: --exact-int; int16: both
    "SQUARED_DIFFERENCE": (quant_kernels.exact_squared_difference,),   # --exact-int
    "CAST": (signal.complex_cast,),
}


def kernels(spec: OpSpec) -> tuple:
    """KERNELS' entry for the op, then those its spec asks for: LiteRT's int8 lookup tables
    (quant_tables.exact_table), complex tensors moved as float pairs (signal.complex_shape_op)."""
    return (KERNELS.get(spec.name, ()) + ((quant_tables.exact_table,) if spec.int8_table else ())
            + ((signal.complex_shape_op,) if spec.complex_pairs else ()))

_TABLE: dict[str, OpSpec] = {}


def load_all() -> dict[str, OpSpec]:
    """Every registered op, its emitter wrapped with its kernels (built once)."""
    if not _TABLE:
        _TABLE.update({name: with_kernels(spec, kernels(spec)) for name, spec in OPS.items()})
    return _TABLE
