"""Our shape computation (ir/shapes.py) against LiteRT's on every corpus model: after one run on zeros, each
non-constant tensor of the main graph has the shape LiteRT gave it, and so has each static one of the other subgraphs
(WHILE bodies' dynamic ones hold their last iteration's shape); no correct file gets a note."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite, read_tflite_bytes
from inspector.core.ir.shape_rules import range_

from .conftest import corpus_files


@pytest.mark.parametrize("rel", corpus_files())
def test_shapes_are_litert_s(corpus, rel):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    path = str(corpus / rel)
    graph = read_tflite(path)
    assert graph.notes == []                         # the corpus' files declare LiteRT's shapes
    it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    try:
        it.allocate_tensors()
    except RuntimeError as e:                        # a custom op this LiteRT lacks: nothing to compare with
        assert "custom op" in str(e) and rel == "realworld/mediapipe_selfie_segmentation.tflite"
        return
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    it.invoke()
    tensors = graph.main.tensors
    details = [d for d in it.get_tensor_details() if d["index"] < len(tensors)     # (not LiteRT's scratch)
               and tensors[d["index"]].data is None]
    assert details
    got = {tensors[d["index"]].name: tuple(tensors[d["index"]].shape) for d in details}
    assert got == {tensors[d["index"]].name: tuple(int(x) for x in d["shape"]) for d in details}
    for k, sg in enumerate(graph.subgraphs[1:], 1):
        static = [d for d in it.get_tensor_details(subgraph_index=k) if d["index"] < len(sg.tensors)
                  and sg.tensors[d["index"]].data is None and not sg.tensors[d["index"]].dynamic]
        assert {d["index"]: sg.tensors[d["index"]].shape for d in static} == \
            {d["index"]: tuple(int(x) for x in d["shape"]) for d in static}, sg.name


# --- dynamic dims: generated models, one per rule that was wrong for them; each compared with LiteRT after a run ---
def _i32(*v) -> np.ndarray:
    return np.array(v, np.int32)


def range_chain(b):
    """x [3, 5] (length dynamic) + RANGE(0, SHAPE(x)[1], 1) -> RESHAPE to [-1]: without a RANGE rule the sum stayed a
    placeholder and so did the RESHAPE after it (declared [1], LiteRT: [15])."""
    x = b.input("x", [3, 5], shape_signature=[3, -1])
    s, n = b.tensor("s", [2], "int32"), b.tensor("n", [], "int32")
    b.op("SHAPE", [x], [s], {"out_type": 2})
    b.op("STRIDED_SLICE", [s, b.const("b", _i32(1)), b.const("e", _i32(2)), b.const("st", _i32(1))], [n],
         {"shrink_axis_mask": 1})
    r, rf = b.tensor("r", [1], "int32", shape_signature=[-1]), b.tensor("rf", [1], shape_signature=[-1])
    b.op("RANGE", [b.const("zero", np.int32(0)), n, b.const("one", np.int32(1))], [r])
    b.op("CAST", [r], [rf])
    y, z = b.tensor("y", [3, 1], shape_signature=[3, -1]), b.tensor("z", [1], shape_signature=[-1])
    b.op("ADD", [x, rf], [y], {})
    b.op("RESHAPE", [y, b.const("flat", _i32(-1))], [z])
    return z


def empty_window(b):
    """x [1, 3, 2, 4] (width dynamic) -> CONV_2D VALID, kernel 9 wide, stride 6: LiteRT's (2 + 6 - 9) / 6 truncates to
    0 (an empty output, declared [1, 3, 1, 5]); floor division gave -1 and the placeholder stood."""
    x = b.input("x", [1, 3, 2, 4], shape_signature=[1, 3, -1, 4])
    y = b.tensor("y", [1, 3, 1, 5], shape_signature=[1, 3, -1, 5])
    b.op("CONV_2D", [x, b.const("w", np.ones((5, 1, 9, 4), np.float32)), b.const("bias", np.ones(5, np.float32))],
         [y], {"padding": "VALID", "stride_h": 1, "stride_w": 6})
    return y


def upsampled(b):
    """x [1, 3, 2, 4] (H and W dynamic) -> TRANSPOSE_CONV stride 2 to [1, 2H, 2W, 5] from a SHAPE/PACK chain: LiteRT
    computes [1, 6, 4, 5] where the file holds the converter's placeholder [1, 1, 1, 5]; a placeholder, not a stale
    size, so no note."""
    x = b.input("x", [1, 3, 2, 4], shape_signature=[1, -1, -1, 4])
    s = b.tensor("s", [4], "int32")
    b.op("SHAPE", [x], [s], {"out_type": 2})
    dims = []
    for k in (1, 2):
        d, d2 = b.tensor(f"d{k}", [], "int32"), b.tensor(f"d{k}x2", [], "int32")
        b.op("STRIDED_SLICE", [s, b.const(f"b{k}", _i32(k)), b.const(f"e{k}", _i32(k + 1)),
                               b.const(f"st{k}", _i32(1))], [d], {"shrink_axis_mask": 1})
        b.op("MUL", [d, b.const(f"two{k}", np.int32(2))], [d2], {})
        dims.append(d2)
    shape = b.tensor("out_shape", [4], "int32")
    b.op("PACK", [b.const("n", np.int32(1)), *dims, b.const("c", np.int32(5))], [shape], {"axis": 0, "values_count": 4})
    y = b.tensor("y", [1, 1, 1, 5], shape_signature=[1, -1, -1, 5])
    b.op("TRANSPOSE_CONV", [shape, b.const("w", np.ones((5, 3, 3, 4), np.float32)), x], [y],
         {"padding": "SAME", "stride_h": 2, "stride_w": 2})
    return y


@pytest.mark.parametrize("make, want", [(range_chain, (15,)), (empty_window, (1, 3, 0, 5)), (upsampled, (1, 6, 4, 5))])
def test_dynamic_dims_take_litert_s_shapes_without_a_note(make, want):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    b = ModelBuilder()
    out = make(b)
    b.output(out)
    data = b.build()
    graph = read_tflite_bytes(data)
    assert graph.notes == []                         # only dynamic dims' placeholders differ
    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    it.invoke()
    tensors = graph.main.tensors
    lit = {tensors[d["index"]].name: tuple(int(x) for x in d["shape"]) for d in it.get_tensor_details()
           if d["index"] < len(tensors) and tensors[d["index"]].data is None}
    assert lit[tensors[out].name] == want
    assert {t.name: tuple(t.shape) for t in tensors if t.name in lit} == lit


@pytest.mark.parametrize("start, limit, delta", [(0, 7, 2), (5, -4, -3), (0, 5, -1), (2.0, 3.5, 0.4)])
def test_range_length_is_numpy_s(start, limit, delta):
    """RANGE's length as ONNX's Range (and NumPy) compute it: a step away from the limit gives none (|...| gave 5)."""
    ins = [SimpleNamespace(value=np.array(v), shape=()) for v in (start, limit, delta)]
    assert range_(None, ins) == [(len(np.arange(start, limit, delta)),)]


def test_range_with_a_zero_step_is_refused_in_words():
    with pytest.raises(ValueError, match="step of 0"):
        range_(None, [SimpleNamespace(value=np.array(v), shape=()) for v in (0, 4, 0)])
