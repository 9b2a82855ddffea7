"""Any custom op the table lacks, with `allow_custom=True` (CLI --allow-custom): one node in the custom domain
ai.layout_inspector.tflite, inputs and outputs in the TFLite layout (Terminate), its options kept as attributes.
Without the option such an op stops the conversion with an error that names it (UnsupportedOpsError)."""
from __future__ import annotations

from .registry import X, OpSpec

CUSTOM_DOMAIN = "ai.layout_inspector.tflite"


def custom_attributes(op) -> dict:
    """The custom options as node attributes: a flexbuffer map's scalar/str/list fields by name, and always the
    raw bytes (`tflite_custom_options`), so nothing is lost."""
    attrs = {"tflite_custom_options": op.custom_options or b""}
    if not op.custom_options:
        return attrs
    try:
        from flatbuffers import flexbuffers
        decoded = flexbuffers.Loads(op.custom_options)
    except Exception:                     # not a flexbuffer: the raw bytes are all there is
        return attrs
    if not isinstance(decoded, dict):
        return attrs
    for key, value in decoded.items():
        if isinstance(value, bool):
            value = int(value)
        elif isinstance(value, (bytes, bytearray)):
            value = bytes(value)
        elif isinstance(value, (list, tuple)):
            if not value or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                value = repr(value)
            elif any(isinstance(v, float) for v in value):
                value = [float(v) for v in value]
        elif not isinstance(value, (int, float, str)):
            value = repr(value)
        attrs[str(key)] = value
    return attrs


def emit_custom(ctx, op):
    """A node in the custom domain, inputs and outputs in the TFLite layout (Terminate)."""
    ins = [ctx.input(op, s) for s in range(len(op.inputs))]
    outs = [ctx.output(op, s) if t >= 0 else "" for s, t in enumerate(op.outputs)]
    ctx.node(op.opcode, ins, outs, domain=CUSTOM_DOMAIN, **custom_attributes(op))


def with_custom_nodes(graph, table) -> dict:
    """The op table plus a custom-domain emitter for every custom op the table lacks."""
    extra = {op.opcode: OpSpec(op.opcode, X, emit_custom, (f"{CUSTOM_DOMAIN}:{op.opcode}",),
                               notes="kept as a custom-domain node (--allow-custom)")
             for sg in graph.subgraphs for op in sg.ops if op.custom and op.opcode not in table}
    return {**table, **extra} if extra else table


def uses_domain(g, domain: str) -> bool:
    """Whether any node of graph g or of its nested bodies is in `domain`."""
    for n in g.node:
        if n.domain == domain:
            return True
        if any(a.g.node and uses_domain(a.g, domain) for a in n.attribute if a.type == a.GRAPH):
            return True
    return False
