"""Structural attack generators (issue 22): tiny files and odd paths that cost time, memory or a file.

Each builder makes one hostile input from parameters; tests/test_control_flow_limits.py and friends use them
directly, and tests/fuzz_attacks.py draws them at random for the fuzz harness.
"""
from __future__ import annotations

from inspector.core.io.tflite_builder import ModelBuilder


def while_chain(depth: int, kind: str = "WHILE", cycle: bool = False) -> bytes:
    """Subgraph k runs the next subgraph k+1 as both cond and body of a WHILE (or both branches of an IF);
    the last one is LOGICAL_NOT. Emitted once per use, that is 3^depth (2^depth for IF) ops from a file of
    ~180 bytes per level. `cycle`: the last subgraph runs the first again instead."""
    b = ModelBuilder()
    x = b.input("x", [], "bool")
    y = b.tensor("y", [], "bool")
    sgs = [b.subgraph(f"s{k}") for k in range(1, depth + 1)]

    def call(g, i, o, target):
        if kind == "WHILE":
            g.op("WHILE", [i], [o], {"cond_subgraph_index": target, "body_subgraph_index": target})
        else:
            g.op("IF", [i, i], [o], {"then_subgraph_index": target, "else_subgraph_index": target})
    call(b, x, y, 1)
    b.output(y)
    for k, sg in enumerate(sgs, 1):
        i = sg.input("b", [], "bool")
        o = sg.tensor("o", [], "bool")
        if k < depth or cycle:
            call(sg, i, o, k + 1 if k < depth else 1)
        else:
            sg.op("LOGICAL_NOT", [i], [o])
        sg.output(o)
    return b.build()
