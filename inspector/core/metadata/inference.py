"""ONNX shape inference for the denotation propagator, after a pin only over the nodes whose types can change.

ONNX infers node by node in order: a node's output types come from the node, the types of its inputs as inferred
so far, the data of constant inputs (initializers, Constant nodes) and its outputs' declared value infos (merged
into them). So after a pin, a node with the same bytes whose inputs and outputs have the same types, data and
declarations as in the last model gets what it got there. Only the others are inferred again, as a small model of
their own, in waves: a node whose outputs' types come out changed brings its readers in. The shapes are those of
one inference over the whole model (only generated symbol names, which give no shape, may differ), and anything
this does not cover (control flow, functions, a name declared twice, a first model) is inferred whole.
"""
from __future__ import annotations

from dataclasses import dataclass

import onnx

from inspector.core.ir.diff import changed

from .parsed import Memo, Parts, Value

SUBGRAPH_OPS = {"If", "Loop", "Scan", "SequenceMap"}    # the standard ops with graph attributes (inference skips
                                                         # other domains' ops: no schema)
PART_OF_WHOLE = 4              # past 1/4 of the nodes, one whole inference is cheaper than waves


@dataclass
class Inferred:
    """What one shape inference of a model found, kept to redo only what a re-run changed."""
    key: tuple                           # everything inference reads: the same key, the same shapes
    shapes: dict                         # value name -> static shape (None for symbolic dims); read only
    finals: dict[str, Value] | None      # value name -> its type after inference; None: not usable for the next
    nodes: set[bytes] | None = None      # the model's node bytes
    declared: dict[str, bytes] | None = None     # value name -> its value info without denotations
    inits: dict[str, bytes] | None = None        # initializer name -> its bytes
    produced: set[str] | None = None
    how: str = "whole"                   # "whole", "as declared" or "waves" (then `redone` nodes were inferred)
    redone: int = 0


class Inference:
    """Shape inference over the models read one after another with `memo`, which keeps the last one's (`inferred`)
    for the next: after a pin, only the nodes whose types can change are inferred again."""

    def __init__(self, memo: Memo):
        self.memo = memo

    def shapes(self, model, parts: Parts, declared_shapes: dict, needed: bool) -> dict:
        """Static shapes: `declared_shapes` (the value infos') and the initializers', and when `needed` (a node
        output without a shape, or a symbolic dim) what inference adds (see the module's doc); kept with what the
        next model's inference needs. The dict returned is shared: read it only."""
        memo = self.memo
        g = model.graph
        init_list = [(t.name, t.SerializeToString()) for t in g.initializer]
        inits = dict(init_list)
        key = (tuple(parts.node_keys), tuple(v.type_key for v in parts.inputs),
               tuple(v.type_key for v in parts.value_info), tuple(v.type_key for v in parts.outputs), tuple(init_list),
               tuple(o.SerializeToString() for o in model.opset_import), model.ir_version)
        last = memo.inferred
        if last is not None and last.key == key:
            return last.shapes
        state = None
        if not needed:
            state = _as_declared(parts, declared_shapes)
        elif last is not None and last.finals is not None and last.key[5:] == key[5:] and not model.functions \
                and len(inits) == len(init_list):
            try:
                state = self._incremental(parts, inits, model, last)
            except Exception:  # noqa: BLE001 - whatever it cannot do, the whole inference does (and says the same)
                state = None
            if state is not None:
                state.how = "waves"
        if state is None:
            state = self._whole(model, parts, declared_shapes)
        state.key, state.inits = key, inits
        for t in g.initializer:
            state.shapes.setdefault(t.name, tuple(t.dims))
        memo.inferred = state
        return state.shapes

    def _whole(self, model, parts: Parts, declared_shapes: dict) -> Inferred:
        try:
            g = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False).graph
        except Exception:  # noqa: BLE001 - shape inference is a bonus here, not a requirement
            return Inferred((), dict(declared_shapes), None)
        out = self.memo.add_values(g)
        shapes: dict[str, tuple] = {}
        finals: dict[str, Value] | None = {}
        for v in (*out.inputs, *out.value_info, *out.outputs):
            if v.shape is not None:
                shapes[v.name] = v.shape
            if finals is not None:
                if v.name in finals:            # a name twice: which of its types inference used is not modelled
                    finals = None
                else:
                    finals[v.name] = v
        return _state(shapes, finals, parts, _facts(parts))

    def _incremental(self, parts: Parts, inits: dict[str, bytes], model, last: Inferred) -> Inferred | None:
        facts = _facts(parts)
        lf, l_declared, l_inits, l_produced, l_nodes = last.finals, last.declared, last.inits, last.produced, last.nodes
        if facts is None or lf is None or l_declared is None or l_inits is None or l_produced is None \
                or l_nodes is None:
            return None                     # (the last inference kept too little to start from)
        declared, producer = facts
        if set(inits) & set(declared):
            return None
        nodes, keys = parts.nodes, parts.node_keys
        if any(n.op_type in SUBGRAPH_OPS for n in nodes):     # a subgraph reads outer values its node does not list
            return None
        todo = {i for i, k in enumerate(keys) if k not in l_nodes}
        # Names whose type or data changed outside any node's inference: their readers are inferred again.
        types = {n: v.type_key for n, v in declared.items()}
        forced = changed(l_declared, types) | changed(l_inits, inits)
        forced.update(l_produced.difference(producer))
        forced.update(o for i in todo if nodes[i].op_type == "Constant" for o in nodes[i].output)
        readers: dict[str, list[int]] = {}
        for i, n in enumerate(nodes):
            for x in n.input:
                if x:
                    readers.setdefault(x, []).append(i)
        todo.update(producer[n] for n in forced if n in producer)
        todo.update(j for n in forced for j in readers.get(n, ()))

        def final(name: str) -> Value | None:
            """The type of a value no node of `todo` produces, as inference leaves it."""
            return lf.get(name) if name in producer else declared.get(name)

        while True:
            if len(todo) * PART_OF_WHOLE > len(nodes):
                return None
            got = self._infer_part(model, parts, sorted(todo), declared, producer, inits, final)
            grow: set[int] = set()
            for i in todo:
                for o in nodes[i].output:
                    if o and not _same(got.get(o), lf.get(o)):
                        grow.update(j for j in readers.get(o, ()) if j not in todo)
            if not grow:
                break
            todo |= grow
        # (final() inlined: it runs for each of the model's names)
        finals = {n: v for n in dict.fromkeys((*declared, *producer))
                  if (v := lf.get(n) if n in producer else declared.get(n)) is not None}
        for i in todo:
            for o in nodes[i].output:
                if o:
                    finals.pop(o, None)
                    if got.get(o) is not None:
                        finals[o] = got[o]
        state = _state({n: v.shape for n, v in finals.items() if v.shape is not None}, finals, parts, facts, types)
        state.redone = len(todo)
        return state

    def _infer_part(self, model, parts: Parts, todo: list[int], declared, producer, inits, final
                    ) -> dict[str, Value]:
        """Inference over the nodes `todo` (and the Constant nodes whose data they read) as a model of their own, their
        other inputs typed as inference left them: their output name -> its type (absent: none inferred or declared)."""
        nodes, g = parts.nodes, model.graph
        consts = {producer[x] for i in todo for x in nodes[i].input
                  if x in producer and nodes[producer[x]].op_type == "Constant"}
        chosen = sorted(set(todo) | consts)
        sub = onnx.ModelProto(ir_version=model.ir_version)
        sub.opset_import.extend(model.opset_import)
        sg = sub.graph
        made: set[str] = set()
        for i in chosen:
            sg.node.add().ParseFromString(parts.node_keys[i])
            made.update(nodes[i].output)
        outside = dict.fromkeys(x for i in chosen for x in nodes[i].input if x and x not in made)
        tensors = {t.name: t for t in g.initializer if t.name in outside} if any(x in inits for x in outside) else {}
        for x in outside:
            if x in tensors:
                sg.initializer.append(tensors[x])
            else:
                v = final(x)
                if v is not None:
                    sg.input.add().ParseFromString(v.type_key)
        for o in made:
            if o in declared:
                sg.value_info.add().ParseFromString(declared[o].type_key)
        out = self.memo.add_values(onnx.shape_inference.infer_shapes(sub, check_type=False, strict_mode=False).graph)
        wanted = {o for i in todo for o in nodes[i].output if o}
        return {v.name: v for v in out.value_info if v.name in wanted}


def _facts(parts: Parts):
    """(value name -> declared Value, value name -> producing node index), or None where a name is declared or
    produced twice or a value info is not a tensor (cases the waves do not model)."""
    declared: dict[str, Value] = {}
    for v in (*parts.inputs, *parts.value_info, *parts.outputs):
        if v.name in declared or not v.tensor:
            return None
        declared[v.name] = v
    producer: dict[str, int] = {}
    for i, n in enumerate(parts.nodes):
        for o in n.output:
            if o:
                if o in producer:
                    return None
                producer[o] = i
    return declared, producer


def _state(shapes: dict, finals: dict | None, parts: Parts, facts, types: dict | None = None) -> Inferred:
    if facts is None or finals is None:
        return Inferred((), shapes, None)
    if types is None:
        types = {k: v.type_key for k, v in facts[0].items()}
    return Inferred((), shapes, finals, set(parts.node_keys), types, None, set(facts[1]))


def _as_declared(parts: Parts, declared_shapes: dict) -> Inferred:
    """A model inference would leave as it is (every node output declared, every dim static): its value infos are
    what inference would give, so the next model after a pin can be inferred in waves from them. Not when an
    element type is undefined (inference would fill it in)."""
    facts = _facts(parts)
    finals = facts[0] if facts is not None and all(v.elem_type for v in facts[0].values()) else None
    state = _state(dict(declared_shapes), finals, parts, facts)
    state.how = "as declared"
    return state


def _same(a: Value | None, b: Value | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.tensor, a.elem_type, a.shape) == (b.tensor, b.elem_type, b.shape) and (a.tensor or a.type_key ==
                                                                                      b.type_key)
