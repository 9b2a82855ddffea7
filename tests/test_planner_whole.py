"""The plan covers the whole model: the model's own TRANSPOSE ops are choices like any other op (they vanish, become a
Reshape or move), and IF/WHILE bodies are planned with their parent (no branch converts a layout in and back out).
Generated non-square models, each checked against LiteRT."""
from __future__ import annotations

import numpy as np

from inspector.core.emit.convert import convert, planner
from inspector.core.emit.incremental import Reconverter
from inspector.core.io.loader import load_model
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.layout import layout as L
from inspector.core.proof.validate import validate
from inspector.core.session.pipeline import Incremental, run

from .test_control_flow import X_SHAPE, compare, conv, convert_bytes, counted_loop, w
from .test_incremental import same
from .test_quant import save

RNG = np.random.default_rng(31)


def f32(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def mel_front_end(tmp_path, length: int = 200, hop: int = 8, kernel: int = 16, bins: int = 6, mels: int = 5):
    """A log-mel front end with dynamic batch and length ([N, L] in, stored [1, 200]): EXPAND_DIMS, a TRANSPOSE
    that moves the size-1 axis ([N, 1, L] -> [N, L, 1]), a strided CONV_2D with DFT-like kernels, a square, SQUEEZE,
    a mel matrix, LOG, EXPAND_DIMS and a TRANSPOSE to [N, 1, F, mels] that moves the size-1 axis too."""
    b = ModelBuilder()
    frames = (length - kernel) // hop + 1

    def t(name, shape, sig):
        return b.tensor(name, shape, shape_signature=sig)

    def run(opcode, ins, out, options=None):
        b.op(opcode, ins, [out], options or {})
        return out

    def i32(v):
        return b.const(f"c{len(b.tensors)}", np.asarray(v, np.int32))

    wave = b.input("wave", [1, length], "float32", shape_signature=[-1, -1])
    x = run("EXPAND_DIMS", [wave, i32(1)], t("wave3", [1, 1, length], [-1, 1, -1]))
    x = run("TRANSPOSE", [x, i32([0, 2, 1])], t("wave_t", [1, length, 1], [-1, -1, 1]))
    x = run("EXPAND_DIMS", [x, i32(1)], t("wave4", [1, 1, length, 1], [-1, 1, -1, 1]))
    x = run("CONV_2D", [x, b.const("dft", f32(bins, 1, kernel, 1)), b.const("dft_b", f32(bins))],
            t("spec", [1, 1, frames, bins], [-1, 1, -1, bins]),
            {"padding": "VALID", "stride_h": 1, "stride_w": hop, "fused_activation_function": "NONE"})
    x = run("MUL", [x, x], t("power", [1, 1, frames, bins], [-1, 1, -1, bins]))
    x = run("SQUEEZE", [x], t("power3", [1, frames, bins], [-1, -1, bins]), {"squeeze_dims": [1]})
    x = run("FULLY_CONNECTED", [x, b.const("mel_w", np.abs(f32(mels, bins))), None],
            t("mel", [1, frames, mels], [-1, -1, mels]), {"keep_num_dims": True})
    x = run("ADD", [x, b.const("eps", np.float32(1e-3))], t("mel_eps", [1, frames, mels], [-1, -1, mels]))
    x = run("LOG", [x], t("log_mel", [1, frames, mels], [-1, -1, mels]))
    x = run("EXPAND_DIMS", [x, i32(-1)], t("log_mel4", [1, frames, mels, 1], [-1, -1, mels, 1]))
    b.output(run("TRANSPOSE", [x, i32([0, 3, 1, 2])], t("image", [1, 1, frames, mels], [-1, 1, -1, mels])))
    return save(b, tmp_path)


def test_transposes_that_move_only_size1_axes_move_no_data_with_two_dynamic_dims(tmp_path):
    """Both TRANSPOSE ops only move a size-1 axis: no data moves whatever the batch and length (Squeeze and
    Unsqueeze where a Reshape cannot place two dynamic dims). The one Transpose left is the spectrogram's, NCHW
    after the conv, before SQUEEZE needs TFLite's order; the plan says so and proves it."""
    graph = mel_front_end(tmp_path)
    result = convert(graph)
    assert result.transposes == 1 and len(result.plan.conflicts) == 1
    assert graph.main.ops[result.plan.conflicts[0].op].opcode == "SQUEEZE"
    assert result.plan.optimality.proven and result.plan.optimality.transposes == 1
    for batch in (1, 3):
        v = validate(result, batch=batch)
        assert v.ok and not v.first_bad(), [(e.name, e.max_rel) for e in v.outputs + v.intermediates if not e.ok]


# --- IF and WHILE planned with their parent ------------------------------------------------------------------------
def cond_while_model(c: int = 4) -> bytes:
    """conv in the main graph; an IF (flag) whose branches each conv [1, 5, 7, c] (one adds a LOGISTIC, the other
    a MUL); a WHILE running n times a body x -> 0.5 x + tanh(conv(x)) with a step counter; MEAN over H and W; a
    dense head. Every layout-sensitive op works channels-first, so can the boundaries."""
    shape = X_SHAPE[:3] + [c]
    b = ModelBuilder()
    flag, n = b.input("flag", [], "bool"), b.input("n", [], "int32")
    x = b.input("x", X_SHAPE)
    x0 = conv(b, x, "pre", cout=c)
    branched = b.tensor("branched", shape)
    for name, tail in (("then", "LOGISTIC"), ("else", "MUL")):
        sg = b.subgraph(name)
        y = conv(sg, sg.input("x", shape), name, cout=c, cin=c)
        out = sg.tensor(name + "_out", shape)
        sg.op(tail, [y] if tail == "LOGISTIC" else [y, sg.const("half", np.array([0.5], np.float32))], [out])
        sg.output(out)
    body, bx, i1, bn = counted_loop(b, shape)
    half = body.tensor("half_x", shape)
    body.op("MUL", [bx, body.const("half", np.array([0.5], np.float32))], [half])
    step = body.tensor("step", shape)
    body.op("ADD", [half, conv(body, bx, "step", cout=c, cin=c)], [step])
    body.output(i1, bn, step)
    b.op("IF", [flag, x0], [branched], {"then_subgraph_index": 1, "else_subgraph_index": 2})
    looped = [b.tensor("i_end", [], "int32"), b.tensor("n_end", [], "int32"), b.tensor("looped", shape)]
    b.op("WHILE", [b.const("i0", np.array(0, np.int32)), n, branched], looped,
         {"cond_subgraph_index": 3, "body_subgraph_index": 4})
    pooled = b.tensor("pooled", [1, c])
    b.op("MEAN", [looped[2], b.const("hw", np.array([1, 2], np.int32))], [pooled], {"keep_dims": False})
    logits = b.tensor("logits", [1, 6])
    b.op("FULLY_CONNECTED", [pooled, b.const("fc_w", w(6, c)), b.const("fc_b", w(6))], [logits])
    b.output(logits)
    return b.build()


def test_if_branches_and_while_body_take_the_layout_their_parent_works_in(tmp_path):
    """The IF's input and result and the WHILE's carried map are channels-first: no branch or body converts to
    TFLite's layout and back (7 Transposes when each subgraph kept TFLite's layout at its boundary). The report's
    proof covers the subgraphs: 0 Transposes, proven over the whole model."""
    data = cond_while_model()
    r = convert_bytes(data, tmp_path)
    assert r.transposes == 0, [c.reason for _, (p, _) in r.subgraphs.items()
                                                       for c in p.conflicts]
    o = r.plan.optimality
    assert o.proven and o.transposes == 0 and not o.left_out and "subgraphs" in o.to_dict()["over"]
    sg = r.graph.main
    branched = next(op.outputs[0] for op in sg.ops if op.opcode == "IF")
    assert r.plan.perms[branched] == (0, 3, 1, 2)
    body_plan = r.subgraphs[4][0]
    assert "chosen with" in body_plan.io_rules[r.graph.subgraphs[4].inputs[2]]
    for flag in (True, False):
        for steps in (0, 1, 3):
            x = RNG.uniform(-1, 1, X_SHAPE).astype(np.float32)
            compare(r, data, [np.array(flag), np.array(steps, np.int32), x])


def test_pins_around_an_if_and_a_while_replan_as_from_scratch(tmp_path):
    """A pin on the IF's input, its result or the WHILE's: the re-plan from the last one (the window's path) equals
    a conversion from scratch, and the what-if planner predicts its Transposes, the subgraphs' included."""

    path = tmp_path / "cw.tflite"
    path.write_bytes(cond_while_model())
    graph = load_model(path)
    cache, what_if = Reconverter(), planner(graph)
    Incremental(cache).run(graph, check=False)
    counts = set()
    for pins in ({"branched": "keep"}, {"branched": "keep", "pre": "keep"}, {"looped": "NHWC"}, {}, {"pre": "keep"}):
        got = Incremental(cache).run(graph, pins, check=False)
        same(got, run(graph, pins, check=False))
        counts.add(got.result.transposes)
        if len(pins) == 1:
            (name, text), = pins.items()
            t = next(t.index for t in graph.main.tensors if t.name == name)
            assert what_if.transposes_if(t, L.parse(text, 4)).transposes == got.result.transposes
    assert len(counts) > 1 and min(counts) == 0


def wide_if_model(c: int = 4) -> bytes:
    """An IF over three convolved maps returning two (then: conv(a) + b and c * 2; else: a - b and tanh(c)), their
    sum convolved and averaged over H and W: 2^5 combinations of boundary layouts, more than the planner prices one
    by one."""
    shape = X_SHAPE[:3] + [c]
    b = ModelBuilder()
    flag, x = b.input("flag", [], "bool"), b.input("x", X_SHAPE)
    maps = [conv(b, x, f"m{k}", cout=c) for k in range(3)]
    outs = [b.tensor("r0", shape), b.tensor("r1", shape)]
    for name in ("then", "else"):
        sg = b.subgraph(name)
        a, m, k = (sg.input(n, shape) for n in "abc")
        r0, r1 = sg.tensor("r0", shape), sg.tensor("r1", shape)
        if name == "then":
            sg.op("ADD", [conv(sg, a, "t", cout=c, cin=c), m], [r0])
            sg.op("MUL", [k, sg.const("two", np.array([2.0], np.float32))], [r1])
        else:
            sg.op("SUB", [a, m], [r0])
            sg.op("TANH", [k], [r1])
        sg.output(r0, r1)
    b.op("IF", [flag, *maps], outs, {"then_subgraph_index": 1, "else_subgraph_index": 2})
    y = b.tensor("y", shape)
    b.op("ADD", outs, [y])
    pooled = b.tensor("pooled", [1, 3])
    b.op("MEAN", [conv(b, y, "post", cout=3, cin=c), b.const("hw", np.array([1, 2], np.int32))], [pooled],
         {"keep_dims": False})
    b.output(pooled)
    return b.build()


def test_an_if_with_too_many_boundary_combinations_says_what_its_proof_leaves_out(tmp_path):
    """Priced at its uniform boundaries only (every slot channels-first here: 0 Transposes), the plan's report says
    so: proven over the model except that IF's other combinations."""
    data = wide_if_model()
    r = convert_bytes(data, tmp_path)
    o = r.plan.optimality
    assert r.transposes == 0 and o.proven
    assert o.left_out == "IF#6: 3 of 32 boundary layout combinations"
    assert o.to_dict()["over"].endswith("except IF#6: 3 of 32 boundary layout combinations")
    assert "over the model except IF#6" in o.describe()
    for flag in (True, False):
        compare(r, data, [np.array(flag), RNG.uniform(-1, 1, X_SHAPE).astype(np.float32)])


def test_a_re_conversion_after_a_pin_solves_no_subgraph_at_a_boundary_solved_before(tmp_path, monkeypatch):
    """The IF and WHILE bodies' plans (convert.Subplans) stay with the Reconverter: after a pin, a body at a
    boundary solved in an earlier run is not solved again, and the result is still a conversion from scratch's."""
    from inspector.core.emit import convert as C
    path = tmp_path / "cw.tflite"
    path.write_bytes(cond_while_model())
    graph = load_model(path)
    solved = []
    real = C.solved_problem
    monkeypatch.setattr(C, "solved_problem", lambda sg, *a, **k: solved.append(sg.name) or real(sg, *a, **k))
    cache = Reconverter()
    Incremental(cache).run(graph, check=False)
    first = len(solved)
    assert first > 0                                        # the bodies were solved once...
    again = 0
    for pins in ({"branched": "keep"}, {}, {"branched": "keep"}, {}):
        want = run(graph, pins, check=False)
        before = len(solved)
        same(Incremental(cache).run(graph, pins, check=False), want)
        again += len(solved) - before
        if not pins:
            assert len(solved) == before                    # ...and a boundary seen before is not solved again
    assert again < first                                    # (a conversion from scratch solves them all each time)
