"""The bench's markdown: a conversion table, an output/runtime table, failures, target summary, GUI figures."""
from __future__ import annotations

import math

NAMES = {"ours": "ours", "tflite2onnx": "t2o", "tf2onnx": "tf2"}
# Targets (issues 9, 15 and 33), on models both converters convert: (label, ours field, peer, peer field, max ratio,
# rule). rule "every": met when every model's ratio is within the limit; "mean+big": the geometric mean, and every
# model of 100 KB or more; "info": a figure only (the row the target is not judged on).
TARGETS = [("in-process ours/tflite2onnx <= 0.5 (geometric mean, and every model of 100 KB or more)", "inproc",
            "tflite2onnx", "inproc", 0.5, "mean+big"),
           ("in-process ours/tf2onnx <= 0.05", "inproc", "tf2onnx", "inproc", 0.05, "every"),
           ("CLI cold ours --no-ort-check / tflite2onnx <= 0.8 (alternated; tflite2onnx runs no check)",
            "cli_nocheck", "tflite2onnx", "cli", 0.8, "every"),
           ("CLI cold ours --no-ort-check / tf2onnx <= 0.15 (alternated)", "cli_nocheck", "tf2onnx", "cli", 0.15,
            "every"),
           ("CLI cold ours (default: ONNX Runtime's run check on, in a child process) / tflite2onnx, not the "
            "target's row", "cli", "tflite2onnx", "cli", 0.8, "info"),
           ("ORT time of our output <= tf2onnx's output + 5 %", "ort", "tf2onnx", "ort", 1.05, "every")]
FLOOR_LIMIT, FLOOR_MODELS = 1.5, 5            # the five largest corpus models within 1.5x of the weights floor
MEMORY_FACTOR, MEMORY_EXTRA = 3, 150e6        # peak memory <= 3x the model file + 150 MB


def _ms(x):
    if x is None:
        return ""
    ms = x * 1000
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 1 else f"{ms:.3f}"


def _s(x):
    return "" if x is None else f"{x:.2f}"


def ratio(row, field, peer, peer_field=None):
    a, b = row["ours"].get(field), row[peer].get(peer_field or field)
    return a / b if a is not None and b else None


def floor_ratio(row):
    """Ours over the weights floor: the median of their pairs' ratios (run.floor_pairs: timed in pairs in a fresh
    process); a run saved before that has only the in-process median over a floor timed after it."""
    o = row["ours"]
    if o.get("floor_ratio") is not None:
        return o["floor_ratio"]
    return o["inproc"] / row["floor"] if o.get("inproc") and row.get("floor") else None


def _r(x):
    return "" if x is None else f"{x:.3f}" if x < 0.1 else f"{x:.2f}"


def _time_or_fail(entry, field, fmt):
    if not entry.get("ok"):
        return "✗"
    if entry.get(field) is None:
        return "✗" if field == "cli" and entry.get("cli_error") else ""
    return fmt(entry[field])


def _nodes(entry):
    return f"{entry['nodes']} ({entry['transposes']})" if entry.get("ok") and "nodes" in entry else "✗"


def _ort_transposes(entry):
    return str(entry["ort_transposes"]) if entry.get("ok") and "ort_transposes" in entry else "✗"


def _mb(x):
    return "" if not x else f"{x / 1e6:.0f}"


def conversion_table(rows) -> list[str]:
    out = ["| model | ours ms | tflite2onnx ms | ours/t2o | tf2onnx ms | ours/tf2 | weights floor ms | ours/floor "
           "| CLI ours s | CLI ours --no-ort-check s | CLI t2o s | CLI tf2 s | peak MB in-process / CLI |",
           "|" + "---|" * 13]
    for r in rows:
        o, a, b = r["ours"], r["tflite2onnx"], r["tf2onnx"]
        fl = floor_ratio(r)
        peak = f"{_mb(o.get('peak_inproc'))} / {_mb(o.get('peak_cli'))}" if o.get("peak_inproc") else ""
        out.append(f"| {r['model']} | {_time_or_fail(o, 'inproc', _ms)} | {_time_or_fail(a, 'inproc', _ms)} "
                   f"| {_r(ratio(r, 'inproc', 'tflite2onnx'))} | {_time_or_fail(b, 'inproc', _ms)} "
                   f"| {_r(ratio(r, 'inproc', 'tf2onnx'))} | {_ms(r.get('floor'))} | {_r(fl)} "
                   f"| {_time_or_fail(o, 'cli', _s)} | {_time_or_fail(o, 'cli_nocheck', _s)} "
                   f"| {_time_or_fail(a, 'cli', _s)} | {_time_or_fail(b, 'cli', _s)} | {peak} |")
    return out


def output_table(rows) -> list[str]:
    out = ["| model | nodes (Transposes) ours | t2o | tf2 | Transposes after ORT's optimiser ours / t2o / tf2 "
           "| ORT ours ms | ORT t2o ms | ours/t2o | ORT tf2 ms | ours/tf2 | LiteRT ms |", "|" + "---|" * 11]
    for r in rows:
        o, a, b, lt = r["ours"], r["tflite2onnx"], r["tf2onnx"], r.get("litert", {})
        ort = [_time_or_fail(e, "ort", _ms) if "ort_error" not in e else "ort ✗" for e in (o, a, b)]
        opt = " / ".join(_ort_transposes(e) for e in (o, a, b))
        out.append(f"| {r['model']} | {_nodes(o)} | {_nodes(a)} | {_nodes(b)} | {opt} | {ort[0]} | {ort[1]} "
                   f"| {_r(ratio(r, 'ort', 'tflite2onnx'))} | {ort[2]} | {_r(ratio(r, 'ort', 'tf2onnx'))} "
                   f"| {_ms(lt.get('time')) if lt.get('ok') else '✗'} |")
    return out


def summary_table(rows, min_bytes: int = 100_000) -> list[str]:
    """The real models (100 KB or more) in one table: what the README quotes."""
    out = ["| model | ours ms | tflite2onnx ms | tf2onnx ms | CLI ours (no check) / t2o / tf2 s "
           "| Transposes ours / t2o / tf2 | ORT ours / tf2 ms |", "|" + "---|" * 7]
    for r in rows:
        if r["bytes"] < min_bytes:
            continue
        o, a, b = r["ours"], r["tflite2onnx"], r["tf2onnx"]
        cli = " / ".join(_time_or_fail(e, "cli", _s) or "-" for e in (o, a, b))
        if o.get("cli_nocheck") is not None:
            cli = cli.replace(" / ", f" ({_s(o['cli_nocheck'])}) / ", 1)
        tr = " / ".join(str(e["transposes"]) if e.get("ok") and "transposes" in e else "✗" for e in (o, a, b))
        ort = " / ".join(_ms(e["ort"]) if e.get("ort") is not None else "✗" for e in (o, b))
        out.append(f"| {r['model']} | {_time_or_fail(o, 'inproc', _ms)} | {_time_or_fail(a, 'inproc', _ms)} "
                   f"| {_time_or_fail(b, 'inproc', _ms)} | {cli} | {tr} | {ort} |")
    return out


def breakdown_table(rows, n: int = 8) -> list[str]:
    """Our time on the largest models, split, against the weights floor (transpose + serialise + write)."""
    big = sorted((r for r in rows if r["ours"].get("ok") and r.get("floor")), key=lambda r: -r["bytes"])[:n]
    out = ["| model | MB | read ms | convert ms | serialise ms | checker ms | ours in-process ms "
           "| ours beside the floor ms | weights floor ms | ours/floor |", "|" + "---|" * 10]
    for r in big:
        b, o = r["ours"]["breakdown"], r["ours"]
        out.append(f"| {r['model']} | {r['bytes'] / 1e6:.1f} | {_ms(b['read'])} | {_ms(b['convert'])} "
                   f"| {_ms(b['serialise'])} | {_ms(b['check'])} | {_ms(o['inproc'])} | {_ms(o.get('beside_floor'))} "
                   f"| {_ms(r['floor'])} | {floor_ratio(r):.2f} |")
    return out


def failures(rows) -> list[str]:
    out = []
    for r in rows:
        parts = []
        for name in ("ours", "tflite2onnx", "tf2onnx"):
            e = r[name]
            if not e.get("ok"):
                parts.append(f"{name}: {e['error']}")
            elif e.get("cli_error"):
                parts.append(f"{name} CLI: {e['cli_error']}")
            if e.get("ort_error"):
                parts.append(f"{name} output in ONNX Runtime: {e['ort_error']}")
        if not r.get("litert", {}).get("ok", True):
            parts.append(f"LiteRT: {r['litert']['error']}")
        if parts:
            out.append(f"- `{r['model']}`: " + "; ".join(p.replace("|", "/") for p in parts))
    return out


def target_lines(rows) -> list[str]:
    out = []
    for label, field, peer, peer_field, limit, rule in TARGETS:
        rs = [(r["model"], ratio(r, field, peer, peer_field), r["bytes"] >= 100_000) for r in rows]
        big = [(m, x) for m, x, b in rs if x is not None and b]
        rs = [(m, x) for m, x, _ in rs if x is not None]
        if not rs:
            out.append(f"- {label}: no model measured by both")
            continue
        met = sum(x <= limit for _, x in rs)
        near = sum(x <= limit * 1.05 for _, x in rs)        # run-to-run noise on a shared machine is ~5%
        worst = max(rs, key=lambda mx: mx[1])
        geo = math.exp(sum(math.log(x) for _, x in rs) / len(rs))
        ok = {"every": met == len(rs), "mean+big": geo <= limit and all(x <= limit for _, x in big)}.get(rule)
        verdict = "" if ok is None else f"{'met' if ok else 'missed'}: "
        worst_big = max(big, key=lambda mx: mx[1]) if big else None
        out.append(f"- {label}: {verdict}on {met}/{len(rs)} models both convert ({near} within 5%); geometric mean "
                   f"{geo:.3g}, worst {worst[1]:.3g} ({worst[0]}); on the models of 100 KB or more: "
                   f"{sum(x <= limit for _, x in big)}/{len(big)}"
                   + (f", worst {worst_big[1]:.3g} ({worst_big[0]})" if worst_big else ""))
    return out


def floor_lines(rows, big=None) -> list[str]:
    """The five largest corpus models: ours over the weights floor (read, view, transpose, serialise and write the
    weights with NumPy and protobuf alone), timed in pairs (floor_ratio)."""
    rs = sorted((r for r in rows if floor_ratio(r) is not None), key=lambda r: -r["bytes"])
    rs = [(r["model"], floor_ratio(r)) for r in rs[:FLOOR_MODELS]]
    if not rs:
        return []
    worst = max(rs, key=lambda mx: mx[1])
    extra = ""
    if big and big["ours"].get("inproc") and big.get("floor"):
        extra = (f"; the generated {big['bytes'] / 1e9:.1f} GB model: {big['ours']['inproc']:.1f} s against "
                 f"{big['floor']:.1f} s ({floor_ratio(big):.2f})")
    return [f"- the {FLOOR_MODELS} largest corpus models within {FLOOR_LIMIT}x of the weights floor: "
            f"{'met' if worst[1] <= FLOOR_LIMIT else 'missed'}: on {sum(x <= FLOOR_LIMIT for _, x in rs)}/{len(rs)}, "
            f"worst {worst[1]:.2f} ({worst[0]}); " + ", ".join(f"{m.split('/')[-1]} {x:.2f}" for m, x in rs) + extra]


def memory_lines(rows, big=None) -> list[str]:
    """Peak memory of a conversion (in-process: read, convert, serialise, write, in a fresh process) against
    3x the model file + 150 MB, on the models of 100 KB or more and the generated one; the CLI's peaks beside."""
    rs = [r for r in rows + ([big] if big else []) if r["ours"].get("peak_inproc")]
    if not rs:
        return []
    limit = lambda r: MEMORY_FACTOR * r["bytes"] + MEMORY_EXTRA        # noqa: E731
    over = lambda r, key="peak_inproc": r["ours"][key] / limit(r) if r["ours"].get(key) else 0   # noqa: E731
    worst = max(rs, key=over)
    line = (f"- peak memory of a conversion <= {MEMORY_FACTOR}x the model file + {MEMORY_EXTRA / 1e6:.0f} MB: "
            f"{'met' if over(worst) <= 1 else 'missed'}: on {sum(over(r) <= 1 for r in rs)}/{len(rs)} models, worst "
            f"{worst['ours']['peak_inproc'] / 1e6:.0f} MB against {limit(worst) / 1e6:.0f} ({worst['model']})")
    for r in [big] if big and big["ours"].get("peak_inproc") else []:
        o = r["ours"]
        line += (f"; the generated {r['bytes'] / 1e9:.1f} GB model: in-process {o['peak_inproc'] / 1e9:.2f} GB, "
                 f"CLI --no-ort-check (full ONNX checker) {(o.get('peak_cli') or 0) / 1e9:.2f} GB, CLI default "
                 f"{(o.get('peak_cli_check') or 0) / 1e9:.2f} GB (its run-check child "
                 f"{(o.get('peak_cli_check_child') or 0) / 1e9:.2f} GB), against {limit(r) / 1e9:.2f} GB")
    cli_worst = max(rs, key=lambda r: over(r, "peak_cli"))
    line += (f"; the CLI --no-ort-check on {sum(over(r, 'peak_cli') <= 1 for r in rs)}/{len(rs)} "
             f"(worst {over(cli_worst, 'peak_cli'):.2f} of the limit, {cli_worst['model']})")
    return [line]


VERSION_LIMIT = 0.1      # seconds: `layout-inspector --version` on an idle machine (issue 33)


def version_line(data) -> list[str]:
    v = data.get("version")
    if not v:
        return []
    return [f"- `layout-inspector --version` < {VERSION_LIMIT * 1000:.0f} ms: "
            f"{'met' if v['median'] < VERSION_LIMIT else 'missed'}: median {v['median'] * 1000:.0f} ms, "
            f"min {v['min'] * 1000:.0f} ms over {v['runs']} fresh processes (load average at the start "
            f"{data.get('load_start', 0):.1f})"]


def as_float_lines(rows) -> list[str]:
    """--dynamic-as-float on the dynamic-range models: its ONNX Runtime time against tf2onnx's output's."""
    rs = [(r["model"], r["ours"]["ort_float"] / r["tf2onnx"]["ort"], r["ours"].get("ort", 0) / r["tf2onnx"]["ort"])
          for r in rows if r["ours"].get("ort_float") and r["tf2onnx"].get("ort")]
    if not rs:
        return []
    worst = max(rs, key=lambda x: x[1])
    return [f"- ORT time with `--dynamic-as-float` <= tf2onnx's output on the dynamic-range models: "
            f"{'met' if worst[1] <= 1 else 'missed'}: on {sum(x <= 1 for _, x, _ in rs)}/{len(rs)}, worst "
            f"{worst[1]:.3g} ({worst[0]}); the default (LiteRT's activation quantization) "
            + ", ".join(f"{m.split('/')[-1]} {d:.2f} -> {f:.2f}" for m, f, d in rs)]


def layout_lines(rows) -> list[str]:
    """Issue 15's targets: never more Transposes than tf2onnx, and inputs already channels-first keep their shape."""
    both = [(r["model"], r["ours"]["transposes"], r["tf2onnx"]["transposes"]) for r in rows
            if "transposes" in r["ours"] and "transposes" in r["tf2onnx"]]
    worse = [f"{m} ({a} > {b})" for m, a, b in both if a > b]
    kept = [r["ours"]["inputs_kept"] for r in rows if r["ours"].get("inputs_kept")]
    cf = [(r["model"], *r["ours"]["inputs_kept"]) for r in rows if r["ours"].get("inputs_kept") and
          r["ours"]["inputs_kept"][1]]
    plans = [(r["model"], r["ours"]["plan"]) for r in rows if r["ours"].get("plan")]
    open_ = [f"{m} ({p['transposes']} vs bound {p['lower_bound']}: {p['method']})" for m, p in plans
             if not p["proven_optimal"]]
    verdict = ("no model converted by both" if not both else
               f"{'met' if not worse else 'NOT met'} on {len(both) - len(worse)}/{len(both)}")
    return [f"- Transposes ours <= tf2onnx's on every model both convert: {verdict}"
            + (f"; more on {', '.join(worse)}" if worse else ""),
            f"- ONNX input shape = TFLite input shape when already channels-first: "
            f"{sum(k for k, _ in kept)}/{sum(n for _, n in kept)} inputs of {len(cf)} models"
            + ("" if all(k == n for _, k, n in cf) else ": NOT met on " + ", ".join(m for m, k, n in cf if k != n)),
            f"- Layout plan proven optimal (over the planner's candidate layouts) or its gap reported: proven on "
            f"{len(plans) - len(open_)}/{len(plans)} models" + (f"; gap on {', '.join(open_)}" if open_ else "")]


def all_targets(data) -> list[str]:
    rows, big = data["models"], data.get("big")
    return (version_line(data) + target_lines(rows) + floor_lines(rows, big) + memory_lines(rows, big)
            + as_float_lines(rows) + layout_lines(rows))


def summary(data) -> str:
    head = [f"(peers' figures from the full run of {data['peers_from']})"] if data.get("peers_from") else []
    return "\n".join(head + all_targets(data))


def render(data) -> str:
    m, rows = data["machine"], data["models"]
    peers = data.get("peers", {})
    lines = ["# Benchmark: layout-inspector vs tflite2onnx and tf2onnx", "",
             f"`{data['command']}` on {data['started']} at commit {data.get('commit', 'unknown')}: {len(rows)} models, whole run {data['total_s'] / 60:.1f} min "
             f"(peers' install {data.get('peers_install_s', 0):.0f} s of it).",
             f"Machine: {m['nproc']} cores, {m['cpu']} (load average {data.get('load_start', 0):.1f} at the start, "
             f"{data.get('load_end', 0):.1f} at the end); Python {m['python']}, onnx {m['onnx']}, "
             f"onnxruntime {m['onnxruntime']}, numpy {m['numpy']}. Peers: "
             + ", ".join(f"{k} {v}" for k, v in peers.items()) + ".", "",
             *([f"Peers not run (--no-peers): their figures are the full run's of {data['peers_from']}, so the "
                "ratios compare this code with the peers measured then (on a shared machine the load differs).",
                ""] if data.get("peers_from") else []),
             *([f"Peak memory measured again on {data['memory_refreshed']} at commit {data['memory_commit']} "
                f"(`bench/run.py --memory-only`, load average {data['memory_load']:.1f}): the full run's figures "
                "counted the bench's own resident size, which a forked process starts from.", ""]
               if data.get("memory_refreshed") else []),
             "## Targets", "", *all_targets(data), "",
             "## Summary: the models of 100 KB or more", "", *summary_table(rows), "",
             "## Conversion time", "",
             f"In-process: median of at least {data['runs']} runs (up to 50 or ~0.25 s for fast ones) in 3 alternating blocks of ours and each peer, each block after a warm-up, file to file (ours: read + convert without "
             "the checker + serialise + write; tflite2onnx.convert: read + convert + save + basic checker; "
             "tf2onnx from_tflite: read + convert + optimise + save). Weights floor, with NumPy and protobuf alone: "
             "read the file, view each constant in it, transpose every rank-4 one to NCHW, serialise all of them "
             "as initializers, write; ours/floor: ours and the floor timed in pairs (ours then the floor, then the "
             "floor then ours, ...) in a fresh process per model, the median of the pairs' ratios, so a load that "
             "comes and goes hits both sides of each pair alike. Peak memory (models of 100 KB or more): the largest resident size of a fresh "
             "process converting in-process as timed, and of the CLI with --no-ort-check (full ONNX checker). CLI: a fresh process, median of "
             f"{data['cli_runs']} in alternating rounds of ours and each peer (1 run when the first takes over 3 s); "
             "ours includes the full ONNX checker and, by default, ONNX Runtime's run check (in a child process "
             "forked at the start, so its import overlaps the conversion); --no-ort-check, the row the target "
             "against tflite2onnx is judged on, runs no run check, as tflite2onnx runs none. "
             "✗ = failed (see below).", "",
             *conversion_table(rows), "",
             "## Outputs and run time", "",
             "Nodes (Transposes) of each converter's output. ONNX Runtime (CPU, intra_op_num_threads=1): median per "
             "run, the same random input for every output (in each model's own input layout); LiteRT: the .tflite, "
             "1 thread. Ratios below 1 mean our output runs faster.", "",
             *output_table(rows), "",
             "## Where our time goes", "",
             "The largest models' time split (median of 3) into read, convert (check=False), serialise and the full "
             "checker (not part of the in-process figure; the CLI runs it), next to the weights floor and ours timed in "
             "pairs with it.", "",
             *breakdown_table(rows), "", "## Failures", "", *(failures(rows) or ["none"]), ""]
    for key, title, how in (("gui", "GUI scale", " (offscreen)"), ("batch", "Batch start-up", "")):
        fig = data.get(key)
        if fig:
            lines += [f"## {title}", "", f"`{fig['cmd']}`{how}" + ("" if fig["ok"] else f": failed: {fig['error']}"),
                      ""]
            out = fig.get("stdout", "")
            lines += [out] if out.lstrip().startswith(("|", "#", "-")) else (["```", out, "```"] if out else [])
            lines.append("")
    return "\n".join(lines)


def progress_line(row) -> str:
    def cell(name):
        e = row[name]
        return f"{NAMES[name]} {_ms(e['inproc'])} ms" if e.get("ok") else f"{NAMES[name]} failed"
    return f"{row['model']}: " + ", ".join(cell(n) for n in ("ours", "tflite2onnx", "tf2onnx"))


if __name__ == "__main__":               # re-render a saved run: python bench/report.py bench/results/bench.json
    import json
    import sys
    print(render(json.load(open(sys.argv[1]))))
