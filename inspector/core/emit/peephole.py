"""Peephole clean-up after emission, a safety net behind the planner: a Transpose feeding only another Transpose
folds into it (a chain becomes one, an inverse pair none), and a Transpose that only moves size-1 axes becomes a
Reshape. The planner should leave nothing to do (tests/test_planner_corpus.py checks that on the corpus).
Then every Identity goes (an op whose layouts made it a no-op: a TFLite TRANSPOSE or RESHAPE absorbed), its
readers reading its input, unless a graph output is its output: that one needs a producer of its own name."""
from __future__ import annotations

from typing import Callable

import onnx

from inspector.core.layout import layout as L

KINDS = ("Transpose", "Identity")           # the nodes the pass looks at (a re-conversion notes where they are)
BODIES = frozenset({"If", "Loop", "Scan", "SequenceMap"})    # the standard ops with graphs in their attributes


def _static_dims(value_info) -> list[int] | None:
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in value_info.type.tensor_type.shape.dim]
    return dims if value_info.type.tensor_type.HasField("shape") else None


def clean(graph: onnx.GraphProto, trace=None, nodes=None) -> list[str]:
    """Rewrite `graph` in place; returns one line per rewrite of a Transpose (empty when the plan was already
    clean; an Identity dropped is no line: the emitters write them). `nodes`: the NodeProtos the graph's nodes were
    copied from, in order, to look for a Transpose or Identity without a wrapper per graph node."""
    where = [i for i, n in enumerate(graph.node if nodes is None else nodes) if n.op_type in KINDS]
    if not where:                               # the usual case
        return []
    return clean_nodes(graph, trace, where, lambda wanted: _walked(graph, wanted),
                       lambda names: [i for i, v in enumerate(graph.value_info) if v.name in names])


def clean_nodes(graph, trace, where: list[int], shapes_of: Callable[[set[str]], dict],
                value_positions: Callable[[set[str]], list[int]]) -> list[str]:
    """clean, given the positions of the graph's Transpose and Identity nodes (`where`, ascending),
    `shapes_of(names)`: value name -> its value info (the last of a name, outputs over the rest), and
    `value_positions(names)`: the positions of the value_infos of those names, ascending (a re-conversion knows
    all three: incremental.Reconverter.clean). Only the nodes from the first Transpose or Identity on
    are read (none before reads what they write), and what goes is deleted where it is: rebuilding the node list
    copied every node of the graph whenever one Identity went."""
    done: list[str] = []
    nodes = graph.node
    found = [(i, nodes[i]) for i in where]
    transposes = [n for _, n in found if n.op_type == "Transpose"]
    dead = _transposes(graph, transposes, trace, shapes_of, done) if transposes else set()
    # (a Transpose the fold left as an identity has become one)
    dead |= _identities(graph, [(i, n) for i, n in found if n.op_type == "Identity" and n.name not in dead], trace,
                        value_positions)
    if dead:
        for i, n in reversed(found):
            if n.name in dead:
                del nodes[i]
        if trace is not None:
            for name in dead:
                trace.node_op.pop(name, None)
                trace.inserted.pop(name, None)
    return done


def _walked(graph, wanted: set[str]) -> dict:
    """Value name -> its value info, for the names `wanted`: the last of a name wins, outputs over the rest."""
    return {v.name: v for part in (graph.input, graph.value_info, graph.output) for v in part if v.name in wanted}


def value_infos_at(graph, wanted: set[str], index: dict[str, int]) -> dict:
    """_walked, with the position of each name's last value_info known (`index`)."""
    shapes = {v.name: v for v in graph.input if v.name in wanted}
    shapes.update((name, graph.value_info[index[name]]) for name in wanted if name in index)
    shapes.update((v.name, v) for v in graph.output if v.name in wanted)
    return shapes


def _transposes(graph, transposes, trace, shapes_of, done) -> set[str]:
    """Folds and rewrites of the Transposes (lines into `done`); the names of those folded away."""
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
    shapes = shapes_of({n.input[0] for n in transposes})
    for n in transposes:
        if n.name in dead:
            continue
        p = _perm(n)
        dims = _static_dims(shapes[n.input[0]]) if n.input[0] in shapes else None
        if L.is_identity(p) or (dims is not None and L.reshapable(dims, p)):
            what = "Identity" if L.is_identity(p) else "Reshape"
            done.append(f"{n.name}: a Transpose that moves no data becomes {what}")
            _become(graph, n, what, L.apply(dims, p) if dims is not None else None)
    return dead


def _identities(graph, identities: list[tuple[int, onnx.NodeProto]], trace, value_positions) -> set[str]:
    """Readers of each Identity (`identities`: (position, node)) read its input instead (through chains of them),
    its value info goes and the trace maps its TFLite tensor to that input; the names of the Identities dropped.
    Kept: one that makes a graph output, and one whose output a subgraph reads from the outer scope (renaming
    inside bodies is not worth it). Its readers come after it (ONNX's order): only those nodes are read."""
    if not identities:
        return set()
    outs = {n.output[0] for _, n in identities}
    readers, keep = [], {o.name for o in graph.output}
    for n in graph.node[identities[0][0]:]:
        if not outs.isdisjoint(n.input):
            readers.append(n)
        if n.op_type in BODIES:
            keep |= _read_inside([n])
    source = {n.output[0]: n.input[0] for _, n in identities if n.output[0] not in keep and n.name}
    if not source:
        return set()
    for value in source:
        root = source[value]
        while root in source:
            root = source[root]
        source[value] = root
    for n in readers:
        for k, name in enumerate(n.input):
            if name in source:
                n.input[k] = source[name]
    infos = graph.value_info
    for i in reversed(value_positions(source.keys())):
        del infos[i]
    dropped = {n.name for _, n in identities if n.output[0] in source}
    if trace is not None:
        for value, root in source.items():
            t = trace.value_tensor.pop(value, None)
            if t is not None and t in trace.tensor_values:      # new lists: a re-conversion's records share them
                names = [root if v == value else v for v in trace.tensor_values[t]]
                trace.tensor_values[t] = list(dict.fromkeys(names))
        node_op = trace.node_op
        ops = {node_op[name] for name in dropped if name in node_op} if all(name in node_op for name in dropped) \
            else list(trace.op_nodes)           # (an Identity no op wrote: every op's list is looked at)
        for op in ops:
            names = trace.op_nodes.get(op)
            if names is not None and any(name in dropped for name in names):
                trace.op_nodes[op] = [name for name in names if name not in dropped]
    return dropped


def _read_inside(nodes) -> set[str]:
    """Every value name a node of a subgraph of `nodes` (If/Loop/Scan bodies, nested) reads."""
    names: set[str] = set()
    for n in nodes:
        for a in n.attribute:
            for body in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                names.update(i for m in body.node for i in m.input)
                names |= _read_inside(body.node)
    return names


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
