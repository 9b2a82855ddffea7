"""Weights a Loop body alone reads become that body's own initializers.

The emitter puts every constant in the main graph, so a body reads its weights from the enclosing scope. ONNX
Runtime runs a body Gemm whose B comes from outside the body on a slower path than the same Gemm with B the body's
own initializer (the gap goes with its weight prepacking: with prepacking off both run alike), and pays it on every
iteration.

Only small plain initializers move (the large ones stay where the weights machinery measures, cuts and writes
them: onnx_bytes, external data), and only those read by the nodes of exactly one Loop body and nothing else
(a name read anywhere else, nested deeper, or shadowed in the body stays outside).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from inspector.core.io.onnx_bytes import ITEM_BYTES

SMALL = 1 << 20         # raw bytes at most of a weight that moves into a body


def localize(graph, initializers: list) -> list:
    """Move into their Loop body each small initializer of `initializers` only that body's own nodes read
    (appended to the body's initializers in `initializers`' order); returns the ones that stay in the main graph."""
    bodies = [a.g for n in graph.node if n.op_type == "Loop" and not n.domain for a in n.attribute
              if a.name == "body" and a.HasField("g")]
    if not bodies:
        return initializers
    everywhere = _reads(graph)
    owner: dict[str, Any] = {}
    for body in bodies:
        direct = Counter(i for m in body.node for i in m.input)
        owner.update((name, body) for name, k in direct.items() if everywhere[name] == k)
    stay = []
    for t in initializers:
        body = owner.get(t.name)
        if body is None or not _small(t) or _defined(body, t.name):
            stay.append(t)
        else:
            body.initializer.append(t)
    return stay


def _reads(graph) -> Counter:
    """How often each name is read in `graph`, its nested bodies included."""
    out = Counter(i for n in graph.node for i in n.input)
    out.update(o.name for o in graph.output)
    for n in graph.node:
        for a in n.attribute:
            for body in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                out.update(_reads(body))
    return out


def _small(t) -> bool:
    """A plain tensor (raw_data, a fixed-size type, no external data) of at most SMALL bytes."""
    return t.data_location == 0 and t.data_type in ITEM_BYTES and t.HasField("raw_data") and \
        len(t.raw_data) <= SMALL


def _defined(body, name: str) -> bool:
    """Does the body define `name` itself (an input, initializer or node output that would clash)?"""
    return any(v.name == name for v in body.input) or any(t.name == name for t in body.initializer) or \
        any(name in m.output for m in body.node)
