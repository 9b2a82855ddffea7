"""Peephole clean-up after emission, a safety net behind the planner: a Transpose feeding only another Transpose
folds into it (a chain becomes one, an inverse pair none), and a Transpose that only moves size-1 axes becomes a
Reshape. The planner should leave nothing to do (tests/test_planner_corpus.py checks that on the corpus)."""
from __future__ import annotations

import onnx

from inspector.core.layout import layout as L


def _static_dims(value_info) -> list[int] | None:
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in value_info.type.tensor_type.shape.dim]
    return dims if value_info.type.tensor_type.HasField("shape") else None


def clean(graph: onnx.GraphProto, trace=None, nodes=None, at=None, infos=None) -> list[str]:
    """Rewrite `graph` in place; returns one line per rewrite (empty when the plan was already clean). `nodes`: the
    NodeProtos the graph's nodes were copied from, to look for a Transpose without a wrapper per graph node; or
    `at`: the positions of the graph's Transposes, and `infos`: a function giving value name -> position of its
    last value_info in the graph (a re-conversion knows both: no walk over 10,000 nodes and value infos)."""
    done = []
    if at is not None:
        if not at:
            return done
        transposes = [graph.node[i] for i in at]
    else:
        if not any(n.op_type == "Transpose" for n in (graph.node if nodes is None else nodes)):   # the usual case
            return done
        transposes = [n for n in graph.node if n.op_type == "Transpose"]
    # A graph output or a value that is a TFLite tensor's image (a pinned tensor, say) must stay as it is.
    outputs = {o.name for o in graph.output}
    images = trace.value_tensor if trace is not None else {}
    by_out = {n.output[0]: n for n in transposes}
    readers: dict[str, int] = {}
    if any(n.input[0] in by_out and n.input[0] not in outputs and n.input[0] not in images
           for n in transposes):                    # a chain that may fold
        for n in graph.node:
            for i in n.input:
                if i in by_out:
                    readers[i] = readers.get(i, 0) + 1
    dead = set()
    for n in transposes:
        if n.name in dead:
            continue
        first = by_out.get(n.input[0])
        if first is None or first.name in dead or readers.get(first.output[0]) != 1 or \
                first.output[0] in outputs or first.output[0] in images:
            continue
        p = L.compose(_perm(first), _perm(n))
        _set_perm(n, p)
        n.input[0] = first.input[0]
        dead.add(first.name)
        done.append(f"{first.name} + {n.name}: Transposes folded into one ({list(p)})")
    wanted = {n.input[0] for n in transposes}
    if infos is None:
        shapes = {v.name: v for part in (graph.input, graph.value_info, graph.output) for v in part
                  if v.name in wanted}
    else:                                           # the same: the last of a name wins, outputs over the rest
        index = infos()
        shapes = {v.name: v for v in graph.input if v.name in wanted}
        shapes.update((name, graph.value_info[index[name]]) for name in wanted if name in index)
        shapes.update((v.name, v) for v in graph.output if v.name in wanted)
    for n in transposes:
        if n.name in dead:
            continue
        p = _perm(n)
        dims = _static_dims(shapes[n.input[0]]) if n.input[0] in shapes else None
        if L.is_identity(p) or (dims is not None and L.reshapable(dims, p)):
            what = "Identity" if L.is_identity(p) else "Reshape"
            done.append(f"{n.name}: a Transpose that moves no data becomes {what}")
            _become(graph, n, what, L.apply(dims, p) if dims is not None else None)
    if dead:
        keep = [n for n in graph.node if n.name not in dead]
        del graph.node[:]
        graph.node.extend(keep)
        if trace is not None:
            for name in dead:
                trace.node_op.pop(name, None)
                trace.inserted.pop(name, None)
    return done


def _perm(node) -> tuple[int, ...]:
    return tuple(next(a.ints for a in node.attribute if a.name == "perm"))


def _set_perm(node, perm) -> None:
    attr = next(a for a in node.attribute if a.name == "perm")
    del attr.ints[:]
    attr.ints.extend(perm)


def _become(graph, node, op_type: str, dims) -> None:
    del node.attribute[:]
    node.op_type = op_type
    if op_type == "Reshape":
        name = node.name + "_shape"
        graph.initializer.append(onnx.helper.make_tensor(name, onnx.TensorProto.INT64, [len(dims)], list(dims)))
        node.input.append(name)
