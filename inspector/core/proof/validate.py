"""Proof: run the TFLite model (ai-edge-litert, reference kernels) and the ONNX model (onnxruntime) on the same
seeded inputs and compare every output, and every intermediate tensor the trace maps.

LiteRT runs its reference kernels (BUILTIN_REF), which agree more closely with ONNX Runtime than the optimized
builtin kernels on deep models (EfficientNetB0-fp16 output: 3.8e-4 vs 1.1e-3 of its scale) and are fast enough
for models of the corpus's size; it falls back to the builtin kernels for the few ops the reference resolver lacks.
Errors are judged relative to each tensor's scale (its largest reference magnitude), because LiteRT's kernels
and ONNX Runtime's legitimately differ in the last bits, more so deep in a network.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx

from inspector.core.layout import layout as L
from . import noise
from .input_shapes import cannot_run, resolve as resolve_shapes, unsized as unsized_inputs
from .litert_log import quiet_litert
from inspector.core.ir.errors import InspectorError
from inspector.core.ir.graph import Graph
from inspector.core.emit.result import ConversionResult

if TYPE_CHECKING:                       # (cut.py imports the TFLite builder: only when validating needs it)
    from .cut import Cut

# Relative tolerance per kind of model: |onnx - tflite| <= RTOL * scale + ATOL.
RTOL = {"float": 1e-4, "float16": 1e-3, "dynamic": 1e-3, "quantized": 0.0}
ATOL = 1e-5
# Quantized tensors are judged in steps of their scale: TFLite's integer kernels round and rescale their own way.
STEPS_OK, STEPS_SHARE, STEPS_MAX = 2.0, 0.999, 5.0


@dataclass
class TensorError:
    name: str                       # TFLite tensor name
    tensor: int                     # TFLite tensor index
    onnx_name: str
    max_abs: float
    max_rel: float                  # max_abs / scale
    scale: float
    ok: bool                        # the verdict is "ok"
    is_output: bool = False
    op: int | None = None           # producing TFLite op (for plotting in topological order)
    shape: tuple = ()
    steps: float | None = None      # quantized tensors: largest error in quantization steps
    within: float | None = None     # quantized tensors: share of elements within STEPS_OK steps
    floor: float | None = None      # the model's own noise (absolute; quantized: steps), None: not measured
    limit: float | None = None      # the absolute error the verdict allowed
    verdict: str = ""               # ok / suspicious / fail (see noise.py)
    floor_within: float | None = None   # quantized: share within STEPS_OK steps between LiteRT's kernel families
    typical: float | None = None        # float outputs: the median of the noise measures (noise.py: suspicious)

    @property
    def compared(self) -> bool:
        """False for a row that stands for a tensor with no value to compare (an output computed after an op
        LiteRT cannot run, or one the ONNX model does not produce): no scale and an infinite error."""
        return not (self.scale == 0 and not self.max_abs < float("inf"))

    @property
    def ratio(self) -> float | None:
        """Error over floor (None when the floor is not measured or zero)."""
        err = self.steps if self.steps is not None else self.max_abs
        return err / self.floor if self.floor else None


@dataclass
class Validation:
    outputs: list[TensorError]
    intermediates: list[TensorError] = field(default_factory=list)
    seed: int = 0
    rtol: float = 0.0
    output_diffs: list[np.ndarray] = field(default_factory=list, repr=False)   # onnx - tflite per output
    io: list[dict] = field(default_factory=list)        # how each ONNX I/O's layout was known
    notes: list[str] = field(default_factory=list)      # e.g. where the reference was cut
    cut: Cut | None = None                              # cut.Cut when LiteRT could run only the ops before one
    reference: str = "reference"                        # LiteRT's kernels compared with: "reference" or "default"
    lacks: str = ""                                     # with "default": the op version the reference kernels lack

    @property
    def ok(self) -> bool:
        return bool(self.outputs) and all(e.ok for e in self.outputs)

    @property
    def verdict(self) -> str:
        return verdict_of(self.outputs)

    def first_bad(self) -> TensorError | None:
        """The earliest intermediate (in op order) whose error exceeds the tolerance: where to look first."""
        bad = [e for e in self.intermediates if not e.ok]
        return min(bad, key=lambda e: (e.op if e.op is not None else -1)) if bad else None

    def to_json(self) -> dict:
        def row(e):
            out = {"name": e.name, "max_abs": _num(e.max_abs), "max_rel": _num(e.max_rel), "scale": e.scale,
                   "floor": e.floor, "ratio": _num(e.ratio), "limit": e.limit, "verdict": e.verdict, "ok": e.ok}
            if e.steps is not None:
                out.update(steps=_num(e.steps), within=e.within)
            return out
        return {"outputs": [row(e) for e in self.outputs], "ok": self.ok, "verdict": self.verdict,
                "reference": self.reference, "k": noise.K, "far": noise.FAR, "rtol": self.rtol, "io": self.io, "notes": self.notes,
                "cut": None if self.cut is None else dict(self.cut.to_json(), compared=len(self.intermediates),
                                                          ok=sum(e.ok for e in self.intermediates)),
                "intermediates": [dict(row(e), tensor=e.tensor, onnx_name=e.onnx_name, op=e.op,
                                       shape=list(e.shape)) for e in self.intermediates]}


def verdict_of(outputs: list[TensorError]) -> str:
    """The model's verdict: its worst output's (no outputs compared: fail)."""
    kinds = {e.verdict or ("ok" if e.ok else "fail") for e in outputs} or {"fail"}
    return "fail" if "fail" in kinds else "suspicious" if "suspicious" in kinds else "ok"


def _num(x):
    """JSON has no infinity."""
    return x if x is None or np.isfinite(x) else None


class Cancelled(InspectorError):
    pass


def model_kind(graph: Graph) -> str:
    sg = graph.main
    dtypes = {sg.tensors[t].dtype for t in sg.inputs + sg.outputs}
    if dtypes & {"int8", "uint8", "int16"} or any(quant_step(sg, t.index) for t in sg.tensors if t.data is None):
        return "quantized"
    if any(t.quantization is not None and t.dtype == "int8" for t in sg.tensors if t.data is not None):
        return "dynamic"                # int8 weights, float activations
    if any(t.dtype == "float16" for t in sg.tensors):
        return "float16"
    return "float"


def index_bounds(sg) -> dict[int, int]:
    """Graph input tensor -> exclusive upper bound of the values it may take, for inputs that index a table (the
    ops' specs say which: OpSpec.indexes; an index out of the table's range is an error in LiteRT, so such inputs
    are drawn from [0, size)), traced back through ops that carry integer values unchanged (OpSpec.passes_values)."""
    from inspector.core.emit.ops.table import load_all
    specs = load_all()
    producers = sg.producers()
    bounds: dict[int, int] = {}
    for op in sg.ops:
        spec = specs.get(op.opcode)
        if spec is None or spec.indexes is None or op.custom:
            continue
        at, table, axis = spec.indexes
        if at >= len(op.inputs) or op.inputs[at] < 0:
            continue
        if op.opcode == "ONE_HOT":
            depth = sg.tensors[op.inputs[1]].data
            size = int(np.asarray(depth).reshape(-1)[0]) if depth is not None else 0
        elif op.opcode == "SCATTER_ND":
            shape = sg.tensors[op.inputs[2]].data
            size = int(np.min(shape)) if shape is not None and np.size(shape) else 0
        else:
            dims = sg.tensors[op.inputs[table]].shape
            if op.opcode == "GATHER_ND":
                k = sg.tensors[op.inputs[at]].shape[-1] if sg.tensors[op.inputs[at]].rank else 1
                size = min(dims[:k]) if dims[:k] else 0
            else:
                ax = op.options.get("axis", 0) if axis is None else axis
                size = dims[ax % len(dims)] if dims else 0
        t = op.inputs[at]
        while t in producers and _passes_values(specs, sg.ops[producers[t]]):
            t = sg.ops[producers[t]].inputs[0]
        if t in sg.inputs and size > 0:
            bounds[t] = min(bounds.get(t, size), size)
    return bounds


def _passes_values(specs, op) -> bool:
    spec = specs.get(op.opcode)
    return spec is not None and spec.passes_values


def make_inputs(graph: Graph, seed: int = 0, batch: int | None = None,
                shapes: dict[int, tuple] | None = None) -> list[np.ndarray]:
    """Seeded inputs in TFLite layout; floats in [-1, 1], integers in a small range (indices within the table
    they index), bools random. `shapes`: input tensor -> the dims the user gave (input_shapes.resolve)."""
    rng = np.random.default_rng(seed)
    sg = graph.main
    bounds = index_bounds(sg)
    out = []
    for t in (sg.tensors[i] for i in sg.inputs):
        shape = _input_shape(t, batch, shapes)
        if t.dtype.startswith("float"):
            out.append(rng.uniform(-1, 1, shape).astype(t.dtype))
        elif t.dtype == "bool":
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:
            info = np.iinfo(t.dtype)
            lo, hi = max(info.min, -8 if info.min < 0 else 0), min(info.max, 8)
            if t.dtype in ("int8", "uint8", "int16"):
                lo, hi = info.min, info.max
            if t.index in bounds:
                lo, hi = 0, min(info.max, bounds[t.index] - 1)
            out.append(rng.integers(lo, hi, shape, endpoint=True).astype(t.dtype))
    return out


def _input_shape(t, batch: int | None, shapes: dict[int, tuple] | None) -> list[int]:
    if shapes and t.index in shapes:
        return list(shapes[t.index])
    shape = list(t.shape)
    if batch is not None and t.shape_signature is not None and t.shape_signature and t.shape_signature[0] < 0:
        shape[0] = batch
    return shape


class LiteRTRefusal(InspectorError):
    """LiteRT cannot run the model (a custom op without kernel, string I/O, bad kernel parameters)."""

    def __init__(self, reason: str, op: str = ""):
        self.reason, self.op = reason, op
        super().__init__(f"LiteRT cannot run the model: {reason}")


def _refusal(e: Exception) -> LiteRTRefusal:
    """One line from LiteRT's multi-line error, naming the op when it says which."""
    import re
    text = str(e)
    custom = re.search(r"unresolved custom op: ([^\s.]+)", text)
    if custom:
        return LiteRTRefusal(f"custom op {custom.group(1)} has no kernel in LiteRT", custom.group(1))
    op = re.search(r"Node number (\d+) \((\w+)\)", text)
    text = re.sub(r"Node number \d+ \(\w+\) failed to (prepare|invoke)\.?", "\n", text)
    lines = [re.sub(r"^\S+\.(h|cc)(:\d+)?\s*", "", ln.strip()) for ln in text.splitlines() if ln.strip()]
    reason = next((ln for ln in lines if ln), type(e).__name__)
    return LiteRTRefusal(f"{op.group(2)} (op {op.group(1)}): {reason}" if op else reason, op.group(2) if op else "")


class Run(dict):
    """A LiteRT run's values by tensor index; `kernels`: "reference" (BUILTIN_REF) or "default" (the builtin
    kernels, where the reference resolver lacks an op or an op version: `lacks` says which)."""
    kernels = "reference"
    lacks = ""


def run_tflite(graph: Graph, inputs, model_bytes: bytes | None = None, keep_all: bool = True, resolver=None) -> Run:
    """Outputs and (with keep_all) every tensor of the main subgraph, by tensor index; in the reference kernels
    unless another `resolver` (an OpResolverType) is asked for."""
    import re

    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    def make(resolver, keep):
        kwargs = dict(experimental_op_resolver_type=resolver, experimental_preserve_all_tensors=keep)
        with quiet_litert():
            it = Interpreter(model_content=model_bytes, **kwargs) if model_bytes else Interpreter(graph.path, **kwargs)
            for d, x in zip(it.get_input_details(), inputs):
                if list(d["shape"]) != list(x.shape):
                    it.resize_tensor_input(d["index"], x.shape)
            it.allocate_tensors()
        return it

    values = Run()
    asked = resolver or OpResolverType.BUILTIN_REF
    try:
        try:
            interp = make(asked, keep_all)
        except (RuntimeError, ValueError) as e:
            # the reference resolver lacks a few kernels (CEIL, ROUND, ELU...); another resolver lacking one is not
            # "the reference lacks it", so its refusal stands
            if "Didn't find op" in str(e) and asked == OpResolverType.BUILTIN_REF:
                interp = make(OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, keep_all)
                lacks = re.search(r"opcode '(\w+)' version '(\d+)'", str(e))
                values.kernels = "default"
                values.lacks = f"{lacks.group(1)} version {lacks.group(2)}" if lacks else str(e).splitlines()[0]
            elif "custom op" not in str(e) or isinstance(e, ValueError):
                raise
            else:
                # MediaPipe's custom ops exist only in the XNNPACK delegate; what it fuses cannot be observed, so
                # only the outputs are compared then.
                interp, keep_all = make(OpResolverType.AUTO, False), False
        details = interp.get_input_details()
        for d, x in zip(details, inputs):
            interp.set_tensor(d["index"], x)
        interp.invoke()
    except (RuntimeError, ValueError) as e:     # LiteRT's refusals: unresolved custom ops, bad parameters...
        raise _refusal(e) from None
    sg = graph.main
    wanted = range(len(sg.tensors)) if keep_all else sg.outputs
    for i in wanted:
        t = sg.tensors[i]
        if t.data is not None or t.dtype in ("resource", "variant", "string"):
            continue
        try:
            values[i] = np.array(interp.get_tensor(i))
        except ValueError:
            pass
    return values


def own_kernel_steps(graph: Graph, seed: int = 0) -> list[float | None]:
    """Per output, the largest error in quantization steps of LiteRT's default kernels (builtin + XNNPACK, what a
    plain Interpreter runs) against its reference kernels on the validation inputs: how far TFLite disagrees with
    itself on a quantized model, which deep random-weight networks amplify far beyond 2 steps."""
    from ai_edge_litert.interpreter import OpResolverType
    inputs = make_inputs(graph, seed)
    sg = graph.main
    ref = run_tflite(graph, inputs, keep_all=False)
    default = run_tflite(graph, inputs, keep_all=False, resolver=OpResolverType.AUTO)
    return [compare_tensor(sg, t, ref[t], default[t], 0.0)[4] if t in ref and t in default else None for t in sg.outputs]


def run_onnx(model: onnx.ModelProto, feeds: dict, extra: Sequence[str] = (), threads: int = 1,
             optimise: bool | None = None):
    """`optimise` None: fully optimised unless intermediates are read (then as written), retried unoptimised."""
    import onnxruntime as ort
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    vi = {v.name: v for v in m.graph.value_info}
    for name in extra:
        if name not in have and name in vi:        # (two tensors may share a value: an Identity dropped)
            m.graph.output.append(vi[name])
            have.add(name)
    # Graph optimisations stay off when intermediates are read, so they are the values the converter wrote;
    # ONNX Runtime's optimiser also refuses some valid graphs (Resize with `axes` between Transposes), so a
    # refusal is retried without it before it is reported.
    levels = [ort.GraphOptimizationLevel.ORT_DISABLE_ALL] if extra or optimise is False else \
        [ort.GraphOptimizationLevel.ORT_ENABLE_ALL] if optimise else \
        [ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL]
    data = m.SerializeToString()
    for level in levels:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.log_severity_level = 3
        opts.graph_optimization_level = level
        try:
            sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
            names = [o.name for o in sess.get_outputs()]
            return dict(zip(names, sess.run(names, feeds)))
        except Exception as e:                          # onnxruntime raises its own untyped errors
            failure = str(e).splitlines()[0] if str(e) else type(e).__name__
    raise InspectorError(f"ONNX Runtime cannot run the model: {failure}")


def compare(ref: np.ndarray, got: np.ndarray, rtol: float) -> tuple[float, float, float, bool]:
    if ref.dtype == bool or got.dtype == bool:
        diff = np.count_nonzero(ref != got)
        return float(diff), float(diff), 1.0, diff == 0
    ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
    if ref64.shape != got64.shape:
        return float("inf"), float("inf"), 0.0, False
    scale = float(np.max(np.abs(ref64))) if ref64.size else 0.0
    max_abs = float(np.max(np.abs(ref64 - got64))) if ref64.size else 0.0
    if np.issubdtype(ref.dtype, np.integer):
        return max_abs, max_abs / max(scale, 1.0), scale, max_abs == 0
    max_rel = max_abs / max(scale, 1e-12)
    ok = bool(np.isfinite(max_abs)) and max_abs <= rtol * scale + ATOL
    return max_abs, max_rel, scale, ok


def quant_step(sg, t: int) -> tuple[float, int] | None:
    """(scale, zero point) a tensor is judged in: its own quantization, or for the float output of a DEQUANTIZE,
    its input's. None for float tensors and per-channel ones."""
    ten = sg.tensors[t]
    q = ten.quantization
    if ten.dtype in ("float32", "float16"):
        src = next((op.inputs[0] for op in sg.ops if op.opcode == "DEQUANTIZE" and t in op.outputs), None)
        q = sg.tensors[src].quantization if src is not None and sg.tensors[src].data is None else None
    elif ten.dtype not in ("int8", "uint8", "int16"):
        return None
    if q is None or q.scales.size != 1:
        return None
    return float(q.scales[0]), int(q.zero_points[0])


def compare_steps(ref: np.ndarray, got: np.ndarray, scale: float, zp: int):
    """Errors of a quantized tensor in steps of its scale; either side may be integers or real values."""
    def real(a):
        return (a.astype(np.float64) - zp) * scale if np.issubdtype(a.dtype, np.integer) else a.astype(np.float64)
    if ref.shape != got.shape:
        return float("inf"), float("inf"), 0.0, False, float("inf"), 0.0
    r, g = real(ref), real(got)
    steps = np.abs(g - r) / scale
    rng = float(np.max(np.abs(r))) if r.size else 0.0
    max_abs = float(np.max(np.abs(g - r))) if r.size else 0.0
    worst = float(np.max(steps)) if r.size else 0.0
    within = float(np.mean(steps <= STEPS_OK + 1e-6)) if r.size else 1.0
    ok = bool(np.isfinite(worst)) and worst <= STEPS_MAX + 1e-6 and within >= STEPS_SHARE
    return max_abs, max_abs / max(rng, 1e-12), rng, ok, worst, within


def compare_tensor(sg, t, ref, got, rtol):
    """compare() for float and integer tensors, compare_steps() for quantized ones: (a, r, s, ok, steps, within)."""
    q = quant_step(sg, t)
    if q is not None:
        return compare_steps(ref, got, *q)
    return (*compare(ref, got, rtol), None, None)


# Inputs, outputs and (when intermediates are compared) every tensor are held at once, by LiteRT and ONNX Runtime.
BUDGET_BYTES = 2 << 30


def checked_inputs(graph: Graph, seed: int, batch: int | None, intermediates: bool,
                   shapes: dict[int, tuple] | None = None) -> list[np.ndarray]:
    """make_inputs, after refusing what cannot be fed (strings) or held (check_budget)."""
    sg = graph.main
    for t in sg.inputs:
        if sg.tensors[t].dtype in ("string", "resource", "variant"):
            raise InspectorError(f"input '{sg.tensors[t].name}' is a {sg.tensors[t].dtype} tensor: "
                                 "validation feeds numeric inputs only")
    check_budget(graph, batch, intermediates, shapes)
    return make_inputs(graph, seed, batch, shapes)


def check_budget(graph: Graph, batch: int | None, intermediates: bool, shapes: dict[int, tuple] | None = None
                 ) -> None:
    """Refuse before anything is allocated when the tensors the runs hold would exceed BUDGET_BYTES (inputs at
    the sizes given, other tensors at their stored sizes, batch apart)."""
    from math import prod
    sg = graph.main
    batch = batch or 1
    total = 0
    for t in (sg.tensors if intermediates else [sg.tensors[i] for i in sg.inputs + sg.outputs]):
        if t.data is not None or t.dtype in ("resource", "variant", "string"):
            continue
        dims = _input_shape(t, batch, shapes)
        total += prod(max(d, 0) for d in dims) * np.dtype(t.dtype).itemsize
    if total > BUDGET_BYTES:
        raise InspectorError(f"validation would hold {total / 2**30:.1f} GiB of tensors (the limit is "
                             f"{BUDGET_BYTES / 2**30:g} GiB); try a smaller --batch")


def validate(result: ConversionResult, seed: int = 0, intermediates: bool = True, batch: int | None = None,
             rtol: float | None = None, cancel: threading.Event | None = None, progress=None,
             floor: bool | None = None, input_shapes: dict[str, tuple] | None = None, _reference=None,
             _output_perms=None, _guess_layouts: bool = False) -> Validation:
    """Compare the converted model with the TFLite interpreter; `cancel`/`progress` serve the GUI's worker.
    `floor`: True measures the noise floor of every compared tensor, False never, None where it could change a
    verdict (noise.needs_floor). `input_shapes`: input name (TFLite's or ONNX's) -> the sizes of its dynamic
    dimensions (input_shapes.parse). `_reference` (inputs, LiteRT values, Cut or None), `_output_perms` (output ->
    layouts to try) and `_guess_layouts` (intermediates' layouts read off their shapes) serve validate_files."""
    graph, trace = result.graph, result.trace
    sg = graph.main
    rtol = RTOL[model_kind(graph)] if rtol is None else rtol

    def step(msg, frac):
        if cancel is not None and cancel.is_set():
            raise Cancelled("validation cancelled")
        if progress is not None:
            progress(msg, frac)

    if _reference is None:
        shapes = resolve_shapes(graph, input_shapes, {trace.tensor_values[t][0]: t for t in sg.inputs
                                                      if trace.tensor_values.get(t)})
        inputs = checked_inputs(graph, seed, batch, intermediates, shapes)
        step("running TFLite", 0.1)
        ref, cut = reference(graph, inputs, intermediates)
    else:
        inputs, ref, cut = _reference
    step("running ONNX Runtime", 0.4)
    feeds = onnx_feeds(result, inputs)
    extra = [trace.tensor_values[t][0] for t in ref if t in trace.tensor_values] if intermediates else []
    got = run_onnx(result.model, feeds, extra)
    step("comparing", 0.6)
    # (a tensor whose op became no node may have a graph input for its image: the fed values)
    v = _compare_all(result, ref, {**feeds, **got}, rtol, intermediates, _output_perms or {}, _guess_layouts)
    v.seed, v.cut, v.notes = seed, cut, [cut.note(len(v.intermediates))] if cut is not None else []
    v.notes += fed_notes(graph, inputs, input_shapes)
    v.reference, v.lacks = getattr(ref, "kernels", "reference"), getattr(ref, "lacks", "")
    if v.reference == "default":
        v.notes.append(f"LiteRT's reference kernels lack {v.lacks}: compared with its default kernels, against a "
                       f"noise floor {noise.FALLBACK:g} x the spread of its two default kernel families")
    judge(result.graph, v.outputs + v.intermediates, inputs, ref, rtol, seed, floor, intermediates,
          lambda: (got, run_onnx(result.model, feeds, optimise=bool(extra))),
          lambda: step("measuring the noise floor", 0.7), cut, v.reference == "default")
    step("done", 1.0)
    return v


def fed_notes(graph: Graph, inputs, given) -> list[str]:
    """A note per input fed at sizes the user gave."""
    if not given:
        return []
    return [f"input '{graph.main.tensors[t].name}' fed as {list(x.shape)}" for t, x in zip(graph.main.inputs, inputs)
            if graph.main.tensors[t].dynamic]


def reference(graph: Graph, inputs, keep_all: bool):
    """(LiteRT's values, None), or when LiteRT cannot run an op, (its values of every tensor before that op, the
    Cut); the refusal itself when nothing precedes that op or the cut model cannot be written."""
    from .cut import Cut, cut_before, first_op
    unsized = unsized_inputs(graph, inputs)
    try:
        values = run_tflite(graph, inputs, keep_all=keep_all)
    except LiteRTRefusal as e:
        if unsized:
            raise cannot_run(graph, unsized, e.reason) from None
        refusal = e
    else:
        empty = [graph.main.tensors[t].name for t in graph.main.outputs if t in values and not values[t].size]
        if unsized and empty:
            raise cannot_run(graph, unsized, f"output '{empty[0]}' comes out empty")
        return values, None
    k = first_op(graph, refusal.op) if refusal.op else None
    if not k:
        raise refusal
    try:
        data = cut_before(graph, k)
    except (ValueError, KeyError, TypeError):   # what the builder cannot write (sparse constants...)
        raise refusal from None
    made = {t for op in graph.main.ops[:k] for t in op.outputs}
    run = run_tflite(graph, inputs, model_bytes=data, keep_all=True)
    ref = Run((t, x) for t, x in run.items() if t in made)
    ref.kernels, ref.lacks = run.kernels, run.lacks
    return ref, Cut(k, refusal.op, refusal.reason, data)


def onnx_feeds(result: ConversionResult, inputs: list[np.ndarray]) -> dict:
    """The ONNX model's inputs for the TFLite `inputs`: each in its ONNX layout (real values where the ONNX model
    takes a quantized input as float)."""
    sg, plan, trace = result.graph.main, result.plan, result.trace
    in_types = {i.name: i.type.tensor_type.elem_type for i in result.model.graph.input}
    feeds = {}
    for t, x in zip(sg.inputs, inputs):
        name = trace.tensor_values.get(t, [sg.tensors[t].name])[0]
        if name in in_types:
            feeds[name] = np.transpose(x, plan.perm(t, x.ndim))
            q = sg.tensors[t].quantization
            if in_types[name] == onnx.TensorProto.FLOAT and q is not None and np.issubdtype(x.dtype, np.integer):
                # A quantized input the ONNX model takes as real values (convert(float_io=True) or another tool)
                feeds[name] = ((feeds[name].astype(np.float32) - q.zero_points[0]) * q.scales[0]).astype(np.float32)
    return feeds


def _output_name(result: ConversionResult, t: int) -> str:
    out_names = {o.name for o in result.model.graph.output}
    sg = result.graph.main
    return next((n for n in result.trace.tensor_values.get(t, []) if n in out_names), sg.tensors[t].name)


def best_layout(sg, t: int, ref: np.ndarray, y: np.ndarray, rtol: float, perms):
    """compare_tensor in each layout of `perms` (the likeliest first) until one is within tolerance, else the
    closest: ((a, r, s, ok, steps, within), y in TFLite's layout, the perm). A square H == W == C tensor fits
    several layouts, and only the values can tell which one a model uses."""
    best = None
    for perm in perms:
        yy = np.transpose(y, L.inverse(perm))
        row = compare_tensor(sg, t, ref, yy, rtol)
        if best is None or row[3] and not best[0][3] or row[3] == best[0][3] and row[1] < best[0][1]:
            best = (row, yy, perm)
        if row[3]:
            break
    return best or ((float("inf"), float("inf"), 0.0, False, None, None), y, None)


def guessed_perms(shape, y: np.ndarray, guess=None) -> list:
    """The layouts `y` fits `shape` in, `guess` first (when it fits)."""
    from inspector.core.layout.fitting import fitting_perms
    perms = fitting_perms(shape, list(y.shape))
    return [guess] + [p for p in perms if p != guess] if guess in perms else perms


def _compare_all(result, ref, got, rtol, intermediates, output_perms, guess_layouts=False) -> Validation:
    """Rows for every output and (with intermediates) every mapped tensor; verdicts come later (_judge).
    `guess_layouts`: each intermediate in the layout its values fit best (a model without a trace of ours)."""
    sg, plan, trace = result.graph.main, result.plan, result.trace
    out_names = {o.name for o in result.model.graph.output}
    producers = sg.producers()
    out_errs, mid_errs, diffs = [], [], []
    for t in sg.outputs:
        name = _output_name(result, t)
        y = got.get(name)
        if y is None or t not in ref:
            out_errs.append(TensorError(name, t, name, float("inf"), float("inf"), 0.0, False, True))
            continue
        perms = output_perms.get(t) or [plan.outputs.get(t, plan.perm(t, sg.tensors[t].rank))]
        (a, r, s, ok, steps, within), y, perm = best_layout(sg, t, ref[t], y, rtol, perms)
        plan.outputs[t] = perm
        out_errs.append(TensorError(name, t, name, a, r, s, ok, True, producers.get(t), ref[t].shape, steps, within))
        if ref[t].dtype != bool and ref[t].shape == y.shape:
            diffs.append((y.astype(np.float64) - ref[t].astype(np.float64)).reshape(-1))
    if intermediates:
        for t in sorted(ref, key=lambda i: producers.get(i, -1)):
            names = trace.tensor_values.get(t)
            if not names or names[0] not in got or names[0] in out_names or t in sg.inputs:
                continue
            y, perm = got[names[0]], plan.perm(t, sg.tensors[t].rank)
            perms = guessed_perms(ref[t].shape, y, perm) if guess_layouts else [perm]
            (a, r, s, ok, steps, within), _, _ = best_layout(sg, t, ref[t], y, rtol, perms)
            mid_errs.append(TensorError(sg.tensors[t].name, t, names[0], a, r, s, ok, False, producers.get(t),
                                        ref[t].shape, steps, within))
    return Validation(out_errs, mid_errs, 0, rtol, diffs)


def typed(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy with value_info for every value shape inference can type, so ONNX Runtime can return it."""
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False)
    except Exception:                       # onnx raises its own error types; untyped values are then skipped
        return model


def _is_float(sg, e: TensorError) -> bool:
    return e.steps is None and sg.tensors[e.tensor].dtype.startswith("float")


def _needs_floor(sg, e: TensorError, rtol: float) -> bool:
    if e.steps is not None:
        return not e.ok
    return _is_float(sg, e) and noise.needs_floor(e.max_abs, e.scale, rtol * e.scale + ATOL)


def judge(graph: Graph, rows: list[TensorError], inputs, ref, rtol: float, seed: int, floor: bool | None,
          keep_all: bool, onnx_runs=None, announce=None, cut=None, fallback: bool = False) -> None:
    """Verdicts for compared rows, measuring the noise floor first when asked (or, with floor None, when it could
    change one): LiteRT's default vs reference kernels, LiteRT on moved inputs and, for outputs, `onnx_runs()`
    (ONNX Runtime at two optimisation levels, by ONNX name). With a `cut` (cut.Cut), LiteRT runs the cut model.
    `fallback`: `ref` is of LiteRT's default kernels (the reference ones cannot run the model), see noise.py."""
    sg = graph.main
    if floor or fallback or floor is None and any(_needs_floor(sg, e, rtol) for e in rows):
        if announce is not None:
            announce()
        _measure_floor(graph, rows, inputs, ref, seed, keep_all or cut is not None, onnx_runs,
                       cut.model if cut is not None else None, fallback)
    for e in rows:
        _judge(sg, e, rtol)


def _measure_floor(graph, rows, inputs, ref, seed, keep_all, onnx_runs, model_bytes=None, fallback=False) -> None:
    sg = graph.main
    from ai_edge_litert.interpreter import OpResolverType
    runs = []
    try:    # LiteRT's default kernels (XNNPACK's fused partitions hide their intermediates: builtins then); when
        # they are the reference already, XNNPACK's against the builtin ones (outputs only)
        kernels = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES if keep_all and not fallback else \
            OpResolverType.AUTO
        runs.append(run_tflite(graph, inputs, model_bytes, keep_all=keep_all and not fallback, resolver=kernels))
    except LiteRTRefusal:
        pass
    if any(x.dtype.kind == "f" for x in inputs):
        for draw in range(noise.DRAWS if any(e.is_output for e in rows) else 1):
            try:    # (the first draw keeps every tensor when asked; the others the outputs)
                runs.append(run_tflite(graph, noise.perturbed(inputs, seed, draw), model_bytes,
                                       keep_all=keep_all and draw == 0))
            except LiteRTRefusal:
                pass
    got, other = {}, {}
    if onnx_runs is not None and any(e.is_output for e in rows):
        try:
            got, other = onnx_runs()
        except InspectorError:
            pass
    for e in rows:
        t = e.tensor
        if t not in ref:                        # an output beyond a cut reference: nothing to measure
            continue
        q = quant_step(sg, t)
        if q is not None:
            default = runs[0].get(t) if runs else None
            if default is not None and default.shape == ref[t].shape:
                *_, worst, within = compare_steps(ref[t], default, *q)
                e.floor, e.floor_within = worst * (noise.FALLBACK if fallback else 1.0), within
            continue
        if not _is_float(sg, e):
            continue
        spreads = [noise.spread(ref[t], r.get(t)) for r in runs]
        if e.is_output:
            spreads.append(noise.spread(got.get(e.onnx_name), other.get(e.onnx_name)))
        e.floor, e.typical = noise.floor_of(*spreads), noise.typical_of(*spreads)
        if fallback and e.floor is not None:
            e.floor, e.typical = e.floor * noise.FALLBACK, e.typical * noise.FALLBACK


def _judge(sg, e: TensorError, rtol: float) -> None:
    if e.steps is not None:
        e.verdict = noise.step_verdict(e.ok, e.steps, e.floor)
    elif _is_float(sg, e):
        e.verdict, e.limit = noise.verdict(e.max_abs, e.scale, rtol * e.scale + ATOL, e.floor, e.typical)
    else:
        e.verdict = "ok" if e.ok else "fail"
    e.ok = e.verdict == "ok"


def headline(v: Validation) -> str:
    """The verdict and the measure it was decided by, in one line (CLI and window)."""
    if not v.outputs:
        return "fail: the outputs could not be compared"
    against = f"; against LiteRT's default kernels (its reference kernels lack {v.lacks})" \
        if getattr(v, "reference", "") == "default" else ""        # (a PairValidation has no such field)
    if v.cut is not None:
        return f"{verdict_of(v.outputs)}: {cut_summary(v)}{against}"
    stepped = [e for e in v.outputs if e.steps is not None]
    floated = [e for e in v.outputs if e.steps is None and e.limit is not None]
    exact = [e for e in v.outputs if e.steps is None and e.limit is None]
    parts = []
    if exact:
        worst = max(e.max_abs for e in exact)
        parts.append(f"integer outputs {'equal' if worst == 0 else f'differ by up to {worst:g}'}")
    if floated:
        w = max(floated, key=lambda e: e.max_rel if np.isfinite(e.max_rel) else np.inf)
        floor = f", floor {w.floor / w.scale:.2g}" if w.floor is not None and w.scale else ""
        parts.append(f"worst error {w.max_rel:.2g} of the output's scale (tolerance {v.rtol:g}{floor})")
    if stepped:
        w = max(stepped, key=lambda e: (e.steps or 0.0, -(e.within or 0.0)))
        floor = f", LiteRT's own kernels {w.floor:g}" if w.floor is not None else ""
        parts.append(f"worst {w.steps:g} quantization steps, {100 * (w.within or 0.0):.2f}% within {STEPS_OK:g} "
                     f"(rule: >= {100 * STEPS_SHARE:g}% within {STEPS_OK:g}, none beyond {STEPS_MAX:g}{floor})")
    return f"{verdict_of(v.outputs)}: " + "; ".join(parts) + against


def cut_summary(v: Validation) -> str:
    """What a comparison cut before an op LiteRT cannot run did compare, in one phrase."""
    c, mids = v.cut, v.intermediates
    assert c is not None, "a summary of a cut comparison"
    text = f"outputs not compared (LiteRT cannot run op {c.op}, {c.opcode}); "
    if not mids:
        return text + "no tensor before it could be compared"
    worst = max(mids, key=lambda e: e.max_rel if np.isfinite(e.max_rel) else np.inf)
    bad = v.first_bad()
    text += (f"{sum(e.ok for e in mids)} of {len(mids)} tensors before it ok, worst '{worst.name}' "
             f"{worst.max_rel:.2g} of its scale")
    return text + (f"; first bad: '{bad.name}' ({bad.verdict})" if bad is not None else "")


MAX_INPUT_LAYOUTS = 24          # input layout combinations tried for an ONNX model that does not record them


def values_by_name(graph: Graph, model: onnx.ModelProto) -> dict[int, list[str]]:
    """TFLite tensor -> the ONNX value of the same name (or name:0), as our converter and most others keep them."""
    made = {o for n in model.graph.node for o in n.output}
    out = {}
    for t in graph.main.tensors:
        name = next((n for n in (t.name, t.name + ":0") if n in made), None)
        if name is not None:
            out[t.index] = [name]
    return out


def validate_files(graph: Graph, onnx_path: str, seed: int = 0, batch: int | None = None,
                   rtol: float | None = None, floor: bool | None = None, mapper=None,
                   input_shapes: dict[str, tuple] | None = None) -> Validation:
    """Validate any ONNX model (ours or another converter's) against the TFLite model: I/O matched by name,
    then by position; each one's layout read from the model's `layout_inspector.io` entry, else every layout its
    shape fits is tried (inputs: each combination, at most MAX_INPUT_LAYOUTS; outputs: the best fit).
    When LiteRT cannot run an op, the reference is cut before it and every tensor before it that maps to an ONNX
    value is compared, in the layout its values fit: `mapper(graph, model)` -> {tensor: [ONNX values]} maps them
    (pairing.mapping.match for a model made elsewhere; by default values_by_name)."""
    import itertools

    from inspector.core.emit import io_layout
    from inspector.core.ir.errors import ModelLoadError
    from inspector.core.io.onnx_reader import load_proto, read_onnx
    from inspector.core.layout.fitting import fitting_perms
    from inspector.core.emit.result import ConversionResult, ConversionTrace
    from inspector.core.layout.plan import LayoutPlan
    read_onnx(onnx_path)                        # refuses hostile files (external data escaping the folder...)
    model = load_proto(onnx_path)               # through the same guards (onnx.load blocks on a FIFO)
    recorded = io_layout.read(model)
    sg = graph.main
    trace, io, choices = ConversionTrace(), [], {}
    for tfl, values, kind in ((sg.inputs, model.graph.input, "input"), (sg.outputs, model.graph.output, "output")):
        init = {i.name for i in model.graph.initializer}
        values = [v for v in values if v.name not in init]
        by_name = {v.name: v for v in values}
        for pos, t in enumerate(tfl):
            tensor = sg.tensors[t]
            vi = by_name.get(tensor.name) or by_name.get(tensor.name + ":0") or (
                values[pos] if pos < len(values) else None)
            if vi is None:
                raise ModelLoadError(onnx_path, f"no ONNX {kind} matches TFLite {kind} '{tensor.name}'")
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]
            perms = fitting_perms(tensor.dims, dims)
            if not perms:
                raise ModelLoadError(onnx_path, f"ONNX {kind} '{vi.name}' {dims} does not match TFLite "
                                                f"'{tensor.name}' {list(tensor.shape)} in any layout")
            row = {"kind": kind, "onnx": vi.name, "tflite": tensor.name}
            if recorded.get(vi.name) in perms:
                perms, row["layout"] = [recorded[vi.name]], "recorded"
            else:
                row["layout"] = "ambiguous" if len(perms) > 1 else "shape"
                if len(perms) > 1:
                    row["tried"] = [L.name(p) for p in perms]
            choices[t] = perms
            io.append(row)
            trace.tensor_values[t] = [vi.name]
    combos = list(itertools.islice(itertools.product(*(choices[t] for t in sg.inputs)), MAX_INPUT_LAYOUTS))
    aliases = {trace.tensor_values[t][0]: t for t in sg.inputs}
    inputs = checked_inputs(graph, seed, batch, False, resolve_shapes(graph, input_shapes, aliases))
    ref, cut = reference(graph, inputs, False)
    if cut is not None:                         # what precedes the op LiteRT cannot run, tensor by tensor
        check_budget(graph, batch, True)
        for t, values in (mapper or values_by_name)(graph, model).items():
            if t in ref and t not in trace.tensor_values and values:
                trace.tensor_values[t] = list(values[:1])
        model = typed(model)
    best = None
    for combo in combos:
        plan = LayoutPlan()
        plan.perms.update(zip(sg.inputs, combo))
        result = ConversionResult(graph=graph, plan=plan, model=model, trace=trace, categories={})
        v = validate(result, seed=seed, intermediates=cut is not None, batch=batch, rtol=rtol, floor=floor,
                     input_shapes=input_shapes, _reference=(inputs, ref, cut), _output_perms={t: choices[t] for t in sg.outputs},
                     _guess_layouts=True)
        worst = [-max((e.max_rel for e in rows), default=0.0) for rows in (v.outputs, v.intermediates)]
        score = (v.ok, worst[0], all(e.ok for e in v.intermediates), worst[1])
        if best is None or score > best[0]:
            best = (score, v, plan)
        if score[0] or cut is not None and score[2]:
            break
    assert best is not None, "at least one input layout is tried"
    _, v, plan = best
    for row, t in zip(io, sg.inputs + sg.outputs):
        row["perm"] = list(plan.outputs.get(t, plan.perms.get(t, ())))
    v.io = io
    return v
