"""What a graph pane draws: op nodes, terminal nodes and edges, built from a TFLite subgraph or an ONNX ModelProto.

Qt-free on purpose (built in the worker thread). Constants are folded into their consumer node as text lines
("w 16×3×3×8") instead of being nodes: separate weight nodes ruin any layered layout.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable

TFLITE, ONNX = "tflite", "onnx"            # the two panes (and their graphs)
CONFLICT, UNKNOWN = "conflict/inserted", "unknown"   # colour keys beside the layout categories
TITLE_H, LINE_H, NODE_W, TERMINAL_W = 22, 14, 168, 120
MAX_ATTR_LINES = 3

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
    subgraphs: list = field(default_factory=list)   # bodies it runs: TFLite subgraph indices, ONNX attribute names

    @property
    def width(self) -> int:
        return NODE_W if self.kind == "op" else TERMINAL_W

    @property
    def height(self) -> int:
        return TITLE_H + LINE_H * len(self.lines) + (4 if self.lines else 0)


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
        op_node[op.index] = i = b.node(Node(("op", op.index), "op", op.opcode, lines, search=names, subgraphs=calls))
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
    indeg: dict[int, int] = {}
    for e in g.edges:
        indeg[e.dst] = indeg.get(e.dst, 0) + 1
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
    """Value name -> shape, from a GraphProto's inputs, value_info and outputs. Read once per distinct type (most
    values of a model share a few): the bytes of a small TypeProto are cheaper to get than its dims one by one."""
    shapes: dict[str, tuple] = {}
    by_type: dict[bytes, tuple | None] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        t = vi.type
        key = t.SerializeToString()
        shape = by_type.get(key, _MISSING)
        if shape is _MISSING:
            tt = t.tensor_type
            shape = by_type[key] = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                         for d in tt.shape.dim) if tt.HasField("shape") else None
        if shape is not None:
            shapes[vi.name] = shape
    return shapes


_MISSING = object()


# Ops whose output has their (first) input's shape: a converter's fused activations (Conv → Relu) leave the
# value between them without value_info, and whole-model inference costs more than the rest of the view.
_SAME_SHAPE = {"Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "HardSwish", "HardSigmoid", "Elu", "Selu", "Neg",
               "Abs", "Identity", "Cast", "Exp", "Log", "Sqrt", "Floor", "Ceil", "Round", "Erf", "Softplus",
               "PRelu", "QuantizeLinear", "DequantizeLinear", "Relu6"}


def _same_shape_fill(nodes, shapes: dict) -> None:
    """`nodes`: (op type, inputs, outputs) of each node, in graph order."""
    for op_type, ins, outs in reversed(nodes):     # backwards: a Conv's output from the Relu after it
        if op_type in _SAME_SHAPE and ins and outs and outs[0] in shapes and ins[0] not in shapes:
            shapes[ins[0]] = shapes[outs[0]]
    for op_type, ins, outs in nodes:
        if op_type in _SAME_SHAPE and ins and outs and ins[0] in shapes and outs[0] not in shapes:
            shapes[outs[0]] = shapes[ins[0]]


_NODES: dict[tuple, Node] = {}      # ONNX node (bytes, its initializers' types and dims) -> its box (never changed)
_FIELDS: dict[bytes, tuple] = {}    # ONNX node bytes -> (op type, inputs, outputs): upb builds a container per field
                                    # read, and a re-run after a pin re-emits few nodes


def _onnx_node(n, i: int, inits: dict) -> Node:
    import onnx
    from onnx import helper
    attrs = {}
    for a in n.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS, onnx.AttributeProto.TENSOR):
            continue
        v = helper.get_attribute_value(a)
        attrs[a.name] = v.decode() if isinstance(v, bytes) else v
    consts = []
    for slot, name in enumerate(n.input):
        if name in inits:
            t = inits[name]
            dtype = helper.tensor_dtype_to_np_dtype(t.data_type).name
            consts.append(_const_line(n.op_type, slot, tuple(t.dims), dtype))
    lines = attr_lines(attrs) + _capped(consts)
    name = onnx_node_name(n, i)
    bodies = [a.name for a in n.attribute if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)]
    return Node(name, "op", n.op_type, lines, search=name + " " + " ".join(n.output), subgraphs=bodies)


def from_onnx(model, graph=None) -> ViewGraph:
    """An ONNX graph (the model's, or `graph`, a Loop/If body): nodes keyed by node name (or 'OpType#i'),
    initializers folded into consumers, values from outside the graph as input terminals."""
    import onnx
    g = graph if graph is not None else model.graph
    # each node's fields read once (upb builds a new container on every access; six passes read them), and only
    # for a node not seen before: its bytes name it
    if len(_NODES) > 200_000 or len(_FIELDS) > 200_000:
        _NODES.clear()
        _FIELDS.clear()
    blobs = [n.SerializeToString() for n in g.node]
    fields = list(map(_FIELDS.get, blobs))
    for i, f in enumerate(fields):
        if f is None:
            n = g.node[i]
            fields[i] = _FIELDS[blobs[i]] = (n.op_type, list(n.input), list(n.output), bool(n.name))
    nodes = [f[:3] for f in fields]
    shapes = _value_shapes(g)
    if graph is None:
        _same_shape_fill(nodes, shapes)
        outputs = [o for _, _, outs in nodes for o in outs if o]
        if sum(o not in shapes for o in outputs) > len(outputs) // 10:
            try:    # a model saved without shapes; inference holds the GIL, so only when most are missing
                g = onnx.shape_inference.infer_shapes(model).graph
                shapes = _value_shapes(g)
            except Exception:  # shapes are decoration: a model that fails inference still draws
                pass
    for i, (op_type, ins, outs) in enumerate(nodes):    # Transposes a converter inserted often carry no
        if op_type == "Transpose" and outs[0] not in shapes and ins[0] in shapes:    # value_info: permute
            perm = next((list(a.ints) for a in g.node[i].attribute if a.name == "perm"), None)
            src = shapes[ins[0]]
            shapes[outs[0]] = tuple(src[p] for p in perm) if perm else tuple(reversed(src))
    inits = {t.name: t for t in g.initializer}
    b = _Builder("onnx")
    b.g.tensor_names = {}
    producer: dict[str, int] = {}
    for vi in g.input:
        if vi.name not in inits:
            producer[vi.name] = b.node(Node(("in", vi.name), "input", vi.name,
                                            _nonempty(shape_text(shapes.get(vi.name))), search=vi.name))
    nodes_out = b.g.nodes
    first = len(nodes_out)              # graph nodes are nodes_out[first + i]
    sig = {name: (t.data_type, tuple(t.dims)) for name, t in inits.items()}.get
    for i, (blob, (_, ins, outs, named)) in enumerate(zip(blobs, fields)):
        # a re-run after a pin re-emits few nodes: the others' boxes come from here
        key = (0 if named else i, blob, tuple(map(sig, ins)) if inits else None)
        node = _NODES.get(key)
        if node is None:
            node = _NODES[key] = _onnx_node(g.node[i], i, inits)
        nodes_out.append(node)
        idx = first + i
        for o in outs:
            if o:
                producer[o] = idx
    edges, seen = b.g.edges, b.seen
    texts: dict = {}                    # shape -> its text (most values share a few shapes)
    for i, (_, ins, _) in enumerate(nodes):
        dst = first + i
        for name in ins:
            if not name or name in inits:
                continue
            src = producer.get(name)
            if src is None:             # from the enclosing graph (Loop/If bodies): a terminal
                src = producer[name] = b.node(Node(("in", name), "input", name,
                                                   _nonempty(shape_text(shapes.get(name))), search=name))
            shape = shapes.get(name)
            text = texts.get(shape) if shape is not None else ""
            if text is None:
                text = texts[shape] = shape_text(shape)
            edges.append(Edge(src, dst, name, text, name not in seen))
            seen.add(name)
    for vi in g.output:
        out = b.node(Node(("out", vi.name), "output", vi.name, _nonempty(shape_text(shapes.get(vi.name))),
                          search=vi.name))
        if vi.name in producer:
            b.edge(producer[vi.name], out, vi.name, shape_text(shapes.get(vi.name)))
    b.g.tensor_names = {e.tensor: str(e.tensor) for e in b.g.edges}
    b.g.shapes = shapes
    return bundle(b.g)
