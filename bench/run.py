"""Benchmark against the peer converters: `make bench` (= `.venv/bin/python bench/run.py --corpus ../shared/corpus`).

For each model of the corpus: our conversion in-process and as a cold CLI process, the same for tflite2onnx and
tf2onnx (installed by this script into bench/.peers-venv), the node and Transpose counts of each output, ONNX Runtime
time of each output and LiteRT's own time. Writes bench/results/bench.{json,md}; a whole-corpus run also refreshes
bench/LATEST.md (the copy the README links). See bench/README.md for what each figure times.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import measure  # noqa: E402
import peers  # noqa: E402
import report  # noqa: E402

LONG_CLI = 3.0                   # a CLI run slower than this (seconds) is not repeated
SLOW_CLI_MIN_BYTES = 100_000     # tf2onnx's CLI is timed on models at least this big (unless --all-cli)
FLOOR_PAIRS = 11                 # pairs of ours and the floor at least: a target rests on each model's one ratio


def one_line(e: BaseException) -> str:
    msg = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {msg}"[:200] if msg else type(e).__name__


def cli_once(cmd: list[str], out: Path | None = None, env=None) -> tuple[float, str | None]:
    """Wall time of one fresh process (writing `out` when given), and its error line or None."""
    if out is not None:
        out.unlink(missing_ok=True)
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    took = time.perf_counter() - t
    if proc.returncode != 0 or (out is not None and not out.exists()):
        tail = (proc.stderr.strip().splitlines() or ["no output file"])[-1]
        return took, f"exit {proc.returncode}: {tail[:180]}"
    return took, None


def cli_rounds(cmds: dict[str, tuple[list[str], Path, dict | None]], runs: int) -> dict[str, dict]:
    """Cold CLI runs of every converter in alternating rounds (ours, tflite2onnx, tf2onnx, then the order turned),
    so that drift in a shared machine's state hits them alike; a converter slower than LONG_CLI on its first run
    runs once. Per converter {ok, cli (median s), cli_times} or {ok: False, error}."""
    times: dict[str, list[float]] = {name: [] for name in cmds}
    errors: dict[str, str] = {}
    names = list(cmds)
    for k in range(runs):
        for name in names[k % len(names):] + names[:k % len(names)]:
            if name in errors or (times[name] and times[name][0] > LONG_CLI):
                continue
            took, error = cli_once(*cmds[name])
            if error:
                errors[name] = error
            else:
                times[name].append(took)
    return {name: {"ok": False, "error": errors[name]} if name in errors else
            {"ok": True, "cli": statistics.median(times[name]), "cli_times": times[name]} for name in cmds}


def version_time(runs: int = 11) -> dict:
    """`layout-inspector --version` as a fresh process: what every start pays before any work (median, min)."""
    cmd = [str(Path(sys.executable).parent / "layout-inspector"), "--version"]
    cli_once(cmd)                                            # the first start after compileall is not a user's
    times = [cli_once(cmd)[0] for _ in range(runs)]
    return {"median": statistics.median(times), "min": min(times), "runs": runs}


BLOCKS = 3
# Idle time before each block, so that what one converter's process leaves running (TensorFlow's thread pools in
# tf2onnx's) does not land on the next block: a precaution on 2 cores; the full runs' small-model medians still
# move by up to ~60 % between runs on this shared VM (ops/abs: 0.25-0.40 ms; 0.24 alone).
SETTLE = 0.1


def inproc_rounds(model: Path, work: Path, drivers: dict, runs: int) -> dict[str, dict]:
    """In-process times of ours and each peer, in BLOCKS alternating blocks (ours, tflite2onnx, tf2onnx, then
    tflite2onnx, tf2onnx, ours, ...),
    each block a warm-up then its share of the timed runs, so that drift in a shared machine's state hits every
    converter alike. Runs: at least `runs`, more when the slowest converter is fast (peer_driver.runs_for); medians
    over all blocks."""
    from peer_driver import no_gc, runs_for
    out = work / "ours.onnx"
    entries: dict[str, dict] = {}
    warmups = {}
    try:
        t = time.perf_counter()
        measure.ours_once(model, out)
        warmups["ours"] = time.perf_counter() - t
        entries["ours"] = {"ok": True, "times": [], "output": str(out)}
    except Exception as e:                                   # an unsupported model is a result
        entries["ours"] = {"ok": False, "error": one_line(e)}
    for name, driver in drivers.items():
        r = driver.convert(model, work / f"{name}.onnx", 0)
        if r["ok"]:
            warmups[name] = r["warmup"]
            entries[name] = {"ok": True, "times": [], "warmup": r["warmup"], "output": str(work / f"{name}.onnx")}
        else:
            entries[name] = {"ok": False, "error": r["error"]}
    per_block = -(-runs_for(max(warmups.values(), default=1.0), runs) // BLOCKS)
    names = list(warmups)
    for k in range(BLOCKS):
        # The order turns each block, so each converter takes each place once (in a fixed order tflite2onnx always
        # ran right after ours, where it is ~4 % faster than after tf2onnx's TensorFlow: a bias in its favour)
        for name in names[k % len(names):] + names[:k % len(names)]:
            entry = entries[name]
            if not entry["ok"]:
                continue
            time.sleep(SETTLE)
            if name == "ours":
                measure.ours_once(model, out)                # the block's warm-up
                with no_gc():
                    for _ in range(per_block):
                        t = time.perf_counter()
                        measure.ours_once(model, out)
                        entry["times"].append(time.perf_counter() - t)
                continue
            r = drivers[name].convert(model, work / f"{name}.onnx", per_block, adapt=False)
            if r["ok"]:
                entry["times"] += r["times"]
            else:
                entries[name] = {"ok": False, "error": r["error"]}
    for entry in entries.values():
        if entry["ok"]:
            entry["inproc"] = statistics.median(entry["times"])
    return entries


def ours(entry: dict, model: Path) -> dict:
    """Our time split, added to the in-process entry."""
    if not entry["ok"]:
        return entry
    splits = [measure.ours_breakdown(model) for _ in range(3)]
    entry["breakdown"] = {k: statistics.median(b[k] for b in splits) for k in splits[0]}
    return entry


def cold_cli(row: dict, model: Path, work: Path, args) -> None:
    """Every converter's cold CLI in alternating rounds, added to its entry (tf2onnx's, mostly importing
    TensorFlow, ~5 s, on the larger models only unless --all-cli)."""
    cmds = {}
    if row["ours"]["ok"]:
        for name, extra in (("ours", []), ("ours_nocheck", ["--no-ort-check"])):
            out = work / f"{name}_cli.onnx"
            cmds[name] = (ours_cli(model, out, *extra), out, None)
    for name in peers.PEERS:
        if row[name].get("ok") and (name != "tf2onnx" or args.all_cli or row["bytes"] >= SLOW_CLI_MIN_BYTES):
            out = work / f"{name}_cli.onnx"
            cmds[name] = (peers.cli_command(name, model, out), out, peers.cli_env())
    for name, c in cli_rounds(cmds, args.cli_runs).items():
        if name == "ours_nocheck":                 # the row judged against tflite2onnx, which runs no check
            row["ours"]["cli_nocheck"] = c.get("cli")
            if not c["ok"]:
                row["ours"]["cli_nocheck_error"] = c["error"]
            continue
        row[name]["cli"] = c.get("cli")
        row[name]["cli_times"] = c.get("cli_times")
        if not c["ok"]:
            row[name]["cli_error"] = c["error"]


def ours_cli(model: Path, out: Path, *extra: str) -> list[str]:
    return [str(Path(sys.executable).parent / "layout-inspector"), "convert", str(model), "-o", str(out), *extra]


def floor_pairs(model: Path, work: Path, runs: int, with_ours: bool = True) -> dict:
    """measure.ours_and_floor (ours and the weights floor timed in pairs) in a fresh process of its own, so what
    earlier phases left in this one (imports, ONNX Runtime sessions, the allocator's state) touches neither side,
    as the peers' drivers touch neither."""
    code = ("import json, sys; from pathlib import Path; sys.path[:0] = sys.argv[5:7]; import measure\n"
            "print(json.dumps(measure.ours_and_floor(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), "
            "sys.argv[4] == '1')))")
    proc = subprocess.run([sys.executable, "-c", code, str(model), str(work), str(runs), "1" if with_ours else "0",
                           str(HERE), str(HERE.parent)], capture_output=True, text=True, timeout=1800)
    for name in ("pair-ours.onnx", "pair-floor.onnx"):
        (work / name).unlink(missing_ok=True)
    if proc.returncode:
        raise RuntimeError(f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:180]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def memory(model: Path, work: Path) -> dict:
    """Peak resident memory of our conversion, each in a fresh process: in-process (read, convert, serialise,
    write: what `inproc` times) and the CLI (main() in the process) without the run check, which adds the full ONNX
    checker, and with it (its ONNX Runtime session is in a child process of its own: `peak_cli_check_child`)."""
    out = work / "mem.onnx"
    inproc = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[3]); import measure\n"
              "measure.ours_once(Path(sys.argv[1]), Path(sys.argv[2]))")
    cli = "from inspector.cli import main\nassert main(['convert', *__import__('sys').argv[1:]]) == 0"
    figures = {}
    for key, code, argv in (("peak_inproc", inproc, [str(model), str(out), str(HERE)]),
                            ("peak_cli", cli, [str(model), "-o", str(out), "--no-ort-check"]),
                            ("peak_cli_check", cli, [str(model), "-o", str(out)])):
        peak, error, child = measure.peak_memory(code, argv)
        figures[key] = peak
        if child and key == "peak_cli_check":
            figures[key + "_child"] = child
        if error:
            figures[key + "_error"] = error
    out.unlink(missing_ok=True)
    return figures


def refresh_memory(path: Path, corpus: Path, work: Path) -> dict:
    """`--memory-only`: the peak-memory figures of a saved run measured again (rows that have them and the
    generated model); the rest of the run is kept as it was."""
    data = json.loads(path.read_text())
    for row in data["models"]:
        if "peak_inproc" in row["ours"]:
            row["ours"].update(memory(corpus / row["model"], work))
    if data.get("big"):
        model = measure.big_model(work / "synthetic_1gb.tflite")
        data["big"]["ours"].update(memory(model, work))
        model.unlink()
    data["memory_refreshed"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    data["memory_commit"] = commit()
    data["memory_load"] = os.getloadavg()[0]
    return data


def big_row(work: Path, args) -> dict:
    """The synthetic model of ~1.1 GB of weights (measure.big_model, generated in the work folder and deleted):
    our in-process time, the floor and peak memory; no peer runs it."""
    row = {"model": "synthetic/1gb_weights (generated)", "bytes": 0, "synthetic": True}
    try:
        model = measure.big_model(work / "synthetic_1gb.tflite")
        row["bytes"] = model.stat().st_size
        pair = floor_pairs(model, work, 1)
        row["ours"] = {"ok": True, "inproc": pair["ours"], "times": pair["times"]["ours"],
                       "floor_ratio": pair["ratio"]}
        row["floor"] = pair["floor"]
        row["ours"].update(memory(model, work))
    except Exception as e:
        row["ours"] = {"ok": False, "error": one_line(e)}
    for name in peers.PEERS:
        row[name] = {"ok": False, "error": "not run (synthetic model)"}
    for f in work.iterdir():
        f.unlink()
    return row


def runtime(row: dict, model: Path, work: Path) -> None:
    """Node counts and ONNX Runtime time of every output that exists, LiteRT's time, the same inputs for all; on a
    dynamic-range model also our --dynamic-as-float output's time (`ort_float`)."""
    try:
        feeds = measure.tflite_inputs(model)
        row["litert"] = {"ok": True, "time": measure.litert_time(model, feeds)}
    except Exception as e:
        row["litert"] = {"ok": False, "error": one_line(e)}
        feeds = None
    runners = {}
    for name in ("ours", *peers.PEERS):
        entry = row[name]
        if not entry.get("ok"):
            continue
        path = Path(entry.pop("output"))
        entry["nodes"], entry["transposes"] = measure.node_counts(path)
        try:
            entry["ort_transposes"] = measure.ort_optimized_transposes(path)
        except Exception as e:
            entry["ort_error"] = one_line(e)
        try:
            if feeds is None:
                raise RuntimeError("no inputs (LiteRT could not load the model)")
            runners[name] = measure.ort_runner(path, feeds)
        except Exception as e:
            entry["ort_error"] = one_line(e)
    if "ours" in runners:
        fast = work / "ours_float.onnx"
        try:
            if measure.ours_as_float(model, fast):
                runners["ours_float"] = measure.ort_runner(fast, feeds)
        except Exception as e:
            row["ours"]["ort_float_error"] = one_line(e)
    for name, t in measure.interleaved_times(runners).items():
        if name == "ours_float":                   # --dynamic-as-float, timed in the same rounds
            row["ours"]["ort_float"] = t
        else:
            row[name]["ort"] = t


def bench_model(model: Path, corpus: Path, work: Path, args, drivers: dict) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    row = {"model": str(model.relative_to(corpus)), "bytes": model.stat().st_size}
    timed = inproc_rounds(model, work, drivers, args.runs)
    row["ours"] = ours(timed["ours"], model)
    try:
        pair = floor_pairs(model, work, max(args.runs, FLOOR_PAIRS), with_ours=row["ours"]["ok"])
        row["floor"] = pair["floor"]
        if "ours" in pair:
            row["ours"]["beside_floor"], row["ours"]["floor_ratio"] = pair["ours"], pair["ratio"]
    except Exception as e:
        row["floor_error"] = one_line(e)
    if row["bytes"] >= SLOW_CLI_MIN_BYTES and row["ours"].get("ok"):
        row["ours"].update(memory(model, work))
    for name in peers.PEERS:
        row[name] = timed[name] if drivers else {"ok": False, "error": "not run (--no-peers)"}
    cold_cli(row, model, work, args)
    runtime(row, model, work)
    try:
        if row["ours"].get("ok"):
            row["ours"].update(measure.layout_facts(model))
    except Exception as e:
        row["ours"]["inputs_kept_error"] = one_line(e)
    for f in work.iterdir():
        f.unlink()
    return row


def gui_figures(corpus: Path) -> dict | None:
    """bench/gui_bench.py (owned by the GUI work) run offscreen as is; its printed figures go into the report."""
    script = HERE / "gui_bench.py"
    if not script.exists():
        return None
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    help_text = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                               env=env, timeout=120).stdout
    return run_script(script, ["--corpus", str(corpus)] if "--corpus" in help_text else [], env)


def batch_figures() -> dict:
    """bench/batch_bench.py's start-up figure: a batch of 10,000 tiny models until its first worker starts."""
    return run_script(HERE / "batch_bench.py", ["--startup", "10000"], dict(os.environ))


def run_script(script: Path, args: list[str], env: dict) -> dict:
    """A bench script run as is; what it prints goes into the report."""
    cmd = [sys.executable, str(script), *args]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    except subprocess.TimeoutExpired:
        return {"cmd": " ".join(cmd[1:]), "ok": False, "stdout": "", "error": "timeout after 1200 s"}
    return {"cmd": "python " + " ".join(Path(c).name if c == str(script) else c for c in cmd[1:]),
            "ok": proc.returncode == 0, "seconds": time.perf_counter() - t, "stdout": proc.stdout.strip(),
            "error": (proc.stderr.strip().splitlines() or [""])[-1] if proc.returncode else ""}


def commit() -> str:
    """The commit measured, "+dirty" when inspector/ has uncommitted changes ("unknown" outside a git checkout)."""
    def git(*a):
        return subprocess.run(["git", "-C", str(HERE.parent), *a], capture_output=True, text=True)
    head = git("rev-parse", "--short=12", "HEAD")
    if head.returncode:
        return "unknown"
    dirty = git("status", "--porcelain", "--", "inspector").stdout.strip()
    return head.stdout.strip() + ("+dirty" if dirty else "")


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    import numpy
    import onnx
    import onnxruntime
    return {"nproc": len(os.sched_getaffinity(0)), "cpu": cpu, "python": platform.python_version(), "numpy": numpy.__version__,
            "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def borrow_peers(rows: list[dict], full: Path) -> str | None:
    """Fill a --no-peers run's peer entries from the last full run's bench.json, so its ratios (and the targets)
    compare this code's figures with the peers' measured then. Returns that run's start time, or None."""
    try:
        last = json.loads(full.read_text())
    except (OSError, ValueError):
        return None
    if not last.get("peers"):
        return None
    by_model = {r["model"]: r for r in last.get("models", [])}
    for row in rows:
        for name in peers.PEERS:
            if row["model"] in by_model and name in by_model[row["model"]]:
                row[name] = by_model[row["model"]][name]
    return last.get("started")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(HERE.parent.parent / "shared" / "corpus"))
    ap.add_argument("--models", default="**/*.tflite", help="glob under the corpus (default: every .tflite)")
    ap.add_argument("--runs", type=int, default=5, help="timed in-process conversions after a warm-up")
    ap.add_argument("--cli-runs", type=int, default=3, help=f"cold CLI runs (1 when the first exceeds {LONG_CLI} s)")
    ap.add_argument("--out", default=None, help="where bench.{json,md} go (default bench/results; with --no-peers "
                                                "bench/results/ours-only, so the last full run's figures stay)")
    ap.add_argument("--no-peers", action="store_true",
                    help="only our converter (for profiling); ratios use the peers' figures of the last full run")
    ap.add_argument("--no-gui", action="store_true", help="skip bench/gui_bench.py")
    ap.add_argument("--no-batch", action="store_true", help="skip bench/batch_bench.py's start-up figure")
    ap.add_argument("--no-big", action="store_true", help="skip the generated model of ~1.1 GB of weights")
    ap.add_argument("--all-cli", action="store_true",
                    help=f"time tf2onnx's CLI on every model (default: models of {SLOW_CLI_MIN_BYTES // 1000} KB or more)")
    ap.add_argument("--memory-only", action="store_true",
                    help="measure the peak-memory figures of the last run (bench/results/bench.json) again")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    corpus = Path(args.corpus).resolve()
    if args.memory_only:
        saved = HERE / "results" / "bench.json"
        work = Path(tempfile.mkdtemp(prefix="li-bench-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
        try:
            data = refresh_memory(saved, corpus, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        saved.write_text(json.dumps(data, indent=1) + "\n")
        md = report.render(data)
        (saved.parent / "bench.md").write_text(md)
        if data["command"] == "make bench":
            (HERE / "LATEST.md").write_text(md)
        print(report.summary(data))
        return 0
    out = Path(args.out) if args.out else HERE / "results" / ("ours-only" if args.no_peers else "")
    models = sorted(corpus.glob(args.models))
    if not models:
        print(f"error: no model matches {args.models} under {corpus}", file=sys.stderr)
        return 1
    data = {"command": "make bench" if args.models == "**/*.tflite" else
            f".venv/bin/python bench/run.py --corpus {args.corpus} --models '{args.models}'",
            "machine": machine(), "commit": commit(), "runs": args.runs, "cli_runs": args.cli_runs,
            "corpus": str(corpus),
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_start": os.getloadavg()[0]}
    # A pip-installed package runs from bytecode compiled at install time (the peers' venv has it); an editable
    # checkout under PYTHONDONTWRITEBYTECODE would recompile every module on each CLI start instead.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(HERE.parent / "inspector")], check=True,
                   stdout=subprocess.DEVNULL)
    data["version"] = version_time()
    if not args.no_peers:
        t = time.perf_counter()
        peers.ensure_venv()
        data["peers_install_s"] = time.perf_counter() - t
        data["peers"] = peers.versions()
    rows = []
    drivers = {} if args.no_peers else {name: peers.Driver(name) for name in peers.PEERS}
    # Outputs go to a RAM disk when there is one: rewriting a file on this disk costs ~4 ms (flush on
    # truncate), which would swamp the small models' conversion times of every converter alike.
    work = Path(tempfile.mkdtemp(prefix="li-bench-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        for k, model in enumerate(models, 1):
            row = bench_model(model, corpus, work, args, drivers)
            rows.append(row)
            print(f"[{k}/{len(models)}] {report.progress_line(row)}", flush=True)
        if not args.no_big:
            data["big"] = big_row(work, args)
            print(f"[big] {report.progress_line(data['big'])}", flush=True)
    finally:
        for d in drivers.values():
            d.close()
        shutil.rmtree(work, ignore_errors=True)
    data["models"] = rows
    if args.no_peers:
        data["peers_from"] = borrow_peers(rows, HERE / "results" / "bench.json")
    data["gui"] = None if args.no_gui else gui_figures(corpus)
    data["batch"] = None if args.no_batch else batch_figures()
    data["total_s"] = time.perf_counter() - start
    data["load_end"] = os.getloadavg()[0]
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(data, indent=1) + "\n")
    md = report.render(data)
    (out / "bench.md").write_text(md)
    if args.models == "**/*.tflite" and not args.no_peers:
        (HERE / "LATEST.md").write_text(md)
    print(report.summary(data))
    print(f"wrote {out / 'bench.md'} and bench.json in {data['total_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
