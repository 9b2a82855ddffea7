"""Memory exhaustion is one line, "not enough memory to convert X: needs about N GB": estimated from the model's
weights before the conversion allocates, and MemoryError / protobuf's EncodeError caught where they surface (a
3 GB address-space limit gave a segmentation fault, 4.5 GB a MemoryError traceback, the window "EncodeError")."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from google.protobuf.message import EncodeError

from inspector.cli import main
from inspector.core.io.tflite_builder import ModelBuilder

from .conftest import ROOT

LIMITED = """
import os, resource, sys
import ai_edge_litert.interpreter, onnxruntime, inspector.cli.convert
with open("/proc/self/statm") as f:
    used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
resource.setrlimit(resource.RLIMIT_AS, (used + (int(sys.argv[1]) << 20), resource.RLIM_INFINITY))
from inspector.cli import main
sys.exit(main(sys.argv[2:]))
"""


def fc_model(path, units: int, k: int = 4096):
    """One FULLY_CONNECTED with units x k float32 weights (non-square), and its input [1, k]."""
    b = ModelBuilder()
    x = b.input("x", [1, k])
    y = b.tensor("y", [1, units])
    w = np.zeros((units, k), np.float32)
    w[np.arange(units), np.arange(units) % k] = 1.0
    b.op("FULLY_CONNECTED", [x, b.const("w", w), None], [y])
    b.output(y)
    path.write_bytes(b.build())
    return path


def test_a_model_that_cannot_fit_under_the_address_space_limit_is_refused_in_one_line(tmp_path):
    """64 MiB of weights with 200 MiB of address space left after start-up: refused before converting (today a
    segmentation fault or an EncodeError traceback), nothing written."""
    model, out = fc_model(tmp_path / "big.tflite", 4096), tmp_path / "big.onnx"
    run = subprocess.run([sys.executable, "-c", LIMITED, "200", "convert", str(model), "-o", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr[-2000:]
    assert run.stderr.startswith("error: not enough memory to convert big.tflite: needs about 0.4 GB (0.")
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr and not out.exists()


@pytest.mark.parametrize("where", ["initializers", "export"])
def test_memory_exhausted_past_the_estimate_is_one_line(tmp_path, monkeypatch, capsys, where):
    import inspector.core.emit.convert as conv
    model, out = fc_model(tmp_path / "m.tflite", 1536), tmp_path / "m.onnx"
    if where == "initializers":          # what protobuf raised at model.graph.initializer.extend under 3.5 GB
        monkeypatch.setattr(conv, "_add_initializers", lambda *a, **k: (_ for _ in ()).throw(
            EncodeError("Failed to serialize proto")))
    else:
        monkeypatch.setattr(conv.onnx.checker, "check_model", lambda *a, **k: (_ for _ in ()).throw(MemoryError()))
    assert main(["convert", str(model), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == "error: not enough memory to convert m.tflite: needs about 0.2 GB\n" and not out.exists()


def test_the_window_says_not_enough_memory_in_one_line(qtbot, tmp_path, monkeypatch):
    import inspector.core.emit.convert as conv
    from .test_gui_edit import make_window
    model = fc_model(tmp_path / "m.tflite", 1536)
    monkeypatch.setattr(conv, "_add_initializers", lambda *a, **k: (_ for _ in ()).throw(
        EncodeError("Failed to serialize proto")))
    w = make_window(qtbot, tmp_path)
    w.open_path(str(model))
    qtbot.waitUntil(lambda: w.statusBar().currentMessage().startswith("Conversion failed"), timeout=60_000)
    assert w.statusBar().currentMessage() == "Conversion failed: not enough memory to convert m.tflite: needs about " \
                                             "0.2 GB"
    assert getattr(w, "last_error", None) is None            # not "EncodeError: Failed to serialize proto"


def test_the_memory_available_is_what_proc_meminfo_says(tmp_path, monkeypatch):
    """`available` reads only the two lines it needs: the same figure as a full parse of /proc/meminfo (within
    what the system's own allocations move between the two reads), and the one-call bound below it. (No cgroup
    files where it looks for them: a machine's container limit is the tests below.)"""
    from inspector.core.ir import memory
    monkeypatch.setattr(memory, "ROOT", str(tmp_path))
    monkeypatch.setattr(memory, "_CGROUP_LIMITED", [])
    with open("/proc/meminfo") as f:
        info = {k: int(v.split()[0]) << 10 for k, _, v in (line.partition(":") for line in f) if v}
    full = info["MemAvailable"] + info.get("SwapFree", 0)
    assert abs(memory.available() - full) < 64 << 20
    assert 0 < memory._surely_available() <= memory.available()


def test_a_model_past_the_quick_bound_is_still_checked_against_meminfo(tmp_path, monkeypatch):
    """Past half the free RAM the estimate is checked against /proc/meminfo's figure: a model that needs more than
    it is refused in one line."""
    from inspector.core.io.tflite_reader import read_tflite
    from inspector.core.ir import memory
    graph = read_tflite(fc_model(tmp_path / "m.tflite", 64))
    want = memory.need(graph)
    memory.check(graph, "m.tflite")                              # fits
    monkeypatch.setattr(memory, "_surely_available", lambda: want - 1)
    monkeypatch.setattr(memory, "available", lambda: want - 1)
    with pytest.raises(memory.OutOfMemory, match="not enough memory to convert m.tflite"):
        memory.check(graph, "m.tflite")
    monkeypatch.setattr(memory, "_surely_available", lambda: want)
    memory.check(graph, "m.tflite")                              # within the quick bound: meminfo not read


GB = 1 << 30


def _cgroup_v2(root, levels: dict[str, tuple[str, int, int]]):
    """A cgroup v2 tree under `root` as the kernel shows it: this process in the last of `levels` (path ->
    (memory.max, memory.current, page cache))."""
    for path, (limit, current, cache) in levels.items():
        folder = root / "sys/fs/cgroup" / path.lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "memory.max").write_text(f"{limit}\n")
        (folder / "memory.current").write_text(f"{current}\n")
        (folder / "memory.stat").write_text(f"anon {current - cache}\nfile {cache}\nkernel 4096\n")
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(f"0::{list(levels)[-1]}\n")


def _cgroup_v1(root, shown: str, folder: str, limit: int, usage: int, cache: int):
    """A cgroup v1 memory controller under `root`: /proc/self/cgroup shows `shown`, the files are in `folder`."""
    where = root / "sys/fs/cgroup/memory" / folder.lstrip("/")
    where.mkdir(parents=True, exist_ok=True)
    (where / "memory.usage_in_bytes").write_text(f"{usage}\n")
    (where / "memory.limit_in_bytes").write_text(f"{limit}\n")
    (where / "memory.stat").write_text(f"cache {cache}\nrss {usage - cache}\nhierarchical_memory_limit {limit}\n"
                                       f"total_cache {cache}\ntotal_rss {usage - cache}\n")
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(f"5:cpu,cpuacct:{shown}\n4:memory:{shown}\n0::/\n")


@pytest.mark.parametrize("layout", ["v2", "v2 parent", "v2 outside", "v1", "v1 docker", "v2 unlimited",
                                    "v1 unlimited"])
def test_a_container_memory_limit_bounds_what_is_available(tmp_path, monkeypatch, layout):
    """In a container /proc/meminfo shows the whole machine: the process's memory cgroup (v1 or v2, its own limit
    or one above it) bounds what a conversion may take, its page cache counted as reclaimable. Before, a
    conversion past a container's limit was killed by the OOM killer without a word (exit 137)."""
    from inspector.core.ir import memory
    if layout == "v2":
        _cgroup_v2(tmp_path, {"/box": (3 * GB, GB, GB // 4)})
    elif layout == "v2 parent":          # the limit is set one level up (a pod, its container without one)
        _cgroup_v2(tmp_path, {"/pod": (3 * GB, 2 * GB, 0), "/pod/box": ("max", GB, GB // 4)})
    elif layout == "v2 outside":         # a cgroup namespace shows a cgroup outside its root as "/.."
        _cgroup_v2(tmp_path, {"/": (3 * GB, GB, GB // 4)})
        (tmp_path / "proc/self/cgroup").write_text("0::/../../elsewhere\n")
    elif layout == "v2 unlimited":
        _cgroup_v2(tmp_path, {"/box": ("max", GB, 0)})
    elif layout == "v1":
        _cgroup_v1(tmp_path, "/box", "/box", 3 * GB, GB, GB // 4)
    elif layout == "v1 docker":          # the host's name shown, the container's own cgroup mounted at the top
        _cgroup_v1(tmp_path, "/docker/0123abcd", "/", 3 * GB, GB, GB // 4)
    else:
        _cgroup_v1(tmp_path, "/box", "/box", 9223372036854771712, GB, 0)
    monkeypatch.setattr(memory, "ROOT", str(tmp_path))
    monkeypatch.setattr(memory, "_CGROUP_LIMITED", [])
    want = {"v2": 2 * GB + GB // 4, "v2 parent": GB, "v2 outside": 2 * GB + GB // 4, "v1": 2 * GB + GB // 4, "v1 docker": 2 * GB + GB // 4}
    assert memory.cgroup_room() == want.get(layout)
    if layout.endswith("unlimited"):
        assert memory._surely_available() > 0
        return
    assert memory._surely_available() == 0                     # the free RAM says nothing here
    assert memory.available() <= want[layout]


def test_a_conversion_past_a_container_limit_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    """64 MiB of weights (about 0.4 GB to convert) in a container with 0.2 GB left: refused before converting, in
    one line, nothing written; the same model with room converts."""
    from inspector.core.ir import memory
    model, out = fc_model(tmp_path / "big.tflite", 4096), tmp_path / "big.onnx"
    root = tmp_path / "root"
    _cgroup_v2(root, {"/box": (GB, GB - (200 << 20), 0)})
    monkeypatch.setattr(memory, "ROOT", str(root))
    monkeypatch.setattr(memory, "_CGROUP_LIMITED", [])
    assert main(["convert", str(model), "-o", str(out), "--no-ort-check"]) == 1
    assert capsys.readouterr().err == "error: not enough memory to convert big.tflite: needs about 0.4 GB (0.2 GB " \
                                      "available)\n"
    assert not out.exists()
    (root / "sys/fs/cgroup/box/memory.current").write_text(f"{100 << 20}\n")
    assert main(["convert", str(model), "-o", str(out), "--no-ort-check"]) == 0 and out.exists()
