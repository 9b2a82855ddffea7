"""Many models at once: `convert MODELS… -o OUTDIR/` (and `check` over many files). Each model runs in a worker
process of its own, so one that crashes or hangs its worker is one failed row and the batch goes on."""
from __future__ import annotations

import glob
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from inspector.cli import UsageError
from inspector.core.ir.errors import InspectorError

MODEL_SUFFIXES = (".tflite",)
JOBS_PER_CPU = 4                # --jobs above this many per CPU only adds memory and switching
FRESHEN_SECONDS = 60            # how often a batch marks its staged temporaries fresh (atomic.STALE_SECONDS is 300)
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


def expand(items: list[str], suffixes=MODEL_SUFFIXES) -> tuple[list[Path], list[Row]]:
    """Files as given, folders searched recursively for models, globs expanded (for shells that did not);
    each model once, in a stable order. Returns the models and a failed row for each folder that could not be
    searched (unreadable, a path over the system's limit)."""
    found: list[Path] = []
    failed: list[Row] = []
    for item in items:
        p = Path(item)
        if os.path.isdir(p):                     # (os.path: an unreadable or over-long path is no folder, no error)
            found += _search(p, suffixes, failed)
        elif os.path.lexists(p) or not glob.has_magic(item):
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
    return out, failed


def _search(top: Path, suffixes, failed: list[Row]) -> list[Path]:
    """Every entry named like a model below `top`, sorted: files, and also dangling links, pipes and devices, whose
    reading fails in the worker as a row of their own. Links to folders are followed, each folder searched once."""
    found, seen, stack = [], set(), [top]
    while stack:
        folder = stack.pop()
        try:
            st = os.stat(folder)
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            with os.scandir(folder) as entries:
                entries = list(entries)
        except OSError as e:
            from inspector.core.io.atomic import reason
            failed.append(Row(model=str(folder), error=f"cannot search this folder: {reason(e)}"))
            continue
        for e in entries:
            try:
                is_dir = e.is_dir()
            except OSError:                      # a link loop: not a folder
                is_dir = False
            if is_dir:
                stack.append(Path(e.path))
            elif os.path.splitext(e.name)[1].lower() in suffixes:
                found.append(Path(e.path))
    return sorted(found)


def output_paths(models: list[Path], outdir: Path, suffix: str = ".onnx") -> list[Path]:
    """OUTDIR/<name>.onnx; where two models share a name, their folders below the common one are kept.
    (String operations: this runs once per model before any work starts.)"""
    stems = [os.path.splitext(m.name)[0] for m in models]
    if len(set(stems)) == len(stems):
        return [outdir / (s + suffix) for s in stems]
    absolute = [os.path.abspath(m) for m in models]
    common = len(os.path.commonpath([os.path.dirname(a) for a in absolute]).rstrip(os.sep)) + 1
    return [outdir / (os.path.splitext(a[common:])[0] + suffix) for a in absolute]


# ---- workers -----------------------------------------------------------------------------------------------
def _child(task: Callable[..., Row], args: tuple, conn) -> None:
    import gc
    gc.enable()                                     # the command paused it for its start-up (cli.main): a worker
    try:                                            # validates, and converts with it paused by the conversion
        row = task(*args)
    except BaseException as e:                      # anything: the parent turns it into a failed row
        row = Row(model=str(args[0]), error=f"{type(e).__name__}: {e}".splitlines()[0])
    conn.send(row)
    conn.close()


def run_all(task: Callable[..., Row], jobs_args: list[tuple], jobs: int, timeout: float,
            progress: Callable[[Row], None], temporaries: list[str | None] | None = None) -> list[Row]:
    """Run task(*args) for each entry, at most `jobs` worker processes at a time; rows in input order.
    `temporaries[i]`: the file task i may leave; removed here when its worker crashes, is killed or is left
    running by an interruption (the caller adopts the others). Every minute they are marked fresh, so a later
    write into their folder does not take them for a killed run's."""
    import multiprocessing as mp
    import multiprocessing.connection

    from inspector.core.emit.convert import remove_check_folders
    from inspector.core.io.atomic import touch
    ctx = mp.get_context("fork")                    # the parent has imported the converter: children start warm
    rows: list[Row | None] = [None] * len(jobs_args)
    pending = list(range(len(jobs_args)))[::-1]
    running: dict[int, tuple] = {}
    discard = (lambda i: Path(temporaries[i]).unlink(missing_ok=True) if temporaries and temporaries[i] else None)
    fresh = time.monotonic()
    try:
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
                row, answered = _outcome(proc, recv, t0, timeout, str(jobs_args[i][0]))
                if row is not None:
                    if not answered:
                        discard(i)                  # crashed or killed: its temporary is ours to remove,
                        remove_check_folders(proc.pid)      # and the checker's folder if it died checking
                    row.seconds = row.seconds or round(time.monotonic() - t0, 3)
                    recv.close()
                    del running[i]
                    rows[i] = row
                    progress(row)
            if temporaries and time.monotonic() - fresh >= FRESHEN_SECONDS:
                touch(t for t in temporaries if t)
                fresh = time.monotonic()
    finally:
        for i, (proc, recv, _) in running.items():  # only after an interruption
            proc.kill()
            proc.join()
            recv.close()
            discard(i)
            remove_check_folders(proc.pid)
    return rows


def _outcome(proc, recv, t0: float, timeout: float, model: str) -> tuple[Row | None, bool]:
    """(the worker's row, True); (a failed row, False) for a crash or timeout, the worker then dead; or
    (None, False) while it works."""
    if recv.poll():
        try:
            row = recv.recv()
        except EOFError:                            # the worker died before it could answer
            proc.join(5)
            return Row(model=model, error=f"worker crashed ({_exit_reason(proc.exitcode)})"), False
        proc.join(5)
        return row, True
    if not proc.is_alive():
        proc.join()
        return Row(model=model, error=f"worker crashed ({_exit_reason(proc.exitcode)})"), False
    if time.monotonic() - t0 > timeout:
        proc.kill()
        proc.join()
        return Row(model=model, error=f"timed out after {timeout:g} s"), False
    return None, False


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
    widths[0], widths[-1] = min(widths[0], 100), min(widths[-1], 80)
    body = [(r[0] if len(r[0]) <= widths[0] else "…" + r[0][1 - widths[0]:],) + r[1:] for r in body]  # the name's end
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


def finish(rows: list[Row], summary: str | None, what: str, out) -> int:
    """Print the table, then write the summary and every staged ONNX file of `out` (the atomic.OutputSet the
    targets were checked in before the run) together: all or none, and a line that says which."""
    from inspector.core.io.atomic import UNCHANGED, WriteError
    print(table(rows))
    failed = sum(not r.ok for r in rows)
    print(f"{len(rows) - failed} {what}, {failed} failed")
    onnx = out.staged()
    files = [f"{onnx} ONNX file(s)"] * bool(onnx) + [f"the summary {summary}"] * bool(summary)
    try:
        with out:
            if summary:
                out.write(summary, summary_bytes(rows, summary))
    except WriteError as e:
        if not onnx:
            raise
        raise WriteError(e.path, e.reason.removesuffix(UNCHANGED) + f"; nothing was written, neither "
                         f"{' nor '.join(files)} (a batch writes all or none), and any existing file is unchanged")
    if files:
        print(f"wrote {' and '.join(files)}")
    return 1 if failed else 0


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def check_options(args) -> int:
    """Refuse wrong batch option values (UsageError, exit 2) before anything is searched or created; returns the
    number of workers: --jobs, at most JOBS_PER_CPU per CPU (saying so when it cuts it)."""
    if getattr(args, "json", False):
        raise UsageError("--json describes one model: with several, use --summary FILE.json")
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise UsageError(f"--timeout {args.timeout:g}: give the seconds a model may take, a number above 0")
    if args.summary and not args.summary.lower().endswith((".csv", ".json")):
        raise UsageError(f"--summary {args.summary}: use a .csv or .json file name")
    if args.jobs is None:
        return default_jobs()
    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: give the number of worker processes, at least 1")
    cap = JOBS_PER_CPU * default_jobs()
    if args.jobs > cap:
        print(f"note: --jobs {args.jobs} is over {JOBS_PER_CPU} per CPU: using {cap} worker processes "
              f"({default_jobs()} CPU(s))", file=sys.stderr)
    return min(args.jobs, cap)


def _folders(outputs: list[Path]) -> list[Path]:
    """Create the folders the outputs go into (same-name models keep theirs); returns those it created, so a
    refusal can remove them. One `error:` line (exit 1) for a folder that cannot be made."""
    from inspector.core.io.atomic import reason
    created: list[Path] = []
    for folder in sorted({Path(f) for f in {os.path.dirname(o) for o in outputs}}, key=lambda f: len(f.parts)):
        missing = []
        for f in [folder, *folder.parents]:
            if os.path.lexists(f):
                break
            missing.append(f)
        for f in reversed(missing):
            try:
                f.mkdir()
            except OSError as e:
                _remove_folders(created)
                raise InspectorError(f"cannot create folder {f}: {reason(e)}") from None
            created.append(f)
    return created


def _remove_folders(created: list[Path]) -> None:
    for f in reversed(created):
        try:
            f.rmdir()
        except OSError:
            pass


# ---- convert MODELS… -o OUTDIR/ ----------------------------------------------------------------------------
def run_batch(task: Callable[..., Row], jobs_args: list[tuple], args, inputs: list, outputs=(),
              what: str = "converted", failed: list[Row] = (), jobs: int = 1) -> int:
    """Check every target as one set (no output or summary may be an input, a special file or another target),
    run the tasks in workers with progress (`failed`: rows made before, for folders that could not be searched),
    print the summary table and write the outputs with --summary, all or none. With `outputs`, task i gets one
    more argument: the temporary its output (`outputs[i]`) goes to, adopted into the set or removed here."""
    from inspector.core.io.atomic import OutputSet, remove_stale, temporary_for
    targets = OutputSet(inputs)
    temporaries = [temporary_for(targets.add(o)) for o in outputs] or None
    if args.summary:
        targets.add(args.summary)
    for folder in {os.path.dirname(t) for t in temporaries or ()}:
        remove_stale(Path(folder))
    if temporaries:
        jobs_args = [a + (t,) for a, t in zip(jobs_args, temporaries)]
    progress = Progress(len(jobs_args) + len(failed))
    try:
        for row in failed:
            progress(row)
        rows = run_all(task, jobs_args, jobs, args.timeout, progress, temporaries)
        for o, t in zip(outputs, temporaries or ()):
            if os.path.exists(t):
                targets.adopt(o, t)
    except BaseException:
        targets.abort()
        for t in temporaries or ():
            Path(t).unlink(missing_ok=True)
        raise
    finally:
        progress.close()
    return finish(list(failed) + rows, args.summary, what, targets)


def convert_many(args, prepare: Callable) -> int:
    """`prepare(args, model)` gives the Session for one model with the command line's options (cli.convert's)."""
    for flag, what in (("pin", "--pin"), ("session", "--session"), ("report", "--report")):
        if getattr(args, flag):
            raise UsageError(f"{what} names one model's tensors or file: convert that model on its own")
    jobs = check_options(args)
    outdir = Path(args.output)
    if os.path.lexists(outdir) and not os.path.isdir(outdir):
        raise UsageError(f"-o {args.output}: with several models -o must be a folder")
    models, failed = expand([args.model] + list(args.more))
    if not models and not failed:
        raise InspectorError(f"no .tflite model found in {' '.join([args.model] + list(args.more))}")
    import inspector.core.session.session  # noqa: F401  (imported once here: forked workers start with it loaded)
    outputs = output_paths(models, outdir)
    created = _folders(outputs)
    try:
        return run_batch(_convert_task, [(str(m), str(o), args, prepare) for m, o in zip(models, outputs)],
                         args, models, outputs, failed=failed, jobs=jobs)
    finally:
        _remove_folders(created)              # those left empty: nothing was written into them


class _Staging:
    """What a worker's export writes into: only the temporary its parent named (the parent renames it with the
    batch's other outputs at the end, or removes it if this worker dies)."""

    def __init__(self, tmp: str):
        self.tmp = tmp

    def write(self, path: str, data) -> str:
        from inspector.core.io.atomic import stage
        stage(Path(path).absolute(), data, self.tmp, path)
        return self.tmp


def _convert_task(model: str, output: str, args, prepare: Callable, tmp: str) -> Row:
    t0 = time.monotonic()
    row = Row(model=model, output=output)
    try:
        session = prepare(args, model)
        session.convert(check=False)
        session.export(output, out=_Staging(tmp))
        if not getattr(args, "no_ort_check", False):
            _run_check(session, tmp)
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


def _run_check(session, tmp: str) -> None:
    """ONNX Runtime's run check on the file export staged (the model serialised once, not again for the check); a
    refused one is removed: the parent adopts whatever temporary exists."""
    from inspector.core.proof.ort_check import check_bytes, has_loop, input_sizes, note_check
    try:
        note_check(session, check_bytes(tmp, not has_loop(session.result.model.graph), input_sizes(session.result)))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---- validate MODELS… OUTDIR/ and check MODELS… ----------------------------------------------------------------
def validate_many(args) -> int:
    """Each TFLite model against OUTDIR/NAME.onnx, the file `convert MODELS… -o OUTDIR/` wrote for it."""
    jobs = check_options(args)
    models, failed = expand([args.tflite])
    if not models and not failed:
        raise InspectorError(f"no .tflite model found in {args.tflite}")
    onnx = output_paths(models, Path(args.onnx))
    import inspector.core.proof.validate  # noqa: F401  (forked workers start with it loaded)
    return run_batch(_validate_task, [(str(m), str(o), args) for m, o in zip(models, onnx)], args, models + onnx,
                     what="validated", failed=failed, jobs=jobs)


def _validate_task(model: str, onnx: str, args) -> Row:
    from inspector.core.io.loader import load_model
    from inspector.core.proof.validate import headline, validate_files
    t0 = time.monotonic()
    row = Row(model=model, output=onnx)
    try:
        if not os.path.isfile(onnx):
            raise InspectorError(f"no ONNX model at {onnx}")
        from inspector.core.proof.input_shapes import parse
        v = validate_files(load_model(model), onnx, seed=args.seed, batch=args.batch, rtol=args.rtol,
                           floor=None if args.no_floor else True, input_shapes=parse(args.input_shape) or None)
        row.verdict, row.ok = v.verdict, bool(v.ok)
        row.error = "" if v.ok else headline(v)
    except InspectorError as e:
        row.error = str(e).splitlines()[0]
    row.seconds = round(time.monotonic() - t0, 3)
    return row


def check_many(args) -> int:
    jobs = check_options(args)
    models, failed = expand(args.model, suffixes=(".onnx",))
    if not models and not failed:
        raise InspectorError(f"no .onnx model found in {' '.join(args.model)}")
    import inspector.core.metadata.lint  # noqa: F401  (forked workers start with it loaded)
    return run_batch(_check_task, [(str(m), args.target) for m in models], args, models, what="without errors",
                     failed=failed, jobs=jobs)


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
