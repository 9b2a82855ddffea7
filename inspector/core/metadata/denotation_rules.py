"""Per-op rules for dimension denotation propagation and verification over an ONNX graph (see denotation.py)."""
from __future__ import annotations

from copy import copy
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from inspector.core.ir.diff import changed

from . import schema as ms
from .findings import Finding, fmt
from .parsed import Memo, Parts

B, C, F = ms.DATA_BATCH, ms.DATA_CHANNEL, ms.DATA_FEATURE
MAX_OUTCOMES = 16           # outcomes kept per node (one per distinct input denotations seen): a bound, not a need

# Input 0 must be [DATA_BATCH, DATA_CHANNEL, spatial...]; output 0 is in that format too.
FORMAT_OPS = {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "DeformConv", "MaxPool", "AveragePool",
              "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "MaxUnpool", "BatchNormalization",
              "InstanceNormalization", "LRN", "DepthToSpace", "SpaceToDepth", "GridSample"}
# Expected weight (input 1) denotations, checked only where the weights carry some.
FILTERS = {"Conv": ("FILTER_OUT_CHANNEL", "FILTER_IN_CHANNEL"), "ConvTranspose": ("FILTER_IN_CHANNEL",
                                                                                    "FILTER_OUT_CHANNEL")}
# Output 0 has the (broadcast) shape of the inputs.
ELEMENTWISE = {
    "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "BitShift", "BitwiseAnd", "BitwiseNot",
    "BitwiseOr", "BitwiseXor", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh", "CumSum",
    "DequantizeLinear", "Div", "Dropout", "DynamicQuantizeLinear", "Elu", "Equal", "Erf", "Exp", "Expand", "Floor",
    "Gelu", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Hardmax", "Identity", "IsInf", "IsNaN",
    "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "Max", "Mean", "Min", "Mish",
    "Mod", "Mul", "Neg", "Not", "Or", "PRelu", "Pow", "QuantizeLinear", "Reciprocal", "Relu", "Round", "Selu",
    "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softmax", "Softplus", "Softsign", "Sqrt", "Sub", "Sum", "Tan",
    "Tanh", "ThresholdedRelu", "Where", "Xor", "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu"}
# Same rank, each axis keeps its meaning (sizes may change); every output like input 0 (Split, TopK).
KEEP = {"Split", "Slice", "Pad", "Tile", "GatherElements", "ScatterElements", "ScatterND", "TopK",
        "ReverseSequence", "Trilu", "CenterCropPad"}
CONCAT = {"Concat", "QLinearConcat"}
RESIZE = {"Resize", "Upsample"}
REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin"}
# Everything else (Reshape, Flatten, MatMul, Gemm, Einsum, Shape, control flow ...) ends the denotations.


class Propagator:
    """One pass over the nodes in order (ONNX requires topological order); `run` may be repeated with other seeds."""

    def __init__(self, model, memo: Memo | None = None, parts: Parts | None = None):
        """`memo`: records of models read before (a Linter's or an Annotator's; None: all of it read anew);
        `parts`: the model's, when the caller read them already."""
        memo = Memo() if memo is None else memo
        parts = parts or memo.parts(model)
        self.graph, self.parts = model.graph, parts
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 18)
        self.nodes = parts.nodes
        self.labels = [n.name or f"{n.op_type}#{i}" for i, n in enumerate(self.nodes)]
        self.input_names = [v.name for v in parts.inputs]
        self.declared: dict[str, Any] = {}
        self.shapes = self._shapes(model, parts, memo)
        self.inits = {t.name: t for t in self.graph.initializer}
        self.consts = {n.output[0]: n for n in self.nodes if n.op_type == "Constant" and n.output}
        self.outcomes = self._outcomes(memo, parts)

    def redeclared(self, parts: Parts, memo: Memo | None = None) -> "Propagator":
        """This Propagator for its model after edits that changed only value infos' denotations (`parts`: the
        model's now; MetadataEdits.apply changes no node, initializer, name or shape): the same nodes, shapes and
        constants, the declared denotations read again, and the outcomes of the nodes that read a changed one
        dropped (`_outcomes`): the checker after the metadata pass then builds no second Propagator."""
        memo = Memo() if memo is None else memo
        p = copy(self)
        p.parts, p.declared = parts, {}
        _declared(parts, p.declared)        # (its shapes: denotations are not part of them)
        p.outcomes = p._outcomes(memo, parts)
        return p

    def _shapes(self, model, parts: Parts, memo: Memo) -> dict[str, tuple]:
        """Static shapes (None for symbolic dims) from the model, and from ONNX shape inference when it succeeds and can
        add something: a node output with no shape, or a symbolic dim (the converter writes static shapes where it can;
        inference on a 10,000-node graph costs as much as a propagation run; after a pin only the nodes it changed
        are inferred again: inference.py). Fills self.declared with the model's dimension denotations on the way (one
        pass over the value infos). The dict returned is shared: read it only."""
        from . import inference
        out = _declared(parts, self.declared)
        needed = any(None in s for s in out.values()) or any(o and o not in out for n in parts.nodes for o in n.output)
        return inference.Inference(memo).shapes(model, parts, out, needed)

    def _outcomes(self, memo: Memo, parts: Parts) -> list[dict]:
        """Per node, what its step did (see `run`), kept from the last model wherever this node reads what it read
        there: the same bytes and label, and the same shapes, declared denotations, initializers and constants
        under each of its input and output names (a step reads nothing else but the denotations of those names,
        which key the outcome)."""
        consts = {out: parts.node_keys[i] for i, n in enumerate(self.nodes)
                  if n.op_type == "Constant" and n.output for out in n.output[:1]}
        init_bytes = {t.name: t.SerializeToString() for t in self.graph.initializer}
        env: tuple[Any, ...] = (self.opset, self.shapes, self.declared, init_bytes, consts)
        last: Any = memo.outcomes                   # (what the nodes read, {(node bytes, label): outcomes})
        stale: set | None = None                    # names whose surroundings changed; None: nothing may be reused
        if last is not None and last[0][0] == env[0]:
            stale = set()
            for old, new in zip(last[0][1:], env[1:]):
                stale |= changed(old, new)
        kept = last[1] if stale is not None else {}
        out: list[Any] = []
        now: dict[tuple[bytes, str], Any] = {}
        for node, key, label in zip(self.nodes, parts.node_keys, self.labels):
            k = (key, label)
            seen = now.get(k)
            if seen is None:
                seen = kept.get(k)
                if seen is None or len(seen) > MAX_OUTCOMES or (
                        stale and not (stale.isdisjoint(node.input) and stale.isdisjoint(node.output))):
                    seen = {}
                now[k] = seen
            out.append(seen)
        memo.outcomes = (env, now)
        return out

    def run(self, seeds=None):
        """Propagate from the graph inputs' declared denotations, or from `seeds` (input name -> dens) instead.

        A node's step (its rule, then storing its outputs) reads the denotations of its inputs and outputs so far
        and what `_outcomes` compares; the step's outcome under those denotations (its outputs' denotations after
        it, its findings) is kept and replayed wherever they recur: in this model's next run, or the next model's
        after a pin. Only the nodes a pin changed, or whose inputs it changed, run their rule again."""
        if seeds is None:
            seeds = {name: self.declared[name] for name in self.input_names if name in self.declared}
        self.dens: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in seeds.items()}
        self.findings: list[Finding] = []
        dens, findings, get = self.dens, self.findings, self.dens.get
        for i, node in enumerate(self.nodes):
            seen = self.outcomes[i]
            before = (tuple(map(get, node.input)), tuple(map(get, node.output)))
            hit = seen.get(before)
            if hit is not None:
                for name, d in zip(node.output, hit[0]):
                    if d is not None:
                        dens[name] = d
                if hit[1]:
                    findings.extend(copy(f) for f in hit[1])
                continue
            n = len(findings)
            self.node, self.index, self.label = node, i, self.labels[i]
            outs = self.rule(node)
            for name, d in zip(node.output, outs):
                if name:
                    self.settle(name, d)
            seen[before] = (tuple(map(get, node.output)), tuple(copy(f) for f in findings[n:]))
        return self.dens, self.findings

    # -- helpers ---------------------------------------------------------------------------------------------------
    def finding(self, kind, message, tensor=""):
        self.findings.append(Finding(self.label, f"{self.node.op_type} '{self.label}': {message}", kind, tensor))

    def settle(self, name, dens):
        """Store a propagated value, reporting a contradiction with what the model declares for it."""
        declared = self.declared.get(name)
        if dens is None:
            if declared:
                self.dens[name] = declared
            return
        if declared and len(declared) == len(dens):
            if _contradicts(dens, declared):
                self.finding("mismatch", f"produces '{name}' as {fmt(dens)} but the model declares it "
                                         f"{fmt(declared)}", name)
            dens = tuple(d or e for d, e in zip(dens, declared))
        self.dens[name] = tuple(dens)

    def rank(self, name):
        if name in self.dens:
            return len(self.dens[name])
        shape = self.shapes.get(name)
        if shape is not None:
            return len(shape)
        if name in self.inits:
            return len(self.inits[name].dims)
        return None

    def const(self, name):
        """Small constant input as a numpy array, or None when it is computed at run time."""
        t = self.inits.get(name)
        if t is None and name in self.consts:
            t = next((a.t for a in self.consts[name].attribute if a.name == "value"), None)
        try:
            return numpy_helper.to_array(t) if t is not None else None
        except Exception:  # noqa: BLE001 - external or odd data: treat as unknown
            return None

    def attr(self, name, default=None):
        for a in self.node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def axes(self, input_index=1, attr="axes"):
        """Axes from the attribute (older opsets) or a constant input; None when unknown, [] when absent."""
        a = self.attr(attr)
        if a is not None:
            return list(a)
        if len(self.node.input) > input_index and self.node.input[input_index]:
            v = self.const(self.node.input[input_index])
            return None if v is None else [int(x) for x in np.ravel(v)]
        return []

    def _distinct(self, node) -> list[str]:
        """An elementwise op's inputs without repeats (merging one tensor twice changes nothing): a Sum reading one
        value 100,000 times would otherwise cost 100,000 steps per run, and annotate runs once per graph input."""
        cache = self.__dict__.setdefault("_distinct_inputs", {})
        found = cache.get(self.index)
        if found is None:
            found = cache[self.index] = list(dict.fromkeys(node.input))
        return found

    # -- rules -------------------------------------------------------------------------------------------------------
    def rule(self, node):
        op = node.op_type
        names = self._distinct(node) if op in ELEMENTWISE else node.input
        ins = [self.dens.get(i) if i else None for i in names]
        x = ins[0] if ins else None
        if node.domain not in ("", "ai.onnx", "com.microsoft"):
            return []
        if op in FORMAT_OPS:
            return [self.format_op(x)] * (2 if op == "MaxPool" else 1)
        if op in ELEMENTWISE:
            return [self.broadcast(names, ins)] * (2 if op == "Dropout" else 1)
        if op in KEEP:
            return [x] * len(node.output)
        if op in CONCAT:
            return [self.same_rank(ins)]
        if op in RESIZE:
            return [self.resize(x)]
        if op == "Transpose" and x is not None:
            perm = self.attr("perm") or list(reversed(range(len(x))))
            return [tuple(x[p] for p in perm)] if sorted(perm) == list(range(len(x))) else []
        if op in REDUCE and x is not None:
            return [self.reduce(x)]
        if op == "Squeeze" and x is not None:
            return [self.squeeze(x)]
        if op == "Unsqueeze" and x is not None:
            axes = self.axes()
            if not axes:
                return []
            r = len(x) + len(axes)
            at = {a % r for a in axes}
            rest = iter(x)
            return [tuple("" if i in at else next(rest) for i in range(r))]
        if op == "Gather" and x is not None:
            k = self.rank(node.input[1])
            if k is None:
                return []
            a = self.attr("axis", 0) % len(x)
            return [x[:a] + ("",) * k + x[a + 1:]]
        return []

    def format_op(self, x):
        if x is not None and len(x) >= 2:
            spatial = tuple(d if d in ms.SPATIAL else "" for d in x[2:])
            expected = (B, C) + tuple(d or F for d in spatial)
            if _contradicts(x, expected):
                want = fmt((B, C) + (F,) * (len(x) - 2))
                self.finding("format", f"expects input '{self.node.input[0]}' as {want}, got {fmt(x)}",
                             self.node.input[0])
            self.check_filter()
            return expected
        self.check_filter()
        r = self.rank(self.node.output[0]) if self.node.output else None
        return (B, C) + (F,) * (r - 2) if r and r >= 2 else None

    def check_filter(self):
        roles = FILTERS.get(self.node.op_type)
        if not roles or len(self.node.input) < 2:
            return
        w = self.dens.get(self.node.input[1]) or self.declared.get(self.node.input[1])
        if w is None:
            return
        expected = roles + ("FILTER_SPATIAL",) * (len(w) - 2)
        if _contradicts(w, expected):
            self.finding("format", f"expects weights '{self.node.input[1]}' as {fmt(expected)}, got {fmt(w)}",
                         self.node.input[1])

    def broadcast(self, names, ins):
        """Right-aligned merge; a contradiction where no side is a size-1 (broadcast) axis is a finding."""
        known = [d for d in ins if d]
        if not known:
            return None
        out_rank = self.rank(self.node.output[0]) if self.node.output else None
        if out_rank is None:
            ranks = [self.rank(n) if n else 0 for n in names]
            if None in ranks:
                return None
            out_rank = max(ranks, default=0)
        if len(known) == 1 and len(known[0]) == out_rank:    # one side known, no broadcast: nothing to merge
            return tuple(known[0]) if any(known[0]) else None
        out = [""] * out_rank
        owner = [""] * out_rank
        clashes: dict[tuple[str, str], list[int]] = {}
        for name, dens in zip(names, ins):
            if not dens or len(dens) > out_rank:
                continue
            shape = self.shapes.get(name)
            shape = shape if shape is not None and len(shape) == len(dens) else (None,) * len(dens)
            off = out_rank - len(dens)
            for i, d in enumerate(dens):
                if not d or shape[i] == 1:
                    continue
                j = off + i
                if out[j] and out[j] != d:
                    clashes.setdefault((owner[j], name), []).append(j)
                elif not out[j]:
                    out[j], owner[j] = d, name
        for (a, b), axes in clashes.items():
            self.finding("mismatch", f"combines '{a}' {fmt(self.dens[a])} and '{b}' {fmt(self.dens[b])}: "
                                     f"axis {', '.join(map(str, axes))} means different things", b)
        # Axes known only through a size-1 input keep that input's meaning.
        for name, dens in zip(names, ins):
            if dens and len(dens) <= out_rank:
                for i, d in enumerate(dens):
                    out[out_rank - len(dens) + i] = out[out_rank - len(dens) + i] or d
        return tuple(out) if any(out) else None

    def same_rank(self, ins):
        known = [d for d in ins if d]
        if not known or any(len(d) != len(known[0]) for d in known):
            return None
        out = list(known[0])
        for d in known[1:]:
            if _contradicts(d, out):
                self.finding("mismatch", f"joins inputs whose axes disagree: {fmt(out)} and {fmt(d)}")
            out = [a or b for a, b in zip(out, d)]
        return tuple(out)

    def resize(self, x):
        """Resize keeps every axis' meaning; the axes it scales must be spatial."""
        if x is None:
            return None
        scaled = self.scaled_axes(len(x))
        bad = [i for i in scaled if x[i] and x[i] not in ms.SPATIAL]
        if bad:
            self.finding("format", f"scales axis {', '.join(map(str, bad))} of '{self.node.input[0]}', denoted "
                                   f"{', '.join(x[i] for i in bad)}: only spatial axes (DATA_FEATURE) should be "
                                   f"resized; input is {fmt(x)}", self.node.input[0])
        return x

    def scaled_axes(self, rank):
        """Axes a Resize/Upsample changes, from its constant scales or sizes; [] when they are not constants."""
        names = list(self.node.input) + ["", "", ""]
        old = self.node.op_type == "Upsample" or self.opset < 11
        scales, sizes = (names[1], "") if old else (names[2], names[3])
        axes = self.attr("axes")
        where = [a % rank for a in axes] if axes else list(range(rank))
        v = self.const(scales) if scales else None
        if v is not None and v.size == len(where):
            return [a for a, s in zip(where, np.ravel(v)) if float(s) != 1.0]
        v = self.const(sizes) if sizes else None
        shape = self.shapes.get(names[0])
        if v is not None and v.size == len(where) and shape is not None:
            return [a for a, s in zip(where, np.ravel(v)) if shape[a] is not None and int(s) != shape[a]]
        return []

    def reduce(self, x):
        op = self.node.op_type
        keep = self.attr("keepdims", 1)
        if op in ("ArgMax", "ArgMin"):
            axes = [self.attr("axis", 0)]
        else:
            axes = self.axes()
            if axes is None:
                return None
            if not axes:
                if self.attr("noop_with_empty_axes", 0):
                    return x
                axes = list(range(len(x)))
        gone = {a % len(x) for a in axes}
        if keep:
            return x
        out = tuple(d for i, d in enumerate(x) if i not in gone)
        return out or None

    def squeeze(self, x):
        axes = self.axes()
        if axes is None:
            return None
        if not axes:
            shape = self.shapes.get(self.node.input[0])
            if shape is None or None in shape:
                return None
            axes = [i for i, s in enumerate(shape) if s == 1]
        gone = {a % len(x) for a in axes}
        out = tuple(d for i, d in enumerate(x) if i not in gone)
        return out or None


def _contradicts(actual, expected) -> bool:
    """True where both sides know an axis and disagree; spatial denotations (FEATURE/TIME) agree with each other."""
    for a, e in zip(actual, expected):
        if a and e and a != e and not (a in ms.SPATIAL and e in ms.SPATIAL):
            return True
    return False


def _declared(parts: Parts, declared: dict) -> dict[str, tuple]:
    """The value infos' shapes; their dimension denotations into `declared` (first declaration wins)."""
    out = {}
    for part in (parts.inputs, parts.value_info, parts.outputs):
        for v in part:
            # A denotation outside the standard set carries no meaning we can check: treat it as unknown.
            dens = v.dims
            if any(dens):
                dens = tuple(d.upper() if d.upper() in ms.DIM_DENOTATIONS else "" for d in dens)
                if any(dens):
                    declared.setdefault(v.name, dens)
            if v.shape is not None:
                out[v.name] = v.shape
    return out

