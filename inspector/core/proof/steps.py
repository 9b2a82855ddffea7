"""Streaming models over several calls: LiteRT keeps its variables in one interpreter, the ONNX model gets each
step's `state_out:*` back as `state:*`, and every call is compared."""
from __future__ import annotations

import numpy as np

from inspector.core.emit.result import ConversionResult, ConversionTrace
from inspector.core.ir.graph import Graph
from inspector.core.layout.plan import LayoutPlan

from .validate import (RTOL, Validation, _compare_all, _refusal, checked_inputs, judge, model_kind, onnx_feeds,
                       run_onnx, validate_files)


def validate_steps(result: ConversionResult, steps: int, seed: int = 0,
                   rtol: float | None = None) -> list[Validation]:
    """A streaming model over `steps` calls: LiteRT keeps its variables in one interpreter, the ONNX model gets
    each step's `state_out:*` back as `state:*` (its first step starts from the state inputs' initializers).
    Step k's inputs are those of seed + k; outputs are judged against the tolerance (the floor would need every
    other run to carry its own state)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    graph, sg = result.graph, result.graph.main
    rtol = RTOL[model_kind(graph)] if rtol is None else rtol
    pairs = [(s["input"], s["output"]) for s in result.state]
    interp = None
    for resolver in (OpResolverType.BUILTIN_REF, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES):
        try:
            interp = Interpreter(graph.path, experimental_op_resolver_type=resolver)
            interp.allocate_tensors()
            break
        except (RuntimeError, ValueError) as e:
            if "Didn't find op" not in str(e) or resolver != OpResolverType.BUILTIN_REF:
                raise _refusal(e) from None
    assert interp is not None                   # the loop above breaks or raises
    carried: dict[str, np.ndarray] = {}
    out = []
    for k in range(steps):
        inputs = checked_inputs(graph, seed + k, None, False)
        try:
            for d, x in zip(interp.get_input_details(), inputs):
                interp.set_tensor(d["index"], x)
            interp.invoke()
        except (RuntimeError, ValueError) as e:
            raise _refusal(e) from None
        ref = {t: np.array(interp.get_tensor(t)) for t in sg.outputs}
        got = run_onnx(result.model, {**onnx_feeds(result, inputs), **carried})
        carried = {i: got[o] for i, o in pairs if o in got}
        v = _compare_all(result, ref, got, rtol, False, {})
        judge(graph, v.outputs, inputs, ref, rtol, seed + k, False, False)
        v.seed = seed + k
        out.append(v)
    return out


def validate_file_steps(graph: Graph, onnx_path: str, steps: int, seed: int = 0,
                        rtol: float | None = None) -> list[Validation]:
    """validate_steps for a model file: layouts as validate_files finds them (one call), state pairs from the
    ONNX I/O names (`state:X` fed from `state_out:X`)."""
    from inspector.core.io.onnx_reader import load_proto
    first = validate_files(graph, onnx_path, seed=seed, rtol=rtol, floor=False)
    model = load_proto(onnx_path)
    sg = graph.main
    plan, trace = LayoutPlan(), ConversionTrace()
    for row, t in zip(first.io, sg.inputs + sg.outputs):
        plan.perms[t] = tuple(row["perm"])
        if row["kind"] == "output":
            plan.outputs[t] = tuple(row["perm"])
        trace.tensor_values[t] = [row["onnx"]]
    outs = {o.name for o in model.graph.output}
    state = [{"input": i.name, "output": "state_out:" + i.name[len("state:"):]}
             for i in model.graph.input if i.name.startswith("state:") and "state_out:" + i.name[len("state:"):] in outs]
    result = ConversionResult(graph=graph, plan=plan, model=model, trace=trace, categories={}, state=state)
    return validate_steps(result, steps, seed, rtol)
