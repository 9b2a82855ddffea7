"""Hostile inputs, one test per refused class, each asserting the message a user sees; and safe writes.

Models are built here (tflite_builder, onnx.helper); corpus files are never copied. See tests/fuzz.py for the
random side of the same contract: only typed errors, readable, no hang, no unjustified allocation.
"""
from __future__ import annotations

import ast
import errno
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from inspector.core.io.atomic import WriteError, write_atomic
from inspector.core.emit.convert import convert
from inspector.core.ir.errors import ConversionError, InspectorError, MetadataError, ModelLoadError
from inspector.core.io.loader import load_model
from inspector.core.metadata.edits import MetadataEdits
from inspector.core.io.onnx_reader import read_onnx, read_onnx_bytes
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite, read_tflite_bytes

from .conftest import ROOT
from .fuzz_attacks import _relu_model, nested_ifs as _nested_ifs
from .fuzz_mutators import _ld, _uvarint

W = np.arange(2 * 3 * 3 * 5, dtype=np.float32).reshape(2, 3, 3, 5) / 90   # OHWI: 5 in, 2 out


def _relu_chain(order=(0, 1)) -> ModelBuilder:
    """x -> RELU -> a -> RELU6 -> y, its two ops stored in `order`."""
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 5])
    a = b.tensor("a", [1, 4, 6, 5])
    y = b.tensor("y", [1, 4, 6, 5])
    ops = [("RELU", [x], [a]), ("RELU6", [a], [y])]
    for i in order:
        b.op(ops[i][0], ops[i][1], ops[i][2])
    b.output(y)
    return b


def _load_error(data: bytes) -> str:
    with pytest.raises(ModelLoadError) as e:
        read_tflite_bytes(data, "hostile.tflite")
    return str(e.value)


# -- TFLite structure --------------------------------------------------------------------------------------------

def test_the_chain_itself_reads():
    assert [op.opcode for op in read_tflite_bytes(_relu_chain().build()).main.ops] == ["RELU", "RELU6"]


def test_ops_out_of_order_are_refused():
    msg = _load_error(_relu_chain(order=(1, 0)).build())
    assert "operator 0 (RELU6) reads tensor 1 'a' before operator 1 writes it" in msg
    assert "out of order" in msg


def test_an_op_reading_its_own_output_is_a_cycle():
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 5])
    y = b.tensor("y", [1, 4, 6, 5])
    b.op("ADD", [x, y], [y])
    b.output(y)
    assert "operator 0 (ADD) reads tensor 1 'y' before operator 0 writes it (a cycle" in _load_error(b.build())


def test_a_tensor_written_twice_is_refused():
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 5])
    y = b.tensor("y", [1, 4, 6, 5])
    b.op("RELU", [x], [y])
    b.op("RELU6", [x], [y])
    b.output(y)
    assert "tensor 1 'y' is written by operators 0 and 1" in _load_error(b.build())


def test_an_op_writing_a_constant_is_refused():
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 5])
    c = b.const("c", np.ones([1, 4, 6, 5], np.float32))
    b.op("RELU", [x], [c])
    b.output(c)
    assert "operator 0 (RELU) writes constant tensor 1 'c'" in _load_error(b.build())


def test_shape_signature_must_agree_with_the_shape():
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 5], shape_signature=[-1, 4, 7, 5])
    b.output(x)
    assert "has shape [1, 4, 6, 5] but shape signature [-1, 4, 7, 5]" in _load_error(b.build())


def test_an_absurd_shape_is_refused_before_any_allocation():
    b = ModelBuilder()
    x = b.input("x", [2**31 - 1, 2**31 - 1, 7, 3])
    b.output(x)
    assert "beyond any real model" in _load_error(b.build())


def test_a_tensor_index_beyond_the_subgraph_is_refused():
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 5])
    y = b.tensor("y", [1, 4, 6, 5])
    b.op("RELU", [x], [y + 40])
    b.output(y)
    assert "refers to tensor 41, but there are 2" in _load_error(b.build())


def test_control_characters_in_names_are_escaped_in_messages():
    b = ModelBuilder()
    x = b.input("\x1b[2J\u202eevil", [1, 4, 6, 5])
    y = b.tensor("y", [1, 4, 6, 5])
    b.op("ADD", [x, y], [y])
    b.output(y)
    msg = _load_error(b.build())
    assert "\x1b" not in msg and "\u202e" not in msg
    g = read_tflite_bytes(_named_model("\x1b[2J\u202eevil"))
    assert g.main.tensors[0].name == "\x1b[2J\u202eevil"          # the name itself is kept for conversion


def _named_model(name: str) -> bytes:
    b = ModelBuilder()
    x = b.input(name, [1, 4, 6, 5])
    y = b.tensor("y", [1, 4, 6, 5])
    b.op("RELU", [x], [y])
    b.output(y)
    return b.build()


# -- conversion of models the reader accepts ----------------------------------------------------------------------

def _convert_error(b: ModelBuilder) -> str:
    g = read_tflite_bytes(b.build(), "hostile.tflite")
    with pytest.raises(ConversionError) as e:
        convert(g)
    return str(e.value)


def test_inconsistent_ranks_are_a_conversion_error():
    """SPLIT of a rank-4 tensor into an output declared as a scalar: the plan's rank-4 layout cannot fit it. (Its
    axis of 10 does not split in 3, so no shape computation can stand in for the declared shapes.)"""
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 10])
    axis = b.const("axis", np.array(3, np.int32))
    outs = [b.tensor("s0", [1, 4, 6, 3]), b.tensor("s1", []), b.tensor("s2", [1, 4, 6, 3])]
    b.op("SPLIT", [axis, x], outs, {"num_splits": 3})
    b.output(outs[0], outs[2])
    msg = _convert_error(b)
    assert "tensor 's1' is declared with shape [] but SPLIT#0 writes a rank-4 result" in msg
    assert "inconsistent" in msg


def test_inconsistent_ranks_are_a_conversion_error_on_every_re_conversion():
    """A re-conversion's plan starts from the last one's and only what changed is checked: a plan that failed the
    check must not be that start (ops with a choice ahead of the SPLIT: the re-plan is then incremental)."""
    from inspector.core.emit.incremental import Reconverter
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 10])
    for i in range(8):
        y = b.tensor(f"r{i}", [1, 4, 6, 10])
        b.op("RELU", [x], [y])
        x = y
    axis = b.const("axis", np.array(3, np.int32))
    outs = [b.tensor("s0", [1, 4, 6, 3]), b.tensor("s1", []), b.tensor("s2", [1, 4, 6, 3])]
    b.op("SPLIT", [axis, x], outs, {"num_splits": 3})
    b.output(outs[0], outs[2])
    g, cache = read_tflite_bytes(b.build(), "hostile.tflite"), Reconverter()
    for pins in ({}, {}, {"r3": "keep"}, {}):
        with pytest.raises(ConversionError, match="'s1' is declared with shape"):
            cache.convert(g, pins)


def test_a_zero_stride_is_a_conversion_error_naming_the_op():
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 5])
    w = b.const("w", W)
    y = b.tensor("y", [1, 5, 7, 2])
    b.op("CONV_2D", [x, w, None], [y], {"padding": "SAME", "stride_h": 0, "stride_w": 0})
    b.output(y)
    assert "CONV_2D#0: cannot convert" in _convert_error(b)


def test_an_op_missing_an_input_is_a_conversion_error():
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 5])
    y = b.tensor("y", [1, 6, 5])
    b.op("MEAN", [x], [y], {"keep_dims": False})
    b.output(y)
    assert "cannot plan layouts in subgraph main at MEAN#0: operator inputs or tensor ranks are inconsistent" \
        in _convert_error(b)


# -- ONNX ---------------------------------------------------------------------------------------------------------

def _external(folder: Path, location: str, offset: int = 0, length: int = 16) -> Path:
    """A one-Add model whose weight lives in external data at `location` (the fuzzer builds the same one)."""
    from .fuzz_cases import _external_model
    path = folder / "model.onnx"
    path.write_bytes(_external_model(location, offset, length).SerializeToString())
    return path


@pytest.fixture
def model_dir(tmp_path) -> Path:
    (tmp_path / "secret.bin").write_bytes(b"S" * 64)
    d = tmp_path / "model"
    d.mkdir()
    (d / "weights.bin").write_bytes(np.arange(8, dtype=np.float32).tobytes())
    (d / "link.bin").symlink_to(tmp_path / "secret.bin")
    return d


def test_external_data_inside_the_folder_is_read(model_dir):
    g = read_onnx(_external(model_dir, "weights.bin", offset=4))
    assert g.main.tensor_by_name("w").data.tolist() == [1.0, 2.0, 3.0, 4.0]


def _short_reads(monkeypatch, cap: int) -> list[int]:
    """os.pread and os.read return at most `cap` bytes, as Linux does past 2,147,479,552 (and any read may);
    returns the list of sizes asked for."""
    asked, pread, read = [], os.pread, os.read
    monkeypatch.setattr(os, "pread", lambda fd, n, off: asked.append(n) or pread(fd, min(n, cap), off))
    monkeypatch.setattr(os, "read", lambda fd, n: asked.append(n) or read(fd, min(n, cap)))
    return asked


def test_external_data_beyond_2_gib_is_read_whole_through_short_reads(model_dir, monkeypatch):
    """A sparse 3 GiB weights file holding its tensor past the 2 GiB mark, read through reads cut to 5 bytes:
    every byte arrives (one read gave 5 of 16 and the tensor was called short)."""
    from inspector.core.io.onnx_reader import load_proto
    at = (5 << 29) + 12                               # 2.5 GiB + 12
    with open(model_dir / "big.bin", "wb") as f:
        f.truncate(3 << 30)
        f.seek(at)
        f.write(np.array([1.5, -2.0, 3.25, 7.0], np.float32).tobytes())
    path = _external(model_dir, "big.bin", offset=at)
    asked = _short_reads(monkeypatch, 5)
    assert read_onnx(path).main.tensor_by_name("w").data.tolist() == [1.5, -2.0, 3.25, 7.0]
    assert 16 in asked and max(asked) < 1 << 20       # the 16 bytes asked for, not the 3 GiB file
    w = load_proto(path).graph.initializer[0]
    assert np.frombuffer(w.raw_data, np.float32).tolist() == [1.5, -2.0, 3.25, 7.0]


def test_a_model_is_told_and_read_through_short_reads(tmp_path, monkeypatch):
    path = _relu_model(tmp_path / "m.tflite")
    _short_reads(monkeypatch, 3)                      # the 8-byte header arrives in three reads
    assert load_model(path).main.tensors[1].name == "y"


@pytest.mark.parametrize("location", ["../secret.bin", "sub/../../secret.bin", "..\\secret.bin"])
def test_external_data_escaping_with_dots_is_refused(model_dir, location):
    with pytest.raises(ModelLoadError, match="refusing external data location .* outside the model's folder"):
        read_onnx(_external(model_dir, location))


def test_external_data_at_an_absolute_path_is_refused(model_dir):
    with pytest.raises(ModelLoadError, match="outside the model's folder"):
        read_onnx(_external(model_dir, str(model_dir.parent / "secret.bin")))


def test_external_data_through_a_symlink_out_of_the_folder_is_refused(model_dir):
    with pytest.raises(ModelLoadError, match="'link.bin' resolves outside the model's folder"):
        read_onnx(_external(model_dir, "link.bin"))


def test_external_data_range_beyond_its_file_is_refused(model_dir):
    with pytest.raises(ModelLoadError, match=r"range 16\+4096 is beyond its 32 bytes"):
        read_onnx(_external(model_dir, "weights.bin", offset=16, length=4096))


def test_external_data_without_a_folder_is_refused(model_dir):
    data = _external(model_dir, "weights.bin").read_bytes()
    with pytest.raises(ModelLoadError, match="given without a folder"):
        read_onnx_bytes(data, "bytes.onnx")


def test_a_file_beyond_protobufs_limit_is_refused_before_reading(tmp_path):
    big = tmp_path / "big.onnx"
    with open(big, "wb") as f:                 # sparse: 2 GiB claimed, nothing written
        f.truncate(2**31)
    with pytest.raises(ModelLoadError, match="beyond protobuf's 2 GB limit .* external data"):
        load_model(big)


def test_graphs_nested_beyond_protobufs_depth_are_refused(tmp_path):
    graph = _ld(1, _ld(1, b"x") + _ld(2, b"t0") + _ld(4, b"Identity"))
    for i in range(1, 150):
        attr = _ld(1, b"then_branch") + _ld(6, graph) + _uvarint(20 << 3) + _uvarint(onnx.AttributeProto.GRAPH)
        graph = _ld(1, _ld(1, b"c") + _ld(2, f"t{i}".encode()) + _ld(4, b"If") + _ld(5, attr))
    data = _uvarint(1 << 3) + _uvarint(8) + _ld(7, graph)      # ir_version 8, then the graph
    with pytest.raises(ModelLoadError, match="If/Loop bodies nested over 31 deep"):
        read_onnx_bytes(data, "deep.onnx")


@pytest.mark.parametrize("shaped", [True, False])
def test_the_body_nesting_limit_is_the_one_the_message_states(shaped):
    """31 bodies inside one another are read; the 32nd is refused whether protobuf can parse it (values without
    shapes) or not (shaped values take 5 more message levels), with the limit the message and docs/hardening.md state."""
    assert len(read_onnx_bytes(_nested_ifs(31, shaped), "ok.onnx").subgraphs) == 1 + 2 * 31
    with pytest.raises(ModelLoadError, match=r"^deep.onnx: If/Loop bodies nested over 31 deep"):
        read_onnx_bytes(_nested_ifs(32, shaped), "deep.onnx")
    docs = (ROOT / "docs" / "hardening.md").read_text() + (ROOT / "README.md").read_text()
    assert "If/Loop bodies nested over 31 deep" in docs and "over 100 deep" not in docs


def test_a_cyclic_onnx_graph_is_refused():
    nodes = [helper.make_node("Relu", ["b"], ["a"], name="first"), helper.make_node("Neg", ["a"], ["b"])]
    g = helper.make_graph(nodes, "cycle", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])])
    with pytest.raises(ModelLoadError, match="node first \\(Relu\\) reads 'b', which no input, initializer or "
                                             "earlier node defines"):
        read_onnx_bytes(helper.make_model(g).SerializeToString(), "cycle.onnx")


def test_an_initializer_shorter_than_its_shape_is_refused():
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2**20, 3], raw_data=b"\x00" * 12)
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [t])
    with pytest.raises(ModelLoadError, match=r"of shape \[1048576, 3\] needs 12582912 bytes but holds 12"):
        read_onnx_bytes(helper.make_model(g).SerializeToString(), "short.onnx")


# -- metadata edits from a hostile session file or flag -----------------------------------------------------------

@pytest.mark.parametrize("fields, message", [
    ({"model_version": 2**70}, "does not fit ONNX's 64-bit field"),
    ({"props": {"author": 5}}, "metadata value of 'author' must be text, got int"),
    ({"props": {"\udc80": "x"}}, "is not valid Unicode text"),
    ({"dims": {"x": "DATA_BATCH"}}, "'dims' must map each tensor to a list"),
    ({"types": ["x"]}, "'types' must map names to values"),
    ({"colour": "red"}, "unknown metadata edit field(s): colour"),
])
def test_hostile_metadata_edits_are_refused(fields, message):
    with pytest.raises(MetadataError) as e:
        MetadataEdits.from_dict(fields).normalized()
    assert message in str(e.value)


# -- atomic writes ------------------------------------------------------------------------------------------------

def test_write_atomic_replaces_whole_and_keeps_permissions(tmp_path):
    p = tmp_path / "out.onnx"
    p.write_bytes(b"old")
    p.chmod(0o640)
    write_atomic(p, b"new contents")
    assert p.read_bytes() == b"new contents" and (p.stat().st_mode & 0o777) == 0o640
    assert os.listdir(tmp_path) == ["out.onnx"]


def test_the_source_model_is_never_replaced(tmp_path):
    src = tmp_path / "model.tflite"
    src.write_bytes(b"source")
    for target in (src, tmp_path / "." / "model.tflite"):
        with pytest.raises(WriteError, match="it is the source model .* never replaced"):
            write_atomic(target, b"x", protect=[str(src)])
    link = tmp_path / "alias.tflite"
    link.symlink_to(src)
    with pytest.raises(WriteError, match="it is the source model"):
        write_atomic(link, b"x", protect=[src])
    assert src.read_bytes() == b"source"


def test_writing_through_a_symlink_keeps_the_link(tmp_path):
    real = tmp_path / "real.json"
    real.write_bytes(b"{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_atomic(link, b"[1]")
    assert link.is_symlink() and real.read_bytes() == b"[1]"


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing" / "out.onnx", "folder .*missing does not exist"),
    (lambda d: d, "the path is a folder"),
])
def test_unwritable_targets_are_refused(tmp_path, make, message):
    with pytest.raises(WriteError, match=message):
        write_atomic(make(tmp_path), b"x")


@pytest.mark.parametrize("code, message", [(errno.ENOSPC, "the disk is full"),
                                           (errno.EACCES, "permission denied")])
def test_a_failed_write_leaves_nothing_and_the_old_file_intact(tmp_path, monkeypatch, code, message):
    p = tmp_path / "out.onnx"
    p.write_bytes(b"precious")

    def fail(fd):
        raise OSError(code, os.strerror(code))
    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(WriteError) as e:
        write_atomic(p, b"new" * 1000)
    assert message in str(e.value) and "existing file is unchanged" in str(e.value)
    assert p.read_bytes() == b"precious" and os.listdir(tmp_path) == ["out.onnx"]


def test_a_real_file_size_limit_mid_write_leaves_nothing(tmp_path):
    """RLIMIT_FSIZE makes the kernel refuse the write itself (EFBIG), as a full disk would (ENOSPC)."""
    p = tmp_path / "out.onnx"
    p.write_bytes(b"precious")
    code = (f"import resource, signal, sys\n"
            f"signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            f"resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
            f"from inspector.core.io.atomic import write_atomic, WriteError\n"
            f"try:\n    write_atomic({str(p)!r}, b'x' * 100000)\n"
            f"except WriteError as e:\n    print(e)\n    sys.exit(1)\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1, run.stderr
    assert "larger than this system allows; nothing was written" in run.stdout
    assert p.read_bytes() == b"precious" and os.listdir(tmp_path) == ["out.onnx"]


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    p = tmp_path / "session.json"

    def interrupt(fd):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(p, b"{}")
    assert os.listdir(tmp_path) == []


# -- no code execution from files ---------------------------------------------------------------------------------

FORBIDDEN_MODULES = {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "joblib"}


def _calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            yield node, (f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""), f


def test_no_pickle_eval_or_exec_in_the_package():
    found = []
    for path in sorted((ROOT / "inspector").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                found += [f"{path.name}:{node.lineno} imports {n}" for n in names
                          if n and n.split(".")[0] in FORBIDDEN_MODULES]
        for node, name, f in _calls(tree):
            if isinstance(f, ast.Name) and name in ("eval", "exec", "compile", "__import__"):
                found.append(f"{path.name}:{node.lineno} calls {name}()")
            if name == "load" and isinstance(f, ast.Attribute) and getattr(f.value, "id", "") in ("np", "numpy"):
                safe = any(k.arg == "allow_pickle" and getattr(k.value, "value", None) is False for k in node.keywords)
                if not safe:
                    found.append(f"{path.name}:{node.lineno} np.load without allow_pickle=False")
            if name in ("load", "unsafe_load", "full_load") and getattr(getattr(f, "value", None), "id", "") == "yaml":
                found.append(f"{path.name}:{node.lineno} yaml.{name}")
    assert found == []


def test_the_ast_scan_would_see_a_pickle():
    tree = ast.parse("import pickle\nnp.load(p)\neval('1')\nnp.load(p, allow_pickle=False)\n")
    names = [name for _, name, _ in _calls(tree)]
    assert names == ["load", "eval", "load"]
    assert any(isinstance(n, ast.Import) and n.names[0].name in FORBIDDEN_MODULES for n in ast.walk(tree))


def test_every_refusal_is_an_inspector_error():
    for cls in (ModelLoadError, ConversionError, MetadataError, WriteError):
        assert issubclass(cls, InspectorError)


def test_a_sparse_constant_claiming_far_more_than_it_stores_is_refused(corpus):
    """The corpus' sparse model with one sparse weight's first dim multiplied: folding would allocate for it."""
    import tflite

    from inspector.core.io.tflite_reader import _slot
    buf = bytearray((corpus / "realworld/face_detection_full_range_sparse.tflite").read_bytes())
    sg = tflite.Model.GetRootAsModel(buf, 0).Subgraphs(0)
    t = next(sg.Tensors(i) for i in range(sg.TensorsLength()) if sg.Tensors(i).Sparsity() is not None)
    pos = t._tab.Vector(t._tab.Offset(_slot(tflite.Tensor, "Shape")))
    dim0 = int.from_bytes(buf[pos:pos + 4], "little")
    buf[pos:pos + 4] = (dim0 * 65536).to_bytes(4, "little")
    msg = _load_error(bytes(buf))
    assert f"of shape [{dim0 * 65536}," in msg and "more than its file can justify (at most 64x)" in msg


def test_quantization_with_min_but_no_max_is_refused():
    from inspector.core.ir.graph import Quantization
    b = ModelBuilder()
    q = Quantization(scales=np.array([0.5], np.float32), zero_points=np.array([0]), min=np.array([0.0], np.float32))
    x = b.input("x", [1, 4, 6, 5], quant=q)
    b.output(x)
    assert "quantization has 1 min values but 0 max values" in _load_error(b.build())


def test_a_tiny_file_cannot_make_the_converter_build_gigabytes():
    """560 bytes claiming a [1, 4096, 4096, 16] update: its index grid would be 8 GiB."""
    b = ModelBuilder()
    x = b.input("x", [1, 8192, 8192, 16])
    u = b.input("u", [1, 4096, 4096, 16])
    start = b.const("start", np.zeros(4, np.int32))
    y = b.tensor("y", [1, 8192, 8192, 16])
    b.op("DYNAMIC_UPDATE_SLICE", [x, u, start], [y])
    b.output(y)
    msg = _convert_error(b)
    assert "DYNAMIC_UPDATE_SLICE#0 index grid: would build a 8.0 GiB constant" in msg
    assert "the limit is 128.0 MiB" in msg


@pytest.mark.parametrize("command", [["edit", "{model}", "-o", "{out}", "--doc-string", "x"], ["check", "{model}"]])
@pytest.mark.parametrize("location, reason", [("../secret.bin", "refusing external data location '../secret.bin'"),
                                              ("link.bin", "external data 'link.bin' resolves outside")])
def test_cli_refuses_escaping_external_data_in_one_line(model_dir, capsys, command, location, reason):
    from inspector.cli import main
    model = _external(model_dir, location)
    argv = [a.format(model=model, out=model_dir / "out.onnx") for a in command]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {model}: initializer 'w': {reason}") and "Traceback" not in err
    assert not (model_dir / "out.onnx").exists()


def test_a_converted_model_beyond_protobufs_limit_is_refused_with_its_size(monkeypatch):
    """The real limit is 2 GB; lowered here so a small model crosses it on the same code path."""
    from inspector.core.io import onnx_reader
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 5])
    w = b.const("w", W)
    y = b.tensor("y", [1, 5, 7, 2])
    b.op("CONV_2D", [x, w, None], [y], {"padding": "SAME"})
    b.output(y)
    g = read_tflite_bytes(b.build())
    assert convert(g).model.ByteSize() > 400
    monkeypatch.setattr(onnx_reader, "PROTOBUF_LIMIT", 400)
    with pytest.raises(ConversionError, match=r"would be 0\.00 GiB, beyond protobuf's 2 GB limit for one ONNX file"):
        convert(g)


def test_cli_prints_hostile_names_escaped(tmp_path, capsys):
    """A tensor name that would recolour the terminal and set its title is printed as text."""
    from inspector.cli import main
    path = tmp_path / "esc.tflite"
    path.write_bytes(_named_model("\x1b[31mRED\x1b]0;pwned\x07"))
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\\x1b[31mRED\\x1b]0;pwned\\x07  [1, 4, 6, 5]" in out and "\x1b" not in out and "\x07" not in out


@pytest.mark.parametrize("doc, message", [
    ({"pins": ["x"]}, "'pins' must be a mapping, not list"),
    ({"options": "fast"}, "'options' must be a mapping, not str"),
    ({"options": {"opset": [18]}}, "opset must be a whole number, not [18]"),
    ({"metadata": {"props": {"k": 5}}}, "metadata value of 'k' must be text, got int"),
    ({"version": 99}, "not a session file of version 1"),
])
def test_a_damaged_session_file_is_refused_whole(tmp_path, doc, message):
    import json

    from inspector.core.session.session import Session
    from inspector.core.session.session_file import SESSION_VERSION
    model = tmp_path / "m.tflite"
    model.write_bytes(_named_model("x"))
    session = Session.open(model)
    session.set_pin("x", "NHWC")
    path = tmp_path / "m.inspector.json"
    path.write_text(json.dumps({"version": SESSION_VERSION, **doc}))
    with pytest.raises(InspectorError) as e:
        session.load_decisions(str(path))
    assert message in str(e.value)
    assert session.pins == {"x": "NHWC"}          # nothing applied from the damaged file


def test_thousands_of_inputs_and_initializers_read_in_one_pass():
    """20,000 of each: matching inputs to initializers pairwise took minutes (a hang by a 800 kB file)."""
    n = 20_000
    inputs = [helper.make_tensor_value_info(f"i{k}", TensorProto.FLOAT, [1]) for k in range(n)]
    inits = [helper.make_tensor(f"w{k}", TensorProto.FLOAT, [1], [1.0]) for k in range(n)]
    inputs.append(helper.make_tensor_value_info("w7", TensorProto.FLOAT, [1]))    # an input fed by an initializer
    g = helper.make_graph([helper.make_node("Identity", ["i0"], ["y"])], "wide", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], inits)
    graph = read_onnx_bytes(helper.make_model(g).SerializeToString(), "wide.onnx")
    assert len(graph.main.inputs) == n and graph.main.tensors[graph.main.inputs[-1]].name == f"i{n - 1}"


def test_many_metadata_edits_on_many_entries_keep_the_rest():
    m = helper.make_model(helper.make_graph([], "g", [], []))
    for k in range(5000):
        m.metadata_props.add(key=f"k{k}", value="old")
    MetadataEdits(props={**{f"K{k}": "new" for k in range(0, 5000, 10)}, "k1": None}).apply(m)
    props = {p.key: p.value for p in m.metadata_props}
    assert len(props) == 5000 - 1 and props["K10"] == "new" and props["k11"] == "old" and "k1" not in props


@pytest.mark.parametrize("name", ["zero.onnx", "zero.tflite", "fifo.onnx"])
def test_devices_and_pipes_named_like_models_are_refused_without_reading(tmp_path, name):
    """Reading /dev/zero never ends and opening a FIFO blocks: neither is read at all."""
    path = tmp_path / name
    if name.startswith("fifo"):
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    with pytest.raises(ModelLoadError, match="not a regular file"):
        load_model(path)
    reader = read_onnx if name.endswith(".onnx") else read_tflite
    with pytest.raises(ModelLoadError, match="not a regular file"):
        reader(path)
