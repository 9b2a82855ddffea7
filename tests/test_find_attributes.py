"""Search by attribute (issue 35): `name=value` or `name:value` matches an op whose attribute name contains `name`
and whose value (or one element of a list) equals `value`; plain text also matches attribute texts."""
from __future__ import annotations

import numpy as np


def _graph():
    """conv (stride 2, NHWC [1, 9, 13, 3] -> [1, 5, 7, 4]) -> concatenation on axis 3 with itself -> MEAN."""
    from inspector.core.io.tflite_builder import ModelBuilder
    from inspector.core.io.tflite_reader import read_tflite_bytes
    from inspector.gui import graph_model
    b = ModelBuilder()
    x = b.input("x", [1, 9, 13, 3])
    y = b.tensor("down:0", [1, 5, 7, 4])
    w = b.const("w", np.ones((4, 3, 2, 3), np.float32))
    b.op("CONV_2D", [x, w, b.const("b", np.zeros(4, np.float32))], [y],
         {"padding": "SAME", "stride_h": 2, "stride_w": 2})
    c = b.tensor("cat", [1, 5, 7, 8])
    b.op("CONCATENATION", [y, y], [c], {"axis": 3})
    b.output(c)
    return graph_model.from_tflite(read_tflite_bytes(b.build(), "m.tflite"))


def _found(text: str, regex: bool = False) -> dict:
    from inspector.gui import find
    vg = _graph()
    ix, q = find.Index(vg), find.pattern(text, regex)
    return {vg.nodes[ix.at[k]].title if kind == "node" else f"tensor {vg.tensor_names[k]}": ix.attributes(kind, k, q)
            for kind, k in ix.matches(q)}


def test_search_by_attribute():
    assert _found("stride=2") == {"CONV_2D": "stride_h=2, stride_w=2"}
    assert _found("stride = 2.0") == {"CONV_2D": "stride_h=2, stride_w=2"}     # one spelling of a number
    assert _found("stride=1") == {}
    assert _found("axis:3") == {"CONCATENATION": "axis=3"}
    assert _found("AXIS=3") == {"CONCATENATION": "axis=3"}
    assert _found("padding=same") == {"CONV_2D": "padding=SAME"}
    assert _found("SAME") == {"CONV_2D": "padding=SAME"}                       # a value's text
    assert _found("stride_h=2$", regex=True) == {"CONV_2D": "stride_h=2"}
    # a name holding ':' is still found by its name
    assert _found("down:0") == {"CONV_2D": "", "tensor down:0": ""}
