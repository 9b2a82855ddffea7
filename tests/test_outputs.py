"""Output targets: checked as one set before any work, written all or none, temporaries findable and cleaned.

Each test is a defect an attack run found (issue 22): `--report` over the input or over `-o`, a FIFO, symlink loop or
over-long name at `-o`, temporaries left by `kill -9`, an `.onnx` left behind when only the report failed.
"""
from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from inspector.cli import main
from inspector.core.io.atomic import STALE_SECONDS, OutputSet, WriteError, write_atomic
from inspector.core.io.tflite_builder import ModelBuilder


@pytest.fixture
def model(tmp_path) -> Path:
    b = ModelBuilder()
    x = b.input("x", [1, 3, 5, 7])
    y = b.tensor("y", [1, 3, 5, 7])
    b.op("RELU", [x], [y])
    b.output(y)
    path = tmp_path / "m.tflite"
    path.write_bytes(b.build())
    return path


def _convert(capsys, model, *extra) -> tuple[int, str]:
    code = main(["convert", str(model), *map(str, extra)])
    return code, capsys.readouterr().err


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: (p.read_bytes() if p.is_file() else b"<special>") for p in folder.iterdir()}


def test_report_over_the_input_model_is_refused_before_any_write(model, capsys):
    before = _snapshot(model.parent)
    code, err = _convert(capsys, model, "-o", model.parent / "out.onnx", "--report", model)
    assert code == 1 and err.startswith("error: cannot write") and "it is the source model" in err
    assert _snapshot(model.parent) == before                  # no out.onnx either: checked before any work


def test_report_equal_to_the_output_is_refused(model, capsys):
    out = model.parent / "out.onnx"
    code, err = _convert(capsys, model, "-o", out, "--report", model.parent / "." / "out.onnx")
    assert code == 1 and f"it is the same file as {out}" in err and not out.exists()


def test_output_through_a_link_to_the_input_is_refused_even_as_a_hard_link(model, capsys):
    (model.parent / "soft.onnx").symlink_to(model)
    os.link(model, model.parent / "hard.onnx")
    before = model.read_bytes()
    for target in ("soft.onnx", "hard.onnx"):
        code, err = _convert(capsys, model, "-o", model.parent / target)
        assert code == 1 and "it is the source model" in err and "--force" in err
    assert model.read_bytes() == before


def test_a_fifo_at_the_output_is_refused_and_kept(model, capsys):
    fifo = model.parent / "out.onnx"
    os.mkfifo(fifo)
    code, err = _convert(capsys, model, "-o", fifo)
    assert code == 1 and "not a regular file" in err and len(err.strip().splitlines()) == 1
    assert fifo.is_fifo()


def test_a_device_or_folder_target_is_refused_without_writing(tmp_path):
    with pytest.raises(WriteError, match="not a regular file"):
        OutputSet().add("/dev/null")
    with pytest.raises(WriteError, match="the path is a folder"):
        OutputSet().add(tmp_path)


def test_a_symlink_loop_is_one_error_line(model, capsys):
    a, b = model.parent / "a.onnx", model.parent / "b.onnx"
    a.symlink_to(b)
    b.symlink_to(a)
    code, err = _convert(capsys, model, "-o", a)
    assert code == 1 and err == f"error: cannot write {a}: a symbolic link loop\n"


def test_an_over_long_name_is_one_error_line(model, capsys):
    long = model.parent / ("x" * 300 + ".onnx")
    code, err = _convert(capsys, model, "-o", long)
    assert code == 1 and err.startswith("error: cannot write") and "longer than 255 bytes" in err
    assert len(err.strip().splitlines()) == 1


def test_a_long_but_legal_name_gets_a_temporary_that_fits(tmp_path):
    target = tmp_path / ("y" * 250 + ".json")
    write_atomic(target, b"{}")
    assert os.listdir(tmp_path) == [target.name]


def test_only_the_report_failing_leaves_no_onnx(model, capsys, monkeypatch):
    """A full disk on the second file: the first (already staged) is removed too, the old output kept."""
    out, report = model.parent / "out.onnx", model.parent / "r.json"
    out.write_bytes(b"previous run")
    real, calls = os.fsync, []

    def full_on_second(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)
    monkeypatch.setattr(os, "fsync", full_on_second)
    code, err = _convert(capsys, model, "-o", out, "--report", report)
    assert code == 1 and f"cannot write {report}: the disk is full" in err
    assert out.read_bytes() == b"previous run" and not report.exists()
    assert sorted(os.listdir(model.parent)) == ["m.tflite", "out.onnx"]


def test_a_failed_rename_puts_back_the_files_already_renamed(tmp_path, monkeypatch):
    first, second = tmp_path / "a.onnx", tmp_path / "b.json"
    first.write_bytes(b"old a")
    real = os.replace

    def fail_second(src, dst):
        if Path(dst) == second:
            raise OSError(errno.EIO, "Input/output error")
        real(src, dst)
    out = OutputSet()
    out.add(first)
    out.add(second)
    out.write(first, b"new a")
    out.write(second, b"new b")
    monkeypatch.setattr(os, "replace", fail_second)
    with pytest.raises(WriteError, match="b.json: Input/output error"):
        out.commit()
    monkeypatch.undo()
    assert first.read_bytes() == b"old a" and not second.exists()
    assert sorted(os.listdir(tmp_path)) == ["a.onnx"]


def test_convert_writes_the_output_and_the_report_together(model, capsys):
    out, report = model.parent / "out.onnx", model.parent / "r.json"
    code, _ = _convert(capsys, model, "-o", out, "--report", report)
    assert code == 0 and out.stat().st_size > 0 and b'"transposes"' in report.read_bytes()
    assert sorted(os.listdir(model.parent)) == ["m.tflite", "out.onnx", "r.json"]


def test_stale_temporaries_of_ours_are_removed_and_nothing_else(tmp_path):
    old = time.time() - STALE_SECONDS - 60
    ours_stale = tmp_path / ".layout-inspector.out.onnx.k3j_9xqz.tmp"
    ours_fresh = tmp_path / ".layout-inspector.out.onnx.a1b2c3d4.tmp"      # a run in progress
    theirs = tmp_path / ".out.onnx.k3j_9xqz.tmp"                             # another program's pattern
    for p in (ours_stale, ours_fresh, theirs):
        p.write_bytes(b"partial")
    for p in (ours_stale, theirs):
        os.utime(p, (old, old))
    write_atomic(tmp_path / "out.onnx", b"whole")
    assert sorted(os.listdir(tmp_path)) == sorted([ours_fresh.name, theirs.name, "out.onnx"])


def test_a_killed_write_leaves_a_temporary_of_the_recognisable_pattern(tmp_path, monkeypatch):
    """What `kill -9` leaves is what the cleaner looks for: simulate the kill after the temporary is written."""
    import inspector.core.io.atomic as atomic
    monkeypatch.setattr(atomic.OutputSet, "abort", lambda self: None)      # a killed process cleans nothing
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        write_atomic(tmp_path / "out.onnx", b"x")
    (left,) = os.listdir(tmp_path)
    assert atomic._TMP.match(left)


def test_batch_summary_over_a_model_or_an_output_is_refused_before_any_work(model, tmp_path, capsys):
    other = tmp_path / "n.tflite"
    other.write_bytes(model.read_bytes())
    outdir = tmp_path / "out"
    outdir.mkdir()
    (tmp_path / "s.json").symlink_to(other)
    (tmp_path / "t.json").symlink_to(outdir / "m.onnx")           # dangling: where m.tflite's output would go
    before = _snapshot(tmp_path)
    for summary, words in ((tmp_path / "s.json", "it is the source model"),
                           (tmp_path / "t.json", "it is the same file as")):
        code = main(["convert", str(model), str(other), "-o", f"{outdir}/", "--summary", str(summary),
                     "--jobs", "1"])
        err = capsys.readouterr().err
        assert code == 1 and words in err, err
    assert other.read_bytes() == model.read_bytes() and not any(outdir.iterdir())
    assert _snapshot(tmp_path) == before
