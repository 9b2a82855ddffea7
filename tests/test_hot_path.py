"""What keeps a conversion cheap without changing its result (issue 15's speed work); no timings here, the bench
measures those (bench/run.py)."""
from __future__ import annotations

import gc
import itertools
import json
import os

import numpy as np
import pytest

from inspector.core.emit import io_layout
from inspector.core.emit.convert import convert, graph_name
from inspector.core.io import tflite_reader
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite_bytes
from inspector.core.ir.errors import ModelLoadError
from inspector.core.ir.graph import Graph, Subgraph, Tensor

from .test_control_flow import while_model
from .test_verified_reading import _unterminated


def _int8_conv():
    """int8 CONV_2D with per-channel weights, H != W != C (built here: test_quant's builder draws from its module's
    random generator, and drawing from it here would change that module's data)."""
    rng = np.random.default_rng(15)
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3], "int8", quant=(0.04, -3))
    scales = rng.uniform(0.005, 0.02, 4).astype(np.float32)
    w = b.const("w", rng.integers(-127, 128, (4, 3, 2, 3)).astype(np.int8),
                quant={"scales": scales, "zero_points": np.zeros(4, np.int64), "axis": 0})
    bias = b.const("b", rng.integers(-300, 300, 4).astype(np.int32),
                   quant={"scales": scales * 0.04, "zero_points": np.zeros(4, np.int64), "axis": 0})
    y = b.tensor("y", [1, 5, 4, 4], "int8", quant=(0.06, -10))
    b.op("CONV_2D", [x, w, bias], [y], {"padding": "SAME", "stride_w": 2, "fused_activation_function": "RELU"})
    b.output(y)
    return b.build()


def _cyclic_garbage(fn) -> int:
    """Objects the cyclic collector finds unreachable once fn's result is dropped (refcounting frees the rest)."""
    gc.collect()
    gc.disable()
    try:
        fn()
        return gc.collect()
    finally:
        gc.enable()


@pytest.mark.parametrize("case", ["int8 conv", "int8 conv, exact", "WHILE loop"])
def test_a_conversion_leaves_no_reference_cycles(case):
    """An emitter referring to itself (and its quantization helpers to it) left every conversion's emitter, plan,
    trace and nodes to the cyclic collector: a collection cost more than a small conversion itself."""
    graph = read_tflite_bytes(while_model() if case == "WHILE loop" else _int8_conv())
    convert(graph, exact_int="exact" in case)              # warm: imports and caches made once
    assert _cyclic_garbage(lambda: convert(graph, exact_int="exact" in case)) == 0


def test_the_io_entry_is_the_json_of_its_rows():
    """Written out by hand; the bytes json.dumps gives, with names that need escaping and rank-0 tensors."""
    names = ['in"pút\\', "out\u2028", ""]
    tensors = [Tensor(0, names[0], (1, 5, 3, 4), "float32", shape_signature=(1, -1, 3, 4)),
               Tensor(1, names[1], (2,), "float32"), Tensor(2, names[2], (), "int32")]
    sg = Subgraph("main", tensors, [], [0], [1, 2])
    got = io_layout.describe(sg, {0: ("x\t", (0, 3, 1, 2))}, {1: ("y", (0,)), 2: ("z", ())})
    rows = [{"kind": "input", "onnx": "x\t", "tflite": names[0], "tflite_shape": [1, -1, 3, 4],
             "onnx_shape": [1, 4, -1, 3], "perm": [0, 3, 1, 2]},
            {"kind": "output", "onnx": "y", "tflite": names[1], "tflite_shape": [2], "onnx_shape": [2], "perm": [0]},
            {"kind": "output", "onnx": "z", "tflite": "", "tflite_shape": [], "onnx_shape": [], "perm": []}]
    assert got == json.dumps(rows, separators=(",", ":"))


def test_the_io_entry_writes_repeated_shapes_and_perms_as_json_does():
    """Rows repeat shapes and perms (written once per entry): lists, numpy ints and a perm equal to a shape."""
    tensors = [Tensor(0, "a", [1, 3, 5, 4], "float32"), Tensor(1, "b", (1, 3, 5, 4), "float32"),
               Tensor(2, "c", (0, 1), "float32")]
    sg = Subgraph("main", tensors, [], [0], [1, 2])
    perm = tuple(np.array([0, 3, 1, 2]))
    got = io_layout.describe(sg, {0: ("a", perm)}, {1: ("b", (0, 1, 2, 3)), 2: ("c", (0, 1))})
    rows = [{"kind": "input", "onnx": "a", "tflite": "a", "tflite_shape": [1, 3, 5, 4], "onnx_shape": [1, 4, 3, 5],
             "perm": [0, 3, 1, 2]},
            {"kind": "output", "onnx": "b", "tflite": "b", "tflite_shape": [1, 3, 5, 4], "onnx_shape": [1, 3, 5, 4],
             "perm": [0, 1, 2, 3]},
            {"kind": "output", "onnx": "c", "tflite": "c", "tflite_shape": [0, 1], "onnx_shape": [0, 1],
             "perm": [0, 1]}]
    assert got == json.dumps(rows, separators=(",", ":"))


def test_the_graph_name_is_the_file_name_without_its_extension():
    """graph_name cuts the extension as os.path.splitext does (leading dots kept), on every short path."""
    for k in range(7):
        for chars in itertools.product("a./", repeat=k):
            path = "".join(chars)
            want = os.path.splitext(os.path.basename(path))[0] or "model"
            assert graph_name(Graph(format="tflite", subgraphs=[], path=path)) == want, path


def _relu() -> bytes:
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 5])
    y = b.tensor("y", [1, 4, 6, 5])
    b.op("RELU", [x], [y])
    b.output(y)
    return b.build()


def test_the_litert_check_falls_back_to_the_public_interpreter(monkeypatch):
    """The check calls LiteRT's wrapper directly; a LiteRT whose wrapper takes other arguments (a TypeError) gets
    the public Interpreter instead, and still refuses what LiteRT refuses."""
    from ai_edge_litert import interpreter as lite
    original, calls = lite._interpreter_wrapper.CreateWrapperFromBuffer, []

    def changed(*args):                                    # refuses the first call's arguments, as a new LiteRT might
        calls.append(len(args))
        if len(calls) == 1:
            raise TypeError("incompatible function arguments")
        return original(*args)

    monkeypatch.setattr(lite._interpreter_wrapper, "CreateWrapperFromBuffer", changed)
    monkeypatch.setattr(tflite_reader, "_LITERT", [])
    assert [op.opcode for op in read_tflite_bytes(_relu()).main.ops] == ["RELU"]
    assert len(calls) == 2                                 # ours refused, then the public class's call
    with pytest.raises(ModelLoadError, match="LiteRT refuses this file: The model is not a valid Flatbuffer"):
        read_tflite_bytes(_unterminated(), "m.tflite")
    assert len(calls) == 3 and tflite_reader._LITERT[0].__name__ == "public"     # the public class for good


def test_the_litert_check_uses_the_resolver_the_public_interpreter_names(monkeypatch):
    """The check calls LiteRT's wrapper with the op resolver's id, not through the Interpreter class (whose module
    a cold start no longer imports): the id is the one LiteRT's own Interpreter passes for that resolver."""
    from ai_edge_litert import interpreter as lite
    kind = lite.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    assert tflite_reader._RESOLVER_WITHOUT_DEFAULT_DELEGATES == lite._get_op_resolver_id(kind)
    original, ids = lite._interpreter_wrapper.CreateWrapperFromBuffer, []
    monkeypatch.setattr(lite._interpreter_wrapper, "CreateWrapperFromBuffer",
                        lambda *args: ids.append(args[1]) or original(*args))
    monkeypatch.setattr(tflite_reader, "_LITERT", [])
    read_tflite_bytes(_relu())
    lite.Interpreter(model_content=_relu(), experimental_op_resolver_type=kind)
    assert ids[0] == ids[1] == tflite_reader._RESOLVER_WITHOUT_DEFAULT_DELEGATES


def test_a_layout_is_read_free_as_the_composed_perms_say():
    """L.reads_free is is_trivial(apply(shape, have), compose(inverse(have), want)) written out: the same answer
    for every pair of layouts of ranks 0-4, size-1 and dynamic axes included."""
    from inspector.core.layout import layout as L
    for rank in range(5):
        perms = list(itertools.permutations(range(rank)))
        for shape in itertools.product([1, 3, -1], repeat=rank):
            for have, want in itertools.product(perms, perms):
                assert L.reads_free(shape, have, want) == \
                    L.is_trivial(L.apply(shape, have), L.compose(L.inverse(have), want)), (shape, have, want)


def test_names_with_whitespace_are_found_as_the_regex_finds_them():
    """clean_base finds whitespace with str.split, not a regex: the same characters (Unicode's included)."""
    import re
    from inspector.core.emit.emitter import clean_base
    for code in range(0x3100):
        c = chr(code)
        for base in (c, f"a{c}b", f"{c}ab", f"ab{c}"):
            want = re.sub(r"\s+", "_", base) if re.search(r"\s", base) else base
            assert clean_base(base) == want, repr(base)
    assert clean_base("") == "v" and clean_base(" \u3000\t") == "_" and clean_base("a \n b") == "a_b"


def _chains():
    """Random chains of convs, relus, adds and TRANSPOSEs (test_planner_exact's), some with size-1 axes, unpinned
    and with one output pinned: graphs whose ops have several modes each."""
    from .test_planner_exact import build
    rng = np.random.default_rng(33)
    for k in range(24):
        steps = [(str(rng.choice(["transpose", "conv", "add", "add", "relu"])), int(rng.integers(0, 8)))
                 for _ in range(int(rng.integers(6, 20)))]
        graph = read_tflite_bytes(build(steps, h=1 if k % 3 == 0 else 2, w=5, c=3), "m.tflite")
        outs = [op.outputs[0] for op in graph.main.ops]
        yield graph, {}
        for j, layout in enumerate(("NCHW", "NHWC", "NWCH")):
            yield graph, {graph.main.tensors[outs[(k + 5 * j) % len(outs)]].name: layout}


def _transpose_modes(pb, op):
    """Problem._transpose's modes by the definition: p read, r written, free when compose(p⁻¹, q∘r) only moves
    size-1 axes of the tensor as held in p."""
    from inspector.core.layout import layout as L
    from inspector.core.layout.assign import MAX_CANDIDATES, Mode, _cf, _id
    q = tuple(np.asarray(pb.sg.tensors[op.inputs[1]].data).reshape(-1).tolist())
    ins, dims = pb.candidates(op.inputs[0]), pb.sg.tensors[op.inputs[0]].dims
    outs = list(dict.fromkeys([L.compose(L.inverse(q), p) for p in ins] + [_id(len(q)), _cf(len(q))]))
    modes = []
    for p in ins:
        for r in outs[:MAX_CANDIDATES]:
            net = L.compose(L.inverse(p), L.compose(q, r))
            cost = 0 if L.is_trivial(L.apply(dims, p), net) else 1
            what = "Transpose" if cost else ("an Identity" if L.is_identity(net) else "a Reshape")
            modes.append(Mode(((0, p),), (r,), cost=cost,
                              why=f"written by {op.opcode}#{op.index} (TRANSPOSE, {what} here): {{layout}}"))
    return sorted(modes, key=lambda m: m.cost)


def _greedy(pb):
    """solve.greedy by its definition: ops in order, each the mode adding fewest Transposes given what is decided,
    counting its outputs' one-way readers, pins and graph outputs; channels-first on a tie (the first such)."""
    from inspector.core.layout import layout as L
    from inspector.core.layout.assign import presented
    lay, done, choice = {t: p for t, (p, _) in pb.fixed.items()}, set(), {}
    for oi, modes in pb.modes.items():
        op = pb.sg.ops[oi]

        def price(m):
            new = {(op.inputs[s], w) for s, w in m.reads
                   if not pb.free(op.inputs[s], lay.get(op.inputs[s]) or pb.identity(op.inputs[s]), w)}
            ahead = 0
            for slot, t in enumerate(op.outputs):
                have = pb.pins.get(t, m.writes[slot])
                ahead += t in pb.pins and not pb.free(t, m.writes[slot], have)
                ahead += sum(not pb.free(t, have, w) for w in pb.demands(t))
                ahead += t in pb.outputs_allowed and not pb.free(t, have, presented(pb, t, have))
            return len(new - done) + m.cost + ahead, L.is_identity(m.writes[0] if m.writes else ())

        best = choice[oi] = min(modes, key=price)
        done |= {(op.inputs[s], w) for s, w in best.reads
                 if not pb.free(op.inputs[s], lay.get(op.inputs[s]) or pb.identity(op.inputs[s]), w)}
        lay.update((t, pb.pins.get(t, best.writes[k])) for k, t in enumerate(op.outputs))
    return choice


def test_transpose_modes_and_the_greedy_pass_follow_their_definitions():
    """The TRANSPOSE modes (compose and is_trivial written out over lists) and the greedy pass (each op's
    lookups made once for all its modes) are what their definitions give, pinned or not."""
    from inspector.core.emit.convert import planner
    from inspector.core.layout import solve as S
    transposes, costs = 0, set()
    for graph, pins in _chains():
        pb = planner(graph, pins).problem
        for op in graph.main.ops:
            if op.opcode == "TRANSPOSE":
                assert pb._transpose(op) == _transpose_modes(pb, op)
                transposes += 1
                costs |= {(m.cost, m.why.split(", ")[1][:4]) for m in pb.modes[op.index]}
        assert S.greedy(pb) == _greedy(pb)
    assert transposes > 50 and costs == {(1, "Tran"), (0, "an I"), (0, "a Re")}     # each kind of mode met


def _by_numpy(pb, t, haves, var, readers, free, unit):
    """exact._tensor_factor as it was before its tables were counted in Python: the sum over each distinct layout
    read with numpy (exact._wide_factor, kept for wide tables), from the same split of its readers."""
    from inspector.core.layout import exact as E
    axes = ([var] if var is not None else []) + [oi for oi in readers if oi in free]
    if not axes:
        return None
    fixed = set().union(*[per[0] for oi, per in readers.items() if oi not in free])
    reads = [per for oi, per in readers.items() if oi in free]
    return E._wide_factor(pb, t, haves if var is not None else haves[:1], axes, reads, fixed, unit)


def test_the_exact_search_s_tables_are_the_numpy_sums(monkeypatch):
    """Each tensor's table of the exact search, counted over sets in Python, is the numpy sum over each layout read
    that it was (and that wide tables still are), entry for entry, on pinned and unpinned random chains."""
    from inspector.core.emit.convert import planner
    from inspector.core.layout import exact as E
    made, seen = [], set()

    def both(pb, t, haves, var, readers, free, unit):
        got = E_factor(pb, t, haves, var, readers, free, unit)
        want = _by_numpy(pb, t, haves, var, readers, free, unit)
        assert (got is None) == (want is None), t
        if got is not None:
            assert got[0] == want[0] and got[1].dtype == want[1].dtype and got[1].flags.c_contiguous, t
            assert np.array_equal(got[1], want[1]), (t, got, want)
            made.append(got[1].shape)
            seen.add((var is not None, len(got[0]), bool(got[1].any())))
        return got

    E_factor = E._tensor_factor
    monkeypatch.setattr(E, "_tensor_factor", both)
    for graph, pins in _chains():
        pb = planner(graph, pins).problem
        groups, _ = E.components(pb)
        readers: dict = {}
        for ops in groups:
            E.factors(pb, pb.graph_facts()[3], ops, readers)
    assert len(made) > 300 and max(map(len, made)) >= 2
    assert {(True, 1, True), (True, 2, True), (False, 1, True), (True, 2, False)} <= seen   # each kind met


def _eliminate(domains, tables):
    """exact.eliminate by its definition (no deadline): again and again the variable whose joint table (over the
    variables sharing a table with it, itself alone when none) is smallest, the lowest on a tie, is summed out: the
    tables holding it are added up, their minimum over it kept as a table of the rest and the first mode reaching
    it remembered; the modes are read back in reverse."""
    import math
    live, steps, left = list(tables), [], set(domains)

    def scope_of(v):
        return tuple(sorted({u for sc, _ in live if v in sc for u in sc} or {v}))

    while left:
        v = min(left, key=lambda u: (math.prod(domains[w] for w in scope_of(u)), u))
        scope, axis = scope_of(v), scope_of(v).index(v)
        joint = np.zeros([domains[u] for u in scope], np.int64)
        for sc, arr in live:
            if v in sc:             # (every scope is ascending, as the joint's is)
                joint = joint + arr.reshape([domains[u] if u in sc else 1 for u in scope])
        rest = scope[:axis] + scope[axis + 1:]
        live = [(sc, arr) for sc, arr in live if v not in sc] + ([(rest, joint.min(axis))] if rest else [])
        steps.append((v, rest, joint.argmin(axis)))
        left.remove(v)
    pick = {}
    for v, rest, arg in reversed(steps):
        pick[v] = int(arg[tuple(pick[u] for u in rest)])
    return pick


def test_the_variable_elimination_follows_its_definition():
    """exact.eliminate (its joint tables summed without a zero table, its sizes counted in a loop) picks what the
    definition picks, ties included, on random factor graphs: chains, stars, variables of no table, repeated
    scopes, small value ranges (many ties)."""
    from inspector.core.layout import exact as E
    rng = np.random.default_rng(33)
    for k in range(400):
        n = int(rng.integers(1, 7))
        domains = {int(v): int(rng.integers(1, 5)) for v in rng.choice(40, n, replace=False)}
        names = sorted(domains)
        tables = []
        for _ in range(int(rng.integers(0, 9))):
            width = int(rng.integers(1, min(3, n) + 1))
            scope = tuple(sorted(int(v) for v in rng.choice(names, width, replace=False)))
            top = 3 if k % 2 else 1000
            tables.append((scope, rng.integers(0, top, [domains[v] for v in scope]).astype(np.int64)))
        assert E.eliminate(domains, tables, float("inf")) == _eliminate(domains, tables), (domains, tables)
