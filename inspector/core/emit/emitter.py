"""Emission: LayoutPlan + Graph -> ONNX nodes, with the ConversionTrace recorded as nodes are made.

Op emitters (inspector/core/emit/ops/*) only ask for inputs in a layout and name their outputs; this context
inserts the Transposes the plan calls for (once per tensor and layout), transposes constants once per layout
(shared weights are not transposed twice), and records which ONNX nodes and values each TFLite op and tensor became.
"""
from __future__ import annotations

import re
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

from inspector.core.layout import layout as L
from inspector.core.ir.dtypes import onnx_dtype
from inspector.core.ir.errors import ConversionError
from inspector.core.ir.graph import Graph, Op, Subgraph
from inspector.core.layout.layout import Perm
from typing import Any, Callable

from .ops.qdq import QDQ
from .result import ConversionTrace
from inspector.core.layout.plan import LayoutPlan

ACTIVATIONS = {"RELU": ("Relu", None), "RELU6": ("Clip", (0.0, 6.0)), "RELU_N1_TO_1": ("Clip", (-1.0, 1.0)),
               "RELU_0_TO_1": ("Clip", (0.0, 1.0))}
# LiteRT's kernels ignore these fused activations (measured on ADD and CONV_2D, reference and optimized): the
# conversion follows the interpreter, and says so in the result's warnings.
IGNORED_BY_LITERT = {"TANH", "SIGN_BIT"}


_SPACES = re.compile(r"\s+")
# numpy dtypes whose TensorProto is just their little-endian bytes; others (strings, 4-bit, float8) go through
# numpy_helper.from_array, which packs or encodes them.
_RAW_TYPES = {np.dtype(t): helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in (
    "float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool")}


def tensor_proto(arr: np.ndarray, name: str) -> onnx.TensorProto:
    """numpy_helper.from_array(arr, name) of the array in C order, without its per-call dtype probing (one call
    per initializer); a transposed weight's raw bytes are gathered by tobytes at once, not copied twice."""
    code = _RAW_TYPES.get(arr.dtype)
    if code is None or sys.byteorder != "little" or arr.dtype.byteorder == ">":
        if not arr.flags.c_contiguous:          # (np.ascontiguousarray would make scalars 1-D)
            arr = arr.copy(order="C")
        return numpy_helper.from_array(arr, name)
    t = onnx.TensorProto(dims=arr.shape, data_type=code, raw_data=arr.tobytes())
    if name:
        t.name = name
    return t


def make_value_info(name: str, elem_type: int, dims, into=None, known: dict | None = None) -> onnx.ValueInfoProto:
    """helper.make_tensor_value_info's result (ints are dim_value, strings dim_param; a scalar still declares its
    empty shape), parsed from its wire form: parsing one small message is cheaper than setting its nested fields
    one by one (one per tensor of every model). `known`: the TypeProto bytes of each (type, shape) built so far in
    this conversion (many tensors share one). Not kept between conversions: a process-wide table made every
    conversion of a model after its first cheaper than the first (a few per cent of a single-op model's), which is
    what repeated timings would then measure. `into`: a repeated field of the graph to parse it in place (no copy
    when the graph takes it)."""
    key = (elem_type, *dims)
    tb = known.get(key) if known is not None else None
    if tb is None:
        tb = _type_wire(elem_type, dims)
        if known is not None:
            known[key] = tb
    nb = name.encode()
    vi = onnx.ValueInfoProto() if into is None else into.add()
    n, m = len(nb), len(tb)
    vi.ParseFromString(b"\n" + (_VARINT1[n] if n < 0x80 else _varint(n)) + nb + b"\x12" +
                       (_VARINT1[m] if m < 0x80 else _varint(m)) + tb)
    return vi


_VARINT1 = [bytes((n,)) for n in range(0x80)]      # one-byte varints: nearly every name and type is that short


def _type_wire(elem_type: int, dims) -> bytes:
    """A tensor TypeProto's bytes (elem_type, then the shape, present even when empty), written as upb writes them
    (fields in number order): building the message field by field to serialise it was most of a value info's
    cost. Dims other than ints >= 0 and strings (none reach here from an emitter) go through protobuf itself."""
    if type(elem_type) is not int or elem_type < 0:
        return _type_proto(elem_type, dims)
    parts = []
    for d in dims:
        if type(d) is str:
            b = d.encode()
            n = len(b)
            parts.append(b"\n" + _VARINT1[n + 2] + b"\x12" + _VARINT1[n] + b if n < 0x7E else
                         _field(1, b"\x12" + _varint(n) + b))
        elif type(d) is int and 0 <= d < 0x80:
            parts.append(b"\n\x02\x08" + _VARINT1[d])
        elif type(d) is int and d > 0:
            v = _varint(d)
            parts.append(b"\n" + _VARINT1[len(v) + 1] + b"\x08" + v)
        else:
            return _type_proto(elem_type, dims)
    shape = b"".join(parts)
    tensor = b"\x08" + _varint(elem_type) + _field(2, shape)
    return _field(1, tensor)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (number < 16) on the wire."""
    n = len(payload)
    return bytes((number << 3 | 2,)) + (_VARINT1[n] if n < 0x80 else _varint(n)) + payload


def _type_proto(elem_type: int, dims) -> bytes:
    t = onnx.TypeProto()
    shape = t.tensor_type.shape
    t.tensor_type.elem_type = elem_type
    shape.SetInParent()
    for d in dims:
        if type(d) is str:
            shape.dim.add(dim_param=d)
        else:
            shape.dim.add(dim_value=d)
    return t.SerializeToString()


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def make_node(op_type: str, inputs, outputs, name: str, domain: str, attrs: dict) -> onnx.NodeProto:
    """helper.make_node's result, built directly for the attribute kinds emitters use (ints, floats, strings,
    int lists): helper.make_attribute's type probing and copies were a quarter of emission time on large models.
    Attributes of those kinds are parsed in from their wire form, made once per distinct set (a big model's
    nodes have few)."""
    node = onnx.NodeProto(op_type=op_type, name=name, input=inputs, output=outputs)
    if domain:
        node.domain = domain
    if attrs:
        key = _attrs_key(attrs)
        wire = _ATTRS.get(key) if key is not None else None
        if wire is None:
            made = onnx.NodeProto()
            _add_attributes(made, attrs)
            wire = made.SerializeToString()
            if key is not None and len(_ATTRS) < MAX_ATTR_SETS:
                _ATTRS[key] = wire
        node.MergeFromString(wire)
    return node


_ATTRS: dict[tuple, bytes] = {}     # _attrs_key -> the attributes' entries on NodeProto's wire
MAX_ATTR_SETS = 10_000


def _attrs_key(attrs: dict) -> tuple | None:
    """The attributes as a key that tells apart every value make_node would write differently (by type: 1 and
    1.0 and True are equal keys otherwise; floats by their bits: 0.0 and -0.0, NaN); None for other kinds."""
    key = []
    for k in sorted(attrs):
        v = attrs[k]
        kind = type(v)
        if kind is int or kind is str:
            key.append((k, kind, v))
        elif kind is float:
            key.append((k, kind, v.hex()))
        elif (kind is list or kind is tuple) and v and all(type(x) is int for x in v):
            key.append((k, list, tuple(v)))
        else:
            return None
    return tuple(key)


def _add_attributes(node, attrs: dict) -> None:
    for key in sorted(attrs):
        value = attrs[key]
        if isinstance(value, (int, np.integer)):
            a = node.attribute.add(name=key, type=onnx.AttributeProto.INT)
            a.i = int(value)
        elif isinstance(value, float):
            a = node.attribute.add(name=key, type=onnx.AttributeProto.FLOAT)
            a.f = value
        elif isinstance(value, str):
            node.attribute.add(name=key, type=onnx.AttributeProto.STRING, s=value.encode())
        elif type(value) in (list, tuple) and value and all(type(v) is int for v in value):
            node.attribute.add(name=key, type=onnx.AttributeProto.INTS, ints=value)
        else:
            node.attribute.append(helper.make_attribute(key, value))


def next_free(base: str, used, k: int, extra=()) -> tuple[str, int]:
    """(`base_k`, k) with the smallest k above the given one whose name is in neither `used` nor `extra`."""
    while True:
        k += 1
        name = f"{base}_{k}"
        if name not in used and name not in extra:
            return name, k


def clean_base(base: str) -> str:
    """A name base as fresh() uses it: whitespace runs become '_', empty becomes 'v'. (str.split finds whitespace
    as the regex's \\s does, Unicode's included, in a fraction of its time: every node and value is named here.)"""
    return _SPACES.sub("_", base) if base and base.split(None, 1) != [base] else base or "v"


class Emitter:
    def __init__(self, sg: Subgraph, plan: LayoutPlan, opset: int, constants: dict[int, np.ndarray],
                 trace: ConversionTrace | None = None, parent: "Emitter | None" = None):
        self.sg, self.plan, self.opset = sg, plan, opset
        self.constants = constants                       # tensor -> data (file constants and folded ones)
        self.trace = trace or ConversionTrace()
        self.nodes: list[onnx.NodeProto] = []
        self.value_info: dict[str, onnx.ValueInfoProto] = {}
        # A subgraph's emitter (Loop/If body, inlined subgraph) shares the model-wide name space, and puts its
        # constants in the main graph, whose values every nested body can read.
        self.parent = parent
        self.initializers: list[onnx.TensorProto] = parent.initializers if parent is not None else []
        self._used: set[str] = parent._used if parent is not None else set()
        self._taken: dict[str, int] = parent._taken if parent is not None else {}   # base -> last k fresh() gave
        self._type_bytes: dict[tuple, bytes] = parent._type_bytes if parent is not None else {}   # make_value_info's
        self.graph: Graph | None = parent.graph if parent is not None else None   # the whole Graph (set by convert)
        self.table: dict[str, Any] = parent.table if parent is not None else {}   # the op table (set by convert)
        # emits a nested TFLite subgraph (set by convert; op handlers call emit_subgraph, never convert)
        self.nested: Callable[..., tuple[list[str], Emitter]] | None = parent.nested if parent is not None else None
        self.subplans = None                             # on the root: convert.Subplans, the subgraphs' plans
        self.subgraphs: dict[int, tuple[LayoutPlan, ConversionTrace]] = {}   # on the root: emitted subgraphs
        self.state = None                                # on the root: ops.variables.State, when used
        self.memo: dict[tuple[Any, ...], Any] = {}      # what a handler made once: key -> ONNX name(s)
        self._vname: dict[int, str] = {}
        self._pending: list[tuple[str, str, str, str]] = []
        self.op: Op | None = None
        self.last_node = ""
        self.warnings: list[str] = []
        self.conflict_at = {(c.tensor, c.to_perm): c for c in plan.conflicts} if plan.conflicts else {}
        self.pin_conflicts: dict[int, list] = {}            # tensor -> its "pin" conflicts (flush names their node)
        for c in plan.conflicts:
            if c.kind == "pin":
                self.pin_conflicts.setdefault(c.tensor, []).append(c)
        self.q = QDQ(self)                               # quantized tensors: Q/DQ around float ops

    @property
    def root(self) -> "Emitter":
        """The main graph's emitter (a property, not an attribute: a reference to itself would make every
        emitter a reference cycle, left for the garbage collector with all it holds)."""
        return self if self.parent is None else self.parent.root

    def emit_subgraph(self, index: int, inputs: list[str], inline: bool = False, ins=None,
                      outs=None, skip=frozenset()) -> tuple[list, "Emitter"]:
        """Plan and emit TFLite subgraph `index` (WHILE cond/body, IF branch, CALL_ONCE init) under this emitter,
        its inputs in layouts `ins`, its outputs in `outs` (None: as TFLite), the ops in `skip` left out: its
        outputs' names and its emitter (see convert.emit_subgraph)."""
        if self.nested is None:
            raise ConversionError("a subgraph is emitted only within a conversion (convert sets Emitter.nested)")
        return self.nested(self, index, inputs, inline, ins, outs, skip)

    # --- names -------------------------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        """`base`, or `base_k` with the smallest k >= 2 not taken. Names are never released, so the search resumes
        where the last one for this base stopped (counting from 2 each time was quadratic: quantized models make
        hundreds of `..._scale` names)."""
        base = clean_base(base)
        used = self._used
        if base not in used:
            used.add(base)
            return base
        name, k = next_free(base, used, self._taken.get(base, 1))
        self._taken[base] = k
        used.add(name)
        return name

    def value(self, t: int) -> str:
        """The ONNX name of activation tensor t in its planned layout."""
        if t not in self._vname:
            self._vname[t] = self.fresh(self.sg.tensors[t].name or f"t{t}")
            self.note_value(t, self._vname[t])
        return self._vname[t]

    def reserve(self, t: int, name: str) -> None:
        self._vname[t] = name
        self._used.add(name)
        self.note_value(t, name)

    def claim(self, *names: str) -> None:
        """Take `names` (graph I/O, state) so fresh() never returns them."""
        self._used.update(names)

    def named_values(self):
        """(tensor, ONNX value name) for every activation emitted so far."""
        return self._vname.items()

    def defer(self, kind: str, src: str, dst: str, arg: str) -> None:
        """Work flush() does once the op's own nodes are out (a Quantize of its output: kind "quantize")."""
        self._pending.append((kind, src, dst, arg))

    def note_value(self, t: int, name: str) -> None:
        """Record in the trace that ONNX value `name` holds TFLite tensor t."""
        self.trace.tensor_values.setdefault(t, []).append(name)
        self.trace.value_tensor.setdefault(name, t)

    # --- tensors -----------------------------------------------------------------------------------------
    def tensor(self, t: int):
        """Tensor t as op emitters see it: a quantized one reads as float32 (they get its real values)."""
        return self.q.view(t)

    def shape(self, t: int) -> tuple[int, ...]:
        """TFLite shape."""
        return self.sg.tensors[t].shape

    def perm(self, t: int) -> Perm:
        p = self.plan.perms.get(t)                       # (LayoutPlan.perm, without building the default first)
        return p if p is not None else tuple(range(len(self.sg.tensors[t].shape)))

    def onnx_shape(self, t: int, perm: Perm | None = None) -> tuple[int, ...]:
        return L.apply(self.shape(t), perm if perm is not None else self.perm(t))

    def is_const(self, t: int) -> bool:
        return t >= 0 and t in self.constants

    def data(self, t: int) -> np.ndarray:
        return self.constants[t]

    def const(self, array, base: str = "const", dtype=None) -> str:
        arr = np.asarray(array, dtype=dtype)
        name = self.fresh(base)
        self.initializers.append(tensor_proto(arr, name))
        return name

    def const_of(self, t: int, perm: Perm | None = None, shape=None, dtype=None, key: str = "") -> str:
        """Tensor t's constant data, transposed by `perm` and/or reshaped, as one initializer per variant."""
        ck = ("const", t, tuple(perm) if perm is not None else None, tuple(shape) if shape is not None else None,
              str(dtype), key, self.q.const_key(t))
        if ck in self.memo:
            return self.memo[ck]
        special = self.q.const(t, perm, shape)          # quantized weights + DequantizeLinear, float16 + Cast
        if special is not None:
            self.memo[ck] = special
            return special
        arr = self.data(t)
        if shape is not None:
            arr = arr.reshape(shape)
        if perm is not None and not L.is_identity(perm):
            arr = np.transpose(arr, perm)
        if dtype is not None:
            arr = arr.astype(dtype)
        name = self.const(arr, self.tensor(t).name or f"c{t}")
        self.note_value(t, name)
        self.memo[ck] = name
        return name

    def i64(self, values, base: str = "shape") -> str:
        if type(values) in (tuple, list) and all(type(v) is int for v in values):
            vals = tuple(values)                         # the usual case, without a numpy round trip
        else:
            vals = tuple(int(v) for v in np.asarray(values).reshape(-1))
        ck = ("i64", vals)
        if ck not in self.memo:
            self.memo[ck] = self.const(np.array(vals, dtype=np.int64), base)
        return self.memo[ck]

    def scalar(self, value, dtype: str = "float32", base: str = "k") -> str:
        ck = ("scalar", float(value), dtype)
        if ck not in self.memo:
            self.memo[ck] = self.const(np.array(value, dtype=dtype), base)
        return self.memo[ck]

    # --- inputs in the layout an op reads ----------------------------------------------------------------
    def input(self, op: Op, slot: int, want: Perm | None = None) -> str:
        """Input `slot` of `op` presented in `want` (default: what the plan says the op reads). '' if absent."""
        if slot >= len(op.inputs) or op.inputs[slot] < 0:
            return ""
        t = op.inputs[slot]
        const = t in self.constants
        if want is None:
            want = self.plan.inputs.get((op.index, slot))
            if want is None:
                want = tuple(range(len(self.sg.tensors[t].shape))) if const else self.perm(t)
        if const:
            return self.const_of(t, want)
        return self.q.read(op, slot, self.present(t, want), want)

    def present(self, t: int, want: Perm, target: str | None = None) -> str:
        """Activation t in layout `want`: a Reshape when only size-1 axes move, else a Transpose; cached."""
        have = self.perm(t)
        if tuple(want) == tuple(have) and target is None:
            return self.value(t)
        ck = ("present", t, tuple(want))
        if ck in self.memo:
            return self.memo[ck]
        step = L.compose(L.inverse(have), want)
        out = target or self.fresh(f"{self.tensor(t).name}_{L.name(want)}")
        if self.rearrange(self.value(t), L.apply(self.tensor(t).dims, have), step, out):
            node = self.last_node
            conflict = self.conflict_at.get((t, tuple(want)))
            if conflict is not None:
                conflict.node = node
                self.trace.inserted[node] = conflict
        self.note_value(t, out)
        self.memo[ck] = out
        return out

    def rearrange(self, src: str, dims, step: Perm, out: str) -> bool:
        """Write src (of ONNX shape `dims`) transposed by `step` to `out`: no data moves when only size-1 axes move
        (Identity, a Reshape, or Squeeze and Unsqueeze where a Reshape cannot say where two dynamic dims go).
        True when it took a Transpose."""
        if L.is_identity(step):
            self.node("Identity", [src], [out])
        elif L.reshapable(dims, step):
            self.node("Reshape", [src, self.i64(L.apply(dims, step))], [out])
        elif L.is_trivial(dims, step):
            ones = [a for a, d in enumerate(dims) if d == 1]
            gone = self.node("Squeeze", [src, self.i64(ones, "axes")], 1)[0]
            self.node("Unsqueeze", [gone, self.i64([a for a, d in enumerate(L.apply(dims, step)) if d == 1], "axes")],
                      [out])
        else:
            self.node("Transpose", [src], [out], perm=list(step))
            return True
        return False

    def broadcast_input(self, op: Op, slot: int, out_rank: int, out_perm: Perm) -> str:
        """A lower-rank operand of a broadcasting op, aligned to the output's rank and layout (numpy rules)."""
        t = op.inputs[slot]
        r = self.tensor(t).rank
        if r == out_rank:
            return self.input(op, slot, out_perm)
        if r == 0:
            return self.input(op, slot, ())
        full = (1,) * (out_rank - r) + tuple(self.shape(t))
        if self.is_const(t):
            return self.const_of(t, out_perm, shape=full)
        if L.is_identity(out_perm):
            return self.q.read(op, slot, self.value(t), self.perm(t))   # ONNX broadcasting aligns trailing axes
        ck = ("bcast", t, tuple(out_perm))
        if ck in self.memo:
            return self.memo[ck]
        x = self.input(op, slot, L.identity(r))
        if self.tensor(t).dynamic:
            up = self.node("Unsqueeze", [x, self.i64(range(out_rank - r), "axes")], 1)[0]
            out = self.node("Transpose", [up], 1, perm=list(out_perm))[0]
        else:
            out = self.node("Reshape", [x, self.i64(L.apply(full, out_perm))], 1)[0]
            if not L.is_trivial(full, out_perm):
                out = self.node("Transpose", [self.node("Reshape", [x, self.i64(full)], 1)[0]], 1,
                                perm=list(out_perm))[0]
        self.memo[ck] = out
        return out

    # --- outputs -----------------------------------------------------------------------------------------
    def output(self, op: Op, slot: int = 0) -> str:
        """Name to write output `slot` to, in the layout the op produces (a pin's Transpose follows)."""
        t = op.outputs[slot]
        perm = self.perm(t)
        natural = self.plan.produced.get((op.index, slot), perm)
        pinned = tuple(natural) != tuple(perm)
        name = self.fresh(f"{self.tensor(t).name}_{L.name(natural)}") if pinned else self.value(t)
        real = self.q.output(op, slot, name) if self.q.active(t) else name   # a QuantizeLinear into `name`
        if pinned:
            self._pending.append(("pin", name, self.value(t), ",".join(map(str, L.compose(L.inverse(natural),
                                                                                           self.perm(t))))))
        return real

    def fused(self, op: Op, out: str) -> str:
        """Where the main node should write when a fused activation follows it."""
        act = op.options.get("fused_activation_function", "NONE")
        if act in (None, "NONE", 0) or self.q.ex.applies(op):      # exact_int: a clamp on the integers
            return out
        if act in IGNORED_BY_LITERT:
            self.warnings.append(f"{op.opcode}#{op.index}: fused activation {act} is ignored, as LiteRT does")
            return out
        if act not in ACTIVATIONS:
            raise ConversionError(f"{op.opcode}#{op.index}: fused activation {act} is not supported")
        tmp = self.fresh(out + "_pre")
        self._pending.insert(0, ("act", tmp, out, act))
        return tmp

    def flush(self) -> None:
        """Emit what an op left pending: its fused activation, then any pin Transpose."""
        pending, self._pending = self._pending, []
        for kind, src, dst, arg in pending:
            if kind == "act":
                op_type, bounds = ACTIVATIONS[arg]
                if bounds is None:
                    self.node(op_type, [src], [dst])
                else:
                    dt = self.tensor(self.op.outputs[0]).dtype if self.op else "float32"
                    dt = dt if dt in ("float16", "float32", "float64") else "float32"
                    self.node("Clip", [src, self.scalar(bounds[0], dt), self.scalar(bounds[1], dt)], [dst])
            elif kind == "quantize":
                self.q.flush(src, dst, arg)
            else:
                step = tuple(int(x) for x in arg.split(","))
                t = self.trace.value_tensor.get(dst)
                if t is None:
                    self.node("Transpose", [src], [dst], perm=list(step))
                elif not self.rearrange(src, L.apply(self.tensor(t).dims, L.compose(self.perm(t), L.inverse(step))),
                                        step, dst):    # (t's shape in the layout its op wrote)
                    continue
                node = self.last_node
                for c in self.pin_conflicts.get(t, ()) if t is not None else ():
                    c.node = node
                    self.trace.inserted[node] = c

    # --- nodes -------------------------------------------------------------------------------------------
    def node(self, op_type: str, inputs: list[str], outputs, domain: str = "", name: str | None = None,
             **attrs) -> list[str]:
        """Append a node. `outputs` is a list of names or a count of fresh names; returns the output names
        (the node's own name is in `last_node`)."""
        op = self.op
        outs = list(outputs) if not isinstance(outputs, int) else [self.fresh(f"{op_type}_out") for _ in range(outputs)]
        node_name = self.fresh(name or (f"{op.opcode}#{op.index}/{op_type}" if op is not None else f"io/{op_type}"))
        if attrs:
            attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(make_node(op_type, inputs, outs, node_name, domain, attrs))
        if op is not None:
            trace = self.trace
            trace.op_nodes.setdefault(op.index, []).append(node_name)
            trace.node_op[node_name] = op.index
        self.last_node = node_name
        return outs

    def begin(self, op: Op | None) -> None:
        self.op = op
        if op is not None:
            self.trace.op_nodes.setdefault(op.index, [])

    def value_info_for(self, t: int, name: str, perm: Perm, dtype: str | None = None, into=None
                       ) -> onnx.ValueInfoProto:
        ten = self.sg.tensors[t]
        sig = ten.shape_signature if ten.shape_signature is not None and len(ten.shape_signature) == ten.rank \
            else ten.shape
        dims: list[str | int] = []
        for axis in perm:
            if sig[axis] < 0:
                dims.append("batch" if axis == 0 else f"{ten.name or 't'}_d{axis}")
            else:
                dims.append(int(ten.shape[axis]))
        return make_value_info(name, onnx_dtype(dtype or ten.dtype), dims, into, self._type_bytes)
