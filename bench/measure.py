"""Measurements on one model: our conversion, the weights floor, node counts, ONNX Runtime and LiteRT run times."""
from __future__ import annotations

import itertools
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper


def adaptive_time(fn, min_runs: int = 10, budget: float = 0.5, max_runs: int = 200) -> float:
    """Median seconds per call for inference: two warm-ups, then at least `min_runs` calls or `budget` seconds."""
    fn()
    fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < max_runs and (len(times) < min_runs or time.perf_counter() - start < budget):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def ours_once(model: Path, out: Path):
    """What 'ours in-process' times: read the .tflite, convert without the checker, serialise and write (in pieces,
    as our export writes: onnx_bytes.pieces)."""
    from inspector.core.emit.convert import convert
    from inspector.core.io.onnx_bytes import pieces
    from inspector.core.io.tflite_reader import read_tflite
    result = convert(read_tflite(str(model)), check=False)
    with open(out, "wb") as f:
        for piece in pieces(result.model)[1]:
            f.write(piece)
    return result


def ours_as_float(model: Path, out: Path) -> bool:
    """A dynamic-range model converted with --dynamic-as-float into `out`; False (nothing written) when the model
    has no hybrid op (float input, int8 weights)."""
    from inspector.core.emit.convert import convert
    from inspector.core.emit.ops.table import load_all
    from inspector.core.io.tflite_reader import read_tflite
    graph, specs = read_tflite(str(model)), load_all()
    if not any(op.opcode in specs and specs[op.opcode].hybrid and len(op.inputs) > 1 and op.inputs[1] >= 0
               and sg.tensors[op.inputs[0]].dtype == "float32" and sg.tensors[op.inputs[1]].dtype == "int8"
               for sg in graph.subgraphs for op in sg.ops):
        return False
    out.write_bytes(convert(graph, check=False, dynamic_as_float=True).model.SerializeToString())
    return True


def ours_breakdown(model: Path) -> dict[str, float]:
    """One run split into read / convert / serialise / checker (seconds), to show where the time goes."""
    from inspector.core.emit.convert import check_model, convert
    from inspector.core.io.tflite_reader import read_tflite
    t0 = time.perf_counter()
    g = read_tflite(str(model))
    t1 = time.perf_counter()
    r = convert(g, check=False)
    t2 = time.perf_counter()
    r.model.SerializeToString()
    t3 = time.perf_counter()
    try:
        check_model(r.model)
    except Exception:                                # the checker's verdict is reported elsewhere
        pass
    t4 = time.perf_counter()
    return {"read": t1 - t0, "convert": t2 - t1, "serialise": t3 - t2, "check": t4 - t3}


def floor_plan(graph) -> list[tuple]:
    """Where each constant's bytes are in the file, for weights_floor: (offset, dtype, shape, widen) per constant
    whose data our reader left as a view of the file, (None, array, None, widen) for the few it had to decode
    (sparse ones). `widen`: a float16 weight a DEQUANTIZE reads, float32 in a converter's output (ours keeps it
    float16 only with --keep-fp16), so the floor widens it too."""
    plan = []
    for sg in graph.subgraphs:
        widened = {op.inputs[0] for op in sg.ops if op.opcode == "DEQUANTIZE" and op.inputs}
        for t in sg.tensors:
            if t.data is None or t.dtype in ("string", "resource", "variant"):
                continue
            widen = t.dtype == "float16" and t.index in widened
            root = t.data
            while isinstance(root.base, np.ndarray):
                root = root.base
            if isinstance(root.base, (bytes, bytearray)) and t.data.flags.c_contiguous:
                start = np.frombuffer(root.base, np.uint8).ctypes.data
                plan.append((t.data.ctypes.data - start, t.data.dtype, t.data.shape, widen))
            else:
                plan.append((None, t.data, None, widen))
    return plan


def weights_floor(path: Path, plan: list[tuple], out: Path) -> None:
    """The least any converter must do with the weights, with NumPy and protobuf alone: read the file, view each
    constant in it, transpose rank-4 ones NHWC->NCHW, serialise every constant as an initializer, write the file."""
    buf = Path(path).read_bytes()
    inits = []
    for k, (off, dtype, shape, widen) in enumerate(plan):
        if off is None:
            arr = dtype
        else:
            arr = np.frombuffer(buf, dtype, count=int(np.prod(shape, dtype=np.int64)), offset=off).reshape(shape)
        if widen:
            arr = arr.astype(np.float32)
        arr = np.ascontiguousarray(np.transpose(arr, (0, 3, 1, 2))) if arr.ndim == 4 else arr
        inits.append(numpy_helper.from_array(arr, f"w{k}"))
    m = helper.make_model(helper.make_graph([], "floor", [], [], inits))
    out.write_bytes(m.SerializeToString())


def ours_and_floor(model: Path, work: Path, runs: int = 5, with_ours: bool = True) -> dict:
    """Ours (ours_once) and the weights floor timed in pairs, after a warm-up of each: ours then the floor, then
    the floor then ours, and so on (runs_for's number of pairs). On a shared machine the load comes and goes within
    seconds; two medians taken one after the other let it land on one side only, a pair's two runs share it.
    Returns {ours, floor: medians (s), ratio: the median of the pairs' ours/floor, times}; `with_ours` False (a
    model ours does not convert): the floor alone."""
    from peer_driver import no_gc, runs_for
    from inspector.core.io.tflite_reader import read_tflite
    plan = floor_plan(read_tflite(str(model)))
    sides = {"floor": lambda: weights_floor(model, plan, work / "pair-floor.onnx")}
    if with_ours:
        sides["ours"] = lambda: ours_once(model, work / "pair-ours.onnx")
    warmup = 0.0
    for fn in sides.values():
        t = time.perf_counter()
        fn()
        warmup += time.perf_counter() - t
    times: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    with no_gc():
        for k in range(runs_for(warmup, runs)):
            for name in order if k % 2 else order[::-1]:
                t = time.perf_counter()
                sides[name]()
                times[name].append(time.perf_counter() - t)
    out: dict = {name: statistics.median(ts) for name, ts in times.items()}
    if with_ours:
        out["ratio"] = statistics.median(o / f for o, f in zip(times["ours"], times["floor"]))
    out["times"] = times
    return out


HWM = ("import re as _re, resource as _rs; print('VmHWM', _re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status')"
       ".read()).group(1), _rs.getrusage(_rs.RUSAGE_CHILDREN).ru_maxrss)")


def peak_memory(code: str, argv: list[str]) -> tuple[int | None, str | None, int | None]:
    """Peak resident memory (bytes) of a fresh Python process running `code` (argv in sys.argv[1:]), as the process
    itself reads it at its end (VmHWM: its own high-water mark since exec; wait4's ru_maxrss would start from the
    RSS of this process, which forked it); its error line or None; and the largest peak of the children it waited
    for (the CLI's run-check child, forked when the process was small), or None without any."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", code + "\n" + HWM, *argv], capture_output=True, text=True,
                          timeout=1800)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("VmHWM ")), None)
    if proc.returncode or line is None:
        return None, f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:180]}", None
    _, own, children = line.split()
    return int(own) * 1024, None, int(children) * 1024 or None


def big_model(path: Path, seed: int = 0) -> Path:
    """A synthetic model of about 1.1 GB of float32 weights (issue 33's peak-memory case), generated here, never
    kept in the repo: seven 3x3 convolutions of 1024 channels on a 3x5 map (264 MB, transposed to OIHW by a
    converter), then FULLY_CONNECTED layers 1024 -> 8192 -> 8192 -> 8192 -> 8192 -> 10 (838 MB)."""
    from inspector.core.io.tflite_builder import ModelBuilder
    rng = np.random.default_rng(seed)

    def w(*shape):
        return (rng.random(shape, dtype=np.float32) - 0.5) * np.float32(2.0 / np.sqrt(np.prod(shape[1:])))

    b = ModelBuilder()
    x = b.input("x", [1, 3, 5, 1024])
    for k in range(7):
        y = b.tensor(f"conv{k}", [1, 3, 5, 1024])
        b.op("CONV_2D", [x, b.const(f"conv{k}_w", w(1024, 3, 3, 1024)), b.const(f"conv{k}_b", w(1024))], [y],
             {"padding": "SAME", "fused_activation_function": "RELU"})
        x = y
    h = b.tensor("flat", [15, 1024])
    b.op("RESHAPE", [x, b.const("flat_shape", np.array([15, 1024], np.int32))], [h])
    for k, (n_in, n_out) in enumerate([(1024, 8192), (8192, 8192), (8192, 8192), (8192, 8192), (8192, 10)]):
        y = b.tensor(f"fc{k}", [15, n_out])
        b.op("FULLY_CONNECTED", [h, b.const(f"fc{k}_w", w(n_out, n_in)), b.const(f"fc{k}_b", w(n_out))], [y],
             {"fused_activation_function": "RELU" if n_out > 10 else "NONE"})
        h = y
    b.output(h)
    path.write_bytes(b.build())
    return path


def node_counts(path: Path) -> tuple[int, int]:
    """(all nodes, Transpose nodes) including nested subgraphs."""
    m = onnx.load(str(path), load_external_data=False)
    total = transposes = 0
    stack = [m.graph]
    while stack:
        g = stack.pop()
        for n in g.node:
            total += 1
            transposes += n.op_type == "Transpose"
            stack.extend(a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
            stack.extend(a.graphs for a in n.attribute if a.type == onnx.AttributeProto.GRAPHS)
    return total, transposes


# --- inputs ----------------------------------------------------------------------------------------------
def tflite_inputs(model: Path, seed: int = 0) -> list[tuple[str, np.ndarray]]:
    """One random input per TFLite graph input (shape_signature -1 -> the interpreter's 1)."""
    interp = _litert(model)
    rng = np.random.default_rng(seed)
    feeds = []
    for d in interp.get_input_details():
        shape, dt = tuple(int(s) for s in d["shape"]), np.dtype(d["dtype"])
        if dt.kind == "f":
            x = rng.standard_normal(shape).astype(dt)
        elif dt == np.bool_:
            x = rng.integers(0, 2, shape).astype(bool)
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            lo, hi = (max(info.min, -128), min(info.max, 127)) if dt.itemsize == 1 else (0, 4)
            x = rng.integers(lo, hi + 1, shape).astype(dt)
        else:
            raise ValueError(f"input type {dt} is not generated by the bench")
        feeds.append((d["name"], x))
    return feeds


def _litert(model: Path):
    import warnings
    from ai_edge_litert.interpreter import Interpreter
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        interp = Interpreter(model_path=str(model), num_threads=1)
    interp.allocate_tensors()
    return interp


def litert_time(model: Path, feeds) -> float:
    interp = _litert(model)
    for d, (_, x) in zip(interp.get_input_details(), feeds):
        interp.set_tensor(d["index"], x)
    return adaptive_time(interp.invoke)


def _adapt(x: np.ndarray, dims: list) -> np.ndarray:
    """x (TFLite layout) in the ONNX input's layout: as is when shapes agree, else the channels-first perm,
    else any permutation whose shape matches (symbolic dims match anything)."""
    fits = lambda shape: len(shape) == len(dims) and all(d is None or d in (-1, s) for d, s in zip(dims, shape))
    if fits(x.shape):
        return x
    r = x.ndim
    first = (0, r - 1, *range(1, r - 1)) if r >= 3 else None
    for perm in ([first] if first else []) + list(itertools.permutations(range(r))):
        if fits(tuple(x.shape[p] for p in perm)):
            return np.ascontiguousarray(np.transpose(x, perm))
    raise ValueError(f"no layout of input {x.shape} fits ONNX input {dims}")


ONNX_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
              "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(int32)": np.int32,
              "tensor(int64)": np.int64, "tensor(bool)": np.bool_}


def ort_session(path: Path, optimized_to: Path | None = None):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if optimized_to is not None:             # ORT's own transpose optimiser may add or remove Transposes
        so.optimized_model_filepath = str(optimized_to)
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def ort_optimized_transposes(path: Path) -> int:
    """Transposes left in the graph ONNX Runtime runs after its optimisations (the saved optimised model)."""
    out = path.with_name(path.stem + ".ort-optimized.onnx")
    ort_session(path, out)
    try:
        return node_counts(out)[1]
    finally:
        out.unlink(missing_ok=True)


def layout_facts(model: Path) -> dict:
    """Issue 15's facts of our conversion: `inputs_kept` (inputs whose ONNX shape is their TFLite shape, inputs our
    planner found channels-first already) and `plan` (its Transposes, lower bound, proven or not, and how)."""
    from inspector.core.emit.convert import convert
    from inspector.core.io.tflite_reader import read_tflite
    result = convert(read_tflite(str(model)), check=False)
    sg = result.graph.main
    cf = [t for t, why in result.plan.io_rules.items() if t in sg.inputs and "already channels-first" in why]
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in result.model.graph.input}
    kept = sum(dims.get(sg.tensors[t].name) == list(sg.tensors[t].shape) for t in cf)
    plans = [result.plan.optimality] + [plan.optimality for plan, _ in result.subgraphs.values()]
    plan = result.plan.optimality.to_dict()
    plan["proven_optimal"] = all(o is None or o.proven for o in plans)      # nested subgraphs' plans too
    return {"inputs_kept": (kept, len(cf)), "plan": plan}


def ort_runner(path: Path, feeds):
    """A no-argument call running one output on the same input values (in its own input layout), one thread."""
    sess = ort_session(path)
    ins = sess.get_inputs()
    if len(ins) != len(feeds):
        raise ValueError(f"{len(ins)} ONNX inputs for {len(feeds)} TFLite inputs")
    by_name = {n: x for n, x in feeds}
    ordered = [by_name.get(i.name, by_name.get(i.name.split(":")[0])) for i in ins]
    if any(x is None for x in ordered):
        ordered = [x for _, x in feeds]
    feed = {}
    for i, x in zip(ins, ordered):
        dims = [d if isinstance(d, int) else None for d in i.shape]
        x = _adapt(x, dims)
        want = ONNX_TYPES.get(i.type)               # e.g. float I/O where a peer dequantized a uint8 model
        feed[i.name] = x.astype(want) if want is not None and x.dtype != want else x
    run = lambda: sess.run(None, feed)          # noqa: E731
    run()                                       # fail here, not in the timed rounds
    return run


def interleaved_times(runners: dict, min_runs: int = 10, budget: float = 1.0, max_runs: int = 200) -> dict:
    """Median seconds per call of each runner, timed in alternating rounds (A B C A B C ...) after two warm-ups:
    timing one output after the other let the CPU's state drift between them (single-node models showed 10-15 %
    between identical graphs)."""
    for fn in runners.values():
        fn()
        fn()
    times: dict = {k: [] for k in runners}
    start = time.perf_counter()
    rounds = 0
    while rounds < max_runs and (rounds < min_runs or time.perf_counter() - start < budget):
        for k, fn in runners.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
        rounds += 1
    return {k: statistics.median(v) for k, v in times.items()}
