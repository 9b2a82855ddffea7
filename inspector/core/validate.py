"""Proof: run the TFLite model (ai-edge-litert, reference kernels) and the ONNX model (onnxruntime) on the same
seeded inputs and compare every output, and every intermediate tensor the trace maps.

LiteRT runs its reference kernels (BUILTIN_REF), which agree more closely with ONNX Runtime than the optimized
builtin kernels on deep models (EfficientNetB0-fp16 output: 3.8e-4 vs 1.1e-3 of its scale) and are fast enough
(NASNet: 0.6 s); it falls back to the builtin kernels for the few ops the reference resolver lacks.
Errors are judged relative to each tensor's scale (its largest reference magnitude), because LiteRT's kernels
and ONNX Runtime's legitimately differ in the last bits, more so deep in a network.
"""
from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field

import numpy as np
import onnx

from . import layout as L
from .errors import InspectorError
from .graph import Graph
from .result import ConversionResult

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
    ok: bool
    is_output: bool = False
    op: int | None = None           # producing TFLite op (for plotting in topological order)
    shape: tuple = ()
    steps: float | None = None      # quantized tensors: largest error in quantization steps
    within: float | None = None     # quantized tensors: share of elements within STEPS_OK steps


@dataclass
class Validation:
    outputs: list[TensorError]
    intermediates: list[TensorError] = field(default_factory=list)
    seed: int = 0
    rtol: float = 0.0
    output_diffs: list[np.ndarray] = field(default_factory=list, repr=False)   # onnx - tflite per output

    @property
    def ok(self) -> bool:
        return all(e.ok for e in self.outputs)

    def first_bad(self) -> TensorError | None:
        """The earliest intermediate (in op order) whose error exceeds the tolerance: where to look first."""
        bad = [e for e in self.intermediates if not e.ok]
        return min(bad, key=lambda e: (e.op if e.op is not None else -1)) if bad else None

    def to_json(self) -> dict:
        def row(e):
            return {"name": e.name, "max_abs": e.max_abs, "max_rel": e.max_rel, "ok": e.ok}
        return {"outputs": [row(e) for e in self.outputs], "ok": self.ok,
                "intermediates": [dict(asdict(e), shape=list(e.shape)) for e in self.intermediates]}


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


# Ops that index a table with an integer operand: (index operand, table operand, the table's axis it indexes).
# An index out of the table's range is an error in LiteRT, so such inputs are drawn from [0, size).
_INDEXING = {"EMBEDDING_LOOKUP": (0, 1, 0), "GATHER": (1, 0, None), "GATHER_ND": (1, 0, None),
             "ONE_HOT": (0, None, None), "SCATTER_ND": (0, 2, None)}
# Ops that carry integer values through unchanged, so an index can be traced back to a graph input.
_PASS_THROUGH = {"CAST", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "IDENTITY", "TRANSPOSE"}


def index_bounds(sg) -> dict[int, int]:
    """Graph input tensor -> exclusive upper bound of the values it may take, for inputs that index a table."""
    producers = sg.producers()
    bounds: dict[int, int] = {}
    for op in sg.ops:
        if op.opcode not in _INDEXING or op.custom:
            continue
        at, table, axis = _INDEXING[op.opcode]
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
        while t in producers and sg.ops[producers[t]].opcode in _PASS_THROUGH:
            t = sg.ops[producers[t]].inputs[0]
        if t in sg.inputs and size > 0:
            bounds[t] = min(bounds.get(t, size), size)
    return bounds


def make_inputs(graph: Graph, seed: int = 0, batch: int | None = None) -> list[np.ndarray]:
    """Seeded inputs in TFLite layout; floats in [-1, 1], integers in a small range (indices within the table
    they index), bools random."""
    rng = np.random.default_rng(seed)
    sg = graph.main
    bounds = index_bounds(sg)
    out = []
    for t in (sg.tensors[i] for i in sg.inputs):
        shape = list(t.shape)
        if batch is not None and t.shape_signature is not None and t.shape_signature and t.shape_signature[0] < 0:
            shape[0] = batch
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


def run_tflite(graph: Graph, inputs, model_bytes: bytes | None = None, keep_all: bool = True, resolver=None):
    """Outputs and (with keep_all) every tensor of the main subgraph, by tensor index; in the reference kernels
    unless another `resolver` (an OpResolverType) is asked for."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    def make(resolver, keep):
        kwargs = dict(experimental_op_resolver_type=resolver, experimental_preserve_all_tensors=keep)
        it = Interpreter(model_content=model_bytes, **kwargs) if model_bytes else Interpreter(graph.path, **kwargs)
        for d, x in zip(it.get_input_details(), inputs):
            if list(d["shape"]) != list(x.shape):
                it.resize_tensor_input(d["index"], x.shape)
        it.allocate_tensors()
        return it

    try:
        interp = make(resolver or OpResolverType.BUILTIN_REF, keep_all)
    except RuntimeError as e:
        if "Didn't find op" in str(e):       # the reference resolver lacks a few kernels (CEIL, ROUND, ELU...)
            interp = make(OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, keep_all)
        elif "custom op" not in str(e):
            raise
        else:
            # MediaPipe's custom ops exist only in the XNNPACK delegate; what it fuses cannot be observed, so
            # only the outputs are compared then.
            interp, keep_all = make(OpResolverType.AUTO, False), False
    details = interp.get_input_details()
    for d, x in zip(details, inputs):
        interp.set_tensor(d["index"], x)
    interp.invoke()
    values = {}
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
    return [_compare(sg, t, ref[t], default[t], 0.0)[4] if t in ref and t in default else None for t in sg.outputs]


def run_onnx(model: onnx.ModelProto, feeds: dict, extra: list[str] = (), threads: int = 1):
    import onnxruntime as ort
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    vi = {v.name: v for v in m.graph.value_info}
    for name in extra:
        if name not in have and name in vi:
            m.graph.output.append(vi[name])
    # Graph optimisations stay off when intermediates are read, so they are the values the converter wrote;
    # ONNX Runtime's optimiser also refuses some valid graphs (Resize with `axes` between Transposes), so a
    # refusal is retried without it before it is reported.
    levels = [ort.GraphOptimizationLevel.ORT_DISABLE_ALL] if extra else \
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


def _compare(sg, t, ref, got, rtol):
    """compare() for float and integer tensors, compare_steps() for quantized ones: (a, r, s, ok, steps, within)."""
    q = quant_step(sg, t)
    if q is not None:
        return compare_steps(ref, got, *q)
    return (*compare(ref, got, rtol), None, None)


def validate(result: ConversionResult, seed: int = 0, intermediates: bool = True, batch: int | None = None,
             rtol: float | None = None, cancel: threading.Event | None = None, progress=None) -> Validation:
    """Compare the converted model with the TFLite interpreter; `cancel`/`progress` serve the GUI's worker."""
    graph, plan, trace = result.graph, result.plan, result.trace
    sg = graph.main
    rtol = RTOL[model_kind(graph)] if rtol is None else rtol
    inputs = make_inputs(graph, seed, batch)

    def step(msg, frac):
        if cancel is not None and cancel.is_set():
            raise Cancelled("validation cancelled")
        if progress is not None:
            progress(msg, frac)

    step("running TFLite", 0.1)
    ref = run_tflite(graph, inputs, keep_all=intermediates)
    step("running ONNX Runtime", 0.5)
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
    out_names = {o.name for o in result.model.graph.output}
    extra = []
    if intermediates:
        extra = [trace.tensor_values[t][0] for t in ref if t in trace.tensor_values]
    got = run_onnx(result.model, feeds, extra)
    step("comparing", 0.9)
    producers = sg.producers()
    out_errs, mid_errs, diffs = [], [], []
    for t in sg.outputs:
        name = next((n for n in trace.tensor_values.get(t, []) if n in out_names), sg.tensors[t].name)
        y = got.get(name)
        perm = plan.outputs.get(t, plan.perm(t, sg.tensors[t].rank))
        if y is None or t not in ref:
            out_errs.append(TensorError(name, t, name, float("inf"), float("inf"), 0.0, False, True))
            continue
        y = np.transpose(y, L.inverse(perm))
        a, r, s, ok, steps, within = _compare(sg, t, ref[t], y, rtol)
        out_errs.append(TensorError(name, t, name, a, r, s, ok, True, producers.get(t), ref[t].shape, steps, within))
        if ref[t].dtype != bool and ref[t].shape == y.shape:
            diffs.append((y.astype(np.float64) - ref[t].astype(np.float64)).reshape(-1))
    if intermediates:
        for t in sorted(ref, key=lambda i: producers.get(i, -1)):
            names = trace.tensor_values.get(t)
            if not names or names[0] not in got or names[0] in out_names:
                continue
            y = np.transpose(got[names[0]], L.inverse(plan.perm(t, sg.tensors[t].rank)))
            a, r, s, ok, steps, within = _compare(sg, t, ref[t], y, rtol)
            mid_errs.append(TensorError(sg.tensors[t].name, t, names[0], a, r, s, ok, False, producers.get(t),
                                        ref[t].shape, steps, within))
    step("done", 1.0)
    return Validation(out_errs, mid_errs, seed, rtol, diffs)


def io_perm(tfl_shape, onnx_dims) -> tuple[int, ...] | None:
    """The layout an ONNX graph input/output has relative to TFLite's, read off the shapes (None: no fit)."""
    rank = len(tfl_shape)
    if len(onnx_dims) != rank:
        return None
    for p in (L.identity(rank), L.channels_first(rank)):
        if all(d in (-1, s) for d, s in zip(onnx_dims, L.apply(tfl_shape, p))):
            return p
    return None


def validate_files(graph: Graph, onnx_path: str, seed: int = 0, batch: int | None = None,
                   rtol: float | None = None) -> Validation:
    """Validate any ONNX model (ours or another converter's) against the TFLite model: I/O matched by name,
    then by position; each one's layout read from its shape."""
    from .errors import ModelLoadError
    from .onnx_reader import load_proto, read_onnx
    from .result import ConversionResult, ConversionTrace, LayoutPlan
    read_onnx(onnx_path)                        # refuses hostile files (external data escaping the folder...)
    model = load_proto(onnx_path)               # through the same guards (onnx.load blocks on a FIFO)
    sg = graph.main
    plan, trace = LayoutPlan(), ConversionTrace()
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
            perm = io_perm(tensor.shape, dims)
            if perm is None:
                raise ModelLoadError(onnx_path, f"ONNX {kind} '{vi.name}' {dims} does not match TFLite "
                                                f"'{tensor.name}' {list(tensor.shape)} in any layout")
            plan.perms[t] = perm
            if kind == "output":
                plan.outputs[t] = perm
            trace.tensor_values[t] = [vi.name]
    result = ConversionResult(graph=graph, plan=plan, model=model, trace=trace, categories={})
    return validate(result, seed=seed, intermediates=False, batch=batch, rtol=rtol)
