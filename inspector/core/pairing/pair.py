"""A TFLite model and an ONNX model made elsewhere, side by side: what the other converter did to the layout,
what our own conversion would do instead, and where its numbers first go wrong.

    pair = open_pair("model.tflite", "other.onnx")       # mapping (mapping.py), findings, our conversion
    pair.validate(seed=0)                                # outputs via validate_files, then every mapped tensor
    pair.to_json()
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from inspector.core.layout import layout as L
from inspector.core.ir.errors import InspectorError, ModelLoadError
from inspector.core.emit.result import ConversionResult
from inspector.core.ir.graph import Graph
from inspector.core.layout.fitting import fitting_perms
from .mapping import Mapping, match

if TYPE_CHECKING:                       # (proof.cut imports the TFLite builder: only when a pair is validated)
    from inspector.core.proof.cut import Cut


@dataclass
class LayoutFinding:
    """What the other converter did to a layout that ours would not (not a metadata.findings.Finding)."""
    kind: str          # transpose-pair | transpose-unneeded | transpose-shared | transpose-constant | io-layout
    message: str
    nodes: list[str] = field(default_factory=list)      # ONNX nodes (labels) it is about
    tensor: int | None = None                           # TFLite tensor
    op: int | None = None                               # TFLite op the nodes belong to


@dataclass
class Pair:
    graph: Graph                    # the TFLite model
    model: onnx.ModelProto          # the other converter's model
    path: str                       # where it was read from
    mapping: Mapping
    ours: ConversionResult | None = None   # ours of the TFLite model, None when it cannot convert
    ours_error: str = ""
    findings: list[LayoutFinding] = field(default_factory=list)
    validation: PairValidation | None = None   # after validate()

    @property
    def counts(self) -> dict:
        theirs = {"nodes": len(self.model.graph.node), "transposes": _transposes(self.model),
                  "bytes": _size(self.path, self.model)}
        ours = None if self.ours is None else {"nodes": len(self.ours.model.graph.node),
                                                "transposes": self.ours.transposes,
                                                "bytes": self.ours.model.ByteSize()}
        return {k: {"ours": None if ours is None else ours[k], "theirs": theirs[k]} for k in theirs}

    def layouts(self) -> dict:
        """Each mapped tensor's layout in their graph against our plan's: how many agree, and which do not."""
        out: dict[str, Any] = {"same": 0, "differ": [], "unknown": 0}
        if self.ours is None:
            return out
        sg, plan = self.graph.main, self.ours.plan
        for t, values in sorted(self.mapping.tensor_values.items()):
            theirs, shape = self.mapping.layout(values[0]), sg.tensors[t].shape
            if theirs is None:
                out["unknown"] += 1
                continue
            ours = plan.perm(t, len(shape))
            if L.reads_free(shape, theirs, ours):
                out["same"] += 1
            else:
                out["differ"].append({"tensor": sg.tensors[t].name, "theirs": L.name(theirs), "ours": L.name(ours)})
        return out

    def validate(self, seed: int = 0, batch: int | None = None, rtol: float | None = None, cancel=None,
                 progress=None, floor: bool | None = None, input_shapes=None) -> "PairValidation":
        self.validation = validate_pair(self, seed, batch, rtol, cancel, progress, floor, input_shapes)
        return self.validation

    def as_result(self):
        """The pair in the shape viewers already know (a ConversionResult): their model, the mapping as its trace,
        our categories for colour, and each of their Transposes our plan does without as a conflict on its node."""
        from inspector.core.layout.plan import Conflict, LayoutPlan
        from inspector.core.emit.result import ConversionResult
        plan = LayoutPlan()
        for f in self.findings:
            if f.kind in ("transpose-pair", "transpose-unneeded", "transpose-constant") and f.nodes:
                c = Conflict(tensor=f.tensor if f.tensor is not None else -1, op=f.op, kind="theirs",
                             reason=f.message, node=f.nodes[0])
                plan.conflicts.append(c)
                for n in f.nodes:
                    self.mapping.inserted[n] = c
        cats = self.ours.categories if self.ours is not None else {}
        return ConversionResult(graph=self.graph, plan=plan, model=self.model, trace=self.mapping, categories=cats,
                                pair=self)

    def to_json(self) -> dict:
        sg, m = self.graph.main, self.mapping
        counts = self.counts
        out = {
            "matched": m.matched,
            "unmatched_tflite": [{"kind": "tensor", "index": t, "name": sg.tensors[t].name}
                                 for t in m.unmatched_tensors]
            + [{"kind": "op", "index": k, "name": sg.ops[k].label} for k in m.unmatched_ops],
            "unmatched_onnx": [{"kind": "node", "name": n} for n in m.unmatched_nodes]
            + [{"kind": "value", "name": v} for v in m.unmatched_io],
            "transposes": counts["transposes"],
            "counts": counts,
            "coverage": m.coverage(self.graph),
            "layouts": self.layouts(),
            "findings": [asdict(f) for f in self.findings],
            "validation": self.validation.to_json() if self.validation is not None else None,
        }
        if self.ours_error:
            out["ours_error"] = self.ours_error
        return out


def open_pair(tflite_path: str, onnx_path: str) -> Pair:
    """Read both models, map them, convert the TFLite model ourselves and collect the findings."""
    from inspector.core.io.loader import load_model
    graph = load_model(tflite_path)
    if graph.format != "tflite":
        raise ModelLoadError(tflite_path, "the first model of a pair must be TFLite")
    return make_pair(graph, read_other(onnx_path), onnx_path)


def read_other(path: str) -> onnx.ModelProto:
    """The other converter's model, after onnx_reader has refused anything hostile (external data outside its
    folder, truncation, a dangling name)."""
    from inspector.core.io.onnx_reader import load_proto, read_onnx
    read_onnx(path)
    model = load_proto(path)
    check_perms(model, path)
    return model


def check_perms(model: onnx.ModelProto, path: str = "") -> None:
    """Refuse a Transpose whose perm is not a permutation (the checker lets it through; mapping would index
    axes that do not exist)."""
    for n in model.graph.node:
        if n.op_type != "Transpose":
            continue
        perm = next((list(a.ints) for a in n.attribute if a.name == "perm"), None)
        if perm is not None and sorted(perm) != list(range(len(perm))):
            raise ModelLoadError(path, f"Transpose node '{n.name or n.output[0]}' has perm {perm}, "
                                       f"not a permutation of 0..{len(perm) - 1}")


def make_pair(graph: Graph, model: onnx.ModelProto, path: str = "") -> Pair:
    from inspector.core.emit.convert import convert
    pair = Pair(graph, model, path, match(graph, model))
    try:
        pair.ours = convert(graph)
    except InspectorError as e:
        pair.ours_error = str(e).splitlines()[0]
    pair.findings = transpose_findings(pair) + io_findings(pair)
    return pair


def _transposes(model) -> int:
    return sum(1 for n in model.graph.node if n.op_type == "Transpose")


def _size(path: str, model) -> int:
    return os.path.getsize(path) if path and os.path.exists(path) else model.ByteSize()


def _perm_attr(node, rank: int) -> tuple[int, ...]:
    p = next((tuple(a.ints) for a in node.attribute if a.name == "perm"), ())
    return p or tuple(reversed(range(rank)))


# -- findings -------------------------------------------------------------------------------------------------
def transpose_findings(pair: Pair) -> list[LayoutFinding]:
    """Each of their Transposes: a pair that cancels, one on a constant (foldable), one our plan also needs on
    that tensor, or one our plan does without."""
    m, sg = pair.mapping, pair.graph.main
    nodes = list(pair.model.graph.node)
    labels = [n.name or f"{n.op_type}#{i}" for i, n in enumerate(nodes)]
    producer = {o: i for i, n in enumerate(nodes) for o in n.output}
    constant = {t.name for t in pair.model.graph.initializer} | {
        o for n in nodes if n.op_type == "Constant" for o in n.output}
    ours_on = set()
    if pair.ours is not None:
        ours_on = {c.tensor for c in pair.ours.trace.inserted.values() if c.subgraph == 0}
    out, paired = [], set()
    for j, n in enumerate(nodes):                       # pairs first: a Transpose fed by one it undoes
        i = producer.get(n.input[0]) if n.op_type == "Transpose" and n.input else None
        if i is None or nodes[i].op_type != "Transpose" or i in paired:
            continue
        p0 = _perm_attr(nodes[i], len(m.layout(nodes[i].input[0]) or ()))
        p1 = _perm_attr(n, len(p0))
        if len(p0) == len(p1) and L.is_identity(L.compose(p0, p1)):
            paired |= {i, j}
            out.append(LayoutFinding("transpose-pair", f"Transposes {labels[i]} and {labels[j]} cancel "
                                     f"({list(p0)} then {list(p1)}): both can go", [labels[i], labels[j]],
                                     m.value_tensor.get(nodes[i].input[0]), m.node_op.get(labels[j])))
    for i, n in enumerate(nodes):
        if n.op_type != "Transpose" or i in paired or not n.input:
            continue
        src = n.input[0]
        t = m.value_tensor.get(src, m.value_tensor.get(n.output[0]) if n.output else None)
        name = sg.tensors[t].name if t is not None else src
        perm = _perm_attr(n, len(m.layout(src) or ()))
        op = m.node_op.get(labels[i])
        if src in constant:
            out.append(LayoutFinding("transpose-constant", f"{labels[i]} transposes the constant '{src}' at run "
                                     "time: it could be stored transposed", [labels[i]], None, op))
        elif t is None:
            out.append(LayoutFinding("transpose-unmapped", f"{labels[i]} transposes '{src}', which maps to no "
                                     "TFLite tensor", [labels[i]], None, op))
        elif t in ours_on:
            out.append(LayoutFinding("transpose-shared", f"{labels[i]} on '{name}': our plan needs a Transpose "
                                     "there too", [labels[i]], t, op))
        elif pair.ours is not None:
            ours = L.name(pair.ours.plan.perm(t, sg.tensors[t].rank))
            out.append(LayoutFinding("transpose-unneeded", f"{labels[i]} on '{name}' ({list(perm)}): our plan "
                                     f"needs none there (keeps '{name}' {ours} for every consumer)", [labels[i]], t,
                                     op))
    return out


def io_findings(pair: Pair) -> list[LayoutFinding]:
    """Graph inputs/outputs whose layout differs from ours (ours: channels-first unless kept)."""
    if pair.ours is None:
        return []
    sg, m, plan = pair.graph.main, pair.mapping, pair.ours.plan
    out = []
    for kind, tensors, names in (("input", sg.inputs, [v.name for v in pair.model.graph.input]),
                                 ("output", sg.outputs, [v.name for v in pair.model.graph.output])):
        for t in tensors:
            value = next((v for v in m.tensor_values.get(t, []) if v in names), None)
            theirs = m.layout(value) if value else None
            if theirs is None:
                continue
            rank = sg.tensors[t].rank
            ours = plan.outputs.get(t, plan.perm(t, rank)) if kind == "output" else plan.perm(t, rank)
            if tuple(theirs) != tuple(ours) and not L.reads_free(sg.tensors[t].shape, theirs, ours):
                out.append(LayoutFinding("io-layout", f"{kind} '{sg.tensors[t].name}': theirs is {L.name(theirs)}, "
                                         f"ours is {L.name(ours)}", [], t, None))
    return out


# -- validation -------------------------------------------------------------------------------------------------
@dataclass
class PairValidation:
    outputs: list                   # validate.TensorError per graph output, as `validate` judges them
    tensors: list = field(default_factory=list)     # validate.TensorError per mapped tensor, in op order
    perms: dict[int, tuple] = field(default_factory=dict)   # tensor -> layout it was compared in
    skipped: list[str] = field(default_factory=list)        # why a mapped tensor was not compared
    notes: list[str] = field(default_factory=list)
    rtol: float = 0.0
    cut: Cut | None = None          # when LiteRT could run only the ops before one
    output_diffs: list = field(default_factory=list, repr=False)   # onnx - tflite per output, as validate gives

    @property
    def intermediates(self) -> list:
        """The compared tensors that are not graph outputs (the shape validate.Validation has, for viewers)."""
        return [e for e in self.tensors if not e.is_output]

    @property
    def ok(self) -> bool:
        return bool(self.outputs) and all(e.ok for e in self.outputs)

    def first_bad(self):
        bad = [e for e in self.tensors if not e.ok]
        return min(bad, key=lambda e: (e.op if e.op is not None else -1)) if bad else None

    def to_json(self, graph: Graph | None = None, mapping: Mapping | None = None) -> dict:
        def row(e):
            return {"name": e.name, "tensor": e.tensor, "onnx": e.onnx_name, "op": e.op, "max_abs": _num(e.max_abs),
                    "max_rel": _num(e.max_rel), "ok": e.ok, "layout": list(self.perms.get(e.tensor, ()))}
        out: dict[str, Any] = {"ok": self.ok, "outputs": [row(e) for e in self.outputs],
                               "tensors": [row(e) for e in self.tensors]}
        bad = self.first_bad()
        out["first_bad"] = None if bad is None else {"tensor": bad.name, "onnx": bad.onnx_name, "op": bad.op,
                                                     "max_rel": _num(bad.max_rel)}
        if bad is not None and graph is not None and bad.op is not None:
            out["first_bad"]["opcode"] = graph.main.ops[bad.op].label
            if mapping is not None:
                out["first_bad"]["nodes"] = mapping.op_nodes.get(bad.op, [])
        out["skipped"], out["notes"] = self.skipped, self.notes
        out["cut"] = None if self.cut is None else self.cut.to_json()
        return out


def _num(x: float) -> float | None:
    """JSON has no infinity: a tensor whose shapes differ in every layout has no error figure."""
    return x if np.isfinite(x) else None


def validate_pair(pair: Pair, seed: int = 0, batch: int | None = None, rtol: float | None = None,
                  cancel=None, progress=None, floor: bool | None = None, input_shapes=None) -> PairValidation:
    """Outputs as `validate` judges them (validate_files: same seeded inputs, I/O layouts read off the shapes),
    then every mapped tensor against LiteRT's preserved one, each in the layout its ONNX shape shows.
    `cancel` (a threading.Event) and `progress(msg, fraction)` serve the GUI's worker, as for validate();
    `input_shapes` as for validate_files."""
    from inspector.core.proof.input_shapes import resolve
    from inspector.core.proof.validate import (RTOL, Cancelled, best_layout, guessed_perms, make_inputs, model_kind,
                                               reference, run_onnx, typed, validate_files)
    from inspector.core.proof.validate import TensorError, judge
    graph, m, sg = pair.graph, pair.mapping, pair.graph.main
    if not pair.path:
        raise InspectorError("validate a pair read from a file (open_pair)")

    def step(msg, frac):
        if cancel is not None and cancel.is_set():
            raise Cancelled("validation cancelled")
        if progress is not None:
            progress(msg, frac)

    result = PairValidation([])
    step("comparing the outputs", 0.05)
    try:
        v = validate_files(graph, pair.path, seed=seed, batch=batch, rtol=rtol, floor=floor,
                           mapper=lambda *_: m.tensor_values, input_shapes=input_shapes)
        result.outputs, result.output_diffs = v.outputs, v.output_diffs
    except ModelLoadError:
        raise
    except Exception as e:          # ONNX Runtime refusing the model with its optimisations on: judged below
        result.notes.append(f"ONNX Runtime (optimised) cannot run it: {str(e).splitlines()[0][:300]}")
    rtol = result.rtol = RTOL[model_kind(graph)] if rtol is None else rtol
    step("running TFLite, keeping every tensor", 0.35)
    inputs = make_inputs(graph, seed, batch, resolve(graph, input_shapes, {
        v: t for t in sg.inputs for v in m.tensor_values.get(t, [])}))
    feeds = {}
    names = [v.name for v in pair.model.graph.input]
    for t, x in zip(sg.inputs, inputs):
        value = next((v for v in m.tensor_values.get(t, []) if v in names), None)
        perm = next(iter(fitting_perms(x.shape, _dims(pair.model, value))), None) if value else None
        if perm is None:
            result.skipped.append(f"input '{sg.tensors[t].name}' has no ONNX input in a matching layout")
            return result
        feeds[value] = np.transpose(x, perm)
    ref, cut = reference(graph, inputs, True)
    wanted = {t: name for t in ref if (name := m.image(t)) and t not in sg.inputs}
    step("running ONNX Runtime on every mapped value", 0.6)
    try:
        got = run_onnx(typed(pair.model), feeds, list(wanted.values()))
    except Exception as e:          # onnxruntime's own exception types: a model it cannot load or run fails
        result.notes.append(f"ONNX Runtime cannot run it: {str(e).splitlines()[0][:300]}")
        result.outputs = []
        return result
    step("comparing tensor by tensor", 0.9)
    producers = sg.producers()
    for t in sorted(wanted, key=lambda i: producers.get(i, -1)):
        y = got.get(wanted[t])
        if y is None:
            result.skipped.append(f"'{sg.tensors[t].name}': '{wanted[t]}' has no type ONNX Runtime could return")
            continue
        err, _, perm = best_layout(sg, t, ref[t], y, rtol, guessed_perms(ref[t].shape, y, m.layout(wanted[t])))
        a, r, s, ok, steps, within = err
        result.tensors.append(TensorError(sg.tensors[t].name, t, wanted[t], a, r, s, ok, t in sg.outputs,
                                          producers.get(t), ref[t].shape, steps, within))
        if perm is not None:
            result.perms[t] = perm
    judge(graph, result.tensors, inputs, ref, rtol, seed, floor, True, cut=cut,
          fallback=getattr(ref, "kernels", "") == "default")
    if cut is not None:
        result.cut = cut
        result.notes.append(cut.note(len(result.tensors)))
    if not result.outputs:
        result.outputs = [e for e in result.tensors if e.is_output]
        if len(result.outputs) != len(sg.outputs):
            result.outputs = []                 # an output not compared cannot pass
    return result


def _dims(model, name):
    for vi in model.graph.input:
        if vi.name == name:
            return [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]
    return None


# -- metadata ------------------------------------------------------------------------------------------------
def write_with_metadata(model: onnx.ModelProto, edits, path: str, protect=(), target: str = "onnx",
                        out=None) -> list[str]:
    """Write the other converter's model with metadata edits only (denotations, metadata_props, doc string...):
    MetadataEdits never touches nodes, initializers or the I/O lists. Returns the edits' notes. With `out` (an
    atomic.OutputSet, its inputs protected) the file is staged there, renamed at its commit."""
    from inspector.core.io.atomic import write_atomic
    from inspector.core.metadata.lint import gate
    edited = onnx.ModelProto()
    edited.CopyFrom(model)
    notes = edits.apply(edited) + [f"warning: {f.message}" for f in gate(edited, target)]
    try:
        onnx.checker.check_model(edited)
        data = edited.SerializeToString()
    except (onnx.checker.ValidationError, ValueError) as e:
        raise InspectorError(f"the edited model cannot be written: {str(e).splitlines()[0]}") from None
    if out is not None:
        out.write(path, data)
    else:
        write_atomic(path, data, protect=protect)
    return notes
