"""The planner's exact searches agree: on random small TRANSPOSE/conv/elementwise graphs, trying every combination
of modes, the variable elimination (exact.py) and HiGHS's ILP find the same number of Transposes, none above the
greedy pass, and what they count is what convert() emits."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.core.emit.convert import convert, planner
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite_bytes
from inspector.core.layout import exact as E
from inspector.core.layout import solve as S

FOREVER = float("inf")     # no time budget: a loaded machine must not change what is compared
PERMS = [(0, 2, 3, 1), (0, 3, 1, 2), (0, 2, 1, 3), (0, 1, 3, 2)]


def build(steps, h=3, w=5, c=2) -> bytes:
    """A chain from a [1, h, w, c] input; each step a conv, a relu, an add of an earlier tensor, or a TRANSPOSE."""
    rng = np.random.default_rng(0)
    b = ModelBuilder()
    shape = [1, h, w, c]
    made = [(b.input("x", shape), shape)]
    for i, (kind, arg) in enumerate(steps):
        x, s = made[-1]
        if kind == "transpose":
            perm = PERMS[arg % len(PERMS)]
            s = [s[p] for p in perm]
            y = b.tensor(f"t{i}", s)
            b.op("TRANSPOSE", [x, b.const(f"p{i}", np.array(perm, np.int32))], [y])
        elif kind == "conv":
            y = b.tensor(f"t{i}", s)
            b.op("CONV_2D", [x, b.const(f"w{i}", rng.uniform(-1, 1, (s[3], 1, 1, s[3])).astype(np.float32)),
                             b.const(f"b{i}", np.zeros(s[3], np.float32))], [y], {"padding": "SAME"})
        elif kind == "add":
            same = [t for t, ts in made if ts == s]
            y = b.tensor(f"t{i}", s)
            b.op("ADD", [x, same[arg % len(same)]], [y])
        else:
            y = b.tensor(f"t{i}", s)
            b.op("RELU", [x], [y])
        made.append((y, s))
    b.output(made[-1][0])
    return b.build()


STEPS = st.lists(st.tuples(st.sampled_from(["transpose", "conv", "add", "relu"]), st.integers(0, 7)),
                 min_size=2, max_size=7)


@settings(max_examples=40, deadline=None)
@given(STEPS)
def test_every_combination_and_the_ilp_agree(steps):
    graph = read_tflite_bytes(build(steps), "m.tflite")
    pb = planner(graph).problem
    greedy = S.transposes(pb, S.greedy(pb))[0]
    tried, proof = S.solve(pb, FOREVER)
    found = S._ilp(pb, FOREVER)
    assert found is not None and found[2], "HiGHS did not prove its plan optimal"
    ilp = S.transposes(pb, found[0])[0]
    best = S.transposes(pb, tried)[0]
    assert ilp == best == proof.transposes <= greedy
    assert proof.proven
    emitted = convert(graph).transposes
    assert emitted == best


def objective(pb, choice) -> tuple[int, int]:
    """What the ILP minimises, in integers: (Transposes, bytes they move + inserted nodes)."""
    count, moved, inserted = S.transposes(pb, choice)
    return count, moved + inserted


BIG_STEPS = st.lists(st.tuples(st.sampled_from(["transpose", "conv", "add", "add", "relu"]), st.integers(0, 7)),
                     min_size=8, max_size=24)


@settings(max_examples=40, deadline=None)
@given(BIG_STEPS, st.integers(0, 30))
def test_elimination_is_as_good_as_the_ilp_and_deterministic(steps, pin_at):
    """On graphs too big to try every combination (pinned or not), the elimination's plan has the ILP's
    Transposes and an objective no worse (HiGHS stops within 1e-7 of it, which the bytes term can be under);
    the same problem gives the same plan; convert() emits what it counts."""
    graph = read_tflite_bytes(build(steps, h=2, w=5, c=3), "m.tflite")
    sg = graph.main
    outs = [op.outputs[0] for op in sg.ops]
    pins = {sg.tensors[outs[pin_at % len(outs)]].name: "keep"} if pin_at < 15 else {}
    pb = planner(graph, pins).problem
    greedy = S.greedy(pb)
    found = E.refine(pb, greedy, float("inf"))
    ilp = S._ilp(pb, FOREVER)
    assert found is not None                # a part too wide for the elimination goes to HiGHS alone
    again = E.refine(planner(graph, pins).problem, S.greedy(planner(graph, pins).problem), float("inf"))[0]
    assert [m for _, m in sorted(again.items())] == [m for _, m in sorted(found[0].items())]
    assert ilp is not None and ilp[2]
    assert objective(pb, found[0]) <= objective(pb, ilp[0]) and objective(pb, found[0])[0] == objective(pb, ilp[0])[0]
    assert objective(pb, found[0]) <= objective(pb, greedy)
    best = S.solve(pb, FOREVER)[0]
    assert convert(graph, pins=pins).transposes >= S.transposes(pb, best)[0] == objective(pb, ilp[0])[0]


def test_a_tensor_read_by_too_many_choosing_ops_is_left_to_highs():
    """One tensor read by 20 RELUs that may each take several layouts: its table alone would exceed MAX_TABLE, so
    HiGHS plans that part alone; the plan is proven optimal, as good as HiGHS's over the whole graph, the same
    from a re-plan."""
    b = ModelBuilder()
    x = b.input("x", [1, 2, 5, 3])
    y = b.tensor("y", [1, 2, 5, 3])
    b.op("TRANSPOSE", [x, b.const("p", np.array([0, 3, 1, 2], np.int32))], [b.tensor("xt", [1, 3, 2, 5])])
    b.op("RELU", [x], [y])
    for i in range(20):
        z = b.tensor(f"z{i}", [1, 2, 5, 3])
        b.op("RELU", [y], [z])
        b.output(z)
    graph = read_tflite_bytes(b.build(), "wide.tflite")
    base = planner(graph).problem
    S.solve(base, FOREVER)
    pb = planner(graph, {"y": "channels-first"}).problem
    readers = sum(1 for op in graph.main.ops if y in op.inputs and len(pb.modes[op.index]) > 1)
    assert 2 ** readers > E.MAX_TABLE
    choice, (searched, by_highs) = E.refine(pb, S.greedy(pb), float("inf"))
    assert by_highs == 1
    assert objective(pb, choice) == objective(pb, S._ilp(pb, FOREVER)[0])
    plan, proof = S.solve(pb, FOREVER)
    assert plan == choice and proof.proven and "HiGHS" in proof.method
    from inspector.core.emit.convert import _op_table, fold_constants
    from inspector.core.layout.pins import resolve_pins
    from inspector.core.layout.propagation import problem
    folded, constants = fold_constants(graph.main)
    again = problem(graph.main, _op_table(graph), resolve_pins(graph.main, {"y": "channels-first"}), False, folded,
                    set(constants), reuse=base)
    assert S.solve(again, FOREVER, previous=base)[0] == choice


@settings(max_examples=30, deadline=None)
@given(BIG_STEPS, st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["keep", "channels-first", None])),
                           min_size=2, max_size=4))
def test_a_replan_from_the_last_problem_chooses_what_a_fresh_one_does(steps, pin_steps):
    """Pins set and cleared one after another: the problem rebuilt from the last one (Problem.build's reuse) and
    solved from its plan (exact.resolve: greedy and the search only around the change) give the very modes a fresh
    problem and solve give, so an incremental re-conversion writes a full conversion's bytes."""
    from inspector.core.emit.convert import _op_table, fold_constants
    from inspector.core.layout.pins import resolve_pins
    from inspector.core.layout.propagation import assemble, problem
    from tests.test_incremental import same_plan
    graph = read_tflite_bytes(build(steps, h=2, w=5, c=3), "m.tflite")
    sg = graph.main
    folded, constants = fold_constants(sg)
    outs = [op.outputs[0] for op in sg.ops]
    prev, pins = None, {}
    for at, how in pin_steps:
        name = sg.tensors[outs[at % len(outs)]].name
        pins = {k: v for k, v in pins.items() if k != name} | ({name: how} if how else {})
        pin_map = resolve_pins(sg, pins)
        fresh = problem(sg, _op_table(graph), pin_map, False, folded, set(constants))
        cur = problem(sg, _op_table(graph), pin_map, False, folded, set(constants), reuse=prev)
        assert cur.modes == fresh.modes and cur.cand == fresh.cand
        if prev is not None and prev.solution is not None:
            got = E.resolve(cur, prev, float("inf"), S.greedy)
            if got is not None:                 # None: a part too wide for the search (HiGHS's then)
                assert got[0] == S.solve(fresh, FOREVER)[0]
        got, want = S.solve(cur, FOREVER, previous=prev), S.solve(fresh, FOREVER)
        assert got[0] == want[0] and (got[1].transposes, got[1].bound) == (want[1].transposes, want[1].bound)
        same_plan(assemble(cur, *got), assemble(fresh, *want))   # the tables updated from prev's: the same
        prev = cur
