"""`convert MODELS… -o OUTDIR/`: parallel workers, a summary that matches one-by-one conversion, and a bad,
crashing or hanging model costing one failed row, never the batch."""
from __future__ import annotations

import io
import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from inspector.cli import batch, main

MODELS = ["ops/abs.float32.tflite", "ops/conv-reshape-multiple-conv.float32.tflite", "ops/concat.float32.tflite",
          "ops/transposeconv-samepad-stride2.float32.tflite"]


@pytest.fixture
def folder(tmp_path, corpus) -> Path:
    src = tmp_path / "models"
    (src / "sub").mkdir(parents=True)
    for i, m in enumerate(MODELS):
        shutil.copy(corpus / m, (src / "sub" if i % 2 else src) / Path(m).name)
    (src / "notes.txt").write_text("not a model")
    return src


def test_folder_in_parallel_matches_one_by_one(folder, tmp_path, capsys):
    broken = folder / "broken.tflite"
    broken.write_bytes((folder / "abs.float32.tflite").read_bytes()[:300])
    summary = tmp_path / "summary.json"
    rc = main(["convert", str(folder), "-o", str(tmp_path / "out") + "/", "--jobs", "2", "--validate",
               "--summary", str(summary)])
    out = capsys.readouterr()
    assert rc == 1                                          # one model failed
    rows = {Path(r["model"]).name: r for r in json.loads(summary.read_text())["models"]}
    assert set(rows) == {Path(m).name for m in MODELS} | {"broken.tflite"}
    assert not rows["broken.tflite"]["ok"] and rows["broken.tflite"]["error"]
    assert "4 converted, 1 failed" in out.out
    assert out.err.count("] ok ") == 4 and "] FAILED " in out.err        # plain progress lines (not a TTY)
    for m in MODELS:
        row = rows[Path(m).name]
        alone = tmp_path / "alone" / (Path(m).stem + ".onnx")
        report = tmp_path / "alone" / (Path(m).stem + ".json")
        alone.parent.mkdir(exist_ok=True)
        assert main(["convert", str(row["model"]), "-o", str(alone), "--report", str(report)]) == 0
        single = json.loads(report.read_text())
        assert row["ok"] and row["verdict"] == "ok"
        assert (row["nodes"], row["transposes"], row["conflicts"]) == \
            (single["nodes"], single["transposes"], len(single["conflicts"]))
        assert Path(row["output"]).read_bytes() == alone.read_bytes()


def test_crashing_and_hanging_workers_are_failed_rows(folder, tmp_path, monkeypatch, capsys):
    real = batch._convert_task

    def task(model, output, *rest):
        if model.endswith("abs.float32.tflite"):
            os.kill(os.getpid(), signal.SIGKILL)
        if model.endswith("concat.float32.tflite"):
            time.sleep(60)
        return real(model, output, *rest)

    monkeypatch.setattr(batch, "_convert_task", task)          # forked workers inherit the patch
    summary = tmp_path / "s.csv"
    t0 = time.monotonic()
    rc = main(["convert", str(folder), "-o", str(tmp_path / "out"), "--jobs", "4", "--timeout", "5",
               "--summary", str(summary)])
    assert time.monotonic() - t0 < 50                           # the hung worker was not waited for
    capsys.readouterr()
    assert rc == 1
    lines = summary.read_text().splitlines()
    assert lines[0] == ",".join(batch.COLUMNS)
    by_name = {Path(line.split(",")[0]).name: line for line in lines[1:]}
    assert "worker crashed (killed by SIGKILL)" in by_name["abs.float32.tflite"]
    assert "timed out after 5 s" in by_name["concat.float32.tflite"]
    assert ",True," in by_name["conv-reshape-multiple-conv.float32.tflite"]


def test_same_names_keep_their_folders(tmp_path):
    a, b = tmp_path / "x" / "m.tflite", tmp_path / "y" / "z" / "m.tflite"
    assert batch.output_paths([a, b], tmp_path / "out") == [tmp_path / "out" / "x" / "m.onnx",
                                                            tmp_path / "out" / "y" / "z" / "m.onnx"]
    assert batch.output_paths([a], tmp_path / "out") == [tmp_path / "out" / "m.onnx"]


def test_globs_files_and_refusals(folder, tmp_path, capsys):
    found, unread = batch.expand([str(folder / "*.tflite"), str(folder / "sub")])
    assert unread == []
    assert [p.name for p in found] == sorted(Path(m).name for m in MODELS[0::2]) + \
        sorted(Path(m).name for m in MODELS[1::2])
    assert main(["convert", str(folder / "*.nothing"), "-o", str(tmp_path / "o/")]) == 1
    assert "matches no file" in capsys.readouterr().err
    assert main(["convert", str(folder), "-o", str(tmp_path / "o/"), "--pin", "x=NHWC"]) == 2     # a usage error


def test_progress_bar_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    stream = Tty()
    p = batch.Progress(2, stream)
    p(batch.Row(model="a.tflite", ok=True))
    p(batch.Row(model="b.tflite", error="boom"))
    p.close()
    text = stream.getvalue()
    assert "2/2" in text and "100%" in text and "[1/2]" not in text


def test_validate_and_check_over_a_converted_folder(folder, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["convert", str(folder), "-o", str(out) + "/", "--jobs", "2"]) == 0
    (out / "concat.float32.onnx").unlink()                     # one conversion missing: one failed row
    summary = tmp_path / "v.json"
    assert main(["validate", str(folder), str(out), "--jobs", "2", "--summary", str(summary)]) == 1
    rows = {Path(r["model"]).name: r for r in json.loads(summary.read_text())["models"]}
    assert "no ONNX model at" in rows["concat.float32.tflite"]["error"]
    for m in MODELS:
        if "concat" not in m:
            assert rows[Path(m).name]["ok"] and rows[Path(m).name]["verdict"] in ("ok", "suspicious")
    capsys.readouterr()
    bad = out / "bad.onnx"
    bad.write_bytes(b"not an onnx model")
    summary = tmp_path / "c.csv"
    assert main(["check", str(out), "--target", "winml", "--summary", str(summary)]) == 1
    text = summary.read_text()
    assert text.count(",True,") == 3 and "bad.onnx" in text and "1 failed" in capsys.readouterr().out
    assert main(["check", str(out / "abs.float32.onnx"), "--json"]) == 0     # one model: today's output
    assert json.loads(capsys.readouterr().out)["findings"] == []
