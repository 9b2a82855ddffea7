"""Malformed models, made here from corpus files, each give ModelLoadError quickly and one CLI error line.

The 1 s bound is a watchdog (the load runs in a thread that must finish), not a timed assertion.
"""
from __future__ import annotations

import struct
import subprocess
import sys
import threading

import numpy as np
import onnx
import pytest
import tflite
from onnx import TensorProto, helper

from inspector.cli import main
from inspector.core.ir.errors import ModelLoadError
from inspector.core.io.loader import load_model
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import _slot

from .conftest import ROOT

CONV = "ops/conv.float32.tflite"
AUDIO = "keras/custom_conv1d_audio_fp32.tflite"
QUANT = "ops/conv.uint8.tflite"
SINE = "realworld/sine_float.tflite"


def _put(buf: bytearray, pos: int, fmt: str, value) -> bytearray:
    struct.pack_into(fmt, buf, pos, value)
    return buf


def _field(table, accessor: str) -> int:
    """Absolute position of a table's field (a scalar, or the offset to a vector or table)."""
    tab = table._tab
    o = tab.Offset(_slot(type(table), accessor))
    assert o, f"{type(table).__name__}.{accessor} is absent in this file"
    return tab.Pos + o


def _vector_len(table, accessor: str) -> int:
    """Absolute position of a vector's element count."""
    tab = table._tab
    return tab.Vector(tab.Offset(_slot(type(table), accessor))) - 4


def _model(buf) -> tflite.Model:
    return tflite.Model.GetRootAsModel(bytes(buf), 0)


def _weight(m: tflite.Model):
    """(tensor index, tensor) of the first constant with data."""
    sg = m.Subgraphs(0)
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        if t.Buffer() and m.Buffers(t.Buffer()).DataLength():
            return i, t
    raise AssertionError("no constant")


def _activation(m: tflite.Model):
    sg = m.Subgraphs(0)
    return sg.Tensors(sg.Inputs(0))


def _op_with_code(m: tflite.Model):
    """An operator whose opcode index is stored (not the default 0)."""
    sg = m.Subgraphs(0)
    return next(sg.Operators(i) for i in range(sg.OperatorsLength()) if sg.Operators(i).OpcodeIndex())


def _flip(pos_of, bit: int = 7):
    """Flip one bit of the byte at pos_of(model, buf)."""
    def mutate(buf):
        pos = pos_of(_model(buf), buf)
        buf[pos] ^= 1 << bit
        return buf
    return mutate


def _root(buf) -> int:
    return struct.unpack_from("<I", buf, 0)[0]


def _root_vtable(buf) -> int:
    return _root(buf) - struct.unpack_from("<i", buf, _root(buf))[0]


def _count(getter, accessor, value):
    return lambda buf: _put(buf, _vector_len(getter(_model(buf)), accessor), "<I", value)


def _tail_model(offset_shift: int = 0, size_shift: int = 0) -> bytes:
    """A builder-made model whose constant lives after the flatbuffer; shifted offset/size point past the end."""
    b = ModelBuilder()
    x = b.input("x", [2, 3])
    y = b.tensor("y", [2, 3])
    b.op("MUL", [x, b.const("c", np.ones((2, 3), np.float32), tail=True)], [y])
    b.output(y)
    buf = bytearray(b.build())
    buf_table = _model(buf).Buffers(1)
    _put(buf, _field(buf_table, "Offset"), "<Q", buf_table.Offset() + offset_shift)
    return bytes(_put(buf, _field(buf_table, "Size"), "<Q", buf_table.Size() + size_shift))


def _onnx_model() -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 5, 7])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(g).SerializeToString()


# name -> (source corpus file or None, mutation of its bytes, file suffix)
CASES = {
    "empty": (None, lambda b: bytearray(), ".tflite"),
    "seven_bytes": (CONV, lambda b: b[:7], ".tflite"),
    "header_only": (CONV, lambda b: b[:16], ".tflite"),
    "cut_10pct": (AUDIO, lambda b: b[:len(b) // 10], ".tflite"),
    "cut_33pct": (AUDIO, lambda b: b[:len(b) // 3], ".tflite"),
    "cut_half": (AUDIO, lambda b: b[:len(b) // 2], ".tflite"),
    "cut_90pct": (AUDIO, lambda b: b[:len(b) * 9 // 10], ".tflite"),
    "cut_75pct_quant": (QUANT, lambda b: b[:len(b) * 3 // 4], ".tflite"),
    "wrong_identifier": (CONV, lambda b: b[:4] + b"TFL2" + b[8:], ".tflite"),
    "text_file": (None, lambda b: bytearray(b"this is not a model\n" * 5), ".tflite"),
    "schema_version_4": (CONV, lambda b: _put(b, _field(_model(b), "Version"), "<I", 4), ".tflite"),
    "schema_version_0": (SINE, lambda b: _put(b, _field(_model(b), "Version"), "<I", 0), ".tflite"),
    "root_offset_past_end": (CONV, lambda b: _put(b, 0, "<I", len(b) + 64), ".tflite"),
    "flip_root_offset": (AUDIO, _flip(lambda m, b: 3), ".tflite"),
    "flip_root_table_soffset": (AUDIO, _flip(lambda m, b: _root(b) + 3, 6), ".tflite"),
    "flip_root_vtable_size": (CONV, _flip(lambda m, b: _root_vtable(b) + 1), ".tflite"),
    "flip_vtable_subgraphs_slot": (CONV, _flip(lambda m, b: _root_vtable(b) + _slot(tflite.Model, "Subgraphs") + 1),
                                   ".tflite"),
    "flip_subgraphs_offset": (SINE, _flip(lambda m, b: _field(m, "Subgraphs") + 3), ".tflite"),
    "flip_tensors_offset": (QUANT, _flip(lambda m, b: _field(m.Subgraphs(0), "Tensors") + 3), ".tflite"),
    "flip_operators_offset": (AUDIO, _flip(lambda m, b: _field(m.Subgraphs(0), "Operators") + 2), ".tflite"),
    "subgraph_count_absurd": (CONV, _count(lambda m: m, "Subgraphs", 0x7FFFFFFF), ".tflite"),
    "tensor_count_absurd": (AUDIO, _count(lambda m: m.Subgraphs(0), "Tensors", 0x10000000), ".tflite"),
    "operator_count_absurd": (QUANT, _count(lambda m: m.Subgraphs(0), "Operators", 0xFFFFFFFF), ".tflite"),
    "buffer_count_absurd": (SINE, _count(lambda m: m, "Buffers", 0x00FFFFFF), ".tflite"),
    "opcode_count_absurd": (CONV, _count(lambda m: m, "OperatorCodes", 0x40000000), ".tflite"),
    "tensor_count_into_weights": (AUDIO, _count(lambda m: m.Subgraphs(0), "Tensors", 1500), ".tflite"),
    "shape_count_absurd": (CONV, _count(lambda m: _activation(m), "Shape", 0x20000000), ".tflite"),
    "rank_100": (SINE, _count(lambda m: _activation(m), "Shape", 100), ".tflite"),
    "op_inputs_count_absurd": (AUDIO, _count(lambda m: m.Subgraphs(0).Operators(0), "Inputs", 0x7FFFFFF0),
                               ".tflite"),
    "buffer_size_past_end": (CONV, _count(lambda m: m.Buffers(_weight(m)[1].Buffer()), "Data", 0x7FFFFFFF),
                             ".tflite"),
    "buffer_size_slightly_past_end": (QUANT, lambda b: _count(lambda m: m.Buffers(_weight(m)[1].Buffer()), "Data",
                                                              len(b))(b), ".tflite"),
    "weight_claims_billions": (CONV, lambda b: _put(b, _vector_len(_weight(_model(b))[1], "Shape") + 4, "<i",
                                                    0x7FFFFFFF), ".tflite"),
    "weight_claims_more_than_buffer": (AUDIO, lambda b: _put(b, _vector_len(_weight(_model(b))[1], "Shape") + 4,
                                                             "<i", 1000), ".tflite"),
    "activation_claims_2e37": (SINE, lambda b: [_put(b, _vector_len(_activation(_model(b)), "Shape") + 4 + 4 * k, "<i",
                                                     0x7FFFFFFF) for k in range(2)][-1], ".tflite"),
    "negative_dim": (CONV, lambda b: _put(b, _vector_len(_activation(_model(b)), "Shape") + 8, "<i", -5), ".tflite"),
    "op_input_out_of_range": (CONV, lambda b: _put(b, _vector_len(_model(b).Subgraphs(0).Operators(0), "Inputs") + 4,
                                                   "<i", 999), ".tflite"),
    "opcode_index_out_of_range": (AUDIO, lambda b: _put(b, _field(_op_with_code(_model(b)), "OpcodeIndex"), "<I", 77),
                                  ".tflite"),
    "tail_buffer_offset_past_end": (None, lambda b: bytearray(_tail_model(offset_shift=1 << 20)), ".tflite"),
    "tail_buffer_size_past_end": (None, lambda b: bytearray(_tail_model(size_shift=1 << 32)), ".tflite"),
    "onnx_garbage": (None, lambda b: bytearray(b"\x08" + np.random.default_rng(5).bytes(300)), ".onnx"),
    "onnx_truncated": (None, lambda b: bytearray(_onnx_model()[:len(_onnx_model()) // 2]), ".onnx"),
    "onnx_text": (None, lambda b: bytearray(b"ir_version: 8\ngraph { }\n"), ".onnx"),
}


# What the reason must say for the cases where one rule is clearly the one that applies.
REASONS = {
    "empty": "not a TFLite or ONNX model", "wrong_identifier": "not a TFLite or ONNX model",
    "schema_version_4": "schema version 4", "schema_version_0": "schema version 0",
    "tensor_count_absurd": "more than the file can hold", "subgraph_count_absurd": "more than the file can hold",
    "rank_100": "rank 100", "negative_dim": "negative dimension",
    "weight_claims_billions": "needs 8589934588 bytes", "activation_claims_2e37": "beyond any real model",
    "buffer_size_past_end": "claims 2147483647 bytes", "buffer_size_slightly_past_end": "past the end",
    "tail_buffer_offset_past_end": "past the end", "tail_buffer_size_past_end": "past the end",
    "op_input_out_of_range": "tensor 999", "opcode_index_out_of_range": "opcode index 77",
    "onnx_truncated": "not an ONNX model", "cut_90pct": "truncated",
}


@pytest.fixture(scope="module")
def bad_files(corpus, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("malformed")
    out = {}
    for name, (src, mutate, suffix) in CASES.items():
        data = bytearray((corpus / src).read_bytes()) if src else bytearray()
        path = folder / f"{name}{suffix}"
        path.write_bytes(bytes(mutate(data)))
        out[name] = path
    return out


def test_enough_cases():
    assert len(CASES) >= 30


def _load_with_watchdog(path, seconds: float = 1.0):
    """The exception load_model raised; fails if it is still running after `seconds`."""
    result = {}

    def work():
        try:
            load_model(path)
        except BaseException as e:       # noqa: BLE001 - the test inspects whatever escaped
            result["error"] = e

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{path.name}: still loading after {seconds} s"
    return result.get("error")


@pytest.mark.parametrize("name", CASES)
def test_refused_with_model_load_error(bad_files, name):
    path = bad_files[name]
    err = _load_with_watchdog(path)
    assert isinstance(err, ModelLoadError), f"{name}: {type(err).__name__}: {err}"
    assert err.path == str(path) and err.reason and "\n" not in err.reason
    assert REASONS.get(name, "") in err.reason


@pytest.mark.parametrize("name", CASES)
def test_cli_prints_one_error_line(bad_files, name, capsys):
    path = bad_files[name]
    assert main(["info", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {path}: ")
    assert "Traceback" not in err


@pytest.mark.parametrize("name", ["cut_half", "tensor_count_absurd", "onnx_garbage"])
def test_cli_process_exit_1(bad_files, name):
    path = bad_files[name]
    r = subprocess.run([sys.executable, "-m", "inspector", "info", str(path)], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 1
    assert r.stdout == "" and len(r.stderr.splitlines()) == 1 and r.stderr.startswith(f"error: {path}: ")


def test_debug_shows_the_traceback(bad_files, capsys):
    assert main(["--debug", "info", str(bad_files["cut_half"])]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_missing_file_is_exit_1(tmp_path, capsys):
    path = tmp_path / "nowhere.tflite"
    assert main(["info", str(path)]) == 1
    assert capsys.readouterr().err.startswith(f"error: {path}: ")


@pytest.mark.parametrize("argv", [["info"], ["info", "a.tflite", "b.tflite"], ["info", "--bogus", "a.tflite"],
                                  ["frobnicate"], []])
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        code = main(argv)
        raise SystemExit(code)
    assert e.value.code == 2
    assert "usage" in capsys.readouterr().err


def test_the_untouched_sources_load(corpus):
    """The mutations, not the sources, are what the reader refuses."""
    for src in {CONV, AUDIO, QUANT, SINE}:
        assert load_model(corpus / src).main.ops
    onnx.checker.check_model(onnx.load_from_string(_onnx_model()))
