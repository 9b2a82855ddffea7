"""Gemm folds in a Loop body, which ONNX Runtime runs once per iteration (an RNN cell: the input's and the state's
FULLY_CONNECTED outputs added, split into gates, each gate's bias added):

- Add(Gemm(a, W), Gemm(h, U)) -> Gemm(h, U, C=Gemm(a, W)): the Add becomes the later Gemm's C input;
- Split(Gemm(...)) whose every part only gets a constant row added -> the rows, concatenated, become the C input of
  the first Gemm of that chain (bias + h U + a W instead of (a W + h U) + bias: the same sum in another order, within
  float rounding of LiteRT's).

Only values no one else reads fold (a body result, a value read twice or from a nested graph stays).
"""
from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from inspector.core.layout import layout as L


def fold(em, results: list[str]) -> None:
    """Rewrite the body emitter's node list in place; `results` are the body's outputs (never folded away)."""
    nodes = em.nodes
    if not any(n.op_type == "Gemm" for n in nodes):
        return
    reads = _reads(nodes)
    keep = set(results)
    dead: set[int] = set()
    made = {o: k for k, n in enumerate(nodes) for o in n.output}

    def gemm(name):
        """The plain Gemm (alpha = beta = 1) that makes `name`, read once and no body result; else None."""
        k = made.get(name)
        if k is None or k in dead or reads.get(name) != 1 or name in keep:
            return None
        n = nodes[k]
        if n.op_type != "Gemm" or n.domain or any(a.name in ("alpha", "beta") for a in n.attribute):
            return None
        return k

    for k, n in enumerate(nodes):
        if n.op_type != "Add" or n.domain or len(n.input) != 2:
            continue
        pair = [gemm(x) for x in n.input]
        if None in pair or pair[0] == pair[1] or any(len(nodes[g].input) != 2 for g in pair) \
                or not _same_static_shape(em, [*n.input, n.output[0]]):
            continue
        first, second = sorted(pair)
        nodes[second].input.append(nodes[first].output[0])
        _forget(em, nodes[second].output[0])
        nodes[second].output[0] = n.output[0]
        made[n.output[0]] = second
        dead.add(k)

    consts = None
    for n in nodes:
        if n.op_type != "Split" or n.domain or len(n.input) != 1 or _axis(n) not in (1, -1):
            continue
        g = gemm(n.input[0])
        if g is None or not _same_static_shape(em, [n.input[0]]):
            continue
        if consts is None:
            consts = {t.name: t for t in em.initializers}
        adds = [_bias_add(nodes, made, dead, reads, consts, o) for o in n.output]
        if None in adds:
            continue
        total = em.shape(em.trace.value_tensor[n.input[0]])[-1]
        rows = [numpy_helper.to_array(consts[b]).reshape(-1) for _, b in adds]
        if sum(len(r) for r in rows) != total or len({len(r) for r in rows}) != 1:
            continue
        root = g                                    # the chain's first Gemm takes the bias as its C
        while len(nodes[root].input) == 3:
            root = gemm(nodes[root].input[2])
            if root is None:
                break
        if root is None or len(nodes[root].input) != 2:
            continue
        dtype = numpy_helper.to_array(consts[adds[0][1]]).dtype
        if any(r.dtype != dtype for r in rows):
            continue
        nodes[root].input.append(em.const(np.concatenate(rows), "gate_bias"))
        for j, (a, b) in enumerate(adds):
            _forget(em, n.output[j])
            n.output[j] = nodes[a].output[0]
            dead.add(a)
    if not dead:
        return
    gone = [nodes[k] for k in sorted(dead)]
    em.nodes[:] = [n for k, n in enumerate(nodes) if k not in dead]
    for n in gone:
        op = em.trace.node_op.pop(n.name, None)
        if op is not None and n.name in em.trace.op_nodes.get(op, ()):
            em.trace.op_nodes[op].remove(n.name)
    _drop_unread(em, {i for n in gone for i in n.input})


def _bias_add(nodes, made, dead, reads, consts, value):
    """The Add that adds a constant row to Split output `value` (its only reader): (node index, constant name)."""
    if reads.get(value) != 1:
        return None
    for k, n in enumerate(nodes):
        if k in dead or value not in n.input:
            continue
        if n.op_type != "Add" or n.domain or len(n.input) != 2 or n.input[0] == n.input[1]:
            return None
        other = n.input[1] if n.input[0] == value else n.input[0]
        c = consts.get(other)
        if c is None or other in made or len(c.dims) not in (1, 2) or (len(c.dims) == 2 and c.dims[0] != 1):
            return None
        return k, other
    return None


def _axis(node) -> int:
    for a in node.attribute:
        if a.name == "axis":
            return a.i
    return 0


def _same_static_shape(em, names) -> bool:
    """The TFLite tensors behind `names` all have one fully static 2-D shape."""
    shapes = set()
    for name in names:
        t = em.trace.value_tensor.get(name)
        if t is None or em.tensor(t).dynamic or not L.is_identity(em.perm(t)):
            return False
        shapes.add(tuple(em.shape(t)))
    return len(shapes) == 1 and len(next(iter(shapes))) == 2


def _forget(em, name: str) -> None:
    """A value that no node makes any more leaves the trace."""
    t = em.trace.value_tensor.pop(name, None)
    if t is not None and name in em.trace.tensor_values.get(t, ()):
        em.trace.tensor_values[t].remove(name)


def _reads(nodes) -> dict[str, int]:
    """How many times each name is read, nested graphs included (a nested read counts twice: never folded)."""
    out: dict[str, int] = {}
    for n in nodes:
        for i in n.input:
            out[i] = out.get(i, 0) + 1
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                for i, c in _reads(g.node).items():
                    out[i] = out.get(i, 0) + 2 * c
    return out


def _drop_unread(em, names: set[str]) -> None:
    """Constants this body made that no node reads any more leave the model (other graphs never see this body's
    constants: each emitter keeps its own)."""
    mine = {v for v in em.memo.values() if isinstance(v, str)}
    left = _reads(em.nodes)
    unread = {n for n in names if n in mine and n not in left}
    if not unread:
        return
    em.initializers[:] = [t for t in em.initializers if t.name not in unread]
    for name in unread:
        _forget(em, name)
    for key in [k for k, v in em.memo.items() if isinstance(v, str) and v in unread]:
        del em.memo[key]
