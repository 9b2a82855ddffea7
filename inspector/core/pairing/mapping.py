"""Mapping: a TFLite graph paired with an ONNX model made elsewhere, tensor by tensor and op by node.

It has the shape of a ConversionTrace (op_nodes, tensor_values, node_op, value_tensor), so whatever syncs selection
or maps errors through our own converter's trace works through it too. Matching, in order:
1. names: converters keep TFLite tensor names, often with a suffix (`:0`, `_nchw`, `__transpose`,
   `_raw_output___3`); a name counts only if it normalises to exactly one TFLite tensor and the shapes agree in
   some layout. A name on an op's first node (tf2onnx names the Conv, not the Clip of its fused Relu6) is carried
   on to the value the op ends with;
2. graph inputs/outputs by position;
3. copies: what a Transpose, Identity, QuantizeLinear/DequantizeLinear makes of a mapped value is that tensor
   again, in the layout the perm gives (also backwards, and through a Reshape that only moves size-1 axes);
4. position and shape: an op whose inputs are mapped looks downstream of their values for the nearest value its
   output's shape fits in some layout. Ties are broken by the ONNX op types our own emitter uses for that op, then
   by the weights (constants compared by their sorted values, so any layout matches), then by where one op's
   branches meet (GELU); a tie that stays is left unmatched, never guessed.
ONNX nodes then belong to the op whose tensor they write, or to the op that consumes what they write if they read
only that op's inputs (weights transposed at run time, a Transpose pair in front of a Conv). Anything else is listed
as unmatched.
"""
from __future__ import annotations

import hashlib
import re
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from inspector.core.layout import layout as L
from inspector.core.ir.graph import Graph
from inspector.core.layout.fitting import fitting_perms
from inspector.core.layout.layout import Perm
from inspector.core.io.onnx_reader import DTYPES
from inspector.core.emit.result import ConversionTrace

# ONNX nodes that move or relabel data without computing: they do not count as an op's work when matching by position.
LAYOUT_TYPES = {"Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten", "Cast", "QuantizeLinear",
                "DequantizeLinear"}
# Nodes whose output is their input again (another layout, or the same values quantized / dequantized).
COPY_TYPES = {"Transpose", "Identity", "QuantizeLinear", "DequantizeLinear"}
# What a fused activation becomes.
ACTIVATION_TYPES = {"Relu", "Clip", "Tanh", "Sigmoid", "LeakyRelu", "HardSigmoid", "HardSwish", "Min", "Max", "Sign"}
MAX_HOPS = 12
MIN_WEIGHT_SIZE = 8                     # smaller constants (axes, shapes, scalars) say nothing about which op it is
_SUFFIX = re.compile(r"(:\d+|_raw_output___\d+|__transpose(_\d+)?|_transposed?|_[NCDHW]{3,5}|__\d+)$", re.I)


def normalise(name: str) -> str:
    """A value name without the suffixes converters append to the TFLite tensor name."""
    prev = None
    while prev != name and name:
        prev, name = name, _SUFFIX.sub("", name)
    return name or prev or ""


def fingerprint(data) -> bytes | None:
    """The same for a constant in any layout (its sorted values), None for small or non-numeric constants."""
    a = np.asarray(data)
    if a.size < MIN_WEIGHT_SIZE or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        return None
    return hashlib.blake2b(np.sort(a.astype(np.float32).ravel()).tobytes(), digest_size=16).digest()


def node_label(node, index: int) -> str:
    """What onnx_reader names an ONNX node (its name, else op type and position)."""
    return node.name or f"{node.op_type}#{index}"


@dataclass
class Mapping(ConversionTrace):
    """ConversionTrace-shaped pairing; values in tensor_values are in ONNX order, the first is the tensor's image."""
    how: dict[int, str] = field(default_factory=dict)                 # tensor -> "name" | "io" | "copy" | "position"
    layouts: dict[str, tuple[Perm, ...]] = field(default_factory=dict)  # onnx value -> perms its shape fits
    unmatched_tensors: list[int] = field(default_factory=list)        # TFLite activation tensors with no value
    unmatched_ops: list[int] = field(default_factory=list)            # TFLite ops with no node
    unmatched_nodes: list[str] = field(default_factory=list)          # ONNX nodes with no op
    unmatched_io: list[str] = field(default_factory=list)             # ONNX graph inputs/outputs with no tensor
    folded: list[int] = field(default_factory=list)                   # TFLite ops folded into constants
    scope: list[int] = field(default_factory=list)                    # the TFLite activation tensors matched against

    def image(self, t: int) -> str | None:
        values = self.tensor_values.get(t)
        return values[0] if values else None

    def layout(self, value: str) -> Perm | None:
        """The layout a value most likely has (first fitting perm), None when its shape is unknown."""
        perms = self.layouts.get(value)
        return perms[0] if perms else None

    @property
    def matched(self) -> int:
        return sum(1 for t in self.scope if t in self.tensor_values)

    def coverage(self, graph: Graph) -> dict:
        ops = [op.index for op in graph.main.ops if op.index not in self.folded]
        by = {k: sum(1 for t in self.scope if self.how.get(t) == k) for k in ("name", "io", "position")}
        return {"tensors": [self.matched, len(self.scope)],
                "ops": [sum(1 for k in ops if self.op_nodes.get(k)), len(ops)], "by": by}


class _Onnx:
    """The external model's graph as indexes: producers, consumers, shapes (from shape inference)."""

    def __init__(self, model: onnx.ModelProto):
        g = model.graph
        self.nodes = list(g.node)
        self.labels = [node_label(n, i) for i, n in enumerate(self.nodes)]
        self.init = {t.name for t in g.initializer}
        self.inputs = [v.name for v in g.input if v.name not in self.init]
        self.outputs = [v.name for v in g.output]
        self.producer: dict[str, int] = {}
        self.consumers: dict[str, list[int]] = {}
        for i, n in enumerate(self.nodes):
            for o in n.output:
                if o:
                    self.producer[o] = i
            for x in n.input:
                if x:
                    self.consumers.setdefault(x, []).append(i)
        self.constant = set(self.init) | {o for i, n in enumerate(self.nodes) if n.op_type == "Constant"
                                          for o in n.output}
        self.dims, self.dtypes = _shapes(model)
        self._arrays = {t.name: t for t in g.initializer}
        self._fps: dict[str, bytes | None] = {}

    def weights(self, i: int, depth: int = 3) -> set[bytes]:
        """Fingerprints of the constants node i reads, also through constant-only nodes (a Transpose of weights,
        a DequantizeLinear, a Cast of float16)."""
        out: set[bytes] = set()
        for v in self.nodes[i].input:
            if v in self._arrays:
                if v not in self._fps:
                    try:
                        self._fps[v] = fingerprint(numpy_helper.to_array(self._arrays[v]))
                    except Exception:               # external or exotic data: no fingerprint
                        self._fps[v] = None
                fp = self._fps[v]
                if fp is not None:
                    out.add(fp)
            elif v in self.producer and depth > 0 and all(
                    x in self.constant or x in self._arrays or not x for x in self.nodes[self.producer[v]].input):
                out |= self.weights(self.producer[v], depth - 1)
        return out

    def values(self) -> list[str]:
        """Graph inputs, then every node output, in graph order."""
        return self.inputs + [o for n in self.nodes for o in n.output if o]


def _shapes(model: onnx.ModelProto) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Static dims (-1 where unknown) and dtype names of every value shape inference can type."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False)
    except Exception:                   # a model inference cannot follow: keep whatever the file declares
        inferred = model
    g = inferred.graph
    dims, dtypes = {}, {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            dims[vi.name] = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        if vi.type.HasField("tensor_type") and tt.elem_type:
            dtypes[vi.name] = DTYPES.get(tt.elem_type, "")
    return dims, dtypes


def match(graph: Graph, model: onnx.ModelProto) -> Mapping:
    """Pair the main subgraph of a TFLite Graph with an ONNX model's main graph."""
    return _Matcher(graph, model).run()


class _Matcher:
    def __init__(self, graph: Graph, model: onnx.ModelProto):
        from inspector.core.emit.convert import fold_constants
        from inspector.core.ir.errors import ConversionError
        from inspector.core.emit.ops.table import load_all
        self.sg = sg = graph.main
        self.x = _Onnx(model)
        self.table = load_all()
        try:
            folded, constants = fold_constants(sg)
        except ConversionError:
            folded, constants = set(), {}
        self.weights = {}                   # op -> fingerprints of its constant inputs (folded ones included)
        for op in sg.ops:
            fps = {fingerprint(constants[t]) for t in op.inputs if t in constants}
            self.weights[op.index] = fps - {None}
        self.m = Mapping(folded=sorted(folded))
        self.producers, self.consumers = sg.producers(), sg.consumers()
        folded_out = {t for k in folded for t in sg.ops[k].outputs}
        self.m.scope = [t.index for t in sg.tensors if t.data is None and t.index not in folded_out
                        and t.dtype not in ("resource", "variant")
                        and (t.index in self.producers or t.index in sg.inputs)]
        self.in_scope = set(self.m.scope)

    # -- bookkeeping ----------------------------------------------------------------------------------------
    def fits(self, t: int, value: str) -> list[Perm] | None:
        """Perms the value's shape fits for tensor t; None when its shape is unknown."""
        dims = self.x.dims.get(value)
        return None if dims is None else fitting_perms(self.sg.tensors[t].shape, dims)

    def bind(self, t: int, value: str, how: str, perms=None) -> None:
        m = self.m
        if value in m.value_tensor:
            return
        m.value_tensor[value] = t
        m.tensor_values.setdefault(t, []).append(value)
        m.how.setdefault(t, how)
        perms = self.fits(t, value) if perms is None else perms
        if perms:
            m.layouts[value] = tuple(perms)

    # -- the four passes --------------------------------------------------------------------------------------
    def by_name(self) -> None:
        exact: dict[str, list[int]] = {}
        norm: dict[str, list[int]] = {}
        for t in self.m.scope:
            name = self.sg.tensors[t].name
            exact.setdefault(name, []).append(t)
            norm.setdefault(normalise(name), []).append(t)
        for v in self.x.values():
            cands = exact.get(v) or norm.get(normalise(v)) or []
            if len(cands) == 1 and self.fits(cands[0], v) != []:
                self.bind(cands[0], v, "name")

    def by_io_position(self) -> None:
        for tfl, values in ((self.sg.inputs, self.x.inputs), (self.sg.outputs, self.x.outputs)):
            for t, v in zip(tfl, values):
                if t in self.in_scope and t not in self.m.tensor_values and v not in self.m.value_tensor \
                        and self.fits(t, v):
                    self.bind(t, v, "io")

    def copies(self) -> None:
        """Follow COPY_TYPES nodes from mapped values, both ways: their outputs are the same tensor, and so is the
        input of a Transpose whose output is mapped (an NCHW result transposed back for the graph output), or of a
        Reshape that only moves size-1 axes (how our converter presents a one-channel output)."""
        queue = deque(self.m.value_tensor)
        while queue:
            v = queue.popleft()
            t, perm = self.m.value_tensor[v], self.m.layout(v)
            if perm is None:
                continue
            steps = [(self.x.nodes[i], 1) for i in self.x.consumers.get(v, [])]
            if v in self.x.producer:
                steps.append((self.x.nodes[self.x.producer[v]], -1))
            for n, way in steps:
                if not n.input or not n.output or n.op_type not in COPY_TYPES and not (
                        way < 0 and n.op_type == "Reshape" and not self.reshapes(t)):
                    continue
                if way < 0 and n.op_type not in ("Transpose", "Reshape"):
                    continue
                other = n.output[0] if way > 0 else n.input[0]
                if other in self.m.value_tensor or other in self.x.constant or other not in self.x.producer \
                        and other not in self.x.inputs:
                    continue
                fits = self.fits(t, other)
                p: tuple[int, ...] | None = perm
                if n.op_type == "Transpose":
                    tp = next((list(a.ints) for a in n.attribute if a.name == "perm"), None)
                    tp = tp or list(reversed(range(len(perm))))      # ONNX default: reverse the axes
                    if len(tp) != len(perm):
                        continue
                    p = L.compose(perm, tp) if way > 0 else L.compose(perm, L.inverse(tp))
                elif n.op_type == "Reshape":                          # same data order, size-1 axes elsewhere
                    shape = self.sg.tensors[t].shape
                    order = [a for a in perm if shape[a] != 1]
                    p = next((q for q in fits or () if [a for a in q if shape[a] != 1] == order), None)
                    if p is None:
                        continue
                if fits is not None and p not in fits:
                    continue
                self.bind(t, other, "copy", [p])
                queue.append(other)

    def reshapes(self, t: int) -> bool:
        """Whether the TFLite op writing t is itself a reshape (then an ONNX Reshape before t is that op)."""
        k = self.producers.get(t)
        return k is not None and bool(self.types(self.sg.ops[k])) and self.types(self.sg.ops[k]) <= LAYOUT_TYPES

    def by_position(self) -> bool:
        changed = False
        for op in self.sg.ops:
            if op.index in self.m.folded:
                continue
            outs = [t for t in op.outputs if t in self.in_scope]
            ins = [t for t in op.inputs if t in self.in_scope]
            if not outs or not ins or all(t in self.m.tensor_values for t in outs):
                continue
            if any(t not in self.m.tensor_values for t in ins):
                continue
            dist = self.reach(ins)
            if len(outs) == 1:
                v = self.nearest(op, outs[0], dist)
                data = [t for t in ins if not self.sg.tensors[t].dtype.startswith("int")]
                if v is None and data and len(data) < len(ins):
                    # A computed shape or index the other converter folded into a constant (a dynamic-batch
                    # RESHAPE): its value need not lead to the op's node, the data inputs must.
                    v = self.nearest(op, outs[0], self.reach(data))
                if v is not None:
                    self.bind(outs[0], v, "position")
                    changed = True
            else:
                changed |= self.multi(op, outs, dist)
        return changed

    def reach(self, ins: list[int]) -> dict[str, tuple[int, int]]:
        """Unmapped values downstream of every input's values: (compute nodes on the way, hops), the worst input."""
        total: dict[str, tuple[int, int]] = {}
        for k, t in enumerate(ins):
            dist: dict[str, tuple[int, int]] = {}
            queue = deque((v, 0, 0) for v in self.m.tensor_values[t])
            while queue:
                v, depth, hops = queue.popleft()
                if hops >= MAX_HOPS:
                    continue
                for i in self.x.consumers.get(v, []):
                    n = self.x.nodes[i]
                    d = depth + (n.op_type not in LAYOUT_TYPES)
                    for o in n.output:
                        if not o or o in self.m.value_tensor or (o in dist and dist[o] <= (d, hops + 1)):
                            continue
                        dist[o] = (d, hops + 1)
                        queue.append((o, d, hops + 1))
            total = dist if k == 0 else {v: max(total[v], dist[v]) for v in total if v in dist}
        return total

    def nearest(self, op, t: int, dist) -> str | None:
        layout_op = set(self.table[op.opcode].onnx) <= LAYOUT_TYPES if op.opcode in self.table else False
        cands = [(d, v) for v, d in dist.items() if (layout_op or d[0] >= 1) and self.fits(t, v)]
        if not cands:
            return None
        # Nodes of the types we would emit come first (a hybrid Conv quantizes its input in nodes of the same shape).
        types = self.types(op)
        cands = [(d, v) for d, v in cands if self.x.nodes[self.x.producer[v]].op_type in types] or cands
        best = min(d for d, _ in cands)
        group = [v for d, v in cands if d == best]
        if len(group) > 1:                                  # the most weights in common
            score = {v: len(self.weights[op.index] & self.x.weights(self.x.producer[v])) for v in group}
            group = [v for v in group if score[v] == max(score.values())]
        if len(group) > 1:
            group = self.merge(op, t, group, dist, types)
        if len(group) != 1:
            return None                                     # a tie: listed as unmatched, never guessed
        return self.follow(op, t, group[0])

    def merge(self, op, t: int, group: list[str], dist, types) -> list[str]:
        """Branches of one op's decomposition (GELU: x*0.5 and erf(x/sqrt 2) meet in a Mul): where they all meet.
        Only when no other pending TFLite op reads the same inputs; else the branches may be those ops."""
        ins = {i for i in op.inputs if i in self.in_scope}
        for j in {j for i in ins for j in self.consumers.get(i, [])} - {op.index}:
            if any(o in self.in_scope and o not in self.m.tensor_values for o in self.sg.ops[j].outputs):
                return group
        below = None
        for v in group:
            seen, queue = set(), deque([v])
            while queue:
                for i in self.x.consumers.get(queue.popleft(), []):
                    for o in self.x.nodes[i].output:
                        if o in dist and o not in seen:
                            seen.add(o)
                            queue.append(o)
            below = seen if below is None else below & seen
        meet = [o for o in below or () if self.x.nodes[self.x.producer[o]].op_type in types and self.fits(t, o)]
        return [min(meet, key=lambda o: dist[o])] if meet else group

    def types(self, op) -> set[str]:
        return set(self.table[op.opcode].onnx) if op.opcode in self.table else set()

    def follow(self, op, t: int, v: str) -> str:
        """From an op's first node to what the TFLite tensor holds: through the rest of its decomposition (a node of
        another type it emits, which the next ops do not: SQUARED_DIFFERENCE is Sub then Mul), its fused
        activation, and the QuantizeLinear (or Cast) that brings the result to the TFLite tensor's type."""
        later = set().union(*(self.types(self.sg.ops[j]) for j in self.consumers.get(t, [])))
        while True:
            after = set(self.x.consumers.get(v, []))
            if len(after) != 1:
                break
            n = self.x.nodes[after.pop()]
            own = n.op_type in self.types(op) - later - {self.x.nodes[self.x.producer[v]].op_type}
            fused = n.op_type in ACTIVATION_TYPES and op.options.get("fused_activation_function", "NONE") != "NONE"
            quant = n.op_type == "QuantizeLinear" and self.sg.tensors[t].quantization is not None
            quant |= n.op_type == "Cast" and self.x.dtypes.get(v, self.sg.tensors[t].dtype) != self.sg.tensors[t].dtype
            o = n.output[0] if n.output else ""
            if not (own or fused or quant) or o in self.m.value_tensor or not self.fits(t, o):
                break
            v = o
        return v

    def multi(self, op, outs: list[int], dist) -> bool:
        """A multi-output op (SPLIT, UNPACK): the nearest node with as many outputs, each fitting in order."""
        nodes = sorted({self.x.producer[v] for v in dist if v in self.x.producer},
                       key=lambda i: min(dist[o] for o in self.x.nodes[i].output if o in dist))
        for i in nodes:
            n = self.x.nodes[i]
            if len(n.output) == len(op.outputs) and all(
                    t not in self.in_scope or self.m.value_tensor.get(o) == t or (o in dist and self.fits(t, o))
                    for t, o in zip(op.outputs, n.output)):
                for t, o in zip(op.outputs, n.output):
                    if t in self.in_scope and t not in self.m.tensor_values:
                        self.bind(t, o, "position")
                return True
        return False

    def image(self, values: list[str]) -> str:
        """The value that holds what the TFLite tensor holds: the last one computed (not copied) under its name,
        so a Conv's pre-activation output named like the tensor gives way to the Relu after it."""
        def computed(v):
            return v not in self.x.producer or self.x.nodes[self.x.producer[v]].op_type not in COPY_TYPES
        return ([v for v in values if computed(v)] or values)[-1]

    # -- nodes -> ops ------------------------------------------------------------------------------------------
    def assign_nodes(self) -> None:
        m, x = self.m, self.x
        owner: dict[int, int] = {}
        for t, values in m.tensor_values.items():
            img = x.producer.get(values[0])
            if img is not None and t in self.producers:
                owner.setdefault(img, self.producers[t])
        # Which mapped tensors each unowned node reads, through other unowned nodes (forward, in graph order).
        anchors: dict[int, set[int]] = {}
        for i, n in enumerate(x.nodes):
            if i in owner:
                continue
            a: set[int] = set()
            for v in n.input:
                if v in m.value_tensor:
                    a.add(m.value_tensor[v])
                elif v in x.producer and x.producer[v] not in owner:
                    a |= anchors.get(x.producer[v], set())
            anchors[i] = a
        # Backwards: an unowned node belongs to the earliest op consuming its outputs if it reads only that op's
        # inputs; a copy no op consumes (a graph output presented in another layout) to its tensor's producer.
        for i in reversed(range(len(x.nodes))):
            if i in owner:
                continue
            n = x.nodes[i]
            found = {owner.get(j) for o in n.output for j in x.consumers.get(o, [])}
            users = {u for u in found if u is not None}
            if users and len(users) == len(found):
                k = min(users)
                reads = {t for t in self.sg.ops[k].inputs if t >= 0}
                if anchors[i] <= reads:
                    owner[i] = k
            elif not users:
                ts = {m.value_tensor[o] for o in n.output if o in m.value_tensor}
                if len(ts) == 1 and ts <= self.producers.keys() and anchors[i] <= ts | set(
                        self.sg.ops[self.producers[next(iter(ts))]].inputs):
                    owner[i] = self.producers[next(iter(ts))]
        for i, k in sorted(owner.items()):
            m.op_nodes.setdefault(k, []).append(x.labels[i])
            m.node_op[x.labels[i]] = k
        m.unmatched_nodes = [x.labels[i] for i in range(len(x.nodes)) if i not in owner]

    def extend(self) -> None:
        """A name can sit on the first node of an op (tf2onnx names the Conv, not the Relu6 Clip after it): carry
        each named tensor on through the rest of its op, as position matching does."""
        for t, values in list(self.m.tensor_values.items()):
            if t in self.producers:
                v = self.image(values)
                after = self.follow(self.sg.ops[self.producers[t]], t, v)
                if after != v:                      # the named value is inside the op: not the tensor
                    values.remove(v)
                    del self.m.value_tensor[v]
                    self.m.layouts.pop(v, None)
                    self.bind(t, after, "name")

    def run(self) -> Mapping:
        self.by_name()
        self.by_io_position()
        self.extend()
        self.copies()
        while self.by_position():
            self.copies()
        m = self.m
        order = {v: i for i, v in enumerate(self.x.values())}
        for values in m.tensor_values.values():
            values.sort(key=lambda v: order.get(v, len(order)))
            values.insert(0, values.pop(values.index(self.image(values))))
        self.assign_nodes()
        m.unmatched_tensors = [t for t in m.scope if t not in m.tensor_values]
        m.unmatched_ops = [op.index for op in self.sg.ops if op.index not in m.folded and not m.op_nodes.get(op.index)]
        m.unmatched_io = [v for v in self.x.inputs + self.x.outputs if v not in m.value_tensor]
        return m
