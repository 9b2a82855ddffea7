"""The open model as the window sees it: source Graph, conversion result, ONNX model, and the trace between them.

Qt-free (what the panes draw, derived from a ConversionResult); the document the user edits is the core's Session. Pane keys: TFLite nodes are ("op", i), ("in", t), ("out", t)
and tensors are indices; ONNX nodes are node names, ("in", v), ("out", v) and tensors are value names.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Hashable

from .graph_model import CONFLICT, GROUP, UNKNOWN, onnx_node_name

# id(result) -> (a weak reference to the result, its TFLite categories, its ONNX categories or None), for each
# result alive: shared by the Documents a window makes of one result (one per PlanChanged), filled by the loader off
# the GUI thread (two dicts of 50,000 entries were a visible part of the first PlanChanged's handlers), and kept per
# result so two windows do not evict each other's. An entry goes with its result; entries are replaced, never changed.
_COLOURED: dict[int, tuple] = {}


def _coloured(result) -> tuple:
    entry = _COLOURED.get(id(result))
    return entry if entry is not None and entry[0]() is result else (None, {}, None)


def _colour(result, tflite: dict, onnx: dict | None) -> None:
    key = id(result)

    def gone(ref, key=key):
        if _COLOURED.get(key, (None,))[0] is ref:
            _COLOURED.pop(key, None)
    _COLOURED[key] = (weakref.ref(result, gone), tflite, onnx)


@dataclass
class Document:
    path: str
    graph: Any = None             # inspector.core.ir.graph.Graph (None when an .onnx file was opened)
    result: Any = None            # inspector.core.emit.result.ConversionResult once converted
    model: Any = None             # onnx.ModelProto: result.model, or the opened .onnx
    error: str = ""               # why the conversion failed, if it did
    notes: list[str] = field(default_factory=list)                  # the pipeline's warnings and metadata notes
    onnx_shapes: dict[str, tuple] = field(default_factory=dict)     # value name -> shape (after shape inference)
    reconverter: Any = None       # emit.incremental.Reconverter of the conversion made in this process, if any
    findings: Any = None          # an .onnx opened alone: its metadata findings and sources, read off the GUI thread
    sources: Any = None
    layers: Any = None            # folding.Layers the loader made (the tree, both panes' whole graphs, what is open)
    _names: dict[str, Any] = field(default_factory=dict, repr=False)
    _links: tuple | None = field(default=None, repr=False)

    @property
    def trace(self):
        return self.result.trace if self.result is not None else None

    def took(self, result) -> None:
        """`result` in place of this document's: the same conversion with what followed it (its metadata pass and
        findings; results are frozen, so that is a new one). Its plan, trace and categories are the same: the
        colours worked out stand."""
        ref, tflite, onnx = _coloured(self.result)
        if ref is not None:
            _colour(result, tflite, onnx)
        self.result, self.model = result, result.model

    # ---- colours -------------------------------------------------------------------------------------------
    def tflite_categories(self) -> dict[Hashable, str]:
        if self.result is None:
            return {}
        ref, tflite, _ = _coloured(self.result)
        if ref is None:                         # asked for by both panes on every recolour
            cats = self.result.categories
            # each distinct category's text once: an Enum's .value is a Python-level lookup (one per op held the
            # GUI thread after each pin on a big model); the ids hold while `cats` holds the objects
            texts = {k: getattr(c, "value", str(c)) for k, c in {id(c): c for c in cats.values()}.items()}
            tflite = {("op", i): texts[id(c)] for i, c in cats.items()}
            _colour(self.result, tflite, None)
        return tflite

    def onnx_categories(self) -> dict[Hashable, str]:
        """Each ONNX node takes the category of the TFLite op it came from; inserted Transposes are conflicts. An
        ONNX model opened alone is coloured by the categories its op types imply."""
        tr = self.trace
        if tr is None:
            if self.model is None:
                return {}
            from inspector.core.metadata.onnx_categories import onnx_categories
            nodes = self.model.graph.node
            return {onnx_node_name(nodes[i], i): c for i, c in onnx_categories(self.model).items()}
        cats = self.tflite_categories()
        _, _, out = _coloured(self.result)
        if out is None:
            out = {name: cats.get(("op", op), UNKNOWN) for name, op in tr.node_op.items()}
            for name in self.inserted():
                out[name] = CONFLICT
            _colour(self.result, cats, out)
        return out

    def conflicts(self) -> list:
        return list(self.result.plan.conflicts) if self.result is not None else []

    def inserted(self) -> dict[str, Any]:
        """Inserted Transpose node name -> Conflict."""
        tr = self.trace
        if tr is None:
            return {}
        out = dict(tr.inserted)
        for c in self.conflicts():
            if c.node and c.node not in out:
                out[c.node] = c
        return out

    def tflite_markers(self) -> dict[Hashable, str]:
        out: dict[Hashable, str] = {}
        for c in self.conflicts():
            if c.subgraph:
                continue
            key = ("op", c.op) if c.op is not None else ("out", c.tensor)
            out[key] = (out[key] + "\n" if key in out else "") + f"Conflict ({c.kind}): {c.reason}"
        return out

    def tflite_edge_conflicts(self) -> dict[tuple, str]:
        """(tensor, consumer node key) -> reason."""
        return {(c.tensor, ("op", c.op) if c.op is not None else ("out", c.tensor)): f"{c.kind}: {c.reason}"
                for c in self.conflicts() if not c.subgraph}

    def onnx_markers(self) -> dict[Hashable, str]:
        return {name: f"Inserted Transpose ({c.kind}): {c.reason}" for name, c in self.inserted().items()}

    # ---- selection mapping through the trace ---------------------------------------------------------------
    def to_onnx(self, nodes: list, tensors: list) -> tuple[list, list]:
        tr = self.trace
        if tr is None:
            return [], []
        out_nodes: list = []
        out_values: list = []
        for k in nodes:
            if k[0] == "op":
                out_nodes += tr.op_nodes.get(k[1], [])
            elif k[0] == GROUP:                     # a group's box: its twin in the other pane
                out_nodes.append(k)
            else:                                   # a terminal: the same terminal on the other side
                out_nodes += [(k[0], v) for v in tr.tensor_values.get(k[1], [])[:1]]
        for t in tensors:
            out_values += tr.tensor_values.get(t, [])
        return _unique(out_nodes), _unique(out_values)

    def to_tflite(self, nodes: list, values: list) -> tuple[list, list]:
        tr = self.trace
        if tr is None:
            return [], []
        inserted = self.inserted()
        out_nodes: list = []
        out_tensors: list = []
        for k in nodes:
            if isinstance(k, tuple) and k[0] == GROUP:
                out_nodes.append(k)
            elif isinstance(k, tuple):
                t = tr.value_tensor.get(k[1])
                if t is not None:
                    out_nodes.append((k[0], t))
            elif k in tr.node_op:
                out_nodes.append(("op", tr.node_op[k]))
            elif k in inserted:                     # an inserted Transpose: the conflict's tensor and consumer
                c = inserted[k]
                out_tensors.append(c.tensor)
                if c.op is not None:
                    out_nodes.append(("op", c.op))
        for v in values:
            if v in tr.value_tensor:
                out_tensors.append(tr.value_tensor[v])
        return _unique(out_nodes), _unique(out_tensors)

    # ---- ONNX lookups --------------------------------------------------------------------------------------
    def onnx_nodes(self) -> dict[str, Any]:
        if not self._names and self.model is not None:
            self._names.update({onnx_node_name(n, i): n for i, n in enumerate(self.model.graph.node)})
        return self._names

    def onnx_initializers(self) -> dict[str, Any]:
        return {t.name: t for t in self.model.graph.initializer} if self.model is not None else {}

    def onnx_links(self) -> tuple[dict[str, str], dict[str, list[str]]]:
        """(value -> producing node name, value -> consuming node names)."""
        if self._links is None:
            producer: dict[str, str] = {}
            consumers: dict[str, list[str]] = {}
            for name, n in self.onnx_nodes().items():
                for v in n.output:
                    producer[v] = name
                for v in n.input:
                    consumers.setdefault(v, []).append(name)
            self._links = (producer, consumers)
        return self._links


def _unique(xs: list) -> list:
    return list(dict.fromkeys(xs))
