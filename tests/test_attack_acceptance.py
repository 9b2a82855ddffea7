"""Issue 22's acceptance run, for the cases this repository's CLI reads and writes: each listed attack under an
8 GiB address-space limit and a 60 s alarm, in one child process, checked by the fuzz attacks' contract (exit 0/1/2,
one `error:` line, no traceback, no changed file that was not an output). `compare` and `validate` options are the
proof's own tests."""
from __future__ import annotations

import json
import subprocess
import sys

from .conftest import ROOT

CASES = {
    "--report is the input": {"class": "special_file", "role": "report", "special": "input"},
    "--report is -o": {"class": "special_file", "role": "report", "special": "output"},
    "-o is a FIFO": {"class": "special_file", "role": "output", "special": "fifo"},
    "-o is a character device": {"class": "special_file", "role": "output", "special": "device"},
    "-o is a symlink loop": {"class": "special_file", "role": "output", "special": "loop"},
    "-o has a 300-character name": {"class": "special_file", "role": "output", "special": "long"},
    "a 10-deep WHILE chain": {"class": "while_chain", "depth": 10, "kind": "WHILE", "cycle": False},
    "a 200-deep WHILE chain": {"class": "while_chain", "depth": 200, "kind": "WHILE", "cycle": False},
    "external data names a FIFO": {"class": "external_data", "target": "fifo", "offset": "0", "length": None,
                                   "command": "edit"},
    "external data names a folder": {"class": "external_data", "target": "folder", "offset": "0", "length": "16",
                                     "command": "info"},
    "--session is /dev/zero": {"class": "special_file", "role": "session", "special": "dev_zero"},
    "a session holding Infinity": {"class": "session_value",
                                   "text": '{"version": 1, "metadata": {"model_version": Infinity}}'},
    "a flatbuffer LiteRT refuses": {"class": "unverified", "position": "terminator", "seed": 0},
    "If bodies nested 32 deep": {"class": "onnx_nesting", "depth": 32, "shaped": False, "command": "info"},
    "If bodies nested 31 deep": {"class": "onnx_nesting", "depth": 31, "shaped": True, "command": "info",
                                 "exit": 0},
    "external data past 2 GiB": {"class": "external_data", "target": "past_2gib", "offset": "0", "length": "16",
                                 "command": "info", "exit": 0},
    "XDG_DATA_HOME is a file": {"class": "desktop", "xdg": "file", "uninstall": False},
    "an icons file in XDG_DATA_HOME": {"class": "desktop", "xdg": "icons_file", "uninstall": False},
}
# Issue 32's batch attacks: each with the exit code it must give (the contract checks the rest)
BATCH_CASES = {
    "two models named m.tflite in two folders": ({"attack": "same_name"}, 0),
    "--timeout 0": ({"attack": "option", "argv": ["--timeout", "0"]}, 2),
    "--timeout -5": ({"attack": "option", "argv": ["--timeout", "-5"]}, 2),
    "--timeout nan": ({"attack": "option", "argv": ["--timeout", "nan"]}, 2),
    "--timeout inf": ({"attack": "option", "argv": ["--timeout", "inf"]}, 2),
    "--jobs 0": ({"attack": "option", "argv": ["--jobs", "0"]}, 2),
    "--jobs -3": ({"attack": "option", "argv": ["--jobs", "-3"]}, 2),
    "--jobs 100000": ({"attack": "option", "argv": ["--jobs", "100000"]}, 0),
    "--summary with a bad suffix": ({"attack": "option", "argv": ["--summary", "s.txt"]}, 2),
    "check --json over a folder": ({"attack": "json", "command": "check"}, 2),
    "validate --json over a folder": ({"attack": "json", "command": "validate"}, 2),
    "a folder deeper than PATH_MAX": ({"attack": "deep"}, 1),
    "a dangling .tflite link": ({"attack": "dangling"}, 1),
    "a FIFO named .tflite": ({"attack": "fifo"}, 1),
    "-o OUT/ with a 300-character name": ({"attack": "out_long"}, 1),
    "-o OUT/ below a file": ({"attack": "out_below_file"}, 1),
}

DRIVER = """
import json, resource, signal, sys, tempfile
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))
import ai_edge_litert.interpreter, inspector.cli.convert
from tests.fuzz_attacks import run_attack

def alarm(*_):
    raise TimeoutError("over 60 s")
signal.signal(signal.SIGALRM, alarm)
folder = Path(tempfile.mkdtemp())
results = {}
for name, spec in json.loads(sys.argv[1]).items():
    signal.alarm(60)
    try:
        results[name] = run_attack(json.dumps(spec).encode(), folder)
    except BaseException as e:
        results[name] = f"FAILED {type(e).__name__}: {e}"[:1000]
    finally:
        signal.alarm(0)
print(json.dumps(results))
"""


def test_every_listed_attack_is_refused_in_one_line_under_8_gib():
    run = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(CASES)], cwd=ROOT, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.splitlines()[-1])
    assert results == {name: f"{spec['class']}:exit{spec.get('exit', 1)}" for name, spec in CASES.items()}


def test_every_batch_attack_is_a_row_or_one_line_under_8_gib():
    cases = {name: {"class": "batch", **spec} for name, (spec, _) in BATCH_CASES.items()}
    run = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(cases)], cwd=ROOT, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.splitlines()[-1])
    assert results == {name: f"batch:exit{code}" for name, (_, code) in BATCH_CASES.items()}
