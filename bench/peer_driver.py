"""Runs inside bench/.peers-venv: one peer converts each model it is sent, a warm-up then timed runs (runs_for).

Timed: the peer's own file-to-file call (tflite2onnx.convert: read, convert, onnx.save + basic checker;
tf2onnx.convert.from_tflite(output_path=...): read, convert, optimise, save).
"""
import argparse
import contextlib
import gc
import json
import logging
import os
import sys
import time
import traceback
import warnings


BUDGET, MAX_RUNS = 0.25, 50


def runs_for(warmup: float, runs: int) -> int:
    """At least `runs`; fast conversions get more (up to MAX_RUNS or about BUDGET seconds), because a median of 5
    sub-millisecond runs moved by 20-30 % between bench runs. Ours and the peers' use the same rule."""
    return max(runs, min(MAX_RUNS, int(BUDGET / max(warmup, 1e-6))))


@contextlib.contextmanager
def no_gc():
    """Timed runs without the cyclic garbage collector, as timeit does: a collection's cost depends on everything
    else the process holds (the bench's own results, earlier models), not on the conversion timed."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def converter(peer):
    if peer == "tflite2onnx":
        import tflite2onnx
        return lambda src, dst: tflite2onnx.convert(src, dst)
    from tf2onnx import convert
    return lambda src, dst: convert.from_tflite(src, output_path=dst)


def timed(fn, model, out, runs, adapt=True):
    """A warm-up, then `runs` timed calls (with `adapt`, runs_for's number; 0 runs: only the warm-up)."""
    result = {"ok": False}
    try:
        t = time.perf_counter()
        fn(model, out)
        result["warmup"] = time.perf_counter() - t
        if adapt and runs:
            runs = runs_for(result["warmup"], runs)
        times = []
        with no_gc():
            for _ in range(runs):
                t = time.perf_counter()
                fn(model, out)
                times.append(time.perf_counter() - t)
        result.update(ok=os.path.exists(out), times=times)
        if not result["ok"]:
            result["error"] = "no output file written"
    except BaseException as e:                       # any failure of the peer is a result, not a crash
        msg = (str(e).strip().splitlines() or [""])[0]
        frames = traceback.extract_tb(e.__traceback__)
        where = f" at {'/'.join(frames[-1].filename.split('/')[-2:])}:{frames[-1].lineno}" if frames else ""
        result["error"] = (f"{type(e).__name__}{where}: {msg}" if msg else f"{type(e).__name__}{where}")[:200]
    return result


def main():
    """Reads one JSON request per line on stdin ({model, out, runs, adapt}), answers one JSON line each, so the peer's
    imports (TensorFlow's several seconds) happen once per bench, outside every timed run."""
    ap = argparse.ArgumentParser()
    ap.add_argument("peer", choices=["tflite2onnx", "tf2onnx"])
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    answers = os.fdopen(os.dup(1), "w")             # the protocol; anything the peers print goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    fn = converter(args.peer)
    logging.disable(logging.WARNING)                # tf2onnx resets logging on import
    print(json.dumps({"ready": True}), file=answers, flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        answer = timed(fn, req["model"], req["out"], req["runs"], req.get("adapt", True))
        print(json.dumps(answer), file=answers, flush=True)


if __name__ == "__main__":
    main()
