"""Fuzz the readers, the converter and metadata editing with mutated corpus models.

    python -m tests.fuzz --cases 10000 --corpus ../shared/corpus [--seed 0] [--workers 2]
    python -m tests.fuzz --corpus ../shared/corpus --repro SEED      # one case in-process, with its traceback

Each case runs in a worker process under a watchdog (a case over --timeout seconds is a hang: the worker is killed
and the case retried once in a fresh one) and an address-space limit of what the file can justify (a fixed
allowance plus a multiple of its size), so a hostile size or offset that makes us allocate shows up as a failure,
not as a slow machine. A failure is anything but a typed InspectorError with a readable message.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import selectors
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEMORY_ALLOWANCE = 256 << 20          # bytes over the worker's size when the case starts
MEMORY_PER_BYTE = 32                  # ... plus this many bytes per byte of the file
MESSAGE_LIMIT = 20_000
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def case_seed(seed: int, i: int) -> int:
    return seed * 1_000_000 + i


# -- worker side ---------------------------------------------------------------------------------------------------

class _Worker:
    def __init__(self, corpus: Path, tmp: str | None = None):
        from . import fuzz_cases as fc
        self.fc = fc
        self.tfl = fc.corpus_seeds(corpus)
        if not self.tfl:
            raise SystemExit(f"no corpus models under {corpus}")
        self.onx = fc.onnx_seeds(self.tfl)
        self.folder = fc.prepare_folder(Path(tempfile.mkdtemp(prefix="fuzz-", dir=tmp)))
        import ai_edge_litert.interpreter  # noqa: F401  (the reader's verifier: mapped before the memory limit)
        import inspector.cli.convert  # noqa: F401  (the attack cases run the CLI)

    def case(self, seed: int) -> tuple[str, str, bytes] | None:
        try:
            return self.fc.make_case(seed, self.tfl, self.onx, self.folder)
        except Exception:             # the generator could not build this mutation: not a product failure
            return None

    def run(self, seed: int) -> dict:
        from inspector.core.ir.errors import InspectorError
        if seed in INJECT:
            return self.injected(seed, INJECT[seed])
        case = self.case(seed)
        if case is None:
            return {"seed": seed, "outcome": "generator-skipped"}
        fmt, what, data = case
        out = {"seed": seed, "format": fmt, "what": what, "bytes": len(data), "outcome": "failed"}
        _limit_memory(len(data))
        try:
            out["outcome"] = self.fc.run_case(fmt, data, seed, self.folder)
        except InspectorError as e:
            msg = str(e)
            out["outcome"] = f"refused:{type(e).__name__}"
            if "MemoryError" in msg:
                out.update(failure="memory", detail=msg[:2000])
            elif not msg.strip() or len(msg) > MESSAGE_LIMIT or "Traceback" in msg:
                out.update(failure="unreadable message", detail=msg[:2000])
            elif CONTROL.search(msg):           # a name from the file must not drive the user's terminal
                out.update(failure="control characters in message", detail=repr(msg[:2000]))
        except MemoryError:
            out.update(failure="memory", detail=traceback.format_exc(limit=-8))
        except self.fc.Escaped as e:
            out.update(failure="external data escaped", detail=str(e))
        except BaseException as e:      # noqa: BLE001 - everything else is what we are looking for
            out.update(failure=type(e).__name__, detail=traceback.format_exc(limit=-8)[-4000:])
        finally:
            _limit_memory(None)
        return out


    def injected(self, seed: int, kind: str) -> dict:
        """A deliberate fault (INSPECTOR_FUZZ_INJECT), so the harness's own watchdogs can be tested."""
        out = {"seed": seed, "format": "injected", "what": kind, "bytes": 0, "outcome": "failed"}
        _limit_memory(0)
        try:
            if kind == "hang":
                time.sleep(3600)
            elif kind == "alloc":
                bytearray(MEMORY_ALLOWANCE * 4)
            elif kind == "crash":
                os.abort()
            raise KeyError(kind)
        except MemoryError:
            out.update(failure="memory", detail="MemoryError")
        except KeyError as e:
            out.update(failure="KeyError", detail=repr(e))
        finally:
            _limit_memory(None)
        return out


# seed -> fault, from INSPECTOR_FUZZ_INJECT="12:hang,13:alloc" (tests of the harness only)
INJECT = {int(k): v for k, v in (x.split(":") for x in os.environ.get("INSPECTOR_FUZZ_INJECT", "").split(",") if x)}


def _limit_memory(size: int | None) -> None:
    soft = resource.RLIM_INFINITY
    if size is not None:
        with open("/proc/self/statm") as f:
            vm = int(f.read().split()[0]) * resource.getpagesize()
        soft = vm + MEMORY_ALLOWANCE + MEMORY_PER_BYTE * size
    resource.setrlimit(resource.RLIMIT_AS, (soft, resource.getrlimit(resource.RLIMIT_AS)[1]))


def worker_main(corpus: Path, tmp: str | None) -> None:
    """Reads case seeds from stdin, one per line; writes one JSON line per case to the original stdout."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)               # library chatter must not corrupt the protocol
    sys.setrecursionlimit(3000)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))      # a native crash is reported, not dumped into the repo
    w = _Worker(corpus, tmp)
    out.write("ready\n")
    for line in sys.stdin:
        out.write(json.dumps(w.run(int(line))) + "\n")


# -- parent side ---------------------------------------------------------------------------------------------------

@dataclass
class Summary:
    cases: int = 0
    seconds: float = 0.0
    outcomes: Counter = field(default_factory=Counter)
    failures: list[dict] = field(default_factory=list)
    formats: Counter = field(default_factory=Counter)

    def text(self, corpus: str, seed: int) -> str:
        lines = [f"fuzz: {self.cases} cases, {len(self.failures)} failures, {self.seconds:.0f} s "
                 f"(seed {seed}, corpus {corpus})",
                 "formats: " + ", ".join(f"{k} {v}" for k, v in sorted(self.formats.items())),
                 "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))]
        for f in self.failures:
            lines.append(f"FAIL seed {f['seed']} [{f['failure']}] {f.get('what', '')} ({f.get('bytes', '?')} bytes)"
                         f"\n  reproduce: python -m tests.fuzz --corpus {corpus} --repro {f['seed']}"
                         f"\n  " + str(f.get("detail", "")).strip().replace("\n", "\n  "))
        return "\n".join(lines)


class _Proc:
    def __init__(self, corpus: Path, log, tmp: str):
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
        self.p = subprocess.Popen([sys.executable, "-m", "tests.fuzz", "--worker", "--corpus", str(corpus),
                                   "--tmp", tmp],
                                  cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                                  text=True, bufsize=1)
        self.seed: int | None = None
        self.retry = False
        self.deadline = time.monotonic() + 300       # startup: reading seeds and converting the ONNX ones
        self.ready = False

    def send(self, seed: int, retry: bool, timeout: float) -> None:
        self.seed, self.retry, self.deadline = seed, retry, time.monotonic() + timeout
        self.p.stdin.write(f"{seed}\n")
        self.p.stdin.flush()

    def kill(self) -> None:
        self.p.kill()
        self.p.wait()


def run(cases: int, corpus: Path, seed: int = 0, workers: int = 2, timeout: float = 5.0,
        log_path: str | None = None) -> Summary:
    start = time.monotonic()
    todo = [(case_seed(seed, i), False) for i in range(cases)][::-1]
    summary = Summary()
    sel = selectors.DefaultSelector()
    log = open(log_path or os.devnull, "a")
    tmp = tempfile.TemporaryDirectory(prefix="fuzz-")      # every worker's folder, removed at the end
    procs: list[_Proc] = []

    def spawn():
        p = _Proc(corpus, log, tmp.name)
        procs.append(p)
        sel.register(p.p.stdout, selectors.EVENT_READ, p)

    def retire(p: _Proc):
        sel.unregister(p.p.stdout)
        procs.remove(p)
        p.kill()

    def fail(p: _Proc, kind: str, detail: str):
        summary.cases += 1
        summary.failures.append({"seed": p.seed, "failure": kind, "detail": detail})

    def feed(p: _Proc):
        if todo:
            s, retry = todo.pop()
            # The retry gets three times as long: a case past the limit on a machine loaded by other work (seen
            # at load average 5 on 2 cores) finishes then, while a real hang still never does.
            p.send(s, retry, timeout * 3 if retry else timeout)
        else:
            p.seed = None

    for _ in range(workers):
        spawn()
    try:
        while todo or any(p.seed is not None for p in procs):
            now = time.monotonic()
            wait = min((p.deadline for p in procs if p.seed is not None or not p.ready), default=now + 1) - now
            for key, _ in sel.select(max(0.0, wait)):
                p: _Proc = key.data
                line = p.p.stdout.readline()
                if not line:                        # died: a crash in native code, or the kernel's OOM killer
                    code = p.p.wait()
                    retire(p)
                    if p.seed is not None:
                        fail(p, "crash", f"worker exited with {code}")
                    elif not p.ready:
                        raise RuntimeError(f"fuzz worker failed to start (exit {code}); see --log")
                    spawn()
                    continue
                if not p.ready:
                    p.ready = True
                else:
                    res = json.loads(line)
                    summary.cases += 1
                    summary.outcomes[f"{res.get('format', 'none')}:{res['outcome']}"] += 1
                    if "format" in res:
                        summary.formats[res["format"]] += 1
                    if "failure" in res:
                        summary.failures.append(res)
                feed(p)
            now = time.monotonic()
            for p in list(procs):
                if p.deadline < now and (p.seed is not None or not p.ready):
                    if not p.ready:
                        raise RuntimeError("fuzz worker did not start in time")
                    retire(p)
                    if p.retry:
                        fail(p, "hang", f"over {timeout:g} s, then over {3 * timeout:g} s in a fresh worker")
                    else:                           # a loaded machine is not a hang: try once more
                        todo.append((p.seed, True))
                    spawn()
    finally:
        for p in list(procs):
            retire(p)
        log.close()
        tmp.cleanup()
    summary.seconds = time.monotonic() - start
    summary.failures.sort(key=lambda f: f["seed"])
    return summary


def repro(corpus: Path, seed: int, save: str | None) -> int:
    from . import fuzz_cases as fc
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        w = _Worker(corpus, tmp)
        fmt, what, data = fc.make_case(seed, w.tfl, w.onx, w.folder)
        print(f"case {seed}: {fmt}, {what}, {fc.fingerprint(data)}")
        if save:
            Path(save).write_bytes(data)
            print(f"saved to {save}")
        print("outcome:", fc.run_case(fmt, data, seed, w.folder))   # any other exception shows its traceback
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds before a case counts as a hang")
    ap.add_argument("--repro", type=int, help="run one case in this process and show any traceback")
    ap.add_argument("--save", help="with --repro: write the case's bytes to this file")
    ap.add_argument("--log", help="append the workers' stderr to this file")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    corpus = Path(args.corpus).resolve()
    if args.worker:
        worker_main(corpus, args.tmp)
        return 0
    if args.repro is not None:
        return repro(corpus, args.repro, args.save)
    s = run(args.cases, corpus, args.seed, args.workers, args.timeout, args.log)
    print(s.text(args.corpus, args.seed))
    return 1 if s.failures else 0


if __name__ == "__main__":
    sys.exit(main())
