"""Row writes in a WHILE body, found so that the Loop can emit them as scan outputs.

TensorFlow's unrolled RNNs (TensorList writes) reach TFLite as a carried accumulator rebuilt in every iteration:
    acc' = CONCATENATION(SLICE(acc, 0, [i, -1..]), row, SLICE(acc, [i + 1, 0..], -1), axis 0)
with i a counter the body steps by 1. Emitted op by op that copies the whole accumulator per step; the same values
come from collecting `row` once per iteration (a Loop scan output) and putting the rows in place after the loop.
That holds only when the accumulator is read by nothing else in the body or the cond, so each pattern is checked
whole and anything else is emitted as TFLite wrote it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RowWrite:
    slot: int                 # the accumulator's carried slot
    index_slot: int           # the counter's carried slot: row i is written when the counter is i
    row: int                  # body tensor written as row i, shape (1, *acc.shape[1:])
    ops: frozenset            # body op indices the scan output replaces


def _producers(sg) -> dict[int, object]:
    return {t: op for op in sg.ops for t in op.outputs}


def _readers(sg) -> dict[int, list]:
    readers: dict[int, list] = {}
    for op in sg.ops:
        for t in set(op.inputs):
            if t >= 0:
                readers.setdefault(t, []).append(op)
    return readers


def _const(sg, t):
    return None if t < 0 or sg.tensors[t].data is None else np.asarray(sg.tensors[t].data)


def _is_one(sg, t) -> bool:
    v = _const(sg, t)
    return v is not None and v.size == 1 and v.dtype.kind in "iu" and int(v.reshape(-1)[0]) == 1


def _plain(op) -> bool:
    return op.options.get("fused_activation_function", "NONE") in (None, "NONE", 0)


def _step_of(sg, t, producers, i) -> bool:
    """Whether body tensor t is i + 1."""
    op = producers.get(t)
    if op is None or op.opcode != "ADD" or not _plain(op) or len(op.inputs) != 2:
        return False
    a, b = op.inputs
    return (a == i and _is_one(sg, b)) or (b == i and _is_one(sg, a))


def _vector(sg, t, producers, head, rest_ok):
    """Whether t is CONCATENATION(RESHAPE(head, [1]), c) with c constant and rest_ok(c): the ops that make it."""
    cat = producers.get(t)
    if cat is None or cat.opcode != "CONCATENATION" or len(cat.inputs) != 2 or cat.options.get("axis") != 0:
        return None
    rs = producers.get(cat.inputs[0])
    rest = _const(sg, cat.inputs[1])
    if rs is None or rs.opcode != "RESHAPE" or rs.inputs[0] != head or sg.tensors[rs.outputs[0]].shape != (1,):
        return None
    if rest is None or not rest_ok(rest.reshape(-1)):
        return None
    return [cat, rs]


def _slice(op, acc):
    return op is not None and op.opcode == "SLICE" and len(op.inputs) == 3 and op.inputs[0] == acc


def _write(body, cond, slot, producers, readers):
    """The RowWrite of carried `slot`, or None."""
    acc_in, acc_out = body.inputs[slot], body.outputs[slot]
    acc = body.tensors[acc_in]
    if acc.rank < 1 or any(d < 0 for d in acc.dims) or acc.quantization is not None or acc.dtype in (
            "string", "resource", "variant"):               # (the CONCATENATION's own static shape is no guide)
        return None
    cat = producers.get(acc_out)
    if cat is None or cat.opcode != "CONCATENATION" or len(cat.inputs) != 3 or not _plain(cat) \
            or cat.options.get("axis") not in (0, -acc.rank):
        return None
    head, _, tail = (producers.get(t) for t in cat.inputs)
    if not (_slice(head, acc_in) and _slice(tail, acc_in)) or body.tensors[cat.inputs[1]].shape != (1,) + acc.shape[1:]:
        return None
    if body.tensors[cat.inputs[1]].dtype != acc.dtype or body.tensors[cat.inputs[1]].quantization is not None \
            or cat.inputs[1] == acc_in:
        return None
    rest = acc.shape[1:]
    zeros = _const(body, head.inputs[1])
    size = _const(body, tail.inputs[2])
    if zeros is None or zeros.size != acc.rank or zeros.any() or size is None or size.size != acc.rank:
        return None
    if int(size.reshape(-1)[0]) != -1 or not all(s in (-1, d) for s, d in zip(size.reshape(-1)[1:], rest)):
        return None
    for k, i in enumerate(body.inputs):
        if k == slot or body.tensors[i].shape != () or body.tensors[i].dtype not in ("int32", "int64"):
            continue
        if not _step_of(body, body.outputs[k], producers, i):
            continue
        sizes = _vector(body, head.inputs[2], producers, i,
                        lambda r: r.size == len(rest) and all(s in (-1, d) for s, d in zip(r, rest)))
        begin_op = producers.get(tail.inputs[1])                 # CONCATENATION(RESHAPE(i + 1, [1]), zeros)
        rs = producers.get(begin_op.inputs[0]) if begin_op is not None and begin_op.inputs else None
        nxt = rs.inputs[0] if rs is not None and rs.inputs else -1
        begins = _vector(body, tail.inputs[1], producers, nxt, lambda r: r.size == len(rest) and not r.any())
        if sizes is None or begins is None or not _step_of(body, nxt, producers, i):
            continue
        ops = {cat.index, head.index, tail.index}
        candidates = sizes + begins + [producers[nxt]]
        if not _only_written(body, cond, slot, acc_in, acc_out, ops, readers):
            return None
        return RowWrite(slot, k, cat.inputs[1], frozenset(_dead(body, ops, candidates, readers)))
    return None


def _only_written(body, cond, slot, acc_in, acc_out, ops, readers) -> bool:
    """The accumulator is read only by the write (in the body) and not at all by the cond."""
    if any(op.index not in ops for op in readers.get(acc_in, ())) or readers.get(acc_out):
        return False
    if body.outputs.count(acc_out) != 1 or acc_in in body.outputs:
        return False
    c = cond.inputs[slot]
    return c not in cond.outputs and not any(c in op.inputs for op in cond.ops)


def _dead(body, ops: set, candidates, readers) -> set:
    """`ops` plus the candidates only they read (index arithmetic the write alone used)."""
    outs = set(body.outputs)
    changed = True
    while changed:
        changed = False
        for op in candidates:
            if op.index in ops or any(t in outs for t in op.outputs):
                continue
            if all(r.index in ops for t in op.outputs for r in readers.get(t, ())):
                ops.add(op.index)
                changed = True
    return ops


def row_writes(body, cond) -> list[RowWrite]:
    """Every carried slot of the WHILE (body, cond) whose accumulator is written row by row, as the module says."""
    if len(body.inputs) != len(body.outputs) or len(cond.inputs) != len(body.inputs):
        return []
    producers, readers = _producers(body), _readers(body)
    found = [_write(body, cond, s, producers, readers) for s in range(len(body.inputs))]
    found = [w for w in found if w is not None]
    taken: set[int] = set()
    for w in found:                              # one write per op: a shared op would be skipped twice
        if taken & w.ops:
            return []
        taken |= w.ops
    return found


def trip_count(body, cond, initial) -> int | None:
    """Iterations the WHILE makes when its cond is `counter < limit` (or a LOGICAL_AND of such): each counter a
    carried int stepped by 1, each limit a constant or a carried value the body leaves alone; `initial(slot)` gives
    a carried value's initial int (None when unknown). None when the count cannot be told."""
    if len(cond.outputs) != 1:
        return None
    producers = _producers(cond)
    body_producers = _producers(body)

    def value(t):
        """t's int in the cond: a constant or an unchanged carried value."""
        c = _const(cond, t)
        if c is not None:
            return int(c.reshape(-1)[0]) if c.size == 1 and c.dtype.kind in "iu" else None
        if t not in cond.inputs:
            return None
        k = cond.inputs.index(t)
        return initial(k) if body.outputs[k] == body.inputs[k] else None

    def count(t):
        op = producers.get(t)
        if op is None or len(op.inputs) != 2:
            return None
        if op.opcode == "LOGICAL_AND":
            a, b = count(op.inputs[0]), count(op.inputs[1])
            return None if a is None or b is None else min(a, b)
        if op.opcode != "LESS" or op.inputs[0] not in cond.inputs:
            return None
        k = cond.inputs.index(op.inputs[0])
        if not _step_of(body, body.outputs[k], body_producers, body.inputs[k]):
            return None
        start, limit = initial(k), value(op.inputs[1])
        return None if start is None or limit is None else max(0, limit - start)

    return count(cond.outputs[0])
