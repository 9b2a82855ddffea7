"""Verified reading: a TFLite file LiteRT refuses is refused by our reader too, with LiteRT's reason. Before, the
reader accepted a file the flatbuffer verifier refuses, `convert` wrote an ONNX file (exit 0) and `validate` then
failed with a traceback (issue 22)."""
from __future__ import annotations

import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from inspector.cli import main
from inspector.core.ir.errors import ModelLoadError
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite_bytes

from .test_hostile import _named_model

NAME = "input_unterminated"


def _unterminated() -> bytes:
    """A flatbuffer string must end in a zero byte the length does not count; this one's is overwritten."""
    data = bytearray(_named_model(NAME))
    data[data.index(NAME.encode() + b"\x00") + len(NAME)] = ord("!")
    return bytes(data)


def test_litert_refuses_the_file_itself():
    with pytest.raises(ValueError, match="not a valid Flatbuffer buffer"):
        Interpreter(model_content=_unterminated())


def test_the_reader_refuses_it_with_litert_s_reason():
    assert read_tflite_bytes(_named_model(NAME)).main.tensors[0].name == NAME       # the intact file reads
    with pytest.raises(ModelLoadError, match="LiteRT refuses this file: The model is not a valid Flatbuffer buffer"):
        read_tflite_bytes(_unterminated(), "m.tflite")


def test_convert_writes_nothing_and_says_why_in_one_line(tmp_path, capsys):
    path = tmp_path / "m.tflite"
    path.write_bytes(_unterminated())
    assert main(["convert", str(path), "-o", str(tmp_path / "m.onnx")]) == 1
    assert capsys.readouterr().err == (f"error: {path}: LiteRT refuses this file: The model is not a valid "
                                       "Flatbuffer buffer\n")
    assert not (tmp_path / "m.onnx").exists()


def test_a_kernel_litert_lacks_is_no_reason_to_refuse_a_file():
    """Building an interpreter also resolves builtin kernels: a missing one is LiteRT's gap, not the file's."""
    b = ModelBuilder()
    x = b.input("x", [2, 3, 5])
    y = b.tensor("y", [5, 3, 2])
    b.op("STABLEHLO_TRANSPOSE", [x], [y], {"permutation": [2, 1, 0]})
    b.output(y)
    with pytest.raises(ValueError, match="Didn't find op for builtin opcode 'STABLEHLO_TRANSPOSE'"):
        Interpreter(model_content=b.build(),
                    experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    assert [op.opcode for op in read_tflite_bytes(b.build()).main.ops] == ["STABLEHLO_TRANSPOSE"]
