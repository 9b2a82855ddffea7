"""Each result's category colours are worked out once, for as long as the result lives, whatever other windows
colour in between (one shared slot made two windows recompute each other's on every recolour)."""
from __future__ import annotations

import gc

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite
from inspector.gui import document
from inspector.gui.document import Document

from .test_convert_core import conv


def _result(tmp_path, name, h, w):
    b = ModelBuilder()
    x = b.input("x", [1, h, w, 3])
    b.output(conv(b, x, 3, 4, h, w, name="c"))
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(b.build())
    return convert(read_tflite(path))


def test_two_results_keep_their_colours_and_a_dead_result_drops_them(tmp_path):
    a = Document("a", result=_result(tmp_path, "a", 5, 7))
    b = Document("b", result=_result(tmp_path, "b", 6, 9))
    a_onnx = a.onnx_categories()
    b_onnx = b.onnx_categories()
    assert a_onnx and b_onnx and a_onnx is not b_onnx
    assert a.onnx_categories() is a_onnx and a.tflite_categories() is a.tflite_categories()   # not recomputed
    assert b.onnx_categories() is b_onnx
    assert set(a_onnx) == {n.name for n in a.result.model.graph.node}
    key = id(b.result)
    assert key in document._COLOURED
    b.result = None
    del b
    gc.collect()
    assert key not in document._COLOURED and a.onnx_categories() is a_onnx
