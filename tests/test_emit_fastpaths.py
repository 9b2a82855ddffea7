"""The conversion's fast paths build exactly what the onnx helpers they replace build, and keep their guarantees.

Each fast path (value infos parsed from cached bytes, initializers without numpy_helper, the resumed name search,
one checker pass, the denotation propagator's shape view) is compared with the slow construction it replaced.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector.core.emit.convert import check_model, convert
from inspector.core.metadata.denotation import LARGE_CONSTANT, shape_view
from inspector.core.metadata.denotation_rules import Propagator
from inspector.core.emit.emitter import Emitter, make_value_info, tensor_proto
from inspector.core.ir.errors import ConversionError
from inspector.core.ir.graph import Subgraph, Tensor
from inspector.core.layout.plan import LayoutPlan
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite_bytes

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("name", ["x", "é" * 70, "n" * 200, ""])        # 200 bytes: a two-byte length varint
@pytest.mark.parametrize("elem, dims", [
    (TensorProto.FLOAT, [1, 5, 7, 3]), (TensorProto.INT64, []), (TensorProto.UINT8, ["batch", 6, 4]),
    (TensorProto.FLOAT16, [0, 300, 70000]), (TensorProto.BOOL, ["t_d1" * 40]), (TensorProto.INT32, [-1, 2**40, "é"]),
])
def test_value_info_matches_the_helper_byte_for_byte(name, elem, dims):
    want = helper.make_tensor_value_info(name, elem, dims).SerializeToString()
    known = {}
    assert make_value_info(name, elem, dims, known=known).SerializeToString() == want
    assert len(known) == 1
    assert make_value_info(name, elem, dims, known=known).SerializeToString() == want   # second time from `known`
    assert make_value_info(name, elem, dims).SerializeToString() == want


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32",
                                   "uint32", "int64", "uint64", "bool"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 5, 7)])
def test_initializer_matches_from_array(dtype, shape):
    arr = (RNG.standard_normal(shape) * 50).astype(dtype)
    assert tensor_proto(arr, "w").SerializeToString() == numpy_helper.from_array(arr, "w").SerializeToString()


def test_other_dtypes_go_through_from_array():
    arr = np.array(["ab", "c"], dtype=object)
    assert tensor_proto(arr, "s").SerializeToString() == numpy_helper.from_array(arr, "s").SerializeToString()


def _emitter() -> Emitter:
    sg = Subgraph(name="g", tensors=[Tensor(index=0, name="x", shape=(1, 2), dtype="float32")], ops=[],
                  inputs=[0], outputs=[0])
    return Emitter(sg, LayoutPlan(), 18, {})


def test_fresh_names_take_the_smallest_free_suffix_even_after_outside_reservations():
    em = _emitter()
    assert [em.fresh("k") for _ in range(3)] == ["k", "k_2", "k_3"]
    em.claim("k_4", "k_6")                            # names reserved without fresh() (graph outputs do this)
    assert [em.fresh("k") for _ in range(3)] == ["k_5", "k_7", "k_8"]
    assert em.fresh("a b\tc") == "a_b_c" and em.fresh("") == "v"


def test_fresh_names_are_shared_with_a_subgraph_emitter():
    root = _emitter()
    child = Emitter(root.sg, LayoutPlan(), 18, {}, parent=root)
    assert [root.fresh("y"), child.fresh("y"), root.fresh("y")] == ["y", "y_2", "y_3"]


def test_value_info_types_are_shared_within_a_conversion_and_not_kept_after_it():
    """Tensors of one (type, shape) share its TypeProto bytes within a conversion (a subgraph too); a new
    conversion starts from none, so repeated conversions of a model cost what its first one does."""
    root = _emitter()
    child = Emitter(root.sg, LayoutPlan(), 18, {}, parent=root)
    root.value_info_for(0, "a", (0, 1))
    assert child._type_bytes is root._type_bytes and len(root._type_bytes) == 1
    child.value_info_for(0, "b", (0, 1))              # the same (type, shape): no new entry
    assert len(root._type_bytes) == 1
    child.value_info_for(0, "c", (1, 0))              # transposed: another shape
    assert len(root._type_bytes) == 2
    assert _emitter()._type_bytes == {}


def _relu_model(declared: list[int]) -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 3, 5])],
                          value_info=[helper.make_tensor_value_info("y", TensorProto.FLOAT, declared)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_one_checker_pass_still_refuses_a_declared_shape_inference_contradicts():
    check_model(_relu_model([1, 3, 5]))
    with pytest.raises(ConversionError, match=r"fails the ONNX checker: .*differ in dimension 2: \(5\) vs \(4\)"):
        check_model(_relu_model([1, 3, 4]))


def test_checker_accepts_the_serialised_model_too():
    check_model(_relu_model([1, 3, 5]).SerializeToString())
    with pytest.raises(ConversionError):
        check_model(_relu_model([1, 3, 4]).SerializeToString())


def _conv_model() -> onnx.ModelProto:
    b = ModelBuilder()
    x = b.input("x", [1, 9, 7, 6])
    y = b.tensor("y", [1, 9, 7, 40])
    b.op("CONV_2D", [x, b.const("w", RNG.standard_normal((40, 3, 2, 6)).astype(np.float32)),
                     b.const("b", RNG.standard_normal(40).astype(np.float32))], [y], {"padding": "SAME"})
    z = b.tensor("z", [1, 5, 4, 40])
    b.op("MAX_POOL_2D", [y], [z], {"padding": "SAME", "stride_h": 2, "stride_w": 2, "filter_height": 2,
                                    "filter_width": 2})
    b.output(z)
    return convert(read_tflite_bytes(b.build())).model


def test_shape_view_drops_only_large_weights_and_propagates_the_same_denotations():
    model = _conv_model()
    view = shape_view(model)
    sizes = {t.name: (tuple(t.dims), len(t.raw_data)) for t in model.graph.initializer}
    light = {t.name: (tuple(t.dims), len(t.raw_data)) for t in view.graph.initializer}
    assert sizes.keys() == light.keys()
    for name, (dims, n) in sizes.items():
        big = int(np.prod(dims)) > LARGE_CONSTANT
        assert light[name] == (dims, 0 if big else n), name
    assert any(int(np.prod(d)) > LARGE_CONSTANT for d, _ in sizes.values())        # the test has a weight to drop
    assert list(view.graph.node) == list(model.graph.node) and view.opset_import == model.opset_import
    seeds = {model.graph.input[0].name: ("DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE", "DATA_FEATURE")}
    full, lite = Propagator(model).run(seeds), Propagator(view).run(seeds)
    assert full[0] == lite[0] and [f.message for f in full[1]] == [f.message for f in lite[1]]
    assert full[0][model.graph.output[0].name] == seeds[model.graph.input[0].name]


def test_nodes_match_the_helper_byte_for_byte_with_their_attribute_sets_kept():
    """make_node keeps each set of attributes' wire form: values the cache could confuse (1, 1.0 and True; 0.0 and
    -0.0; NaN; an int list and a float list with equal values; numpy ints) each give what helper.make_node gives,
    the first time and from what was kept."""
    from inspector.core.emit import emitter
    sets = [{}, {"axis": 1}, {"axis": 1.0}, {"axis": True}, {"alpha": 0.0}, {"alpha": -0.0},
            {"alpha": float("nan")}, {"pads": [1, 2, 1, 2]}, {"pads": (1, 2, 1, 2)}, {"scales": [1.0, 2.0]},
            {"pads": [1, 2, 1, 2], "mode": "reflect", "value": 0.5}, {"axis": np.int64(3)}, {"mode": "é"},
            {"perm": [0, 2, 3, 1], "axes": [np.int64(1)]}]
    emitter._ATTRS.clear()
    for _ in range(2):                                  # the second time from the kept wire forms
        for i, attrs in enumerate(sets):
            got = emitter.make_node("Pad", ["x", ""], [f"y{i}"], f"n{i}", "", dict(attrs))
            want = helper.make_node("Pad", ["x", ""], [f"y{i}"], f"n{i}", **attrs)
            assert got.SerializeToString() == want.SerializeToString(), attrs
    assert 0 < len(emitter._ATTRS) < len(sets)          # (those with a numpy value are not kept)
    d = emitter.make_node("Conv", ["x", "w"], ["y"], "c", "com.microsoft", {"group": 2})
    assert d == helper.make_node("Conv", ["x", "w"], ["y"], "c", domain="com.microsoft", group=2)
