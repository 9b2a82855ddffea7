"""What a graph pane draws: op nodes, terminal nodes and edges, built from a TFLite subgraph or an ONNX ModelProto.

Qt-free on purpose (built in the worker thread). Constants are folded into their consumer node as text lines
("w 16×3×3×8") instead of being nodes: separate weight nodes ruin any layered layout.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from collections import Counter
from operator import attrgetter, eq, itemgetter, not_
from typing import Any, Hashable

TFLITE, ONNX = "tflite", "onnx"            # the two panes (and their graphs)
CONFLICT, UNKNOWN = "conflict/inserted", "unknown"   # colour keys beside the layout categories
GROUP = "group"                            # a closed group's box: its kind, and its key's first part
TITLE_H, LINE_H, NODE_W, TERMINAL_W = 22, 14, 168, 120
MAX_ATTR_LINES = 3
GROUP_BAR = 10                # a group's box: room for its category mix bar

# Input slot names for folded constants; other slots are named by their index.
_SLOT_NAMES = {
    "CONV_2D": {1: "w", 2: "b"}, "DEPTHWISE_CONV_2D": {1: "w", 2: "b"}, "FULLY_CONNECTED": {1: "w", 2: "b"},
    "TRANSPOSE_CONV": {0: "shape", 1: "w", 3: "b"}, "CONV_3D": {1: "w", 2: "b"},
    "Conv": {1: "W", 2: "B"}, "ConvTranspose": {1: "W", 2: "B"}, "Gemm": {1: "B", 2: "C"}, "MatMul": {1: "B"},
}


@dataclass
class Node:
    key: Hashable                 # ("op", index) | ("in", tensor) | ("out", tensor) for TFLite; onnx node name
    kind: str                     # "op" | "input" | "output"
    title: str
    lines: list[str] = field(default_factory=list)     # attributes then folded constants, shown when zoomed in
    search: str = ""              # extra text the search matches (names)
    attrs: tuple = ()             # every attribute as (name, value text), for the search (lines show a few)
    subgraphs: list = field(default_factory=list)   # bodies it runs: TFLite subgraph indices, ONNX attribute names
    layer: Any = None             # a closed group's box (kind "group"): its core.session.layers.Layer

    @property
    def width(self) -> int:
        return NODE_W if self.kind != "input" and self.kind != "output" else TERMINAL_W

    @property
    def name(self) -> str:
        """The whole name people look it up by: an ONNX node's name, a TFLite op's (its first output tensor's: ops
        have none of their own), a graph input's or output's tensor name."""
        if self.layer is not None:              # a closed group: its scope path (its title is a short label)
            return self.search
        if self.kind != "op":
            return self.title
        if isinstance(self.key, str):
            return self.key
        return self.search.split(" ")[0] or f"#{self.key[1]}"

    @property
    def height(self) -> int:
        return TITLE_H + LINE_H * len(self.lines) + (4 if self.lines else 0) + (GROUP_BAR if self.layer else 0)


@dataclass
class Edge:
    src: int                      # node indices
    dst: int
    tensor: Hashable              # TFLite tensor index or ONNX value name
    label: str                    # shape, shown when zoomed in
    first: bool = True            # first edge of its tensor: the one that draws the label
    count: int = 1                # a bundle: this many inputs drawn as one edge (see bundle())


@dataclass
class ViewGraph:
    source: str                   # "tflite" | "onnx"
    nodes: list[Node]
    edges: list[Edge]
    tensor_names: dict[Hashable, str] = field(default_factory=dict)
    subgraph: int = 0
    shapes: dict[Hashable, tuple] = field(default_factory=dict)   # ONNX value -> shape (after inference)
    folded: dict[Hashable, Hashable] = field(default_factory=dict)   # op key drawn inside its consumer -> consumer's

    def index(self) -> dict[Hashable, int]:
        return {n.key: i for i, n in enumerate(self.nodes)}

    @property
    def op_count(self) -> int:
        return sum(1 for n in self.nodes if n.kind == "op")


def shape_text(shape) -> str:
    if shape is None:
        return ""
    return "×".join("?" if (d is None or d == -1 or d == "") else str(d) for d in shape) if shape else "scalar"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_fmt(x) for x in v[:8]) + (",…" if len(v) > 8 else "") + "]"
    if isinstance(v, bytes):
        return f"<{len(v)} bytes>"
    return str(v)


# Options that say nothing about a float graph's structure, and attributes worth reading first.
_NOISE = {"pot_scale_int16", "quantized_bias_type", "asymmetric_quantize_inputs"}
_FIRST = ("kernel_shape", "strides", "group", "pads", "perm", "axis", "axes", "mode")


def _is_default(k: str, v: Any) -> bool:
    if isinstance(v, (list, tuple)) and v:
        return (k in ("dilations", "strides") and all(x == 1 for x in v)) or (k == "pads" and not any(v))
    return False


def attr_pairs(options: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """Every attribute set, defaults included, as (name, value text): what the search matches `stride=2` against."""
    return tuple((k, _fmt(v)) for k, v in options.items()
                 if v is not None and v != "" and k not in _NOISE and not k.endswith("subgraph_index"))


def attr_lines(options: dict[str, Any]) -> list[str]:
    """A few compact lines for the key attributes (pairs such as stride_h/stride_w merged, defaults left out)."""
    opts = {k: v for k, v in options.items()
            if v not in (None, "NONE", False, "", [], ()) and k not in _NOISE and not _is_default(k, v)}
    opts = dict(sorted(opts.items(), key=lambda kv: _FIRST.index(kv[0]) if kv[0] in _FIRST else len(_FIRST)))
    lines: list[str] = []
    for a, b, label in (("stride_h", "stride_w", "stride"), ("filter_height", "filter_width", "kernel"),
                        ("dilation_h_factor", "dilation_w_factor", "dilation")):
        if a in opts and b in opts:
            h, w = opts.pop(a), opts.pop(b)
            if not (label == "dilation" and h == w == 1):
                lines.append(f"{label} {h}×{w}")
    act = opts.pop("fused_activation_function", None)
    for k, v in opts.items():
        if k.endswith("subgraph_index"):
            continue
        lines.append(f"{k} {_fmt(v)}")
    if act:
        lines.append(str(act).lower())
    if len(lines) > MAX_ATTR_LINES:
        lines = lines[:MAX_ATTR_LINES - 1] + [f"+{len(lines) - MAX_ATTR_LINES + 1} more"]
    return lines


MAX_CONST_LINES = 4


def _capped(lines: list[str]) -> list[str]:
    """Folded constants past MAX_CONST_LINES as one "+N more" line: a node's height stays bounded."""
    return lines if len(lines) <= MAX_CONST_LINES else lines[:MAX_CONST_LINES - 1] + [
        f"+{len(lines) - MAX_CONST_LINES + 1} more constants"]


def _const_line(opcode: str, slot: int, shape, dtype: str) -> str:
    name = _SLOT_NAMES.get(opcode, {}).get(slot, f"in{slot}")
    return f"{name} {shape_text(shape)} {dtype}"


class _Builder:
    def __init__(self, source: str, subgraph: int = 0):
        self.g = ViewGraph(source, [], [], subgraph=subgraph)
        self.seen: set[Hashable] = set()

    def node(self, node: Node) -> int:
        self.g.nodes.append(node)
        return len(self.g.nodes) - 1

    def edge(self, src: int, dst: int, tensor: Hashable, label: str) -> None:
        first = tensor not in self.seen
        self.seen.add(tensor)
        self.g.edges.append(Edge(src, dst, tensor, label, first))


def from_tflite(graph, subgraph: int = 0) -> ViewGraph:
    """One node per op, one terminal per graph input/output, one edge per (tensor, consumer). A DEQUANTIZE of a
    constant (float16 or int8 weights) is drawn as its consumer's constant, like the conversion folds it: as nodes
    of their own they pushed every column aside and the graph ran diagonally."""
    sg = graph.subgraphs[subgraph]
    b = _Builder("tflite", subgraph)
    tensors = sg.tensors
    outputs = set(sg.outputs)
    dequantized = {op.outputs[0]: op for op in sg.ops
                   if op.opcode == "DEQUANTIZE" and len(op.inputs) == 1 and op.inputs[0] >= 0 and op.outputs
                   and tensors[op.inputs[0]].is_constant and op.outputs[0] not in outputs}

    def constant(t: int) -> bool:
        return tensors[t].is_constant or t in dequantized

    def dtype(t: int) -> str:
        return tensors[dequantized[t].inputs[0]].dtype if t in dequantized else tensors[t].dtype
    b.g.tensor_names = {t.index: t.name for t in tensors}
    producer: dict[int, int] = {}
    for t in sg.inputs:
        if t >= 0:
            producer[t] = b.node(Node(("in", t), "input", tensors[t].name or f"input {t}",
                                      [shape_text(tensors[t].shape)], search=tensors[t].name))
    op_node: dict[int, int] = {}
    drawn = [op for op in sg.ops if not (op.outputs and op.outputs[0] in dequantized
                                         and dequantized[op.outputs[0]] is op)]
    for op in drawn:
        consts = [_const_line(op.opcode, slot, tensors[t].shape, dtype(t))
                  for slot, t in enumerate(op.inputs) if t >= 0 and constant(t)]
        for t in op.inputs:
            if t in dequantized:
                b.g.folded[("op", dequantized[t].index)] = ("op", op.index)
        calls = [v for k, v in op.options.items() if k.endswith("subgraph_index") and isinstance(v, int)]
        names = " ".join(tensors[t].name for t in op.outputs if t >= 0)
        lines = attr_lines(op.options) + _capped(consts)
        op_node[op.index] = i = b.node(Node(("op", op.index), "op", op.opcode, lines, search=names, subgraphs=calls,
                                            attrs=attr_pairs(op.options)))
        for t in op.outputs:
            if t >= 0:
                producer[t] = i
    for op in drawn:
        for t in op.inputs:
            if t < 0 or constant(t):
                continue
            if t not in producer:           # variable or otherwise unproduced tensor: make it a terminal
                producer[t] = b.node(Node(("in", t), "input", tensors[t].name or f"tensor {t}",
                                          [shape_text(tensors[t].shape)], search=tensors[t].name))
            b.edge(producer[t], op_node[op.index], t, shape_text(tensors[t].shape))
    for t in sg.outputs:
        if t >= 0:
            out = b.node(Node(("out", t), "output", tensors[t].name or f"output {t}",
                              [shape_text(tensors[t].shape)], search=tensors[t].name))
            if t in producer:
                b.edge(producer[t], out, t, shape_text(tensors[t].shape))
    return bundle(b.g)


BUNDLE = 32       # from this many inputs of one op from one node (or from graph inputs read by it alone): one edge


def bundle(g: ViewGraph) -> ViewGraph:
    """Large fan-in drawn as one node with one edge: graph inputs that only feed one op become a single terminal
    ("2000 inputs") when there are more than BUNDLE of them, and more than BUNDLE parallel edges between two
    nodes (ADD_N of one tensor 100,000 times) become one edge labelled with their count."""
    indeg = Counter(map(attrgetter("dst"), g.edges))
    if not indeg or max(indeg.values()) <= BUNDLE:
        return g
    outs: dict[int, set[int]] = {}
    for e in g.edges:
        outs.setdefault(e.src, set()).add(e.dst)
    private: dict[int, list[int]] = {}          # consumer -> input terminals that feed it alone
    for i, n in enumerate(g.nodes):
        if n.kind == "input" and len(outs.get(i, ())) == 1:
            private.setdefault(next(iter(outs[i])), []).append(i)
    merged: dict[int, int] = {}                 # terminal -> the terminal standing for its bundle
    for dst, terms in private.items():
        if len(terms) > BUNDLE:
            head = g.nodes[terms[0]]
            last = g.nodes[terms[-1]]
            g.nodes[terms[0]] = Node(head.key, "input", f"{len(terms)} inputs", [f"{head.title} … {last.title}"],
                                     search=" ".join(g.nodes[t].search for t in terms[:1000]))
            merged.update((t, terms[0]) for t in terms)
    groups: dict[tuple[int, int], list[Edge]] = {}
    for e in g.edges:
        groups.setdefault((merged.get(e.src, e.src), e.dst), []).append(e)
    edges: list[Edge] = []
    for (src, dst), es in groups.items():
        if len(es) > BUNDLE:
            n = sum(e.count for e in es)
            edges.append(Edge(src, dst, es[0].tensor, f"{es[0].label} ×{n}".strip(), True, n))
        else:
            edges += [Edge(src, e.dst, e.tensor, e.label, e.first, e.count) for e in es]
    keep = [i for i in range(len(g.nodes)) if merged.get(i, i) == i]
    new_index = {old: k for k, old in enumerate(keep)}
    g.nodes = [g.nodes[i] for i in keep]
    g.edges = [Edge(new_index[e.src], new_index[e.dst], e.tensor, e.label, e.first, e.count) for e in edges]
    return g


def _nonempty(*lines: str) -> list[str]:
    return [s for s in lines if s]


def onnx_node_name(node, i: int) -> str:
    return node.name or f"{node.op_type}#{i}"


def _value_shapes(g) -> dict[str, tuple]:
    """Value name -> shape, from a GraphProto's inputs, value_info and outputs (see _shapes_of)."""
    return _shapes_of([vi.SerializeToString() for vi in (*g.input, *g.value_info, *g.output)])


_VALUES: dict[bytes, tuple] = {}    # ValueInfoProto bytes -> (name, shape or None)
_TYPES: dict[bytes, tuple | None] = {}      # TypeProto bytes -> shape: most values of a model share a few types


def _shapes_of(blobs: list[bytes]) -> dict[str, tuple]:
    """Value name -> shape of value infos given as their bytes (later ones win, as in a graph's order), each read
    once: a pin changes a few of thousands, and reading them all again held up each re-run's view."""
    got = list(map(_VALUES.get, blobs))
    if None in got:
        import onnx
        for i, b in enumerate(blobs):
            if got[i] is None:
                vi = onnx.ValueInfoProto.FromString(b)
                t = vi.type
                key = t.SerializeToString()
                shape = _TYPES.get(key, _MISSING)
                if shape is _MISSING:
                    tt = t.tensor_type
                    shape = _TYPES[key] = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                                for d in tt.shape.dim) if tt.HasField("shape") else None
                got[i] = _VALUES[b] = (vi.name, shape)
    return {name: shape for name, shape in got if shape is not None}


_MISSING = object()


# Ops whose output has their (first) input's shape: a converter's fused activations (Conv → Relu) leave the
# value between them without value_info, and whole-model inference costs more than the rest of the view.
_SAME_SHAPE = {"Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "HardSwish", "HardSigmoid", "Elu", "Selu", "Neg",
               "Abs", "Identity", "Cast", "Exp", "Log", "Sqrt", "Floor", "Ceil", "Round", "Erf", "Softplus",
               "PRelu", "QuantizeLinear", "DequantizeLinear", "Relu6"}


def _same_shape_fill(nodes, shapes: dict) -> None:
    """`nodes`: (op type, inputs, outputs, ...) of each node, in graph order (only those of _SAME_SHAPE matter)."""
    nodes = [f for f in nodes if f[0] in _SAME_SHAPE]
    for f in reversed(nodes):     # backwards: a Conv's output from the Relu after it
        ins, outs = f[1], f[2]
        if ins and outs and outs[0] in shapes and ins[0] not in shapes:
            shapes[ins[0]] = shapes[outs[0]]
    for f in nodes:
        ins, outs = f[1], f[2]
        if ins and outs and ins[0] in shapes and outs[0] not in shapes:
            shapes[outs[0]] = shapes[ins[0]]


# A re-run after a pin re-emits few of the ONNX graph's nodes: what is read of each node is kept by its bytes.
_FIELDS: dict[bytes, tuple] = {}    # node bytes -> (op type, inputs, outputs, named, Transpose perm)
_PLAIN: dict[bytes, Node] = {}      # node bytes -> its box, for a named node reading no initializer
_NODES: dict[tuple, Node] = {}      # (index if unnamed, bytes, its initializers' types and dims) -> its box
_BY_INITS: dict[tuple, dict] = {}   # a graph's initializers' names, types and dims -> {bytes: box} of named nodes
_TEXTS: dict = {None: ""}           # shape -> its text


def _fields(n) -> tuple:
    perm = next((list(a.ints) for a in n.attribute if a.name == "perm"), None) if n.op_type == "Transpose" else None
    return n.op_type, tuple(n.input), tuple(n.output), bool(n.name), perm


_SKIPPED = (5, 10, 4)                # AttributeProto GRAPH, GRAPHS, TENSOR: not drawn (a body's name is)
_CONTENT: dict[tuple, tuple] = {}   # (op type, attributes, initializers read) -> (lines, attrs, bodies)
_DTYPES: dict[int, str] = {}        # TensorProto data type -> numpy's name for it


def _onnx_node(n, i: int, inits: dict, sig: dict | None = None) -> Node:
    """A node's box. What it draws besides its names depends only on its op type, attributes and the types and
    dims of the initializers it reads: a big model has few such kinds of node, each worked out once. `sig`: each
    initializer's (data type, dims), when the caller has them."""
    if sig is None:
        sig = {name: (t.data_type, tuple(t.dims)) for name, t in inits.items()}
    consts = tuple((slot, *sig[name]) for slot, name in enumerate(n.input) if name in sig)
    key = (n.op_type, tuple(a.name if a.type in _SKIPPED else a.SerializeToString() for a in n.attribute), consts)
    content = _CONTENT.get(key)
    if content is None:
        content = _CONTENT[key] = _onnx_content(n, consts)
    lines, attrs, bodies = content
    name = onnx_node_name(n, i)
    return Node(name, "op", n.op_type, list(lines), search=name + " " + " ".join(n.output), subgraphs=list(bodies),
                attrs=attrs)


def _onnx_content(n, consts: tuple) -> tuple:
    """(lines, attribute pairs, body names) of a node's box (see _onnx_node)."""
    from onnx import helper
    attrs = {}
    for a in n.attribute:
        if a.type in _SKIPPED:
            continue
        v = helper.get_attribute_value(a)
        attrs[a.name] = v.decode() if isinstance(v, bytes) else v
    lines = attr_lines(attrs) + _capped([_const_line(n.op_type, slot, dims, _dtype_name(data_type))
                                         for slot, data_type, dims in consts])
    bodies = [a.name for a in n.attribute if a.type in _SKIPPED[:2]]
    return lines, attr_pairs(attrs), bodies


def _dtype_name(data_type: int) -> str:
    name = _DTYPES.get(data_type)
    if name is None:
        from onnx import helper
        name = _DTYPES[data_type] = helper.tensor_dtype_to_np_dtype(data_type).name
    return name


_BLOBS: list = []                   # the message class of _entries (made once)
LIGHT_BYTES = 16 << 20              # initializer data past this: each entry serialised on its own (see _entries)


def _blob_class():
    """A message whose repeated bytes fields have GraphProto's numbers for node, input, output and value_info:
    a graph's bytes parsed into it are each entry's bytes (a submessage and bytes share one wire form)."""
    if not _BLOBS:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        fd = descriptor_pb2.FileDescriptorProto(name="inspector_graph_entries.proto", package="inspector_gui")
        m = fd.message_type.add(name="GraphEntries")
        for name, number in (("node", 1), ("input", 11), ("output", 12), ("value_info", 13)):
            m.field.add(name=name, number=number, type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
                        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(fd)
        _BLOBS.append(message_factory.GetMessageClass(pool.FindMessageTypeByName("inspector_gui.GraphEntries")))
    return _BLOBS[0]


def _entries(g) -> tuple[list[bytes], list[bytes]]:
    """(each node's bytes, each input's, value info's and output's, in that order). The graph serialised whole and
    split by the C parser (about twice as fast as entry by entry), unless its initializers hold much
    data (the graph's bytes would copy it)."""
    data = 0
    for t in g.initializer:
        if t.HasField("raw_data") or len(t.float_data) or len(t.int32_data) or len(t.int64_data) \
                or len(t.double_data) or len(t.uint64_data) or len(t.string_data):
            size = 8
            for d in t.dims:
                size *= d
            data += size
            if data > LIGHT_BYTES:
                return [n.SerializeToString() for n in g.node], \
                    [vi.SerializeToString() for vi in (*g.input, *g.value_info, *g.output)]
    e = _blob_class().FromString(g.SerializeToString())
    return list(e.node), [*e.input, *e.value_info, *e.output]


def from_onnx(model, graph=None) -> ViewGraph:
    """An ONNX graph (the model's, or `graph`, a Loop/If body): nodes keyed by node name (or 'OpType#i'),
    initializers folded into consumers, values from outside the graph as input terminals.

    Each step runs over whole lists in C where it can (map, zip, compress over what is kept by each node's and
    value's bytes): a Python loop over every node and edge was most of a re-run's view."""
    import onnx
    g = graph if graph is not None else model.graph
    if len(_FIELDS) > 200_000 or len(_VALUES) > 200_000 or len(_PLAIN) > 200_000 or len(_NODES) > 200_000 \
            or len(_CONTENT) > 200_000:
        for cache in (_FIELDS, _VALUES, _TYPES, _PLAIN, _NODES, _BY_INITS, _CONTENT):
            cache.clear()
        _TEXTS.clear()
        _TEXTS[None] = ""
    blobs, values = _entries(g)
    fields = list(map(_FIELDS.get, blobs))
    if None in fields:
        for i, f in enumerate(fields):
            if f is None:
                fields[i] = _FIELDS[blobs[i]] = _fields(g.node[i])
    shapes = _shapes_of(values)
    ops = list(map(itemgetter(0), fields))
    ins_of, outs_of = list(map(itemgetter(1), fields)), list(map(itemgetter(2), fields))
    outputs = list(filter(None, chain.from_iterable(outs_of)))
    if graph is None:
        _same_shape_fill(fields, shapes)
        if len(outputs) - sum(map(shapes.__contains__, outputs)) > len(outputs) // 10:
            try:    # a model saved without shapes; inference holds the GIL, so only when most are missing
                g = onnx.shape_inference.infer_shapes(model).graph
                shapes = _value_shapes(g)
            except Exception:  # shapes are decoration: a model that fails inference still draws
                pass
    for i in compress(range(len(ops)), map("Transpose".__eq__, ops)):   # Transposes a converter inserted often
        _, ins, outs, _, perm = fields[i]                                # carry no value_info: permute
        if outs[0] not in shapes and ins[0] in shapes:
            src = shapes[ins[0]]
            shapes[outs[0]] = tuple(src[p] for p in perm) if perm else tuple(reversed(src))
    inits = {t.name: t for t in g.initializer}
    b = _Builder("onnx")
    producer: dict[str, int] = {}
    for vi in g.input:
        if vi.name not in inits:
            producer[vi.name] = b.node(Node(("in", vi.name), "input", vi.name,
                                            _nonempty(shape_text(shapes.get(vi.name))), search=vi.name))
    first = len(b.g.nodes)              # graph nodes are nodes[first + i]
    n = len(blobs)
    # each input read (not an initializer, not empty) is an edge: its consumer's index, in graph order
    counts = list(map(len, ins_of))
    names = list(chain.from_iterable(ins_of))
    dsts = list(chain.from_iterable(map(repeat, range(first, first + n), counts)))
    skip = {"", *inits}
    drop = list(map(skip.__contains__, names))
    reads: set[int] = set()
    if any(drop):
        reads.update(compress(dsts, drop))          # nodes reading an initializer (or an empty input)
        keep = list(map(not_, drop))
        names, dsts = list(compress(names, keep)), list(compress(dsts, keep))
    # a named node's box by its bytes, kept for the graph's initializer types and dims when it reads one (a
    # re-run's initializers are mostly the last one's); an unnamed node's, or one whose initializers changed,
    # by its own key
    boxes = list(map(_PLAIN.get, blobs))
    reads = sorted(map(first.__rsub__, reads))
    if reads or not all(boxes):         # (a Node is true; `None in` would call Node.__eq__ 10,000 times)
        sigs = {name: (t.data_type, tuple(t.dims)) for name, t in inits.items()}
        if len(_BY_INITS) > 4:
            _BY_INITS.clear()
        kept = _BY_INITS.setdefault(tuple(sigs.items()), {})
        for i, box in zip(reads, map(kept.get, map(blobs.__getitem__, reads))):
            boxes[i] = box
        for i in compress(range(n), map(not_, map(itemgetter(3), fields))):
            boxes[i] = None
        sig = sigs.get
        for i, box in enumerate(boxes):
            if box is None:
                named, blob = fields[i][3], blobs[i]
                if named and skip.isdisjoint(ins_of[i]):
                    box = _PLAIN.get(blob)
                    if box is None:
                        box = _PLAIN[blob] = _onnx_node(g.node[i], i, inits, sigs)
                else:
                    key = (0 if named else i, blob, tuple(map(sig, ins_of[i])))
                    box = _NODES.get(key)
                    if box is None:
                        box = _NODES[key] = _onnx_node(g.node[i], i, inits, sigs)
                    if named:
                        kept[blob] = box
                boxes[i] = box
    nodes_out = b.g.nodes
    nodes_out += boxes
    outs_flat = list(chain.from_iterable(outs_of))
    producer.update(compress(zip(outs_flat, chain.from_iterable(map(repeat, range(first, first + n),
                                                                   map(len, outs_of)))), outs_flat))
    srcs = list(map(producer.get, names))
    if None in srcs:                    # from the enclosing graph (Loop/If bodies): terminals, in the order they
        for name in dict.fromkeys(names):       # are first read
            if name not in producer:
                producer[name] = b.node(Node(("in", name), "input", name, _nonempty(shape_text(shapes.get(name))),
                                             search=name))
        srcs = list(map(producer.__getitem__, names))
    read = list(map(shapes.get, names))
    labels = list(map(_TEXTS.get, read))
    if None in labels:
        for k, shape in enumerate(read):
            if labels[k] is None:
                labels[k] = _TEXTS.get(shape) or _TEXTS.setdefault(shape, shape_text(shape))
    at = dict(zip(reversed(names), range(len(names) - 1, -1, -1)))      # value -> its first edge
    firsts = list(map(eq, map(at.__getitem__, names), range(len(names))))
    edges = b.g.edges
    edges += map(Edge, srcs, dsts, names, labels, firsts)
    b.seen = set(at)
    for vi in g.output:
        out = b.node(Node(("out", vi.name), "output", vi.name, _nonempty(shape_text(shapes.get(vi.name))),
                          search=vi.name))
        if vi.name in producer:
            b.edge(producer[vi.name], out, vi.name, shape_text(shapes.get(vi.name)))
    tensors = list(map(attrgetter("tensor"), edges))
    b.g.tensor_names = dict(zip(tensors, map(str, tensors)))
    b.g.shapes = shapes
    return bundle(b.g)
