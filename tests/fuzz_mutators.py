"""Mutations for the fuzz harness: bytes (flips, truncations, absurd counts, swapped tables), TFLite structure
(edited in the IR and written back with the builder: cycles, rewired inputs, absurd shapes, wrong dtypes, hostile
names, empty subgraphs) and ONNX structure (cycles, escaping external data, deep nesting, absurd dims).

Every mutator takes a random.Random, so a case is rebuilt exactly from its seed.
"""
from __future__ import annotations

import struct

import numpy as np
import onnx
from onnx import TensorProto, helper

from inspector.core.ir.graph import Graph
from inspector.core.io.tflite_builder import ModelBuilder, _option_fields, options_class

CONTROL_NAMES = ["", "\x00", "a\x00b", "line\nbreak", "\x1b[31mred\x1b[0m", "\u202etxt.exe", "tab\there",
                 "x" * 5000, "../../etc/passwd", "\ud7ff\ufffd", "名前", "\x7f\x01\x02", "\udc80lone"]
HUGE = [0, -1, -7, 2**31 - 1, 2**30, 65536 * 65536, 1 << 20]


# -- byte mutators -------------------------------------------------------------------------------------------------

def _flip(rng, b: bytearray):
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)


def _poke(rng, b: bytearray):
    for _ in range(rng.randint(1, 4)):
        b[rng.randrange(len(b))] = rng.choice([0, 0xFF, 0x7F, 0x80, 0x01, rng.randrange(256)])


def _word(rng, b: bytearray):
    """An absurd count, offset or size in an aligned 32-bit slot: what flatbuffers and protobuf lengths look like."""
    if len(b) < 8:
        return
    i = rng.randrange(0, len(b) - 4) & ~3
    value = rng.choice([0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x10000000, len(b), len(b) - i, i, 4, 0,
                        rng.randrange(1 << 32)])
    b[i:i + 4] = struct.pack("<I", value)


def _truncate(rng, b: bytearray):
    del b[rng.randrange(max(1, len(b))):]


def _swap(rng, b: bytearray):
    """Two chunks exchanged: tables and vectors end up where the offsets do not expect them."""
    n = rng.randint(4, max(4, min(256, len(b) // 4)))
    if len(b) < 2 * n:
        return
    i, j = sorted(rng.sample(range(len(b) - n), 2))
    if j < i + n:
        return
    b[i:i + n], b[j:j + n] = b[j:j + n], b[i:i + n]


def _splice(rng, b: bytearray):
    i = rng.randrange(len(b))
    n = rng.randint(1, 64)
    if rng.random() < 0.5:
        del b[i:i + n]
    else:
        b[i:i] = b[rng.randrange(len(b)):][:n] or b"\x00" * n


def _varint(rng, b: bytearray):
    """Protobuf: a length varint replaced by a huge one."""
    i = rng.randrange(len(b))
    b[i:i + 1] = rng.choice([b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\x80" * 10])


def _vectors(data: bytes) -> list[tuple[int, int, bool]]:
    """(position of the length field, length, holds tables) of the main vectors of a well-formed .tflite."""
    import tflite
    from inspector.core.io.tflite_reader import _slot
    out = []

    def add(obj, accessor, tables):
        o = obj._tab.Offset(_slot(type(obj), accessor))
        if o:
            start = obj._tab.Vector(o)
            out.append((start - 4, int.from_bytes(data[start - 4:start], "little"), tables))

    m = tflite.Model.GetRootAsModel(data, 0)
    for acc in ("Buffers", "Subgraphs", "OperatorCodes"):
        add(m, acc, True)
    sg = m.Subgraphs(0)
    add(sg, "Tensors", True)
    add(sg, "Operators", True)
    for acc in ("Inputs", "Outputs"):
        add(sg, acc, False)
    for i in range(min(sg.TensorsLength(), 64)):
        add(sg.Tensors(i), "Shape", False)
    for i in range(min(sg.OperatorsLength(), 64)):
        add(sg.Operators(i), "Inputs", False)
        add(sg.Operators(i), "Outputs", False)
    return out


def _tables_swapped(rng, b: bytearray):
    """Two entries of a table vector (tensors, operators, buffers...) exchanged, offsets kept valid."""
    vecs = [v for v in _vectors(bytes(b)) if v[2] and v[1] >= 2]
    if not vecs:
        return
    pos, n, _ = rng.choice(vecs)
    i, j = (pos + 4 + 4 * k for k in rng.sample(range(n), 2))
    ti = i + int.from_bytes(b[i:i + 4], "little")
    tj = j + int.from_bytes(b[j:j + 4], "little")
    b[i:i + 4], b[j:j + 4] = (tj - i).to_bytes(4, "little"), (ti - j).to_bytes(4, "little")


def _count(rng, b: bytearray):
    """A vector's length replaced by an absurd count (or one more or less than the truth)."""
    vecs = _vectors(bytes(b))
    if vecs:
        pos, n, _ = rng.choice(vecs)
        value = rng.choice([n + 1, max(n - 1, 0), 0, 2**31 - 1, 2**32 - 1, len(b), len(b) // 4, 1 << 20])
        b[pos:pos + 4] = value.to_bytes(4, "little")


BYTE_MUTATORS = [_flip, _poke, _word, _truncate, _swap, _splice]
TFLITE_MUTATORS = [_tables_swapped, _count]


def mutate_bytes(rng, data: bytes, onnx_format: bool = False) -> bytes:
    b = bytearray(data)
    if not onnx_format and rng.random() < 0.35:          # structure-aware first, while the file is still valid
        rng.choice(TFLITE_MUTATORS)(rng, b)
        if rng.random() < 0.6:
            return bytes(b)
    pool = BYTE_MUTATORS + ([_varint] if onnx_format else [])
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if b:
            rng.choice(pool)(rng, b)
    return bytes(b)


# -- structural TFLite mutations (IR edited, written back with the builder) ---------------------------------------

def rebuild(g: Graph) -> bytes:
    """The graph written back as a .tflite: the same model unless the IR was edited to be hostile."""
    b = ModelBuilder(description=g.description)
    builders = [b] + [b.subgraph(sg.name) for sg in g.subgraphs[1:]]
    for sgb, sg in zip(builders, g.subgraphs):
        for t in sg.tensors:
            buf = 0
            if t.data is not None:
                buf = b.buffer(np.ascontiguousarray(t.data).tobytes())
            sgb.tensor(t.name, t.shape, t.dtype if not t.dtype.startswith("type") else "float32",
                       quant=t.quantization, shape_signature=t.shape_signature, variable=t.is_variable, buffer=buf)
        for op in sg.ops:
            if op.custom:
                sgb.custom_op(op.opcode, op.inputs, op.outputs, op.custom_options or b"", version=op.version)
                continue
            cls = options_class(op.opcode)
            fields = _option_fields(cls) if cls else {}
            opts = {k: v for k, v in op.options.items() if k in fields}
            try:
                sgb.op(op.opcode, op.inputs, op.outputs, opts, version=op.version, intermediates=op.intermediates)
            except (ValueError, TypeError):
                sgb.op(op.opcode, op.inputs, op.outputs, version=op.version, intermediates=op.intermediates)
        sgb.inputs, sgb.outputs = list(sg.inputs), list(sg.outputs)
    for name, value in g.metadata.items():
        b.add_metadata(name, value)
    return b.build()


def _pick_op(rng, sg):
    return rng.choice(sg.ops) if sg.ops else None


def s_cycle(rng, g):
    """An op reads its own output or a later op's: not a DAG in TFLite's execution order."""
    sg = g.main
    op = _pick_op(rng, sg)
    if op is None or not op.inputs:
        return
    later = [t for o in sg.ops[op.index:] for t in o.outputs if t >= 0]
    if later:
        op.inputs[rng.randrange(len(op.inputs))] = rng.choice(later)


def s_reorder(rng, g):
    """Operators swapped or reversed: consumers run before producers."""
    sg = g.main
    if len(sg.ops) < 2:
        return
    if rng.random() < 0.5:
        sg.ops.reverse()
    else:
        i, j = rng.sample(range(len(sg.ops)), 2)
        sg.ops[i], sg.ops[j] = sg.ops[j], sg.ops[i]


def s_empty(rng, g):
    sg = g.main
    kind = rng.randrange(4)
    if kind == 0:
        sg.ops.clear()
    elif kind == 1:
        sg.ops.clear()
        sg.tensors.clear()
        sg.inputs.clear()
        sg.outputs.clear()
    elif kind == 2:
        sg.inputs.clear()
    else:
        sg.outputs.clear()


def s_shape(rng, g):
    sg = g.main
    if not sg.tensors:
        return
    t = rng.choice(sg.tensors)
    shape = list(t.shape)
    kind = rng.randrange(4)
    if kind == 0 and shape:
        shape[rng.randrange(len(shape))] = rng.choice(HUGE)
    elif kind == 1:
        shape = shape + [1] * rng.choice([1, 4, 30])
    elif kind == 2:
        shape = shape[:-1]
    else:
        shape = [rng.choice(HUGE) for _ in range(rng.randint(0, 9))]
    t.shape = tuple(shape)
    if t.data is not None and rng.random() < 0.5:
        t.data = None          # keeps the reader happy about the buffer; the shape reaches the converter


def s_dtype(rng, g):
    sg = g.main
    if not sg.tensors:
        return
    t = rng.choice(sg.tensors)
    t.dtype = rng.choice(["int8", "uint8", "int32", "int64", "float16", "float64", "bool", "string", "complex64",
                          "int16", "resource", "variant", "int4", "bfloat16"])
    if t.data is not None and rng.random() < 0.5:
        t.data = np.frombuffer(t.data.tobytes(), np.uint8)[: max(0, t.data.nbytes - 1)]


def s_names(rng, g):
    sg = g.main
    for t in rng.sample(sg.tensors, min(len(sg.tensors), rng.randint(1, 4))):
        t.name = rng.choice(CONTROL_NAMES)
    if sg.tensors and rng.random() < 0.3:          # duplicate names
        name = sg.tensors[0].name
        for t in sg.tensors:
            t.name = name
    sg.name = rng.choice(CONTROL_NAMES)
    if rng.random() < 0.3:
        g.metadata[rng.choice(CONTROL_NAMES)] = rng.choice(CONTROL_NAMES).encode("utf-8", "surrogatepass")


def s_indices(rng, g):
    """Tensor references out of range, negative, or shared by two producers."""
    sg = g.main
    op = _pick_op(rng, sg)
    if op is None:
        return
    n = len(sg.tensors)
    target = op.inputs if op.inputs and rng.random() < 0.6 else op.outputs
    if not target:
        return
    target[rng.randrange(len(target))] = rng.choice([n, n + 1000, -2, -1, 2**31 - 1, 0, rng.randrange(max(n, 1))])


def s_io(rng, g):
    sg = g.main
    if not sg.tensors:
        return
    kind = rng.randrange(3)
    t = rng.randrange(len(sg.tensors))
    if kind == 0:
        sg.inputs.append(t)              # an op output or constant as a graph input
    elif kind == 1:
        sg.outputs.append(t)
    else:
        sg.inputs = sg.inputs * 2
        sg.outputs = sg.outputs * 2


def s_opcode(rng, g):
    from inspector.core.emit.ops.table import load_all
    sg = g.main
    op = _pick_op(rng, sg)
    if op is not None:
        op.opcode = rng.choice(sorted(load_all()))
        op.options = {}


def s_options(rng, g):
    """Absurd option values: zero or huge strides, axes out of range, unknown enum values."""
    sg = g.main
    op = _pick_op(rng, sg)
    if op is None or not op.options:
        return
    key = rng.choice(sorted(op.options))
    v = op.options[key]
    if isinstance(v, list):
        op.options[key] = [rng.choice(HUGE) for _ in range(rng.randint(0, 6))]
    elif isinstance(v, str) and not isinstance(v, bool):
        op.options[key] = rng.choice([99, 3, 255])
    elif isinstance(v, (int, float)):
        op.options[key] = rng.choice([0, -1, -5, 7, 2**31 - 1, 1000]) if not isinstance(v, float) else \
            rng.choice([0.0, -1.0, float("inf"), float("nan"), 1e30])


def s_quant(rng, g):
    sg = g.main
    if not sg.tensors:
        return
    from inspector.core.ir.graph import Quantization
    t = rng.choice(sg.tensors)
    n = rng.choice([1, 3, 1000])
    t.quantization = Quantization(scales=np.full(n, rng.choice([0.0, 1e-3, float("nan"), -1.0]), np.float32),
                                  zero_points=np.zeros(n, np.int64), axis=rng.choice([0, 3, 7, -1]))


def s_subgraphs(rng, g):
    """Extra empty subgraphs, or control-flow options pointing at subgraphs that do not exist."""
    from inspector.core.ir.graph import Subgraph
    if rng.random() < 0.5:
        g.subgraphs.append(Subgraph(name="", tensors=[], ops=[], inputs=[], outputs=[]))
    for op in g.main.ops:
        for k in op.options:
            if k.endswith("subgraph_index"):
                op.options[k] = rng.choice([0, len(g.subgraphs), 2**31 - 1, -1])


def _available(sg, op_index: int) -> list[int]:
    """Tensors op `op_index` may legally read: graph inputs, constants, earlier ops' outputs."""
    out = set(sg.inputs) | {t.index for t in sg.tensors if t.data is not None}
    out.update(t for o in sg.ops[:op_index] for t in o.outputs if t >= 0)
    return sorted(out)


def s_rewire(rng, g):
    """An input swapped for another tensor the op may read: ranks, dtypes and arity the emitter does not expect."""
    sg = g.main
    op = _pick_op(rng, sg)
    if op is None:
        return
    pool = _available(sg, sg.ops.index(op))
    if not pool:
        return
    kind = rng.randrange(3)
    if kind == 0 and op.inputs:
        op.inputs[rng.randrange(len(op.inputs))] = rng.choice(pool)
    elif kind == 1 and op.inputs:
        del op.inputs[rng.randrange(len(op.inputs)):]
    else:
        op.inputs.extend(rng.choice(pool + [-1]) for _ in range(rng.randint(1, 3)))


def s_inflate(rng, g):
    """A few activations claim a huge but reader-legal shape: anything the converter builds from a shape
    (state zeros, coordinate grids, window kernels) must not allocate for it."""
    sg = g.main
    pool = [t for t in sg.tensors if t.data is None and t.rank]
    for t in rng.sample(pool, min(len(pool), rng.randint(1, 3))):
        shape = list(t.shape)
        axis = rng.randrange(len(shape))
        shape[axis] = max(shape[axis], 1) << rng.choice([12, 16, 20, 24])
        t.shape, t.shape_signature = tuple(shape), None


def s_metadata(rng, g):
    """The TFLite Support metadata (a flatbuffer inside a buffer) corrupted: counts, swaps, flips, truncation."""
    for key, value in list(g.metadata.items()):
        b = bytearray(value)
        for _ in range(rng.randint(1, 3)):
            if b:
                rng.choice([_word, _word, _flip, _truncate, _swap, _poke])(rng, b)
        g.metadata[key] = bytes(b)


STRUCTURAL = [s_rewire, s_rewire, s_inflate, s_cycle, s_reorder, s_empty, s_shape, s_dtype, s_names, s_indices,
              s_io, s_opcode, s_options,
              s_quant, s_subgraphs]


# -- structural ONNX mutations --------------------------------------------------------------------------------------

def o_cycle(rng, m):
    nodes = m.graph.node
    if len(nodes) >= 2 and rng.random() < 0.5:
        order = list(nodes)
        rng.shuffle(order)
        del nodes[:]
        nodes.extend(order)
    elif nodes:
        n = rng.choice(nodes)
        if n.input and n.output:
            n.input[rng.randrange(len(n.input))] = n.output[0]


def o_names(rng, m):
    g = m.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if rng.random() < 0.3:
            vi.name = rng.choice(CONTROL_NAMES)
    for n in g.node:
        if rng.random() < 0.3:
            n.name = rng.choice(CONTROL_NAMES)
    p = m.metadata_props.add()
    p.key, p.value = rng.choice(CONTROL_NAMES), rng.choice(CONTROL_NAMES)


def o_dims(rng, m):
    vis = [vi for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info)
           if vi.type.HasField("tensor_type")]
    if vis:
        vi = rng.choice(vis)
        shape = vi.type.tensor_type.shape
        if rng.random() < 0.3:
            for _ in range(rng.choice([1, 30])):
                shape.dim.add().dim_value = rng.choice([1, 2**62])
        elif shape.dim:
            d = shape.dim[rng.randrange(len(shape.dim))]
            d.dim_value = rng.choice([0, -1, 2**62, 2**31 - 1])
    if m.graph.initializer:
        t = rng.choice(m.graph.initializer)
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice([0, -1, 2**40, 2**62, 3])


def o_dtype(rng, m):
    if m.graph.initializer and rng.random() < 0.5:
        rng.choice(m.graph.initializer).data_type = rng.choice([0, 2, 7, 8, 9, 16, 23, 99, 1000])
    vis = [vi for vi in list(m.graph.input) + list(m.graph.output) if vi.type.HasField("tensor_type")]
    if vis:
        rng.choice(vis).type.tensor_type.elem_type = rng.choice([0, 2, 8, 14, 99])


def o_external(rng, m):
    if not m.graph.initializer:
        return
    t = rng.choice(m.graph.initializer)
    loc = rng.choice(["weights.bin", "../secret.bin", "/{abs}/secret.bin", "link.bin", "sub/../../secret.bin",
                      "missing.bin", "", "..\\secret.bin", "C:\\secret.bin", "weights.bin\x00../secret.bin",
                      "./../secret.bin"])
    del t.external_data[:]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", loc), ("offset", str(rng.choice([0, 4, -8, 2**62, 255]))),
                 ("length", str(rng.choice([16, 0, -1, 2**62, 256])))):
        if rng.random() < 0.85:
            e = t.external_data.add()
            e.key, e.value = k, v


def _ld(field: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field."""
    return _uvarint(field << 3 | 2) + _uvarint(len(payload)) + payload


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def o_nest(rng, m) -> bytes:
    """If bodies nested deep: recursion in the reader and protobuf's depth limit.

    Written as raw protobuf (the onnx helpers themselves refuse to build it) and appended to the model's bytes:
    a repeated `graph` field merges into the one already there, adding the deep node.
    """
    graph = _ld(1, _ld(1, b"x") + _ld(2, b"t0") + _ld(4, b"Identity")) + _ld(2, b"leaf")
    for i in range(1, rng.choice([3, 40, 120, 400])):
        attr = _ld(1, b"then_branch") + _ld(6, graph) + _uvarint(20 << 3) + _uvarint(onnx.AttributeProto.GRAPH)
        node = _ld(1, b"c") + _ld(2, f"t{i}".encode()) + _ld(4, b"If") + _ld(5, attr)
        graph = _ld(1, node) + _ld(2, f"b{i}".encode())
    return _ld(7, graph)


def o_graph(rng, m):
    kind = rng.randrange(4)
    if kind == 0:
        del m.graph.node[:]
    elif kind == 1:
        m.ClearField("graph")
    elif kind == 2:
        m.ir_version = rng.choice([0, -1, 99])
        del m.opset_import[:]
    else:
        for n in m.graph.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.INTS and rng.random() < 0.5:
                    a.ints[:] = [rng.choice(HUGE) for _ in a.ints]
                elif a.type == onnx.AttributeProto.INT:
                    a.i = rng.choice(HUGE)


def o_raw(rng, m):
    """Initializer bytes that do not match the declared shape and type."""
    if not m.graph.initializer:
        return
    t = rng.choice(m.graph.initializer)
    raw = t.raw_data
    t.raw_data = rng.choice([raw[: len(raw) // 2], raw + b"\x00" * 3, b"", raw * 2])


def o_many(rng, m):
    """Thousands of inputs, initializers, metadata entries or value infos: any quadratic pass becomes a hang."""
    n = rng.choice([2000, 5000, 10000])      # linear work stays well inside the watchdog; quadratic would not
    kind = rng.randrange(3)
    for k in range(n):
        if kind == 0:
            m.graph.input.add().CopyFrom(helper.make_tensor_value_info(f"in{k}", TensorProto.FLOAT, [1]))
            m.graph.initializer.add().CopyFrom(helper.make_tensor(f"w{k}", TensorProto.FLOAT, [1], [1.0]))
        elif kind == 1:
            m.metadata_props.add(key=f"key{k}", value="v")
        else:
            m.graph.value_info.add().CopyFrom(helper.make_tensor_value_info(f"v{k}", TensorProto.FLOAT, [1, 2]))


O_STRUCTURAL = [o_many, o_cycle, o_names, o_dims, o_dtype, o_external, o_nest, o_graph, o_raw]
