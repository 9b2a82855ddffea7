"""Batch mode under attack (issue 32): every outcome is a row or one `error:` line, usage errors exit 2 before
anything is created, a batch's outputs are written all or none, and no worker's temporary outlives it. Running as
root: unreadable folders and failing writes are injected by patching os functions (root ignores mode bits)."""
from __future__ import annotations

import errno
import json
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from inspector.cli import batch, main
from inspector.core.io import atomic

from .fuzz_attacks import deep_folder


def tiny(path: Path, op: str = "RELU") -> Path:
    from inspector.core.io.tflite_builder import ModelBuilder
    b = ModelBuilder()
    x = b.input("x", [1, 3, 5, 7])
    y = b.tensor("y", [1, 3, 5, 7])
    b.op(op, [x], [y])
    b.output(y)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b.build())
    return path


def leftovers(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob(".layout-inspector.*")] if folder.exists() else []


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def test_same_name_models_keep_their_folders(tmp_path, capsys):
    a, b = tiny(tmp_path / "in" / "a" / "m.tflite"), tiny(tmp_path / "in" / "b" / "m.tflite", "ABS")
    out = tmp_path / "out"
    assert main(["convert", str(a), str(b), "-o", str(out) + "/", "--jobs", "2"]) == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.onnx")) == ["a/m.onnx", "b/m.onnx"]
    import onnx
    assert [onnx.load(out / d / "m.onnx").graph.node[0].op_type for d in "ab"] == ["Relu", "Abs"]
    out2 = tmp_path / "out2"                                   # a folder holding both
    assert main(["convert", str(tmp_path / "in"), "-o", str(out2) + "/"]) == 0
    assert sorted(p.relative_to(out2).as_posix() for p in out2.rglob("*.onnx")) == ["a/m.onnx", "b/m.onnx"]
    assert "2 converted, 0 failed" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [          # (tuples: tests/known_failures.py looks each parameter up in a dict)
    ("--timeout", "0"), ("--timeout", "-5"), ("--timeout", "nan"), ("--timeout", "inf"), ("--timeout=-inf",),
    ("--jobs", "0"), ("--jobs", "-3"), ("--summary", "{tmp}/s.txt"), ("--pin", "y=keep"), ("--report", "{tmp}/r.json"),
])
def test_batch_usage_errors_exit_2_before_anything_is_created(tmp_path, capsys, argv):
    models = [str(tiny(tmp_path / "a.tflite")), str(tiny(tmp_path / "b.tflite"))]
    out = tmp_path / "out" / "deeper"
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["convert", *models, "-o", str(out) + "/", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert not (tmp_path / "out").exists() and not (tmp_path / "s.txt").exists()


@pytest.mark.parametrize("command", ["validate", "check"])
def test_json_in_batch_is_a_usage_error(tmp_path, capsys, command):
    (tmp_path / "m").mkdir()
    argv = [str(tmp_path / "m"), str(tmp_path)]
    assert main([command, *argv, "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --json"), err


def test_jobs_far_above_the_cpu_count_are_cut_with_a_line(tmp_path, capsys):
    models = [str(tiny(tmp_path / "a.tflite")), str(tiny(tmp_path / "b.tflite"))]
    assert main(["convert", *models, "-o", str(tmp_path / "out") + "/", "--jobs", "1000"]) == 0
    err = capsys.readouterr().err
    cap = batch.JOBS_PER_CPU * batch.default_jobs()
    assert f"note: --jobs 1000 is over {batch.JOBS_PER_CPU} per CPU: using {cap} worker processes" in err


def test_killed_and_crashed_workers_leave_no_temporary(tmp_path, monkeypatch, capsys):
    """A worker that hangs while writing its ONNX (killed by --timeout) or dies there: the parent removes its
    temporary. Only the workers' fsync is patched (they inherit the patch through fork)."""
    parent, real = os.getpid(), os.fsync

    def fsync(fd):
        if os.getpid() != parent:
            name = os.readlink(f"/proc/self/fd/{fd}")
            if ".hang.onnx." in name:
                time.sleep(120)
            if ".crash.onnx." in name:
                os.kill(os.getpid(), signal.SIGKILL)
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    models = [str(tiny(tmp_path / n)) for n in ("hang.tflite", "crash.tflite", "fine.tflite")]
    out = tmp_path / "out"
    summary = tmp_path / "s.json"
    assert main(["convert", *models, "-o", str(out) + "/", "--jobs", "3", "--timeout", "4",
                 "--summary", str(summary)]) == 1
    capsys.readouterr()
    rows = {Path(r["model"]).name: r for r in json.loads(summary.read_text())["models"]}
    assert rows["hang.tflite"]["error"] == "timed out after 4 s"
    assert rows["crash.tflite"]["error"] == "worker crashed (killed by SIGKILL)"
    assert rows["fine.tflite"]["ok"]
    assert leftovers(out) == [] and sorted(p.name for p in out.iterdir()) == ["fine.onnx"]


def test_a_summary_that_cannot_be_written_writes_no_onnx_either(tmp_path, monkeypatch, capsys):
    models = [str(tiny(tmp_path / "a.tflite")), str(tiny(tmp_path / "b.tflite"))]
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.onnx").write_bytes(b"the old a")
    parent, real = os.getpid(), tempfile.mkstemp

    def mkstemp(*a, **k):                                      # the parent's disk is full; the workers' is not
        if os.getpid() == parent:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*a, **k)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    assert main(["convert", *models, "-o", str(out) + "/", "--summary", str(tmp_path / "s.csv")]) == 1
    cap = capsys.readouterr()
    assert "2 converted, 0 failed" in cap.out and "wrote" not in cap.out
    assert error_lines(cap.err) == [cap.err.splitlines()[-1]]
    assert "the disk is full; nothing was written, neither 2 ONNX file(s) nor the summary" in cap.err
    assert (out / "a.onnx").read_bytes() == b"the old a"
    assert sorted(p.name for p in out.iterdir()) == ["a.onnx"] and not (tmp_path / "s.csv").exists()


def test_a_batch_writes_its_outputs_together_at_the_end(tmp_path, capsys):
    models = [str(tiny(tmp_path / "a.tflite")), str(tiny(tmp_path / "b.tflite"))]
    out = tmp_path / "out"
    assert main(["convert", *models, "-o", str(out) + "/", "--summary", str(tmp_path / "s.json")]) == 0
    assert "wrote 2 ONNX file(s) and the summary" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["a.onnx", "b.onnx"]


def test_folder_search_never_skips_silently(tmp_path, monkeypatch, capsys):
    """An unreadable sub-folder, one deeper than PATH_MAX, a dangling .tflite link and a FIFO named .tflite are
    each a failed row; the good model converts; no traceback."""
    src = tmp_path / "models"
    tiny(src / "good.tflite")
    tiny(src / "locked" / "hidden.tflite")
    (src / "dangling.tflite").symlink_to("nowhere.tflite")
    os.mkfifo(src / "pipe.tflite")
    (src / "deep").mkdir()
    deep_folder(src / "deep", os.pathconf("/", "PC_PATH_MAX"), (src / "good.tflite").read_bytes())
    real = os.scandir

    def scandir(path="."):
        if str(path).endswith("locked"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    summary = tmp_path / "s.json"
    assert main(["convert", str(src), "-o", str(tmp_path / "out") + "/", "--summary", str(summary),
                 "--timeout", "60"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and not error_lines(err)
    rows = {Path(r["model"]).name: r for r in json.loads(summary.read_text())["models"]}
    assert rows["good.tflite"]["ok"]
    assert rows["locked"]["error"] == "cannot search this folder: permission denied"
    assert rows["dangling.tflite"]["error"] and rows["pipe.tflite"]["error"]
    deep = [r for name, r in rows.items() if name.startswith("d" * 200)]
    assert len(deep) == 1 and deep[0]["error"] == "cannot search this folder: the file name is too long"
    assert not any(r["ok"] for name, r in rows.items() if name != "good.tflite")
    assert len(rows) == 5                                     # hidden.tflite is in the locked folder's row


@pytest.mark.parametrize("case", ["long", "below_a_file", "read_only"])
def test_an_output_folder_that_cannot_be_created_is_one_line(tmp_path, monkeypatch, capsys, case):
    models = [str(tiny(tmp_path / "a.tflite")), str(tiny(tmp_path / "b.tflite"))]
    (tmp_path / "file").write_text("x")
    out = {"long": tmp_path / ("x" * 300), "below_a_file": tmp_path / "file" / "out",
           "read_only": tmp_path / "ro" / "out"}[case]
    if case == "read_only":
        (tmp_path / "ro").mkdir()
        real = os.mkdir

        def mkdir(path, *a, **k):
            if str(path).startswith(str(tmp_path / "ro")):
                raise OSError(errno.EROFS, "Read-only file system", str(path))
            return real(path, *a, **k)
        monkeypatch.setattr(os, "mkdir", mkdir)
    before = sorted(tmp_path.rglob("*"))
    assert main(["convert", *models, "-o", str(out) + "/"]) == 1
    err = capsys.readouterr().err
    reason = {"long": "the file name is too long", "below_a_file": "a part of the path is not a folder",
              "read_only": "the file system is read-only"}[case]
    assert err == f"error: cannot create folder {out}: {reason}\n"
    assert sorted(tmp_path.rglob("*")) == before


def test_output_checks_grow_linearly(tmp_path, monkeypatch):
    """Checking N outputs against N inputs and each other costs O(N) file-system calls (it was O(N²))."""
    def calls(n: int) -> int:
        folder = tmp_path / str(n)
        models = [tiny(folder / f"m{k}.tflite") for k in range(n)]
        count = [0]
        for name in ("stat", "lstat"):
            real = getattr(os, name)
            monkeypatch.setattr(os, name, lambda *a, _real=real, **k: (count.__setitem__(0, count[0] + 1),
                                                                       _real(*a, **k))[1])
        out = atomic.OutputSet(models)
        for p in batch.output_paths(models, folder):
            out.add(p)
        monkeypatch.undo()
        return count[0]
    small, large = calls(50), calls(200)
    assert large <= 4.5 * small, (small, large)


def test_an_interrupted_batch_writes_nothing_and_leaves_no_temporary(tmp_path, monkeypatch, capsys):
    models = [str(tiny(tmp_path / n)) for n in ("a.tflite", "b.tflite", "c.tflite")]
    out = tmp_path / "out"

    def interrupt(self, row):                                  # Ctrl-C once the first model is done
        raise KeyboardInterrupt
    monkeypatch.setattr(batch.Progress, "__call__", interrupt)
    assert main(["convert", *models, "-o", str(out) + "/", "--jobs", "1"]) == 130
    assert capsys.readouterr().err.endswith("error: interrupted\n")
    assert not out.exists()                                    # its folder was made for it, and is gone again


def test_a_long_batch_keeps_its_staged_temporaries_fresh(tmp_path, monkeypatch):
    """Temporaries of a batch still running are marked fresh, so another run's clean-up of stale ones (older than
    atomic.STALE_SECONDS) never takes them."""
    staged = tmp_path / ".layout-inspector.m.onnx.0123abcd.tmp"
    staged.write_bytes(b"converted")
    old = time.time() - 2 * atomic.STALE_SECONDS
    os.utime(staged, (old, old))
    monkeypatch.setattr(batch, "FRESHEN_SECONDS", 0)

    def task(model):
        time.sleep(0.5)
        return batch.Row(model=model, ok=True)
    rows = batch.run_all(task, [("m.tflite",)], 1, 60, lambda row: None, [str(staged)])
    assert rows[0].ok and staged.stat().st_mtime > old + atomic.STALE_SECONDS
    atomic.remove_stale(tmp_path)
    assert staged.exists()


def test_a_worker_killed_while_checking_leaves_no_checker_folder(tmp_path, monkeypatch):
    """A worker killed inside the light check (big weights: emit.convert._checked_light) never runs its `finally`:
    the parent removes the temporary folder it had made there, as it removes the worker's staged output."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    staged = tmp_path / ".layout-inspector.m.onnx.0123abcd.tmp"

    def task(model):
        from inspector.core.emit.convert import check_folder
        Path(check_folder(), "weights").write_bytes(b"")
        staged.write_bytes(b"half")
        os.kill(os.getpid(), signal.SIGKILL)
    other = tmp_path / "layout-inspector-check.1.abc"       # another process's: not this worker's to remove
    other.mkdir()
    rows = batch.run_all(task, [("m.tflite",)], 1, 60, lambda row: None, [str(staged)])
    assert "worker crashed (killed by SIGKILL)" in rows[0].error
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name]
