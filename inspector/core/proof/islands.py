"""Each op's own error, apart from what reaches it: every op of a model fed LiteRT's reference values of its inputs,
in LiteRT (any op resolver) and in the ONNX conversion, in one run each. Deep random-weight networks amplify a
one-step difference into tens of steps at their outputs, so only this local measure says which op kinds a converter
or a kernel family gets further from the reference than another.

TFLite: the model rewritten so that every op reads graph-input copies of its activation inputs (one-op islands) and
every activation is a graph output. ONNX: each activation's image (the value the trace maps it to) is fed as a graph
input, and what its producer computes is read under a new name.
"""
from __future__ import annotations

import numpy as np
import onnx

from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.proof.litert_log import quiet_litert

OWN = "__own"


def activations(sg) -> list[int]:
    return [t for op in sg.ops for t in op.outputs if sg.tensors[t].data is None]


def rewritten(graph, islands: bool) -> tuple[bytes, list[int]]:
    """The main subgraph with every activation a graph output; with `islands`, every op also reads copies of its
    activation inputs that are graph inputs. Returns the model and the tensors whose values the added inputs take."""
    sg = graph.main
    b = ModelBuilder()
    for t in sg.tensors:
        buffer = b.buffer(np.ascontiguousarray(t.data).tobytes()) if t.data is not None else 0
        b.tensor(t.name, t.shape, t.dtype, quant=t.quantization, buffer=buffer)
    made, copies = set(activations(sg)), {}
    for op in sg.ops:
        ins = list(op.inputs)
        for i, t in enumerate(ins):
            if islands and t in made:
                if t not in copies:
                    u = sg.tensors[t]
                    copies[t] = b.tensor(u.name + "/in", u.shape, u.dtype, quant=u.quantization)
                ins[i] = copies[t]
        b.op(op.opcode, ins, op.outputs, op.options, version=op.version, intermediates=op.intermediates)
    b.inputs = list(sg.inputs) + list(copies.values())
    b.outputs = activations(sg)
    return b.build(), list(copies)


def litert_values(graph, inputs, resolver, ref: dict | None = None) -> dict[int, np.ndarray]:
    """Every activation from LiteRT with `resolver` (an OpResolverType): on the inputs (ref None), or each op on
    `ref`'s values of its inputs. Delegates (XNNPACK) stay in place: graph outputs are not a preserve-all hint."""
    from ai_edge_litert.interpreter import Interpreter
    data, fed = rewritten(graph, islands=ref is not None)
    with quiet_litert():
        it = Interpreter(model_content=data, experimental_op_resolver_type=resolver, num_threads=1)
        it.allocate_tensors()
    for d, x in zip(it.get_input_details(), list(inputs) + ([ref[t] for t in fed] if ref is not None else [])):
        it.set_tensor(d["index"], x)
    it.invoke()
    return {d["index"]: np.array(it.get_tensor(d["index"])) for d in it.get_output_details()}


def onnx_values(result, inputs, ref: dict | None = None, fused: bool = False) -> dict[int, np.ndarray]:
    """Every mapped activation from ONNX Runtime, in TFLite's layout: on the inputs (ref None: unoptimised, as the
    intermediates are written), or each op on `ref`'s values of its inputs (`fused`: fully optimised; the QDQ
    fusions survive, the images staying QuantizeLinear outputs and DequantizeLinear inputs)."""
    from .validate import onnx_feeds, run_onnx
    sg, plan, trace = result.graph.main, result.plan, result.trace
    m = onnx.ModelProto()
    m.CopyFrom(result.model)
    feeds = onnx_feeds(result, inputs)
    typed = {v.name: _copy(v) for v in list(m.graph.value_info) + list(m.graph.output)}
    names = {t: trace.tensor_values[t][0] for t in activations(sg)
             if trace.tensor_values.get(t) and trace.tensor_values[t][0] in typed}
    if ref is None:
        got, suffix = run_onnx(m, feeds, list(names.values())), ""
    else:
        images = set(names.values())
        for node in m.graph.node:
            for i, o in enumerate(node.output):
                if o in images:
                    node.output[i] = o + OWN
        del m.graph.output[:]
        for t, n in names.items():
            m.graph.input.append(typed[n])
            feeds[n] = np.transpose(ref[t], plan.perm(t, ref[t].ndim))
            out = m.graph.output.add()
            out.CopyFrom(typed[n])
            out.name = n + OWN
        got, suffix = run_onnx(m, feeds, optimise=fused), OWN
    return {t: np.transpose(got[n + suffix], np.argsort(plan.perm(t, got[n + suffix].ndim)))
            for t, n in names.items() if n + suffix in got}


def onnx_outputs(result, inputs, optimise: bool) -> dict[int, np.ndarray]:
    """The graph outputs from ONNX Runtime (fully optimised or not), in TFLite's layout."""
    from .validate import onnx_feeds, run_onnx
    sg, plan = result.graph.main, result.plan
    got = run_onnx(result.model, onnx_feeds(result, inputs), optimise=optimise)
    return {t: np.transpose(got[sg.tensors[t].name], np.argsort(plan.outputs.get(t, plan.perm(t, sg.tensors[t].rank))))
            for t in sg.outputs}


def _copy(v: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    c = onnx.ValueInfoProto()
    c.CopyFrom(v)
    return c
