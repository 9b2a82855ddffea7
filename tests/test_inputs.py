"""Every input through one guarded opener, and session files checked whole before anything is applied.

Regressions from the attack run of issue 22: ONNX external data naming a FIFO (a hang in info/check/edit/compare)
or a folder (a traceback); `--session /dev/zero` (reading until memory ran out) or a FIFO (a hang); session values
that escaped validation (Infinity, 100k-deep nesting, a pin key "²"); invalid pins or opsets applied, then reported.
Commands that hung on the old code run in a subprocess with a timeout, so a regression fails instead of hanging.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inspector.cli import main
from inspector.core.ir.errors import ModelLoadError
from inspector.core.io.inputs import SESSION_LIMIT
from inspector.core.io.onnx_reader import load_proto, read_onnx
from inspector.core.session.session import Session
from inspector.core.session.pipeline import ConvertOptions
from inspector.core.session.session_file import SessionError

from .conftest import ROOT
from .test_outputs import model  # noqa: F401  (RELU on x [1, 3, 5, 7])


def _cli(*argv, timeout: float = 60) -> subprocess.CompletedProcess:
    """The CLI in its own process: a hang is a TimeoutExpired failure, not a stuck suite."""
    return subprocess.run([sys.executable, "-m", "inspector", *map(str, argv)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _external_model(folder: Path, location: str) -> Path:
    from .fuzz_cases import _external_model as make
    path = folder / "model.onnx"
    path.write_bytes(make(location).SerializeToString())
    return path


@pytest.mark.parametrize("special, kind", [("fifo", "a pipe"), ("folder", "a folder")])
def test_external_data_that_is_no_regular_file_is_refused_in_one_line(tmp_path, special, kind):
    target = tmp_path / "weights.bin"
    os.mkfifo(target) if special == "fifo" else target.mkdir()
    path = _external_model(tmp_path, "weights.bin")
    for reader in (read_onnx, load_proto):
        with pytest.raises(ModelLoadError, match=f"external data 'weights.bin' not a regular file \\({kind}\\)"):
            reader(path)
    for argv in (("info", path), ("edit", path, "-o", tmp_path / "o.onnx", "--doc-string", "d")):
        run = _cli(*argv)
        assert run.returncode == 1 and run.stderr.count("\n") == 1 and "not a regular file" in run.stderr
    assert not (tmp_path / "o.onnx").exists()


def test_external_data_is_inlined_by_load_proto(tmp_path):
    (tmp_path / "weights.bin").write_bytes(bytes(range(16)) * 2)
    path = _external_model(tmp_path, "weights.bin")
    (w,) = load_proto(path).graph.initializer
    assert not w.external_data and w.raw_data == bytes(range(16))


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_session_from_a_device_or_pipe_is_refused(model, tmp_path, special):  # noqa: F811
    path = special if special.startswith("/") else tmp_path / "s.json"
    if special == "fifo":
        os.mkfifo(path)
    run = _cli("convert", model, "-o", tmp_path / "o.onnx", "--session", path)
    assert run.returncode == 1 and run.stderr.count("\n") == 1, run.stderr
    assert "not a regular file" in run.stderr and not (tmp_path / "o.onnx").exists()


def test_an_oversized_session_is_refused_before_reading(model, tmp_path):  # noqa: F811
    path = tmp_path / "s.json"
    with open(path, "wb") as f:
        f.truncate(SESSION_LIMIT + 1)
    with pytest.raises(SessionError, match=f"more than a session file may hold \\({SESSION_LIMIT} bytes\\)"):
        Session.open(model).load_decisions(str(path))


def _session(tmp_path, text: str) -> str:
    path = tmp_path / "s.inspector.json"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text, words", [
    ('{"version": 1, "metadata": {"model_version": Infinity}}', "Infinity is not a number a session file can hold"),
    ('{"version": 1, "metadata": {"model_version": 1e999}}', "1e999 is out of range"),
    ('{"version": 1, "pins": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested 100001 levels deep"),
    ("[]", "a JSON list, not an object"),
    ("null", "a JSON NoneType, not an object"),
    ('"x"', "a JSON str, not an object"),
    ('{"version": 1, "pins": {"\u00b2": "NHWC"}}', "no tensor named '\u00b2'"),
    ('{"version": 1, "options": {"opset": 1}}', "opset 1 is not supported"),
    ('{"version": 1, "options": {"opset": 10000000000000000000000}}', "is not supported"),
    ('{"version": 1, "options": {"float_io": "yes"}}', "option 'float_io' must be true or false"),
    ('{"version": 1, "options": {"turbo": true}}', "unknown option 'turbo'"),
])
def test_session_values_that_escaped_validation_are_refused(model, tmp_path, text, words):  # noqa: F811
    s = Session.open(model)
    s.set_pin("x", "NHWC")
    with pytest.raises(SessionError) as e:
        s.load_decisions(_session(tmp_path, text))
    assert words in str(e.value)
    assert s.pins == {"x": "NHWC"} and s.options == ConvertOptions()


def test_every_problem_is_listed_and_nothing_applied(model, tmp_path, capsys):  # noqa: F811
    doc = {"version": 1, "pins": {"x": "NHWC", "nope": "keep", "y": "QQQQ"}, "options": {"opset": 1},
           "metadata": {"props": {"k": 5}}}
    path = _session(tmp_path, json.dumps(doc))
    code = main(["convert", str(model), "-o", str(tmp_path / "o.onnx"), "--session", path])
    err = capsys.readouterr().err.splitlines()
    assert code == 1 and err[0] == f"error: {path}: not applied, 4 problems"
    assert len(err) == 5 and all(line.startswith("  ") for line in err[1:])
    for words in ("no tensor named 'nope'", "pin y: ", "opset 1 is not supported", "metadata value of 'k'"):
        assert sum(words in line for line in err[1:]) == 1, (words, err)
    assert not (tmp_path / "o.onnx").exists()


def test_a_good_session_still_applies(model, tmp_path):  # noqa: F811
    s = Session.open(model)
    path = _session(tmp_path, json.dumps({"version": 1, "pins": {"y": "keep"}, "options": {"opset": 19},
                                          "metadata": {"doc_string": "d"}}))
    assert s.load_decisions(path) == []
    assert s.pins == {"y": "keep"} and s.options.opset == 19 and s.metadata.doc_string == "d"
