"""Resource variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE) and CALL_ONCE, as explicit state.

ONNX has no mutable state, so each TFLite variable becomes a pair of graph values:
- input  `state:<shared_name>`, whose default (an initializer of the same name) is the variable's initial value;
- output `state_out:<shared_name>`, the value the variable holds after one invocation.
A caller streams by feeding each call's `state_out:*` back as the next call's `state:*`; leaving the inputs out
starts from the initial values, exactly as the TFLite interpreter's first invocation does.

CALL_ONCE runs its init subgraph before the first invocation only: its constant assignments become the initial
values (the rest of that subgraph is inlined and has no effect on outputs).
"""
from __future__ import annotations

import json

import numpy as np
from onnx import helper, numpy_helper

from inspector.core.layout import layout as L
from inspector.core.ir.dtypes import onnx_dtype
from inspector.core.ir.errors import ConversionError
from inspector.core.ir.limits import check_built
from .registry import X, op

STATE_IN, STATE_OUT = "state:", "state_out:"


class State:
    """The variables of one conversion, kept on the root emitter."""

    def __init__(self):
        self.handles: dict[tuple[int, int], str] = {}     # (id(subgraph), handle tensor) -> variable name
        self.order: list[str] = []                          # variables in first-use order
        self.spec: dict[str, tuple[str, tuple[int, ...]]] = {}   # variable -> (dtype, shape)
        self.current: dict[str, str] = {}                   # variable -> ONNX value it holds now
        self.initial: dict[str, np.ndarray] = {}
        self.source: dict[str, str] = {}                    # variable -> where its initial value comes from
        self.init_subgraph: str | None = None               # set while a CALL_ONCE init subgraph is emitted
        self.warnings: list[str] = []
        self.layout: dict[str, tuple[int, ...]] = {}        # variable -> layout its state I/O are stored in

    @staticmethod
    def of(ctx) -> State:
        if ctx.root.state is None:
            ctx.root.state = State()
        return ctx.root.state

    def variable(self, ctx, handle: int) -> str:
        if ctx.nodes is not ctx.root.nodes:
            raise ConversionError(f"{ctx.op.opcode}#{ctx.op.index}: resource variables inside a WHILE or IF body "
                                  "are not supported")
        key = (id(ctx.sg), handle)
        if key not in self.handles:
            raise ConversionError(f"{ctx.op.opcode}#{ctx.op.index}: its resource input "
                                  f"{ctx.tensor(handle).name} does not come from a VAR_HANDLE")
        return self.handles[key]

    def note(self, name: str, tensor) -> None:
        if name not in self.order:
            self.order.append(name)
        self.spec.setdefault(name, (tensor.dtype, tuple(tensor.shape)))

    def tensor_input(self, ctx, t: int) -> str:
        """A TFLite variable tensor (a recurrent op's hidden or cell state, kept between invocations) as state:
        its value now. Initially its file contents, else zeros (the interpreter resets variable tensors to 0)."""
        if ctx.nodes is not ctx.root.nodes:
            raise ConversionError(f"{ctx.op.opcode}#{ctx.op.index}: a stateful op inside a WHILE or IF body "
                                  "is not supported")
        ten = ctx.tensor(t)
        name = ten.name or f"{ctx.sg.name}_t{t}"
        self.note(name, ten)
        if name not in self.initial:
            data = ctx.data(t) if ctx.is_const(t) else None
            if data is None:
                check_built(ten.shape, np.dtype(ten.dtype).itemsize, f"initial state of variable {name}")
            self.initial[name] = np.array(data) if data is not None else np.zeros(ten.shape, ten.dtype)
            self.source[name] = f"variable tensor {name} of {ctx.op.opcode}#{ctx.op.index} (" + \
                ("its file contents)" if data is not None else "zeros, as the interpreter resets it)")
        return self.current.get(name) or _reserve_input(ctx, name)

    def assign(self, ctx, t: int, value: str) -> None:
        """Variable tensor t holds `value` after this op (TFLite updates it in place)."""
        self.current[ctx.tensor(t).name or f"{ctx.sg.name}_t{t}"] = value

    def finish(self, em):
        """Graph inputs (with their initial values as defaults) and outputs of every variable."""
        ins, outs = [], []
        for name in self.order:
            dtype, shape = self.spec[name]
            if name not in self.initial:
                check_built(shape, np.dtype(dtype).itemsize, f"initial state of variable {name}")
                self.initial[name] = np.zeros(shape, dtype)
                self.source[name] = "zeros (the model assigns no initial value)"
                self.warnings.append(f"variable {name}: no initial value in the model, state input defaults to 0")
            src, dst = STATE_IN + name, STATE_OUT + name
            perm = self.layout.get(name, L.identity(len(shape)))
            initial = np.ascontiguousarray(np.transpose(self.initial[name], perm))
            em.initializers.append(numpy_helper.from_array(initial, src))
            ins.append(helper.make_tensor_value_info(src, onnx_dtype(dtype), list(L.apply(shape, perm))))
            em.begin(None)
            em.node("Identity", [self.current.get(name, src)], [dst])
            outs.append(helper.make_tensor_value_info(dst, onnx_dtype(dtype), list(L.apply(shape, perm))))
        return ins, outs

    def describe(self) -> list[dict]:
        def perm(n):
            return self.layout.get(n, L.identity(len(self.spec[n][1])))
        return [{"variable": n, "input": STATE_IN + n, "output": STATE_OUT + n, "dtype": self.spec[n][0],
                 "shape": list(L.apply(self.spec[n][1], perm(n))), "layout": L.name(perm(n)),
                 "initial": self.source.get(n, "")} for n in self.order]

    def to_json(self) -> str:
        return json.dumps(self.describe())


def _reserve_input(ctx, name: str) -> str:
    src = STATE_IN + name
    ctx.root.claim(src, STATE_OUT + name)
    return src


def variable_layouts(sg) -> dict[int, tuple[int, ...]]:
    """VAR_HANDLE tensor -> the layout its variable is stored in. State I/O are ours to lay out: like an image-like
    graph input, a variable whose reads reach a layout-sensitive op is kept channels-first, so neither reading nor
    assigning it needs a Transpose."""
    global _LAYOUTS
    cached = _LAYOUTS                      # one tuple, read once: safe when worker threads convert in parallel
    if cached[0] is sg:                    # every READ/ASSIGN rule of one planning pass asks about the same subgraph
        return cached[1]
    from inspector.core.layout.io_rules import reaches_implicit
    from .registry import OPS
    consumers = sg.consumers()
    out: dict[int, tuple[int, ...]] = {}
    for o in sg.ops:
        if o.opcode != "READ_VARIABLE" or o.outputs[0] < 0:
            continue
        t = o.outputs[0]
        rank = sg.tensors[t].rank
        if rank >= 3 and reaches_implicit(sg, t, OPS, consumers)[0]:
            out[o.inputs[0]] = L.channels_first(rank)
    _LAYOUTS = (sg, out)
    return out


_LAYOUTS: tuple = (None, None)            # the last subgraph asked about, and its answer


def read_rule(op, sg, in_perms, out_pin):
    perm = variable_layouts(sg).get(op.inputs[0])
    return ({}, [perm]) if perm is not None else None


def assign_rule(op, sg, in_perms, out_pin):
    perm = variable_layouts(sg).get(op.inputs[0])
    return ({1: perm}, []) if perm is not None and in_perms[1] is not None else None


@op("VAR_HANDLE", category=X, quantized="raw", notes="no node: names the variable its READ/ASSIGN ops use")
def var_handle(ctx, op):
    state = State.of(ctx)
    name = op.options.get("shared_name") or f"{ctx.sg.name}_var{op.outputs[0]}"
    if op.options.get("container"):
        name = f"{op.options['container']}/{name}"
    state.handles[(id(ctx.sg), op.outputs[0])] = name


@op("READ_VARIABLE", category=X, quantized="raw", onnx="Identity", rule=read_rule,
    notes="reads state:<name> or the last value assigned; kept channels-first when read by layout-sensitive ops")
def read_variable(ctx, op):
    state = State.of(ctx)
    name = state.variable(ctx, op.inputs[0])
    state.note(name, ctx.tensor(op.outputs[0]))
    value = state.current.get(name) or _reserve_input(ctx, name)
    state.layout.setdefault(name, ctx.plan.produced.get((op.index, 0), L.identity(ctx.tensor(op.outputs[0]).rank)))
    ctx.node("Identity", [value], [ctx.output(op)])


@op("ASSIGN_VARIABLE", category=X, writes_nothing=True, quantized="raw", rule=assign_rule,
    notes="no node: the value becomes state_out:<name>")
def assign_variable(ctx, op):
    state = State.of(ctx)
    name = state.variable(ctx, op.inputs[0])
    value_t = op.inputs[1]
    if state.init_subgraph is not None:
        if not ctx.is_const(value_t):
            raise ConversionError(f"ASSIGN_VARIABLE#{op.index} in {state.init_subgraph}: the initial value of "
                                  f"{name} is computed, only constant initial values are supported")
        state.initial[name] = np.array(ctx.data(value_t))
        state.source[name] = f"constant {ctx.tensor(value_t).name} assigned by {state.init_subgraph}"
        state.note(name, ctx.tensor(value_t))
        return
    state.note(name, ctx.tensor(value_t))
    if name not in state.current:
        _reserve_input(ctx, name)
    perm = state.layout.setdefault(name, ctx.plan.inputs.get((op.index, 1), L.identity(ctx.tensor(value_t).rank)))
    state.current[name] = ctx.input(op, 1, perm)


@op("CALL_ONCE", category=X, writes_nothing=True, quantized="raw",
    notes="init subgraph's constant assignments become the state inputs' defaults")
def call_once(ctx, op):
    state = State.of(ctx)
    index = op.options["init_subgraph_index"]
    if ctx.parent is not None:
        raise ConversionError(f"CALL_ONCE#{op.index}: only supported in the main subgraph")
    state.init_subgraph = f"CALL_ONCE init subgraph {index} ({ctx.graph.subgraphs[index].name})"
    try:
        ctx.emit_subgraph(index, [], inline=True)
    finally:
        state.init_subgraph = None
