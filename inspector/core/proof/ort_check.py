"""Before a converted model is written: can ONNX Runtime load it and run it? The ONNX checker accepts graphs that
ONNX Runtime refuses (a ConvTranspose bias of shape [1, 1, 1, C], a kernel missing for a type), and a file that
cannot run is worse than none. Session creation with ONNX Runtime's default optimisations, then one run on zeros
when the inputs are small and the graph has no Loop (zeros can make a WHILE condition hold for ever); session
creation is most of the check's cost."""
from __future__ import annotations

import numpy as np

from inspector.core.ir.errors import ConversionError

RUN_LIMIT = 1 << 22           # input elements up to which the model is also run once (on zeros)
_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
          "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(int16)": np.int16, "tensor(uint16)": np.uint16,
          "tensor(int32)": np.int32, "tensor(int64)": np.int64, "tensor(uint32)": np.uint32,
          "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_}


def ort_check(model, sizes: dict[str, tuple[int, ...]] | None = None) -> str | None:
    """Raise ConversionError with ONNX Runtime's reason if it cannot load or run the model (an onnx.ModelProto or
    its bytes); a note (str) when only its graph optimiser refuses it (the model runs with optimisations off), else
    None.

    `sizes`: per input name, the shape whose dims stand in for its dynamic ones in the run on zeros (the file's
    stored sizes; 1 without it). A run that fails only with dynamic dims filled in is a note, not a refusal: the
    model loaded, and sizes of our choosing may be ones it cannot take (a frame length longer than the signal)."""
    if isinstance(model, bytes):
        import onnx
        data, model = model, onnx.load_from_string(model)
    else:
        data = model.SerializeToString()
    return check_bytes(data, not has_loop(model.graph), sizes)


def _utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
        return True
    except UnicodeEncodeError:                      # a file name's undecodable bytes (surrogate escapes)
        return False


def check_bytes(data: bytes | str, run: bool, sizes: dict[str, tuple[int, ...]] | None = None) -> str | None:
    """ort_check on the serialised model (its bytes or its file's path); `run`: also run it once on zeros (not for
    a graph with a Loop: zeros can make a WHILE condition hold for ever). NumPy and ONNX Runtime only (ort_ahead's
    child imports no ONNX)."""
    import onnxruntime as ort
    if isinstance(data, str) and not _utf8(data):    # ONNX Runtime takes a path as UTF-8 text only: such a name's
        with open(data, "rb") as f:                  # model goes in as its bytes (one copy, for a rare name)
            data = f.read()
    failure, chosen = None, None
    for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        opts = ort.SessionOptions()
        opts.graph_optimization_level, opts.intra_op_num_threads, opts.log_severity_level = level, 1, 4
        try:
            sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
            feeds, chosen = _zeros(sess, sizes or {}) if run else (None, None)
            if feeds is not None:
                sess.run(None, feeds)
            return None if failure is None else \
                f"ONNX Runtime's graph optimiser refuses the model ({failure}); it runs with optimisations off"
        except Exception as e:                  # onnxruntime raises its own untyped errors
            failure = _first_line(e)
    if chosen:
        return (f"ONNX Runtime loads the model, but one run on zeros with its dynamic dimensions at {chosen} failed "
                f"({failure}): check it at the sizes it is meant for")
    raise ConversionError(f"ONNX Runtime cannot run the converted model: {failure}")


def input_sizes(result) -> dict[str, tuple[int, ...]]:
    """Each graph input's stored TFLite shape in its ONNX layout, by ONNX name (ort_check's `sizes`)."""
    sg = result.graph.main
    return {sg.tensors[t].name or f"input_{t}": tuple(sg.tensors[t].shape[a] for a in result.plan.perm(
        t, sg.tensors[t].rank)) for t in sg.inputs}


def note_check(session, note: str | None) -> None:
    if note:
        session.notes.append(f"warning: {note}")


def has_loop(graph) -> bool:
    return any(n.op_type in ("Loop", "Scan") or any(has_loop(a.g) for a in n.attribute if a.type == a.GRAPH)
               for n in graph.node)


def _zeros(sess, sizes: dict) -> tuple[dict | None, str | None]:
    """Zero inputs, dynamic dims taken from `sizes` (else 1), or None when running would not be cheap or the inputs
    are not tensors; and which dynamic dims were chosen ("" when none)."""
    feeds: dict[str, np.ndarray] = {}
    total, chosen = 0, []
    for i in sess.get_inputs():
        if i.type not in _TYPES:
            return None, None
        known = sizes.get(i.name, ())
        shape = [d if isinstance(d, int) and d >= 0 else
                 known[k] if len(known) == len(i.shape) and known[k] > 0 else 1 for k, d in enumerate(i.shape)]
        if any(not (isinstance(d, int) and d >= 0) for d in i.shape):
            chosen.append(f"{i.name} {shape}")
        total += int(np.prod(shape))
        feeds[i.name] = np.zeros(shape, _TYPES[i.type])
    return (feeds if total <= RUN_LIMIT else None), ", ".join(chosen)


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    # ONNX Runtime prefixes its messages with "[ONNXRuntimeError] : 1 : FAIL : "; the rest is the reason.
    line = text.splitlines()[0] if text else type(e).__name__
    return line.split(" : ", 3)[-1] if line.startswith("[ONNXRuntimeError]") else line
