"""The planner's exact searches agree: on random small TRANSPOSE/conv/elementwise graphs, trying every combination
of modes and HiGHS's ILP find the same number of Transposes, neither above the greedy pass, and what they count
is what convert() emits."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.core.emit.convert import convert, planner
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite_bytes
from inspector.core.layout import solve as S

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
    tried, proof = S.solve(pb)
    found = S._ilp(pb, 10.0)
    assert found is not None and found[2], "HiGHS did not prove its plan optimal"
    ilp = S.transposes(pb, found[0])[0]
    best = S.transposes(pb, tried)[0]
    assert ilp == best == proof.transposes <= greedy
    assert proof.proven
    emitted = convert(graph).transposes
    assert emitted == best
