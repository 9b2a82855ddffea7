"""`compare MODEL.tflite OTHER.onnx`: map an ONNX model made elsewhere onto the TFLite model, show its layout
decisions next to ours, and find the first op where its numbers go wrong."""
from __future__ import annotations

import json

from inspector.core.layout import layout as L


def add_parser(sub):
    p = sub.add_parser("compare", help="compare a TFLite model with an ONNX model made by another converter",
                       description="Tensors and ops are matched by name, then by graph position and shape; what "
                                   "cannot be matched is listed. Exit 0 when every output is within tolerance, "
                                   "1 otherwise.")
    p.add_argument("tflite")
    p.add_argument("onnx")
    from inspector.cli.validate import add_common
    add_common(p)
    p.add_argument("--no-validate", action="store_true", help="map and compare structure only")
    p.set_defaults(run=run)


def run(args) -> int:
    from inspector.cli.validate import parsed_shapes
    from inspector.core.pairing.pair import open_pair
    pair = open_pair(args.tflite, args.onnx)
    v = None if args.no_validate else pair.validate(seed=args.seed, batch=args.batch, rtol=args.rtol,
                                                    input_shapes=parsed_shapes(args))
    if args.json:
        out = pair.to_json()
        if v is not None:
            out["validation"] = v.to_json(pair.graph, pair.mapping)
        print(json.dumps(out, indent=2))
    else:
        print("\n".join(report(pair)))
    return 0 if v is None or v.ok else 1


def report(pair) -> list[str]:
    sg, m = pair.graph.main, pair.mapping
    cov = m.coverage(pair.graph)
    lines = [f"matched {cov['tensors'][0]}/{cov['tensors'][1]} tensors, {cov['ops'][0]}/{cov['ops'][1]} ops "
             f"(by name {cov['by']['name']}, I/O position {cov['by']['io']}, graph position {cov['by']['position']})"]
    for t in m.unmatched_tensors:
        lines.append(f"  unmatched TFLite tensor {sg.tensors[t].name}")
    for k in m.unmatched_ops:
        lines.append(f"  unmatched TFLite op {sg.ops[k].label}")
    for n in m.unmatched_nodes:
        lines.append(f"  unmatched ONNX node {n}")
    for v in m.unmatched_io:
        lines.append(f"  unmatched ONNX input/output {v}")
    counts = pair.counts
    lines.append(f"{'':12}{'ours':>12}{'theirs':>12}")
    for key in ("nodes", "transposes", "bytes"):
        ours = counts[key]["ours"]
        lines.append(f"{key:12}{'-' if ours is None else ours:>12}{counts[key]['theirs']:>12}")
    if pair.ours_error:
        lines.append(f"our conversion: {pair.ours_error}")
    else:
        lay = pair.layouts()
        differ = ", ".join(f"{d['tensor']} {d['theirs']} (ours {d['ours']})" for d in lay["differ"][:5])
        lines.append(f"tensor layouts: {lay['same']} as ours, {len(lay['differ'])} differ"
                     + (f": {differ}" + (" …" if len(lay["differ"]) > 5 else "") if differ else "")
                     + (f", {lay['unknown']} unknown" if lay["unknown"] else ""))
    for f in pair.findings:
        lines.append(f"{f.kind}: {f.message}")
    v = pair.validation
    if v is not None:
        for e in v.outputs:
            lines.append(f"{'ok  ' if e.ok else 'FAIL'} output {e.name}: "
                         + (f"max_rel {e.max_rel:.3g}" if e.compared else "not compared"))
        bad = v.first_bad()
        if not v.outputs:
            lines.append("FAIL the outputs could not be compared")
        if bad is None and v.tensors:
            lines.append(f"every mapped tensor agrees ({len(v.tensors)} compared)")
        elif bad is None:
            pass
        else:
            nodes = ", ".join(m.op_nodes.get(bad.op, [])) or "no node"
            layout = L.name(v.perms.get(bad.tensor)) if bad.tensor in v.perms else "no layout fits"
            lines.append(f"first wrong: {sg.ops[bad.op].label if bad.op is not None else bad.name} -> tensor "
                         f"{bad.name} (ONNX {bad.onnx_name} as {layout}, max_rel {bad.max_rel:.3g}); "
                         f"their nodes: {nodes}")
        lines += [f"  not compared: {s}" for s in v.skipped] + [f"note: {s}" for s in v.notes]
    return lines
