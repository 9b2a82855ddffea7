"""Many models at once: `convert MODELS… -o OUTDIR/` (and `check` over many files). Each model runs in a worker
process of its own, so one that crashes or hangs its worker is one failed row and the batch goes on."""
from __future__ import annotations

import glob
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from inspector.core.ir.errors import InspectorError

MODEL_SUFFIXES = (".tflite",)
COLUMNS = ("model", "output", "ok", "nodes", "transposes", "conflicts", "verdict", "seconds", "error")


@dataclass
class Row:
    model: str
    output: str = ""
    ok: bool = False
    nodes: int | None = None
    transposes: int | None = None
    conflicts: int | None = None
    verdict: str = ""          # validation's ok / suspicious / fail, or check's finding counts
    seconds: float = 0.0
    error: str = ""


def expand(items: list[str], suffixes=MODEL_SUFFIXES) -> list[Path]:
    """Files as given, folders searched recursively for models, globs expanded (for shells that did not);
    each model once, in a stable order."""
    found: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found += sorted(q for q in p.rglob("*") if q.suffix.lower() in suffixes and q.is_file())
        elif p.exists() or not glob.has_magic(item):
            found.append(p)                      # a missing file is reported as a failed row, not skipped
        else:
            matches = sorted(Path(m) for m in glob.glob(item, recursive=True))
            if not matches:
                raise InspectorError(f"{item}: matches no file")
            found += matches
    seen, out = set(), []
    for p in found:
        key = os.path.abspath(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def output_paths(models: list[Path], outdir: Path, suffix: str = ".onnx") -> list[Path]:
    """OUTDIR/<name>.onnx; where two models share a name, their folders below the common one are kept."""
    stems = [m.stem for m in models]
    if len(set(stems)) == len(stems):
        return [outdir / (s + suffix) for s in stems]
    common = Path(os.path.commonpath([os.path.abspath(m.parent) for m in models]))
    return [outdir / Path(os.path.abspath(m)).relative_to(common).with_suffix(suffix) for m in models]


# ---- workers -----------------------------------------------------------------------------------------------
def _child(task: Callable[..., Row], args: tuple, conn) -> None:
    try:
        row = task(*args)
    except BaseException as e:                      # anything: the parent turns it into a failed row
        row = Row(model=str(args[0]), error=f"{type(e).__name__}: {e}".splitlines()[0])
    conn.send(row)
    conn.close()


def run_all(task: Callable[..., Row], jobs_args: list[tuple], jobs: int, timeout: float,
            progress: Callable[[Row], None]) -> list[Row]:
    """Run task(*args) for each entry, at most `jobs` worker processes at a time; rows in input order."""
    import multiprocessing as mp
    import multiprocessing.connection
    ctx = mp.get_context("fork")                    # the parent has imported the converter: children start warm
    rows: list[Row | None] = [None] * len(jobs_args)
    pending = list(range(len(jobs_args)))[::-1]
    running: dict[int, tuple] = {}
    while pending or running:
        while pending and len(running) < jobs:
            i = pending.pop()
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(task, jobs_args[i], send), daemon=True)
            proc.start()
            send.close()
            running[i] = (proc, recv, time.monotonic())
        mp.connection.wait([r for _, r, _ in running.values()], timeout=0.2)
        for i, (proc, recv, t0) in list(running.items()):
            model = str(jobs_args[i][0])
            row = None
            if recv.poll():
                try:
                    row = recv.recv()
                except EOFError:                    # the worker died before it could answer
                    proc.join(5)
                    row = Row(model=model, error=f"worker crashed ({_exit_reason(proc.exitcode)})")
            elif not proc.is_alive():
                proc.join()
                row = Row(model=model, error=f"worker crashed ({_exit_reason(proc.exitcode)})")
            elif time.monotonic() - t0 > timeout:
                proc.kill()
                proc.join()
                row = Row(model=model, error=f"timed out after {timeout:g} s")
            if row is not None:
                row.seconds = row.seconds or round(time.monotonic() - t0, 3)
                proc.join(5)
                recv.close()
                del running[i]
                rows[i] = row
                progress(row)
    return rows


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        import signal
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


# ---- progress and summary ----------------------------------------------------------------------------------
class Progress:
    """A progress bar on a terminal (tqdm); plain lines otherwise, so logs stay readable."""

    def __init__(self, total: int, stream=None):
        self.stream = stream or sys.stderr
        self.done = 0
        self.total = total
        self.bar = None
        if self.stream.isatty():
            from tqdm import tqdm
            tqdm.monitor_interval = 0       # no monitor thread: one bar, updated from this thread only
            self.bar = tqdm(total=total, unit="model", file=self.stream, dynamic_ncols=True)

    def __call__(self, row: Row) -> None:
        self.done += 1
        state = "ok" if row.ok else "FAILED"
        if self.bar is not None:
            self.bar.set_postfix_str(f"{Path(row.model).name} {state}", refresh=False)
            self.bar.update(1)
        else:
            print(f"[{self.done}/{self.total}] {state} {row.model} ({row.seconds:.2f} s)"
                  + (f": {row.error}" if row.error else ""), file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def table(rows: list[Row]) -> str:
    head = ("model", "nodes", "Transposes", "conflicts", "verdict", "time", "error")
    body = [(r.model, _s(r.nodes), _s(r.transposes), _s(r.conflicts), r.verdict or ("" if r.ok else "-"),
             f"{r.seconds:.2f} s", r.error) for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    widths[-1] = min(widths[-1], 80)
    fmt = lambda cells: "  ".join(str(c)[:w].ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body])


def _s(v) -> str:
    return "" if v is None else str(v)


def summary_bytes(rows: list[Row], path: str) -> bytes:
    if path.lower().endswith(".json"):
        return (json.dumps({"models": [asdict(r) for r in rows],
                            "converted": sum(r.ok for r in rows), "failed": sum(not r.ok for r in rows)},
                           indent=2) + "\n").encode()
    if path.lower().endswith(".csv"):
        import csv
        import io
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow(asdict(r))
        return buf.getvalue().encode()
    raise InspectorError(f"--summary {path}: use a .csv or .json file name")


def finish(rows: list[Row], summary: str | None, what: str = "converted", out=None) -> int:
    """`out`: the atomic.OutputSet the summary was checked in before the run."""
    print(table(rows))
    failed = sum(not r.ok for r in rows)
    print(f"{len(rows) - failed} {what}, {failed} failed")
    if summary:
        from inspector.core.io.atomic import OutputSet
        out = out or OutputSet()
        with out:
            out.write(summary, summary_bytes(rows, summary))
    return 1 if failed else 0


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# ---- convert MODELS… -o OUTDIR/ ----------------------------------------------------------------------------
def is_batch(args) -> bool:
    out = args.output or ""
    return bool(args.more) or os.path.isdir(args.model) or (glob.has_magic(args.model)
                                                             and not os.path.exists(args.model)) \
        or out.endswith(("/", os.sep)) or os.path.isdir(out)      # (os.path: an over-long name is no folder)


def add_arguments(p, validate: bool = False) -> None:
    """The options every batch command shares (convert, validate, check)."""
    b = p.add_argument_group("batch mode (several models, a folder or a glob)")
    b.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes (default: the CPU count)")
    if validate:
        b.add_argument("--validate", action="store_true", help="validate each conversion against LiteRT")
    b.add_argument("--summary", metavar="FILE.csv|.json", help="write the summary table to a file")
    b.add_argument("--timeout", type=float, default=600, metavar="S",
                   help="give up on a model after S seconds (default 600)")


def run_batch(task: Callable[..., Row], jobs_args: list[tuple], args, inputs: list, outputs=(),
              what: str = "converted") -> int:
    """Check every target as one set (no output or summary may be an input, a special file or another target),
    run the tasks in workers with progress, print the summary table and write --summary."""
    from inspector.core.io.atomic import OutputSet
    jobs = args.jobs or default_jobs()
    if jobs < 1:
        raise InspectorError("--jobs must be at least 1")
    targets = OutputSet(inputs)
    for o in outputs:
        targets.add(o)
    if args.summary:
        summary_bytes([], args.summary)  # a bad suffix is refused before the run, not after it
        targets.add(args.summary)
    progress = Progress(len(jobs_args))
    try:
        rows = run_all(task, jobs_args, jobs, args.timeout, progress)
    finally:
        progress.close()
    return finish(rows, args.summary, what, out=targets)


def convert_many(args, prepare: Callable) -> int:
    """`prepare(args, model)` gives the Session for one model with the command line's options (cli.convert's)."""
    for flag, what in (("pin", "--pin"), ("session", "--session"), ("report", "--report")):
        if getattr(args, flag):
            raise InspectorError(f"{what} names one model's tensors or file: convert that model on its own")
    models = expand([args.model] + list(args.more))
    if not models:
        raise InspectorError(f"no .tflite model found in {' '.join([args.model] + list(args.more))}")
    outdir = Path(args.output)
    if outdir.exists() and not outdir.is_dir():
        raise InspectorError(f"-o {args.output}: with several models -o must be a folder")
    outdir.mkdir(parents=True, exist_ok=True)
    import inspector.core.session.document  # noqa: F401  (imported once here: forked workers start with it loaded)
    outputs = output_paths(models, outdir)
    return run_batch(_convert_task, [(str(m), str(o), args, prepare) for m, o in zip(models, outputs)], args,
                     models, outputs)


def _convert_task(model: str, output: str, args, prepare: Callable) -> Row:
    t0 = time.monotonic()
    row = Row(model=model, output=output)
    try:
        session = prepare(args, model)
        session.convert(check=False)
        from inspector.core.proof.ort_check import check_session
        check_session(session, skip=getattr(args, "no_ort_check", False))
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        session.export(output, overwrite_source=args.force)
        report = session.report()
        row.nodes, row.transposes, row.conflicts = report["nodes"], report["transposes"], len(report["conflicts"])
        row.ok = True
        if args.validate:
            from inspector.core.proof.validate import headline
            v = session.validate(intermediates=False)
            row.verdict, row.ok = v.verdict, bool(v.ok)
            if not v.ok:
                row.error = headline(v)
    except InspectorError as e:
        row.error = str(e).splitlines()[0]
    row.seconds = round(time.monotonic() - t0, 3)
    return row


# ---- validate MODELS… OUTDIR/ and check MODELS… ----------------------------------------------------------------
def _many(items: list[str]) -> bool:
    return len(items) > 1 or any(os.path.isdir(i) or (glob.has_magic(i) and not os.path.exists(i)) for i in items)


def is_validate_batch(args) -> bool:
    return _many([args.tflite]) or os.path.isdir(args.onnx)


def validate_many(args) -> int:
    """Each TFLite model against OUTDIR/NAME.onnx, the file `convert MODELS… -o OUTDIR/` wrote for it."""
    if args.json:
        raise InspectorError("--json describes one model: with several, use --summary FILE.json")
    models = expand([args.tflite])
    if not models:
        raise InspectorError(f"no .tflite model found in {args.tflite}")
    onnx = output_paths(models, Path(args.onnx))
    import inspector.core.proof.validate  # noqa: F401  (forked workers start with it loaded)
    return run_batch(_validate_task, [(str(m), str(o), args) for m, o in zip(models, onnx)], args, models + onnx,
                     what="validated")


def _validate_task(model: str, onnx: str, args) -> Row:
    from inspector.core.io.loader import load_model
    from inspector.core.proof.validate import headline, validate_files
    t0 = time.monotonic()
    row = Row(model=model, output=onnx)
    try:
        if not os.path.isfile(onnx):
            raise InspectorError(f"no ONNX model at {onnx}")
        v = validate_files(load_model(model), onnx, seed=args.seed, batch=args.batch, rtol=args.rtol,
                           floor=None if args.no_floor else True)
        row.verdict, row.ok = v.verdict, bool(v.ok)
        row.error = "" if v.ok else headline(v)
    except InspectorError as e:
        row.error = str(e).splitlines()[0]
    row.seconds = round(time.monotonic() - t0, 3)
    return row


def is_check_batch(args) -> bool:
    return _many(args.model)


def check_many(args) -> int:
    if args.json:
        raise InspectorError("--json describes one model: with several, use --summary FILE.json")
    models = expand(args.model, suffixes=(".onnx",))
    if not models:
        raise InspectorError(f"no .onnx model found in {' '.join(args.model)}")
    import inspector.core.metadata.lint  # noqa: F401  (forked workers start with it loaded)
    return run_batch(_check_task, [(str(m), args.target) for m in models], args, models, what="without errors")


def _check_task(model: str, target: str) -> Row:
    from inspector.cli._metadata_args import load_onnx
    from inspector.core.metadata.lint import lint
    t0 = time.monotonic()
    row = Row(model=model)
    try:
        findings = lint(load_onnx(model), target)
        errors = [f for f in findings if f.severity == "error"]
        row.ok = not errors
        row.verdict = f"{len(errors)} error(s), {len(findings) - len(errors)} warning(s)"
        row.error = f"{errors[0].message} [{errors[0].code}]" if errors else ""
    except InspectorError as e:
        row.error = str(e).splitlines()[0]
    row.seconds = round(time.monotonic() - t0, 3)
    return row
