"""WHILE -> Loop, IF -> If, and resource variables as explicit state, each checked against LiteRT.

Bodies contain layout-sensitive ops (Conv) so the subgraph's own plan is exercised; shapes are non-square.
"""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from inspector.core.emit.convert import convert
from inspector.core.ir.errors import ConversionError
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite, read_tflite_bytes
from inspector.core.proof.validate import run_onnx, run_tflite, validate

RNG = np.random.default_rng(11)
X_SHAPE = [1, 5, 7, 3]


def w(*shape):
    return (RNG.standard_normal(shape) * 0.3).astype(np.float32)


def conv(sg, x, name, cout=3, cin=3):
    """tanh(conv(x)): a 3x2 SAME conv (TFLite's Conv kernels ignore a fused TANH, so it is a separate op)."""
    c = sg.tensor(name + "_conv", X_SHAPE[:3] + [cout])
    sg.op("CONV_2D", [x, sg.const(name + "_w", w(cout, 3, 2, cin)), sg.const(name + "_b", w(cout))], [c],
          {"padding": "SAME"})
    y = sg.tensor(name, X_SHAPE[:3] + [cout])
    sg.op("TANH", [c], [y])
    return y


def convert_bytes(data: bytes, tmp_path, **kw):
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    return convert(read_tflite(path), **kw)


def compare(result, data: bytes, inputs: list[np.ndarray], rtol=1e-4):
    """Outputs of LiteRT and ONNX Runtime for explicit inputs (both branches of an IF, several loop counts)."""
    g = result.graph
    ref = run_tflite(g, inputs, model_bytes=data, keep_all=False)
    feeds = {result.model.graph.input[i].name: np.transpose(x, result.plan.perm(t, x.ndim))
             for i, (t, x) in enumerate(zip(g.main.inputs, inputs))}
    got = run_onnx(result.model, feeds)
    for t in g.main.outputs:
        y = got[g.main.tensors[t].name]
        assert y.shape == ref[t].shape
        np.testing.assert_allclose(y, ref[t], rtol=rtol, atol=1e-5)


def counted_loop(b, shape):
    """The next two subgraphs: a WHILE's cond (i < n) and its body's start (i + 1), for carried values (i, n, x of
    `shape`). Returns (body, its x, i + 1, its n): the body's x result is the caller's."""
    cond = b.subgraph("cond")
    ci, cn = cond.input("i", [], "int32"), cond.input("n", [], "int32")
    cond.input("x", shape)
    c = cond.tensor("go", [], "bool")
    cond.op("LESS", [ci, cn], [c])
    cond.output(c)
    body = b.subgraph("body")
    bi, bn, bx = body.input("i", [], "int32"), body.input("n", [], "int32"), body.input("x", shape)
    i1 = body.tensor("i1", [], "int32")
    body.op("ADD", [bi, body.const("one", np.array(1, np.int32))], [i1])
    return body, bx, i1, bn


def loop_subgraphs(b, names, shapes):
    """A WHILE's cond (names[0] < names[1]) and body subgraphs for carried values `names` of (shape, dtype)
    `shapes`. Returns (cond, body, the body's inputs)."""
    cond = b.subgraph("cond")
    ci, cn = (cond.input(nm, s, d) for nm, (s, d) in zip(names[:2], shapes[:2]))
    for nm, (s, d) in zip(names[2:], shapes[2:]):
        cond.input(nm, s, d)
    go = cond.tensor("go", [], "bool")
    cond.op("LESS", [ci, cn], [go])
    cond.output(go)
    body = b.subgraph("body")
    return cond, body, [body.input(nm, s, d) for nm, (s, d) in zip(names, shapes)]


def while_model(steps_input: bool = False) -> bytes:
    """y = tanh(conv(...tanh(conv(tanh(conv0(x))))...)), the loop running `n` times (n a constant or an input)."""
    b = ModelBuilder()
    x = b.input("x", X_SHAPE)
    n = b.input("n", [], "int32") if steps_input else b.const("n", np.array(3, np.int32))
    x0 = conv(b, x, "pre")                                # channels-first in the main graph
    i0 = b.const("i0", np.array(0, np.int32))
    outs = [b.tensor("i_end", [], "int32"), b.tensor("n_end", [], "int32"), b.tensor("y", X_SHAPE)]
    body, bx, i1, bn = counted_loop(b, X_SHAPE)
    y = conv(body, bx, "step")
    body.output(i1, bn, y)

    b.op("WHILE", [i0, n, x0], outs, {"cond_subgraph_index": 1, "body_subgraph_index": 2})
    b.output(outs[2])
    return b.build()


def test_while_becomes_loop_with_cond_inside_body(tmp_path):
    data = while_model()
    r = convert_bytes(data, tmp_path)
    loops = [n for n in r.model.graph.node if n.op_type == "Loop"]
    assert len(loops) == 1
    body = loops[0].attribute[0].g
    assert any(n.op_type == "Less" for n in body.node)            # cond re-evaluated on the body's results
    assert any(n.op_type == "Conv" for n in body.node)
    assert set(r.subgraphs) == {1, 2}
    body_plan, body_trace = r.subgraphs[2]
    conv_out = read_tflite_bytes(data).subgraphs[2].ops[2].outputs[0]
    assert body_plan.perms[conv_out] == (0, 3, 1, 2)              # inside the body the Conv works channels-first
    assert body_trace.op_nodes[1]
    v = validate(r)
    assert v.ok, [(e.name, e.max_rel) for e in v.outputs]


@pytest.mark.parametrize("steps", [0, 1, 4])
def test_while_iteration_count_from_input(steps, tmp_path):
    data = while_model(steps_input=True)
    r = convert_bytes(data, tmp_path)
    x = RNG.uniform(-1, 1, X_SHAPE).astype(np.float32)
    compare(r, data, [x, np.array(steps, np.int32)])


def if_model() -> bytes:
    """then: conv(x) * 2 (a channels-first body), else: x - 1 (shapes [1,5,7,3])."""
    b = ModelBuilder()
    flag = b.input("flag", [], "bool")
    x = b.input("x", X_SHAPE)
    y = b.tensor("y", X_SHAPE)

    then = b.subgraph("then")
    tx = then.input("x", X_SHAPE)
    ty = then.tensor("ty", X_SHAPE)
    then.op("MUL", [conv(then, tx, "t"), then.const("two", np.array([2.0], np.float32))], [ty])
    then.output(ty)

    other = b.subgraph("else")
    ex = other.input("x", X_SHAPE)
    ey = other.tensor("ey", X_SHAPE)
    other.op("SUB", [ex, other.const("one", np.array([1.0], np.float32))], [ey])
    other.output(ey)

    b.op("IF", [flag, x], [y], {"then_subgraph_index": 1, "else_subgraph_index": 2})
    b.output(y)
    return b.build()


@pytest.mark.parametrize("flag", [True, False])
def test_if_becomes_if_with_both_branches(flag, tmp_path):
    data = if_model()
    r = convert_bytes(data, tmp_path)
    ifs = [n for n in r.model.graph.node if n.op_type == "If"]
    assert len(ifs) == 1 and {a.name for a in ifs[0].attribute} == {"then_branch", "else_branch"}
    x = RNG.uniform(-1, 1, X_SHAPE).astype(np.float32)
    compare(r, data, [np.array(flag), x])


# --- resource variables ----------------------------------------------------------------------------------------
STATE_SHAPE = [1, 2, 5]          # a streaming buffer: the last 2 frames of 5 features


def state_model(init: bool = True) -> bytes:
    """Streaming: buf = concat(state[:, 1:], x); y = sum(buf * k); state := buf. Two variables, one counter."""
    b = ModelBuilder()
    x = b.input("x", [1, 1, 5])
    h = b.tensor("h", [], "resource")
    hc = b.tensor("hc", [], "resource")
    if init:
        b.op("CALL_ONCE", [], [], {"init_subgraph_index": 1})
    b.op("VAR_HANDLE", [], [h], {"shared_name": "stream/buf"})
    b.op("VAR_HANDLE", [], [hc], {"shared_name": "count"})
    old = b.tensor("old", STATE_SHAPE)
    b.op("READ_VARIABLE", [h], [old])
    tail = b.tensor("tail", [1, 1, 5])
    b.op("SLICE", [old, b.const("begin", np.array([0, 1, 0], np.int32)),
                   b.const("size", np.array([1, 1, 5], np.int32))], [tail])
    buf = b.tensor("buf", STATE_SHAPE)
    b.op("CONCATENATION", [tail, x], [buf], {"axis": 1})
    b.op("ASSIGN_VARIABLE", [h, buf], [])
    prod = b.tensor("prod", STATE_SHAPE)
    b.op("MUL", [buf, b.const("k", w(*STATE_SHAPE))], [prod])
    y = b.tensor("y", [1, 2])
    b.op("SUM", [prod, b.const("axes", np.array([2], np.int32))], [y])
    c0, c1 = b.tensor("c0", [1]), b.tensor("c1", [1])
    b.op("READ_VARIABLE", [hc], [c0])
    b.op("ADD", [c0, b.const("inc", np.array([1.0], np.float32))], [c1])
    b.op("ASSIGN_VARIABLE", [hc, c1], [])
    out = b.tensor("out", [1, 3])
    b.op("CONCATENATION", [y, _as2d(b, c1)], [out], {"axis": 1})
    b.output(out)
    if init:
        sg = b.subgraph("init")
        for name, value in (("stream/buf", np.full(STATE_SHAPE, 0.5, np.float32)),
                            ("count", np.array([10.0], np.float32))):
            hh = sg.tensor(name + "_h", [], "resource")
            sg.op("VAR_HANDLE", [], [hh], {"shared_name": name})
            sg.op("ASSIGN_VARIABLE", [hh, sg.const(name + "_init", value)], [])
    return b.build()


def _as2d(b, t):
    out = b.tensor("c2d", [1, 1])
    b.op("RESHAPE", [t, b.const("shape2", np.array([1, 1], np.int32))], [out])
    return out


def stream(data: bytes, frames: list[np.ndarray]) -> list[np.ndarray]:
    """LiteRT outputs over consecutive invocations of one interpreter (its variables persist between them)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    outs = []
    for x in frames:
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
    return outs


def test_variables_become_state_inputs_and_outputs_streaming(tmp_path):
    data = state_model()
    r = convert_bytes(data, tmp_path)
    g = r.model.graph
    ins, outs = [i.name for i in g.input], [o.name for o in g.output]
    assert ins == ["x", "state:stream/buf", "state:count"]
    assert outs == ["out", "state_out:stream/buf", "state_out:count"]
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in g.initializer}
    np.testing.assert_array_equal(inits["state:stream/buf"], np.full(STATE_SHAPE, 0.5, np.float32))
    np.testing.assert_array_equal(inits["state:count"], [10.0])
    assert [s["variable"] for s in r.state] == ["stream/buf", "count"]
    assert "CALL_ONCE init subgraph 1" in r.state[0]["initial"]
    meta = {p.key: p.value for p in r.model.metadata_props}
    assert json.loads(meta["layout_inspector.state"])[1]["shape"] == [1]

    frames = [RNG.uniform(-1, 1, (1, 1, 5)).astype(np.float32) for _ in range(4)]
    ref = stream(data, frames)
    state = {}                                     # first call: the state inputs' defaults (initial values)
    for x, want in zip(frames, ref):
        got = run_onnx(r.model, {"x": x, **state})
        np.testing.assert_allclose(got["out"], want, rtol=1e-5, atol=1e-6)
        state = {"state:" + n[len("state_out:"):]: v for n, v in got.items() if n.startswith("state_out:")}
    assert state["state:count"][0] == 14.0         # four invocations counted from the initial 10
    assert validate(r).ok                          # one invocation from the initial state


def test_variable_without_initial_value_defaults_to_zero_with_warning(tmp_path):
    r = convert_bytes(state_model(init=False), tmp_path)
    assert any("no initial value" in m for m in r.warnings)
    assert r.state[1]["initial"].startswith("zeros")


def test_computed_initial_value_is_refused(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [1, 3])
    h = b.tensor("h", [], "resource")
    b.op("CALL_ONCE", [], [], {"init_subgraph_index": 1})
    b.op("VAR_HANDLE", [], [h], {"shared_name": "v"})
    v = b.tensor("v", [1, 3])
    b.op("READ_VARIABLE", [h], [v])
    y = b.tensor("y", [1, 3])
    b.op("ADD", [x, v], [y])
    b.output(y)
    sg = b.subgraph("init")
    hh = sg.tensor("h", [], "resource")
    sg.op("VAR_HANDLE", [], [hh], {"shared_name": "v"})
    val = sg.tensor("val", [1, 3])
    sg.op("EXP", [sg.const("c", np.ones((1, 3), np.float32))], [val])
    sg.op("ASSIGN_VARIABLE", [hh, val], [])
    with pytest.raises(ConversionError, match="only constant initial values"):
        convert_bytes(b.build(), tmp_path)


@pytest.mark.parametrize("name", ["realworld/alexa.tflite", "realworld/hey_jarvis.tflite"])
def test_wake_word_models_stream_with_explicit_state(name, corpus):
    """Streaming int8 wake-word models (CALL_ONCE + 6 variables) over 6 invocations, state fed back each time.
    The int8 logits (FULLY_CONNECTED output) are compared: the uint8 probability is 0 for noise input, the
    logits move with the streamed state."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    path = corpus / name
    r = convert(read_tflite(path))
    assert len(r.state) == 6 and all(s["initial"].startswith("constant") for s in r.state)
    g = r.graph.main
    logits = next(op for op in g.ops if op.opcode == "FULLY_CONNECTED").outputs[0]
    it = Interpreter(str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    rng = np.random.default_rng(2)
    state, x_name, l_name = {}, r.model.graph.input[0].name, r.trace.tensor_values[logits][0]
    seen, worst = set(), 0
    for _ in range(6):
        x = rng.integers(-128, 128, (1, 3, 40)).astype(np.int8)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        want = it.get_tensor(logits).astype(np.int32)
        got = run_onnx(r.model, {x_name: x, **state}, [l_name])
        worst = max(worst, int(np.abs(got[l_name].astype(np.int32) - want).max()))
        seen.add(int(want.ravel()[0]))
        state = {"state:" + n[len("state_out:"):]: v for n, v in got.items() if n.startswith("state_out:")}
    assert len(seen) >= 4                          # the state changes what the model says
    assert worst <= 1                              # at most one int8 step apart (rounding of requantization)


def test_nested_while_and_if_inside_a_loop_body(tmp_path):
    """Outer loop j < 2 whose body runs an inner loop i < 3 of conv steps, then an IF (j even: x * 2, else x - 1):
    bodies inside bodies share the model's name space and read the outer constants."""
    b = ModelBuilder()
    x = b.input("x", X_SHAPE)
    zero = b.const("zero", np.array(0, np.int32))
    outs = [b.tensor("j_end", [], "int32"), b.tensor("y", X_SHAPE)]

    def counter_cond(name, limit):
        sg = b.subgraph(name)
        i, _v = sg.input("i", [], "int32"), sg.input("v", X_SHAPE)
        go = sg.tensor("go", [], "bool")
        sg.op("LESS", [i, sg.const("limit", np.array(limit, np.int32))], [go])
        sg.output(go)
        return sg.index

    def inc(sg, i):
        out = sg.tensor("i1", [], "int32")
        sg.op("ADD", [i, sg.const("one", np.array(1, np.int32))], [out])
        return out

    outer_cond = counter_cond("outer_cond", 2)
    outer = b.subgraph("outer_body")
    inner_cond = counter_cond("inner_cond", 3)
    inner = b.subgraph("inner_body")
    i, v = inner.input("i", [], "int32"), inner.input("v", X_SHAPE)
    inner.output(inc(inner, i), conv(inner, v, "inner"))
    then, other = b.subgraph("double"), b.subgraph("minus_one")
    for sg, opcode, k in ((then, "MUL", 2.0), (other, "SUB", 1.0)):
        sv = sg.input("v", X_SHAPE)
        sy = sg.tensor("r", X_SHAPE)
        sg.op(opcode, [sv, sg.const("k", np.array([k], np.float32))], [sy])
        sg.output(sy)

    j, ov = outer.input("j", [], "int32"), outer.input("v", X_SHAPE)
    looped = [outer.tensor("i_end", [], "int32"), outer.tensor("looped", X_SHAPE)]
    outer.op("WHILE", [outer.const("i0", np.array(0, np.int32)), ov], looped,
             {"cond_subgraph_index": inner_cond, "body_subgraph_index": inner.index})
    parity, even = outer.tensor("parity", [], "int32"), outer.tensor("even", [], "bool")
    outer.op("FLOOR_MOD", [j, outer.const("two", np.array(2, np.int32))], [parity])
    outer.op("EQUAL", [parity, outer.const("zero", np.array(0, np.int32))], [even])
    branched = outer.tensor("branched", X_SHAPE)
    outer.op("IF", [even, looped[1]], [branched], {"then_subgraph_index": then.index,
                                                    "else_subgraph_index": other.index})
    outer.output(inc(outer, j), branched)
    b.op("WHILE", [zero, x], outs, {"cond_subgraph_index": outer_cond, "body_subgraph_index": outer.index})
    b.output(outs[1])
    data = b.build()
    r = convert_bytes(data, tmp_path)
    assert set(r.subgraphs) == {1, 2, 3, 4, 5, 6}
    v = validate(r)
    assert v.ok, [(e.name, e.max_rel) for e in v.outputs]
