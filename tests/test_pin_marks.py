"""Which tensors the panes mark as pinned: every pin that fits the graph, under its own text, whatever the others."""
from __future__ import annotations

from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.layout.pins import resolve_pins
from inspector.gui.main_window import pinned

from .test_convert_core import conv


def _graph(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    y = conv(b, x, 3, 4, 5, 7, name="c1")
    z = b.tensor("r", [1, 5, 7, 4])
    b.op("RELU", [y], [z])
    b.output(z)
    path = tmp_path / "m.tflite"
    path.write_bytes(b.build())
    return read_tflite(path).main


def test_pins_that_fit_are_marked_and_one_that_does_not_is_left_out(tmp_path):
    sg = _graph(tmp_path)
    by_name = {t.name: t.index for t in sg.tensors}
    pins = {"c1": "NCHW", "no such tensor": "NHWC", str(by_name["r"]): "NHWC", "x": "bad layout"}
    shown = pinned(sg, pins)
    assert shown == {by_name["c1"]: "NCHW", by_name["r"]: "NHWC"}
    # the pins that fit resolve to the same tensors when given alone, as conversion reads them
    assert set(resolve_pins(sg, {"c1": "NCHW", str(by_name["r"]): "NHWC"})) == set(shown)


def test_a_tensor_pinned_by_name_and_by_index_is_marked_once_with_the_later_text(tmp_path):
    sg = _graph(tmp_path)
    t = next(t.index for t in sg.tensors if t.name == "r")
    assert pinned(sg, {"r": "NCHW", str(t): "NHWC"}) == {t: "NHWC"}
    assert pinned(sg, {}) == {}
