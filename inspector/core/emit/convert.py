"""TFLite Graph -> ONNX ModelProto: fold constants, plan layouts, emit, check."""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import EncodeError
from onnx import helper

from inspector import __version__

from inspector.core.layout import layout as L
from . import body_weights, io_layout, peephole
from .emitter import Emitter
from inspector.core.ir.errors import ConversionError, UnsupportedOpsError
from inspector.core.ir.graph import Graph, Op, Subgraph
from inspector.core.ir import memory
from inspector.core.io import onnx_bytes
from inspector.core.io.onnx_bytes import add_tensor, copy_fields, raw_length
from inspector.core.ir.limits import check_control_flow
from inspector.core.layout.pins import resolve_pins
from .ops.table import load
from inspector.core.layout.propagation import Planner, assemble, plan_layouts, solved_problem
from inspector.core.layout.plan import Category
from .result import ConversionResult, ConversionTrace

DEFAULT_OPSET = 18
IR_VERSION = min(onnx.IR_VERSION, 10)
MIN_OPSET, MAX_OPSET = 18, 21
PRODUCER = "layout-inspector"
# What an op's emitter, rule or folder raises on a model whose shapes, options or arity are inconsistent (a hostile
# or corrupt file the reader could not judge): reported as a ConversionError naming the op.
HOSTILE = (ValueError, KeyError, IndexError, TypeError, ArithmeticError, RecursionError, MemoryError)


def fold_constants(sg: Subgraph) -> tuple[set[int], dict[int, np.ndarray]]:
    """Ops whose result is known at conversion time (DEQUANTIZE of float16 weights, DENSIFY of sparse weights).

    Returns the folded op indices and every constant's data (file constants plus folded results)."""
    constants = {t.index: t.data for t in sg.tensors if t.data is not None and t.sparsity is None
                 and t.dtype not in ("string", "resource", "variant")}
    folded: set[int] = set()
    folders = _folders()
    for op in sg.ops:
        fold = folders.get(op.opcode)
        if fold is None:
            continue
        try:
            value = fold(op, sg, constants)
        except HOSTILE as e:
            raise ConversionError(f"{op.opcode}#{op.index}: cannot fold its constant "
                                  f"({type(e).__name__}: {e})") from None
        if value is not None and op.outputs and op.outputs[0] >= 0:     # a hostile op may have no output
            constants[op.outputs[0]] = value
            folded.add(op.index)
    return folded, constants


def check_arity(graph: Graph) -> None:
    """Every op but the stateful few (OpSpec.writes_nothing) writes something: emitters and folders may rely on
    op.outputs[0]."""
    table = _op_table(graph)
    for k, sg in enumerate(graph.subgraphs):
        for op in sg.ops:
            if max(op.outputs, default=-1) < 0 and not (op.opcode in table and table[op.opcode].writes_nothing):
                where = f" in subgraph {k} ({sg.name})" if k else ""
                raise ConversionError(f"{op.label}{where} has no output: the model is inconsistent")


def planner(graph: Graph, pins=None, keep_io_layout: bool = False) -> Planner:
    """The main subgraph's layout problem as convert() poses it, for "what if" questions (pins by name or index)."""
    folded, constants = fold_constants(graph.main)
    table = _op_table(graph)
    return Planner(graph.main, table, resolve_pins(graph.main, pins), keep_io_layout, folded, set(constants),
                   **_nested(graph, table))


class Subplans:
    """The plans of a graph's subgraphs at given boundary layouts (nested.Subplans), each solved once: the planner
    prices an IF or WHILE mode with them, and the emitter emits the plan its chosen mode was priced with."""

    def __init__(self, graph: Graph, table):
        self.graph, self.table = graph, table
        self.solved: dict[tuple, tuple] = {}        # (index, ins, outs) -> (problem, choice, optimality)
        self.plans: dict[tuple, object] = {}
        self.folded: dict[int, tuple] = {}
        self.unread: dict[int, set] = {}            # subgraph -> its inputs no op reads and no output is
        self.open: set[int] = set()                 # subgraphs being planned (a cycle is refused before: a guard)

    def _key(self, index: int, ins, outs) -> tuple:
        sg = self.graph.subgraphs[index]
        if index not in self.folded:
            self.folded[index] = fold_constants(sg)
            read = {t for op in sg.ops for t in op.inputs} | set(sg.outputs)
            self.unread[index] = {k for k, t in enumerate(sg.inputs) if t not in read}
        ident = [L.identity(sg.tensors[t].rank) for t in sg.inputs]
        ins = ident if ins is None else [ident[k] if k in self.unread[index] else p for k, p in enumerate(ins)]
        outs = tuple(outs) if outs is not None else tuple(L.identity(sg.tensors[t].rank) for t in sg.outputs)
        return index, tuple(ins), outs             # (the layout of an input nothing reads changes nothing)

    def _solve(self, key: tuple) -> tuple:
        got = self.solved.get(key)
        if got is None:
            index, ins, outs = key
            sg = self.graph.subgraphs[index]
            if index in self.open:
                raise ConversionError(f"subgraph {index} ({sg.name}) runs itself")
            folded, constants = self.folded[index]
            self.open.add(index)
            try:
                got = self.solved[key] = _guarded(sg, lambda: solved_problem(
                    sg, self.table, skip=folded, constants=set(constants), graph=self.graph, subplans=self,
                    boundary=(ins, outs, "chosen with the enclosing graph")))
            finally:
                self.open.discard(index)
            got[0].subplans = None                  # solved: no reference back to here (no cycle to collect)
        return got

    def plan(self, index: int, ins=None, outs=None):
        """Subgraph `index`'s LayoutPlan with its inputs in `ins` and outputs in `outs` (None: as TFLite)."""
        key = self._key(index, ins, outs)
        got = self.plans.get(key)
        if got is None:
            pb, choice, o = self._solve(key)
            got = self.plans[key] = _ranks_checked(self.graph.subgraphs[index], assemble(pb, choice, o, keep=False))
        return got

    def cost(self, index: int, ins, outs):
        try:
            o = self._solve(self._key(index, ins, outs))[2]
        except ConversionError:
            return None                             # the emission says why, with the layouts as in TFLite
        sg = self.graph.subgraphs[index]
        gap = "" if o.proven else f"subgraph {index} ({sg.name}) planned with a gap of {o.transposes - o.bound}"
        return o.transposes, "; ".join(x for x in (gap, o.left_out) if x)


def _nested(graph: Graph, table) -> dict:
    """The main graph planner's arguments that plan its IF/WHILE subgraphs with it (none without subgraphs)."""
    return {"graph": graph, "subplans": Subplans(graph, table)} if len(graph.subgraphs) > 1 else {}


class Fresh:
    """A conversion from scratch: `convert` takes each step in full. incremental.Reconverter, a Fresh, takes the same
    steps from the last run's pieces where they still hold (the same bytes)."""
    prepared = None

    def convert(self, graph: Graph, pins=None, keep_io_layout: bool = False, opset: int = DEFAULT_OPSET,
                check: bool = True, float_io: bool = False, keep_fp16: bool = False, exact_int: bool = False,
                allow_custom: bool = False, weights_over: int | None = None,
                dynamic_as_float: bool = False) -> ConversionResult:
        """The module's `convert` (see there), each step taken by this object."""
        try:
            return self._convert(graph, pins, keep_io_layout, opset, check, float_io, keep_fp16, exact_int,
                                 allow_custom, weights_over, dynamic_as_float)
        except (MemoryError, EncodeError):   # an allocation the estimate did not foresee (protobuf: EncodeError)
            raise memory.OutOfMemory(os.path.basename(graph.path) or "the model", memory.need(graph, weights_over)
                                     ) from None

    def _convert(self, graph: Graph, pins, keep_io_layout, opset, check, float_io, keep_fp16, exact_int, allow_custom,
                 weights_over, dynamic_as_float) -> ConversionResult:
        """One path, each step taken by this object (a Reconverter reuses the last run's pieces)."""
        if graph.format != "tflite":
            raise ConversionError("only TFLite models can be converted (this one is ONNX already)")
        if not MIN_OPSET <= opset <= MAX_OPSET:
            raise ConversionError(f"opset {opset} is not supported (use {MIN_OPSET}..{MAX_OPSET})")
        sg = graph.main
        same = self.start(graph, (keep_io_layout, opset, float_io, keep_fp16, exact_int, allow_custom,
                                  dynamic_as_float))
        if not same:                                     # a re-run's model replaces one already held: no estimate
            memory.check(graph, os.path.basename(graph.path) or "the model", weights_over)
        if same and self.prepared is not None:          # checked and folded by the last run
            table, folded, constants = self.prepared
        else:
            table, folded, constants = self.prepared = _prepare(graph, allow_custom)
        pin_map = resolve_pins(sg, pins)
        nested = self.nested(graph, table)
        plan = self.plan(sg, table, pin_map, keep_io_layout, skip=folded, constants=set(constants), **nested)
        trace = ConversionTrace()
        try:
            em = self.emitter(sg, plan, opset, constants, trace)
        except HOSTILE as e:
            raise ConversionError(f"cannot prepare the conversion: the model is inconsistent ({type(e).__name__}: {e})"
                                  ) from None
        em.graph, em.table, em.nested = graph, table, emit_subgraph
        em.subplans = nested.get("subplans")
        em.q.keep_fp16, em.q.exact, em.q.dynamic_as_float = keep_fp16, exact_int, dynamic_as_float

        # The graph is built in place (helper.make_graph + make_model copied every node twice, extend copied every
        # value info once); the same bytes.
        model = onnx.ModelProto(ir_version=IR_VERSION, producer_name=PRODUCER, producer_version=_version())
        g = model.graph
        inputs = _graph_inputs(em, constants, float_io, g.input)
        out_names = _output_names(em, float_io)
        self.emit_ops(em, folded, emit_op)
        outputs = _graph_outputs(em, out_names, float_io, g.output)
        if em.state is not None:                        # resource variables: explicit state inputs/outputs
            state_in, state_out = em.state.finish(em)
            g.input.extend(state_in)
            g.output.extend(state_out)
            inputs += state_in
            outputs += state_out

        self.add_value_infos(g, em, {v.name for v in inputs + outputs}, constants)

        # Initializers are bounded before anything copies them (upb cannot copy or measure a >2 GB message), and join
        # the model last, once the rest of it has been measured exactly (see _add_initializers).
        init_bound = sum(map(self.size_bound, em.initializers))
        self.finish(em, graph, init_bound)
        if init_bound > _protobuf_limit():
            check_size(*em.initializers)
        self.add_nodes(g, em.nodes)
        g.name = graph_name(graph)
        emitted = len(g.node)
        cleaned = self.clean(g, trace, em.nodes)       # the planner should leave nothing: each rewrite is noted
        rewritten = bool(cleaned) or len(g.node) != emitted      # (an Identity dropped is no warning)
        model.opset_import.add(domain="", version=opset)
        if allow_custom:
            from .ops.custom import CUSTOM_DOMAIN, uses_domain
            if uses_domain(model.graph, CUSTOM_DOMAIN):
                model.opset_import.append(helper.make_opsetid(CUSTOM_DOMAIN, 1))
        if graph.description:
            model.doc_string = graph.description
        categories = self.categories(sg, table)
        warnings = graph.notes + em.warnings + [f"peephole: {line}" for line in cleaned]
        model.metadata_props.add(key=io_layout.KEY, value=io_layout.describe(
            sg, {t: (v.name, em.perm(t)) for t, v in zip([t for t in sg.inputs if t not in constants], inputs)},
            {t: (out_names[t], plan.outputs.get(t, em.perm(t))) for t in sg.outputs}))
        state: list[dict] = []
        if em.state is not None:
            state = em.state.describe()
            warnings += em.state.warnings
            model.metadata_props.add(key="layout_inspector.state", value=em.state.to_json())
        rest = self.rest_bound(model) if not rewritten else None    # (a rewrite may grow one)
        initializers = em.initializers if weights_over is not None else body_weights.localize(g, em.initializers)
        left_out = _add_initializers(model, initializers, init_bound, self, weights_over, rest)
        result = ConversionResult(graph=graph, plan=plan, model=model, trace=trace, categories=categories,
                                  options={"keep_io_layout": keep_io_layout, "opset": opset, "float_io": float_io,
                                           "keep_fp16": keep_fp16, "exact_int": exact_int, "allow_custom": allow_custom,
                                           "dynamic_as_float": dynamic_as_float,
                                           "pins": {sg.tensors[t].name: list(p) for t, p in pin_map.items()}
                                           if pin_map else {}},
                                  warnings=warnings, subgraphs=dict(em.subgraphs), state=state,
                                  quantization=em.q.report(), weights_left_out=bool(left_out))
        if check:
            check_model(model)
        return result

    def start(self, graph, options: tuple) -> bool:
        return False

    def nested(self, graph: Graph, table) -> dict:
        return _nested(graph, table)

    def plan(self, sg: Subgraph, *args, **kwargs):
        """plan_layouts; a model whose tensor ranks or operator inputs disagree gets a ConversionError, not a
        crash."""
        return _ranks_checked(sg, _guarded(sg, lambda: plan_layouts(sg, *args, **kwargs)))

    def emitter(self, sg, plan, opset, constants, trace) -> Emitter:
        return Emitter(sg, plan, opset, constants, trace)

    def emit_ops(self, em: Emitter, folded: set[int], emit_one) -> None:
        emit_ops(em, folded)

    def add_value_infos(self, g, em: Emitter, io_names: set, constants) -> None:
        for t, name in value_names(em, io_names, constants):
            em.value_info_for(t, name, em.perm(t), into=g.value_info)

    def size_bound(self, proto) -> int:
        return _size_bound(proto)

    def finish(self, em: Emitter, graph, initializer_bytes: int) -> None:
        pass

    def add_nodes(self, g, nodes) -> None:
        g.node.extend(nodes)

    def clean(self, g, trace, nodes) -> list[str]:
        return peephole.clean(g, trace, nodes)

    def categories(self, sg, table) -> dict:
        return op_categories(sg, table)

    def rest_bound(self, model) -> int | None:
        return None                 # _add_initializers measures the model

    def add_initializers(self, model, initializers: list, weights_over: int | None) -> bool:
        """Put the initializers in the model; those with more raw bytes than `weights_over` without their data
        (without_data). Returns whether any went in so."""
        into = model.graph.initializer
        if weights_over is not None:
            left_out = False
            for t in initializers:
                big = raw_length(t) > weights_over
                left_out |= big
                into.append(without_data(t) if big else t)
            return left_out
        for k in range(len(initializers)):          # each one is copied in and the original goes at once, so the
            add_tensor(into, initializers[k])       # weights are never held twice whole
            initializers[k] = None
        return False


def unsupported(sg: Subgraph, table, folded) -> list[str]:
    lines = []
    for op in sg.ops:
        if op.index in folded or op.opcode in table:
            continue
        ins = ", ".join(sg.tensors[t].name for t in op.inputs if t >= 0)
        outs = ", ".join(sg.tensors[t].name for t in op.outputs if t >= 0)
        kind = "custom op " if op.custom else ""
        lines.append(f"{kind}{op.opcode} (op #{op.index}; inputs: {ins}; outputs: {outs})")
    return lines


def convert(graph: Graph, pins=None, keep_io_layout: bool = False, opset: int = DEFAULT_OPSET,
            check: bool = True, float_io: bool = False, keep_fp16: bool = False, exact_int: bool = False,
            allow_custom: bool = False, weights_over: int | None = None,
            dynamic_as_float: bool = False) -> ConversionResult:
    """`float_io`: quantized graph inputs/outputs become float32 with the Quantize/Dequantize folded in;
    `keep_fp16`: float16 weights stay float16 initializers followed by a Cast (half the size);
    `exact_int`: int8 Conv/FullyConnected/Mul/Mean requantize as TFLite's kernels do (bit-exact, not QDQ), and
    dynamic-range (hybrid) ops quantize their input as LiteRT does bit for bit (by default a one-row input goes
    through DynamicQuantizeLinear and float Conv/MatMul: ops/hybrid.py);
    `dynamic_as_float`: dynamic-range (hybrid) ops as float ops on their weights dequantized once (fastest, no
    activation quantization);
    `weights_over`: initializers with more raw bytes than this join the model without their data (as
    without_data makes them; the result's `weights_left_out` says so): for a model only viewed and annotated,
    never exported or validated, whose weights would be parsed in only to be cleared again.
    A conversion from scratch, the same each time (incremental.Reconverter.convert gives the same bytes after a
    pin, from the last run's pieces)."""
    return Fresh().convert(graph, pins, keep_io_layout, opset, check, float_io, keep_fp16, exact_int, allow_custom,
                           weights_over, dynamic_as_float)


def _prepare(graph: Graph, allow_custom: bool):
    """(op table, folded ops, constants) of a graph that passes the checks before planning: arity, control-flow
    limits, every op supported (UnsupportedOpsError lists the others)."""
    table = _op_table(graph)
    if allow_custom:                                 # unknown custom ops become custom-domain nodes
        from .ops.custom import with_custom_nodes
        table = with_custom_nodes(graph, table)
    sg = graph.main
    check_arity(graph)
    check_control_flow(graph)
    folded, constants = fold_constants(sg)
    missing = unsupported(sg, table, folded)
    for i, other in enumerate(graph.subgraphs[1:], 1):
        missing += [f"{line} in subgraph {i} ({other.name})"
                    for line in unsupported(other, table, fold_constants(other)[0])]
    if missing:
        raise UnsupportedOpsError(missing)
    return table, folded, constants


def _graph_inputs(em: Emitter, constants, float_io: bool, into) -> list:
    """The main graph's inputs under their TFLite names (quantized ones as float32 with float_io), put `into` the
    graph's inputs."""
    sg, inputs = em.sg, []
    for t in sg.inputs:
        if t in constants:
            continue
        name = sg.tensors[t].name or f"input_{t}"
        if float_io and em.q.quantized_tensor(t):
            inputs.append(em.q.float_input(t, name))
            into.append(inputs[-1])
            continue
        em.reserve(t, name)
        inputs.append(em.value_info_for(t, name, em.perm(t), into=into))
    return inputs


def _output_names(em: Emitter, float_io: bool) -> dict[int, str]:
    """Graph outputs keep their TFLite names; an output presented in another layout gets an internal twin. All are
    named before emission, so no constant an op makes (a kernel's "d", "k") takes an output's name."""
    out_names = {}
    for t in em.sg.outputs:
        name = em.sg.tensors[t].name or f"output_{t}"
        if float_io and em.q.quantized_tensor(t):
            em.reserve(t, em.fresh(f"{name}_quantized"))
            em.claim(name)
        elif tuple(em.plan.outputs.get(t, perm := em.perm(t))) != tuple(perm):
            em.reserve(t, em.fresh(f"{name}_{L.name(perm)}"))
            em.claim(name)
        else:
            em.value(t)
        out_names[t] = name
    return out_names


def value_names(em: Emitter, io_names: set, constants) -> list[tuple[int, str]]:
    """(tensor, ONNX name) of the values the graph declares a value_info for: every activation emitted but the
    graph's inputs and outputs (declared there), constants and resources."""
    tensors = em.sg.tensors
    return [(t, name) for t, name in em.named_values()
            if name not in io_names and t not in constants and tensors[t].dtype not in ("resource", "variant")]


def _graph_outputs(em: Emitter, out_names: dict[int, str], float_io: bool, into) -> list:
    """Each graph output in the layout it is presented in, under its TFLite name, put `into` the graph's outputs."""
    outputs = []
    for t in em.sg.outputs:
        want = em.plan.outputs.get(t, perm := em.perm(t))
        if float_io and em.q.quantized_tensor(t):
            outputs.append(em.q.float_output(t, out_names[t], want))
            into.append(outputs[-1])
            continue
        if tuple(want) != tuple(perm):
            em.present(t, want, target=out_names[t])
        elif em.value(t) != out_names[t]:
            em.node("Identity", [em.value(t)], [out_names[t]])
        outputs.append(em.value_info_for(t, out_names[t], want, into=into))
    return outputs


def _byte_size(proto) -> int:
    """Serialised size; protobuf cannot even measure a message past 2 GB, so fall back to its tensor bytes."""
    try:
        return proto.ByteSize()
    except EncodeError:
        return len(proto.raw_data) if isinstance(proto, onnx.TensorProto) else 2**31


_PLAIN_TENSOR = frozenset({"name", "dims", "data_type", "raw_data"})
_OTHER_TENSOR_FIELDS = [f for f in onnx.TensorProto.DESCRIPTOR.fields if f.name not in _PLAIN_TENSOR]


def _size_bound(proto) -> int:
    """An upper bound of the serialised size, cheap where ByteSize is not: ByteSize encodes the whole message (as
    slow as serialising it; two such passes were a third of a large model's conversion). A plain tensor is its raw
    bytes plus headers; a model or graph is the sum of its fields, each with <= 16 bytes of tag and length."""
    if isinstance(proto, onnx.TensorProto):         # (ListFields would copy raw_data out: every weight once more)
        for f in _OTHER_TENSOR_FIELDS:
            if len(getattr(proto, f.name)) if f.is_repeated else proto.HasField(f.name):
                return _byte_size(proto)
        return 16 + raw_length(proto) + len(proto.name.encode()) + 11 * len(proto.dims) + 11
    elif isinstance(proto, (onnx.ModelProto, onnx.GraphProto)):
        size = 0
        for f, v in proto.ListFields():
            for x in (v if f.is_repeated else [v]):
                if isinstance(x, (onnx.TensorProto, onnx.GraphProto)):
                    size += _size_bound(x) + 16
                elif f.message_type is not None:
                    size += _byte_size(x) + 16
                else:
                    size += (len(x.encode()) if isinstance(x, str) else len(x) if isinstance(x, bytes) else 0) + 16
        return size
    return _byte_size(proto)


def _add_initializers(model, initializers, bound: int, adder: "Fresh", weights_over: int | None = None,
                      rest: int | None = None) -> bool:
    """Put the initializers in the model (adder.add_initializers: from scratch, or parsed in from a Reconverter's
    kept wire forms), after proving it stays under protobuf's limit: the rest of the model measured exactly (nodes
    and value infos; small) plus the initializers' bound and their tags and lengths. Those with more raw bytes
    than `weights_over` go in without their data (without_data); returns whether any did.
    `rest`: an upper bound of the model's size so far, if known (else it is measured)."""
    rest = _byte_size(model) if rest is None else rest
    count = len(initializers)
    left_out = adder.add_initializers(model, initializers, weights_over)
    if rest + bound + 16 * count > _protobuf_limit():
        check_size(model)
    return left_out


def without_data(tensor) -> onnx.TensorProto:
    """A copy of `tensor` without raw_data (name, type, dims and the rest kept): what the window's copy of a result
    holds for a big weight, and what the metadata pass reads of one (denotation.shape_view). Field by field, never
    reading raw_data: CopyFrom then clearing it copied the weight first."""
    out = onnx.TensorProto()
    copy_fields(out, tensor, lambda f: f.name != "raw_data")
    return out


def check_size(*parts) -> None:
    """One ONNX file is one protobuf message, which cannot exceed 2 GB: say so before serialising fails."""
    if sum(_size_bound(p) for p in parts) <= _protobuf_limit():
        return
    size = sum(_byte_size(p) for p in parts)
    if size > _protobuf_limit():
        raise ConversionError(f"the converted model would be {size / 2**30:.2f} GiB, beyond protobuf's 2 GB limit "
                              "for one ONNX file; models this large need external data, which export does not "
                              "write yet")


def _culprit(e: BaseException) -> Op | None:
    """The innermost op being planned when `e` was raised (the planner's frames name it `op`)."""
    found, tb = None, e.__traceback__
    while tb is not None:
        op = tb.tb_frame.f_locals.get("op")
        found = op if isinstance(op, Op) else found
        tb = tb.tb_next
    return found


def op_categories(sg: Subgraph, table) -> dict:
    """Each op's layout category (ops without a rule Terminate)."""
    return {op.index: table[op.opcode].category if op.opcode in table else Category.TERMINATE for op in sg.ops}


def _guarded(sg: Subgraph, planning):
    """planning(); a ConversionError naming the op when the model's operator inputs or ranks make it fail."""
    try:
        return planning()
    except HOSTILE as e:
        op = _culprit(e)
        where = f" at {op.label}" if op is not None else ""
        raise ConversionError(f"cannot plan layouts in subgraph {sg.name}{where}: operator inputs or tensor ranks "
                              f"are inconsistent ({type(e).__name__}: {e})") from None


def _ranks_checked(sg: Subgraph, plan, tensors=None):
    """plan, after checking that every layout has its tensor's rank (ConversionError otherwise); `tensors`: the
    only ones to check, if known (a plan updated from the last one, which passed, checks those it changed)."""
    shapes = sg.tensors
    for t, perm in (((t, plan.perms[t]) for t in tensors) if tensors is not None else plan.perms.items()):
        if len(perm) != len(shapes[t].shape):
            producers = sg.producers()
            op = sg.ops[producers[t]] if t in producers else None
            raise ConversionError(f"tensor '{sg.tensors[t].name}' is declared with shape {list(sg.tensors[t].shape)}"
                                  f" but {op.label if op else 'its producer'} writes a rank-{len(perm)} result: "
                                  "the model's shapes are inconsistent")
    return plan


def emit_ops(em: Emitter, folded: set[int]) -> None:
    """Emit every op of em's subgraph in order (TFLite stores them topologically)."""
    for op in em.sg.ops:
        if op.index in folded:
            em.trace.op_nodes[op.index] = []
            continue
        em.begin(op)
        emit_op(em, op)
    em.begin(None)


def emit_op(em: Emitter, op: Op) -> None:
    """One op's nodes (em.begin(op) was called), its fused activation and pin Transpose included."""
    try:
        em.table[op.opcode].emit(em, op)
    except ConversionError:
        raise
    except HOSTILE as e:
        where = f" in subgraph {em.sg.name}" if em.parent is not None else ""
        raise ConversionError(f"{op.opcode}#{op.index}{where}: cannot convert ({type(e).__name__}: {e})") from None
    em.flush()


def emit_subgraph(parent: Emitter, index: int, inputs: list[str], inline: bool = False, ins=None,
                  outs=None, skip=frozenset()) -> tuple[list, Emitter]:
    """Plan and emit TFLite subgraph `index` (a WHILE cond/body, IF branch, CALL_ONCE init) with its inputs in
    the layouts `ins` and its outputs presented in `outs` (None: as in TFLite), the boundary the parent's plan chose
    (Subplans). `inputs` are the ONNX names its inputs take. Nodes go to the parent's list when `inline`, else to
    the returned emitter's own list (a Loop/If body). The ops in `skip` are left out (the caller emits what they
    compute in another form; an output they write is None). Returns its outputs' names (an output may be one of
    `inputs` or a constant) and the emitter."""
    graph = parent.graph
    if graph is None:
        raise ConversionError("a subgraph is emitted only within a conversion (convert sets Emitter.graph)")
    sg = graph.subgraphs[index]
    if len(inputs) != len(sg.inputs):
        raise ConversionError(f"subgraph {index} ({sg.name}) takes {len(sg.inputs)} inputs, got {len(inputs)}")
    subplans = parent.root.subplans or Subplans(graph, parent.table)
    plan = subplans.plan(index, ins, outs)
    constants = subplans.folded[index][1]
    folded = subplans.folded[index][0]
    em = Emitter(sg, plan, parent.opset, constants, ConversionTrace(), parent=parent)
    if inline:
        em.nodes = parent.nodes
    for t, name in zip(sg.inputs, inputs):
        em.reserve(t, name)
    emit_ops(em, folded | skip if skip else folded)
    if inline and parent.op is not None:            # inlined nodes belong to the op that called the subgraph
        for name in em.trace.node_op:
            parent.trace.op_nodes.setdefault(parent.op.index, []).append(name)
            parent.trace.node_op[name] = parent.op.index
    left = {t for op in sg.ops if op.index in skip for t in op.outputs} if skip else ()
    outs = [None if t in left else em.const_of(t) if em.is_const(t) else em.present(t, plan.outputs[t])
            for t in sg.outputs]
    parent.root.subgraphs[index] = (plan, em.trace)
    return outs, em


def check_model(model, *, written: bool = False) -> None:
    """Full checker + strict shape inference: declared shapes must agree with inferred ones. (full_check runs the
    same strict, type-checking inference in C++; a second pass through infer_shapes also re-serialised and re-parsed
    the whole model, weights included.)

    A model (ModelProto) with big weights is checked without their bytes (onnx_bytes.light: references to an empty
    file), every other part at full strictness: the checker, given the model, its bytes or its file, held every
    weight twice more (the serialised bytes and their parse). What it checks of a weight left out, that its bytes
    are as many as its type and shape say, is checked here, unless `written`: onnx_bytes.pieces checked each one
    it wrote on its own, which are these."""
    light, left = onnx_bytes.light(model, "weights") if isinstance(model, onnx.ModelProto) else (model, [])
    for tensor in left if not written else ():
        n, want = len(tensor.raw_data), raw_length(tensor)          # (one weight's copy at a time)
        if n != want:
            raise ConversionError(f"the converted model fails the ONNX checker: initializer {tensor.name!r} has "
                                  f"{n} bytes of raw_data where its type and shape say {want}")
    try:
        if not (left and _checked_light(light)):
            if left:                    # no folder for the light copy: the whole model, if one message holds it
                check_size(model)
            onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        raise ConversionError(f"the converted model fails the ONNX checker: {str(e).splitlines()[0]}") from None


def _checked_light(light) -> bool:
    """The checker on `light` (onnx_bytes.light's copy), its file in a temporary folder beside the empty file its
    references name; False, nothing checked, when no such folder can be written (the whole model is, as before)."""
    try:
        folder = check_folder()
    except OSError:
        return False
    try:
        path = os.path.join(folder, "model.onnx")
        try:
            with open(os.path.join(folder, "weights"), "wb"), open(path, "wb") as f:
                f.write(light.SerializeToString())
        except OSError:
            return False
        onnx.checker.check_model(path, full_check=True)
        return True
    finally:
        shutil.rmtree(folder, ignore_errors=True)


_CHECK_PREFIX = "layout-inspector-check."


def check_folder() -> str:
    """A new temporary folder for _checked_light, named after this process, so that whoever kills it mid-check
    can remove what its `finally` never did (remove_check_folders)."""
    return tempfile.mkdtemp(prefix=f"{_CHECK_PREFIX}{os.getpid()}.")


def remove_check_folders(pid: int) -> None:
    """The light check's folders that process `pid`, now dead, left behind."""
    import glob
    for path in glob.glob(os.path.join(glob.escape(tempfile.gettempdir()), f"{_CHECK_PREFIX}{pid}.*")):
        shutil.rmtree(path, ignore_errors=True)


def graph_name(graph: Graph) -> str:
    """The file's name without its extension, as os.path.splitext cuts it (a name of leading dots only keeps them),
    from one rpartition: splitext's general walk was most of this call's cost."""
    base = os.path.basename(graph.path)
    stem, dot, _ = base.rpartition(".")
    return (stem if dot and stem.strip(".") else base) or "model"


def _version() -> str:
    return __version__


# Looked up once: an import statement inside a function costs microseconds on every conversion.
_CACHE: dict[str, Any] = {}


def _op_table(graph: Graph) -> dict:
    """The op table with every op the graph's subgraphs use (their families imported on first use)."""
    return load({op.opcode for sg in graph.subgraphs for op in sg.ops})


def _folders():
    if "folders" not in _CACHE:
        from .ops.fold import FOLDERS
        _CACHE["folders"] = FOLDERS
    return _CACHE["folders"]


def _protobuf_limit() -> int:
    if "onnx_reader" not in _CACHE:
        from inspector.core.io import onnx_reader
        _CACHE["onnx_reader"] = onnx_reader
    return _CACHE["onnx_reader"].PROTOBUF_LIMIT          # read each time: tests lower it


__all__ = ["convert", "check_model", "fold_constants", "DEFAULT_OPSET"]
