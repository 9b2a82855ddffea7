"""The ONNX view and the live placement read what they can in C and only what changed: from_onnx equals a plain
node-by-node reading of the graph, and a placement that takes the last layout's positions and routes for what
crossed unchanged lays out and diffs as one that reads every node and edge, over pins and undos in a row."""
from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector.core.io.loader import load_model
from inspector.gui import graph_model, rerun_child
from inspector.gui.graph_layout import compute
from inspector.gui.graph_model import Edge, Node, ViewGraph, from_onnx, shape_text
from inspector.gui.live_layout import Placement, diff
from tests.test_rerun_transfer import Pool, branches, child_pool, window_reruns


def plain_view(model, graph=None) -> ViewGraph:
    """The view read node by node and edge by edge, as from_onnx did before its C passes (the oracle)."""
    g = graph if graph is not None else model.graph

    def read(g):
        shapes = {}
        for vi in [*g.input, *g.value_info, *g.output]:
            tt = vi.type.tensor_type
            if tt.HasField("shape"):
                shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                        for d in tt.shape.dim)
        return shapes
    shapes = read(g)
    nodes = [(n.op_type, list(n.input), list(n.output)) for n in g.node]
    if graph is None:
        graph_model._same_shape_fill(nodes, shapes)
        outputs = [o for _, _, outs in nodes for o in outs if o]
        if sum(o not in shapes for o in outputs) > len(outputs) // 10:       # most missing: inferred
            g = onnx.shape_inference.infer_shapes(model).graph
            shapes = read(g)
    for i, (op, ins, outs) in enumerate(nodes):
        if op == "Transpose" and outs[0] not in shapes and ins[0] in shapes:
            perm = next((list(a.ints) for a in g.node[i].attribute if a.name == "perm"), None)
            shapes[outs[0]] = tuple(shapes[ins[0]][p] for p in perm) if perm else tuple(reversed(shapes[ins[0]]))
    inits = {t.name: t for t in g.initializer}
    out = ViewGraph("onnx", [], [])
    producer, seen = {}, set()

    def terminal(kind, name):
        out.nodes.append(Node((kind, name), "input" if kind == "in" else "output", name,
                              [s for s in [shape_text(shapes.get(name))] if s], search=name))
        return len(out.nodes) - 1

    def edge(src, dst, name):
        out.edges.append(Edge(src, dst, name, shape_text(shapes.get(name)), name not in seen))
        seen.add(name)
    for vi in g.input:
        if vi.name not in inits:
            producer[vi.name] = terminal("in", vi.name)
    first = len(out.nodes)
    for i, n in enumerate(g.node):
        out.nodes.append(graph_model._onnx_node(n, i, inits))
        producer.update((o, first + i) for o in n.output if o)
    for i, (_, ins, _) in enumerate(nodes):
        for name in ins:
            if name and name not in inits:
                if name not in producer:
                    producer[name] = terminal("in", name)
                edge(producer[name], first + i, name)
    for vi in g.output:
        at = terminal("out", vi.name)
        if vi.name in producer:
            edge(producer[vi.name], at, vi.name)
    out.tensor_names = {e.tensor: str(e.tensor) for e in out.edges}
    out.shapes = shapes
    return graph_model.bundle(out)


def same_view(model, graph=None) -> ViewGraph:
    vg, want = from_onnx(model, graph), plain_view(model, graph)
    assert vg == want
    assert list(vg.tensor_names) == list(want.tensor_names) and list(vg.shapes) == list(want.shapes)
    return vg


@pytest.fixture(params=["whole", "entry by entry"])
def split(request, monkeypatch):
    """Both ways from_onnx gets each entry's bytes: the graph's bytes split, or entry by entry (big weights)."""
    if request.param != "whole":
        monkeypatch.setattr(graph_model, "LIGHT_BYTES", -1)
    return request.param


def odd_graph() -> onnx.ModelProto:
    """Unnamed nodes, a node reading an initializer twice and an empty input, a value read twice by one node,
    a value without value_info behind a Relu and a Transpose, and a Loop whose body reads an outer value."""
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "W")
    body = helper.make_graph(
        [helper.make_node("Add", ["v", "outer"], ["v2"]), helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 4, 5, 7])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v2", TensorProto.FLOAT, [1, 4, 5, 7])])
    nodes = [helper.make_node("Conv", ["x", "W", ""], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Transpose", ["r"], ["t"], name="tr", perm=[0, 2, 3, 1]),
             helper.make_node("Mul", ["t", "t"], ["m"]),
             helper.make_node("Conv", ["x", "W"], ["outer"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Loop", ["", "", "outer"], ["looped"], name="loop", body=body)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])],
                          [helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 5, 7, 4]),
                           helper.make_tensor_value_info("looped", TensorProto.FLOAT, [1, 4, 5, 7])], [w],
                          value_info=[helper.make_tensor_value_info("outer", TensorProto.FLOAT, [1, 4, 5, 7])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_the_onnx_view_equals_a_plain_reading_of_odd_graphs(split):
    m = odd_graph()
    vg = same_view(m)
    assert [n.key for n in vg.nodes if n.kind == "op"][0] == "Conv#0"          # unnamed: named by its index
    assert vg.shapes["c"] == (1, 4, 5, 7) and vg.shapes["t"] == (1, 5, 7, 4)
    assert [e.first for e in vg.edges if e.tensor == "t"] == [True, False]      # read twice by the Mul
    body = same_view(None, m.graph.node[-1].attribute[0].g)
    assert ("in", "outer") in {n.key for n in body.nodes}                      # the enclosing graph's value
    t = next(t for t in m.graph.initializer if t.name == "W")
    t.data_type = TensorProto.FLOAT16                                          # the same nodes, another weight
    assert any("float16" in line for n in same_view(m).nodes for line in n.lines)
    m.graph.node[0].name = "named"                                             # an unnamed node named
    assert "named" in {n.key for n in same_view(m).nodes}


def test_the_onnx_view_of_pins_and_undos_in_a_row_equals_a_plain_reading(tmp_path, split):
    """A generated non-square model through pins, a second pin, undos and a pin again (a re-run's model each
    time), and a model whose fan-in is bundled."""
    from inspector.core.session.pipeline import run
    path = branches(tmp_path / "b.tflite", 40)
    sg = load_model(path).main
    convs = [sg.tensors[op.outputs[0]].name for op in sg.ops if op.opcode == "CONV_2D"]
    a, b = convs[len(convs) // 3], convs[2 * len(convs) // 3]
    transposes = set()
    for pins in ({}, {a: "keep"}, {a: "keep", b: "keep"}, {a: "keep"}, {}, {b: "keep"}):
        r = run(load_model(path), pins, check=False).result
        same_view(r.model)
        transposes.add(r.transposes)
    assert len(transposes) > 2
    fan = helper.make_graph([helper.make_node("Sum", [f"x{i}" for i in range(40)], ["y"], name="sum")], "fan",
                            [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [2, 3]) for i in range(40)],
                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    assert len(same_view(helper.make_model(fan)).nodes) == 3                  # the 40 inputs as one terminal


def test_a_placement_reading_only_what_changed_lays_out_as_one_reading_all(tmp_path, monkeypatch):
    """Pins, a second pin, undos and a pin again on a generated non-square model, each view made whole from what
    crossed (rerun_child.view_in): the placement that takes the last layout's sizes, positions and routes for
    what crossed unchanged gives the same positions, routes, extent and diff as one that reads every node and
    edge (the same views without what says what they were)."""
    child_pool(monkeypatch, Pool())
    path = branches(tmp_path / "b.tflite", 60)
    sg = load_model(path).main
    convs = [sg.tensors[op.outputs[0]].name for op in sg.ops if op.opcode == "CONV_2D"]
    a, b = convs[len(convs) // 4], convs[3 * len(convs) // 4]
    vg, *_ = window_reruns(path, {})
    layout = compute(vg)
    fast, slow = Placement(vg, layout, later=True), Placement(vg, layout, later=True)
    shown = (vg, layout)
    taken = 0
    for pins in ({a: "keep"}, {a: "keep", b: "keep"}, {a: "keep"}, {}, {b: "keep"}, {a: "keep", b: "keep"}, {}):
        vg, *_ = window_reruns(path, pins)
        assert vg.__dict__["_was"][0]() is shown[0]
        whole = copy.copy(vg)
        del whole.__dict__["_was"]
        taken += fast.made()._last is not None
        laid, again = fast.layout(vg), slow.layout(whole)     # (whole: nothing says what it was)
        assert (laid.pos, laid.routes, laid.width, laid.height) == (again.pos, again.routes, again.width,
                                                                   again.height)
        assert vars(diff(*shown, vg, laid)) == vars(diff(*shown, whole, again))
        shown = (vg, laid)
    assert taken == 7 and fast.pos == slow.pos
    assert rerun_child.WINDOW.got               # (the views crossed as changes)


def plain_box(n, i: int, inits: dict) -> Node:
    """A node's box read attribute by attribute, as _onnx_node did before it kept each kind of node's lines."""
    attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute
             if a.type not in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS, onnx.AttributeProto.TENSOR)}
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    consts = [graph_model._const_line(n.op_type, slot, tuple(inits[name].dims),
                                      helper.tensor_dtype_to_np_dtype(inits[name].data_type).name)
              for slot, name in enumerate(n.input) if name in inits]
    name = graph_model.onnx_node_name(n, i)
    return Node(name, "op", n.op_type, graph_model.attr_lines(attrs) + graph_model._capped(consts),
                search=name + " " + " ".join(n.output), attrs=graph_model.attr_pairs(attrs),
                subgraphs=[a.name for a in n.attribute
                           if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)])


def test_boxes_of_one_kind_of_node_read_once_equal_each_read_alone():
    """_onnx_node works out each kind of node's lines once (op type, attributes, the initializers' types and dims):
    nodes that differ in any of them, in their names, or in a body or tensor attribute, each get their own."""
    m = odd_graph()
    g = m.graph
    extra = [numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float16), "W16"),
             numpy_helper.from_array(np.ones((2, 3, 5, 3), np.float32), "W2")]
    g.initializer.extend(extra)
    g.node.extend([helper.make_node("Conv", ["x", "W"], ["c2"], name="same", pads=[1, 1, 1, 1]),
                   helper.make_node("Conv", ["x", "W"], ["c3"], name="pads", pads=[0, 1, 0, 1]),
                   helper.make_node("Conv", ["x", "W16"], ["c4"], name="half", pads=[1, 1, 1, 1]),
                   helper.make_node("Conv", ["x", "W2"], ["c5"], name="dims", pads=[1, 1, 1, 1]),
                   helper.make_node("Conv", ["W", "x"], ["c6"], name="slot", pads=[1, 1, 1, 1]),
                   helper.make_node("Resize", ["x"], ["rs"], name="mode", mode="nearest"),
                   helper.make_node("Resize", ["x"], ["rl"], name="linear", mode="linear"),
                   helper.make_node("Constant", [], ["k1"], value=numpy_helper.from_array(np.ones(3, np.float32))),
                   helper.make_node("Constant", [], ["k2"], value=numpy_helper.from_array(np.zeros(5, np.int64))),
                   helper.make_node("If", ["cond"], ["o"], name="if", then_branch=g.node[-1].attribute[0].g,
                                    else_branch=g.node[-1].attribute[0].g)])
    inits = {t.name: t for t in g.initializer}
    graph_model._CONTENT.clear()
    got = [graph_model._onnx_node(n, i, inits) for i, n in enumerate(g.node)]
    again = [graph_model._onnx_node(n, i, inits) for i, n in enumerate(g.node)]      # from what was kept
    want = [plain_box(n, i, inits) for i, n in enumerate(g.node)]
    assert got == want and again == want
    assert len(graph_model._CONTENT) < len(g.node)              # the same kinds of node read once
    lines = {n.key: n.lines for n in got}
    assert lines["same"] == lines["conv2"] != lines["pads"]
    assert "float16" in " ".join(lines["half"]) and "2×3×5×3" in " ".join(lines["dims"])
    assert lines["mode"] != lines["linear"] and next(n for n in got if n.key == "if").subgraphs == [
        "else_branch", "then_branch"]
    got[0].lines.append("changed")                              # a box's lines are its own
    assert graph_model._onnx_node(g.node[0], 0, inits).lines == want[0].lines
