"""The op table: for each TFLite op, one `OpSpec` with everything the converter knows about it.

Op family modules register their ops with `@op(...)`, which builds the op's spec into `OPS`; table.py assembles the
complete table the emitter runs, with the kernels that take over an op where they apply. The emitter, the QDQ
service, the hybrid and complex-number paths and validation read an op's behaviour from its spec, never from a list
of names of their own. The IR's shape and constant-value rules sit in a lower layer (inspector.core.ir cannot import
this package): the spec reads them (`shape_rule`, `value_rule`) and tests/test_opspec.py keeps those tables and the
specs in step.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Literal

from inspector.core.ir import shape_rules, shapes
from inspector.core.layout.plan import Category

I, T, A, X = Category.IMPLICIT, Category.TRANSPARENT, Category.ATTRIBUTE, Category.TERMINATE

# How a quantized op's integers reach its emitter (qdq.QDQ.raw):
#   "dequantize": through DequantizeLinear/QuantizeLinear around the float op (the default);
#   "raw": always the stored integers (state, subgraph boundaries, reinterpretation, Q/DQ themselves);
#   "moves": the op only moves or selects elements, so it is exact on the integers when its inputs and outputs
#            share one scale and zero point (raw then, else dequantized), or when LiteRT's kernel copies the
#            integers whatever their quantization says (OpSpec.copies_integers).
Quantized = Literal["dequantize", "raw", "moves"]
QUANT_INTS = ("int8", "uint8", "int16")   # copies_integers= for an op whose LiteRT kernel copies every quantized type
# What the hybrid path may assume of an op's output sign (hybrid.nonnegative): "nonnegative" always (a ReLU),
# "keeps" non-negative when its first input is.
Sign = Literal["", "keeps", "nonnegative"]
# Validation's index inputs: (index operand, table operand or None, the table axis it indexes or None: the op's
# `axis` option). An index out of the table's range is an error in LiteRT, so such inputs are drawn in range.
Indexes = tuple[int, "int | None", "int | None"]


@dataclass(frozen=True)
class OpSpec:
    """Everything the converter knows about one TFLite op (registered with @op)."""
    name: str
    category: Category
    emit: Callable                       # emit(ctx, op) -> None
    onnx: tuple[str, ...] = ()           # ONNX op types it becomes (for the support table)
    layout_inputs: tuple[int, ...] = (0,)   # Implicit: input slots carrying the NHWC activation
    rule: Callable | None = None         # Attribute: rule(op, sg, in_perms, out_pin) -> (want, outs) or None
    notes: str = ""
    quantized: Quantized = "dequantize"
    int16_kernel: bool = True            # "moves": ONNX (Runtime) has an int16 kernel; else int16 is dequantized
    # "moves": the integer types for which LiteRT's kernel copies the integers even where the file gives its inputs
    # and output different scales or zero points (no check in its release build; docs/quantization.md)
    copies_integers: tuple[str, ...] = ()
    int8_table: bool = False             # LiteRT computes int8/uint8 through a 256-entry table (quant_tables)
    exact_int: bool = False              # --exact-int requantizes its accumulator as TFLite does (exact_int.py)
    hybrid: bool = False                 # LiteRT has a float-input x int8-weights (dynamic range) kernel
    sign: Sign = ""
    complex_pairs: bool = False          # moves complex tensors, held as (..., 2) float pairs (signal.py)
    passes_values: bool = False          # carries integer values unchanged: validation traces indices through it
    indexes: Indexes | None = None
    reframes: bool = False               # gives its data a meaning of its own: a graph output behind it is no image
    writes_nothing: bool = False         # a stateful op with no output (emitters may rely on op.outputs[0] else)

    @property
    def shape_rule(self) -> Callable | None:
        """The IR's output-shape rule for the op (ir/shape_rules.py), None where the file's shapes are used."""
        return shape_rules.RULES.get(self.name)

    @property
    def value_rule(self) -> Callable | None:
        """The IR's constant evaluation of the op on small integer tensors (ir/shapes.py), if any."""
        return shapes.VALUES.get(self.name)


OPS: dict[str, OpSpec] = {}


def op(*names: str, category: Category, onnx: tuple[str, ...] | str = (), layout_inputs=(0,), rule=None, notes="",
       **facts):
    """Register an emitter for one or more TFLite op names, with the facts `OpSpec` lists (quantized=, sign=...)."""
    onnx_t = (onnx,) if isinstance(onnx, str) else tuple(onnx)

    def deco(fn):
        for n in names:
            if n in OPS:
                raise RuntimeError(f"{n} registered twice")
            OPS[n] = OpSpec(n, category, fn, onnx_t, tuple(layout_inputs), rule, notes, **facts)
        return fn
    return deco


def with_kernels(rule: OpSpec, kernels) -> OpSpec:
    """`rule` whose emitter first offers the op to each `kernel(ctx, op) -> bool` in turn (quantized integer
    arithmetic, LiteRT's summation order...); the op's own emitter runs when every kernel declines."""
    if not kernels:
        return rule
    plain = rule.emit

    def emit(ctx, op):
        if not any(kernel(ctx, op) for kernel in kernels):
            plain(ctx, op)
    return replace(rule, emit=emit)
