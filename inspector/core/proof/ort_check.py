"""Before a converted model is written: can ONNX Runtime load it and run it? The ONNX checker accepts graphs that
ONNX Runtime refuses (a ConvTranspose bias of shape [1, 1, 1, C], a kernel missing for a type), and a file that
cannot run is worse than none. Session creation with ONNX Runtime's default optimisations, then one run on zeros
when the inputs are small and the graph has no Loop (zeros can make a WHILE condition hold for ever); session
creation is most of the check's cost."""
from __future__ import annotations

import numpy as np
import onnx

from inspector.core.ir.errors import ConversionError

RUN_LIMIT = 1 << 22           # input elements up to which the model is also run once (on zeros)
_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
          "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(int16)": np.int16, "tensor(uint16)": np.uint16,
          "tensor(int32)": np.int32, "tensor(int64)": np.int64, "tensor(uint32)": np.uint32,
          "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_}


def ort_check(model: onnx.ModelProto | bytes) -> str | None:
    """Raise ConversionError with ONNX Runtime's reason if it cannot load or run the model; a note (str) when only
    its graph optimiser refuses it (the model runs with optimisations off), else None."""
    import onnxruntime as ort
    if isinstance(model, bytes):
        data, model = model, onnx.load_from_string(model)
    else:
        data = model.SerializeToString()
    run = not _has_loop(model.graph)
    note, failure = None, None
    for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        opts = ort.SessionOptions()
        opts.graph_optimization_level, opts.intra_op_num_threads, opts.log_severity_level = level, 1, 4
        try:
            sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
            feeds = _zeros(sess) if run else None
            if feeds is not None:
                sess.run(None, feeds)
            return note
        except Exception as e:                  # onnxruntime raises its own untyped errors
            failure = _first_line(e)
            note = f"ONNX Runtime's graph optimiser refuses the model ({failure}); it runs with optimisations off"
    raise ConversionError(f"ONNX Runtime cannot run the converted model: {failure}")


def check_session(session, skip: bool = False) -> None:
    """ort_check on a Session's converted model (convert's last step before writing); a note joins its notes."""
    note = None if skip else ort_check(session.result.model)
    if note:
        session.notes.append(f"warning: {note}")


def _has_loop(graph) -> bool:
    return any(n.op_type in ("Loop", "Scan") or any(_has_loop(a.g) for a in n.attribute if a.type == a.GRAPH)
               for n in graph.node)


def _zeros(sess) -> dict | None:
    """Zero inputs (dynamic dimensions 1), or None when running would not be cheap or the inputs are not tensors."""
    feeds, total = {}, 0
    for i in sess.get_inputs():
        if i.type not in _TYPES:
            return None
        shape = [d if isinstance(d, int) and d >= 0 else 1 for d in i.shape]
        total += int(np.prod(shape))
        feeds[i.name] = np.zeros(shape, _TYPES[i.type])
    return feeds if total <= RUN_LIMIT else None


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    # ONNX Runtime prefixes its messages with "[ONNXRuntimeError] : 1 : FAIL : "; the rest is the reason.
    line = text.splitlines()[0] if text else type(e).__name__
    return line.split(" : ", 3)[-1] if line.startswith("[ONNXRuntimeError]") else line
