"""The ONNX reader round-trips a model written with onnx.helper and refuses bad files with ModelLoadError."""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector.core.ir.errors import ModelLoadError
from inspector.core.io.loader import load_model
from inspector.core.io.onnx_reader import read_onnx, read_onnx_bytes

RNG = np.random.default_rng(3)
W = RNG.standard_normal((8, 3, 3, 2)).astype(np.float32)     # O, I, kH, kW: not square


def _image_type(name, dims, denot=None):
    vi = helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)
    vi.type.denotation = "IMAGE"
    for d, dn in zip(vi.type.tensor_type.shape.dim, denot or []):
        d.denotation = dn
    return vi


def _model() -> onnx.ModelProto:
    image = _image_type("image", ["N", 3, 48, 64], ["DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE", "DATA_FEATURE"])
    flag = helper.make_tensor_value_info("flag", TensorProto.BOOL, [])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 8 * 48 * 64])
    then_g = helper.make_graph([helper.make_node("Neg", ["flat"], ["t_out"])], "then_body", [],
                               [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Identity", ["flat"], ["e_out"])], "else_body", [],
                               [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, None)])
    nodes = [
        helper.make_node("Conv", ["image", "W", "B"], ["conv"], name="conv1", kernel_shape=[3, 2],
                         pads=[1, 0, 1, 1], strides=[1, 1], auto_pad="NOTSET"),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu1"),
        helper.make_node("Constant", [], ["shape"], name="shape_const",
                         value=numpy_helper.from_array(np.array([-1, 8 * 48 * 64], np.int64))),
        helper.make_node("Reshape", ["relu", "shape"], ["flat"], name="flatten"),
        helper.make_node("If", ["flag"], ["out"], name="maybe_negate", then_branch=then_g, else_branch=else_g),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [image, flag], [out],
        initializer=[numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.arange(8, dtype=np.float32), "B")],
        value_info=[helper.make_tensor_value_info("conv", TensorProto.FLOAT, ["N", 8, 48, 64])],
    )
    model = helper.make_model(graph, producer_name="tests", producer_version="1.0", doc_string="a tiny test model",
                              opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.example", 1)])
    helper.set_model_props(model, {"author": "layout-inspector", "Image.BitmapPixelFormat": "Rgb8"})
    onnx.checker.check_model(model, full_check=True)
    return model


def test_round_trip(tmp_path):
    path = tmp_path / "tiny.onnx"
    onnx.save(_model(), path)
    g = load_model(path)
    assert g.format == "onnx" and g.producer == "tests 1.0" and g.description == "a tiny test model"
    assert g.metadata == {"author": "layout-inspector", "Image.BitmapPixelFormat": "Rgb8"}
    assert g.opsets == {"ai.onnx": 18, "com.example": 1}
    assert g.version == onnx.IR_VERSION
    sg = g.main
    assert [op.opcode for op in sg.ops] == ["Conv", "Relu", "Constant", "Reshape", "If"]
    assert [op.name for op in sg.ops] == ["conv1", "relu1", "shape_const", "flatten", "maybe_negate"]
    assert [sg.tensors[i].name for i in sg.inputs] == ["image", "flag"]
    assert [sg.tensors[i].name for i in sg.outputs] == ["out"]

    image = sg.tensor_by_name("image")
    assert image.shape == (1, 3, 48, 64) and image.shape_signature == (-1, 3, 48, 64)
    assert image.dim_params == ("N", "", "", "") and image.dynamic
    assert image.denotation == "IMAGE"
    assert image.dim_denotations == ("DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE", "DATA_FEATURE")
    assert image.dtype == "float32" and sg.tensor_by_name("flag").dtype == "bool"
    assert sg.tensor_by_name("conv").shape_signature == (-1, 8, 48, 64)      # from value_info

    w = sg.tensor_by_name("W")
    np.testing.assert_array_equal(w.data, W)
    assert w.shape == (8, 3, 3, 2) and w.dtype == "float32" and not w.data.flags.writeable

    conv = sg.ops[0]
    assert conv.options == {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "strides": [1, 1], "auto_pad": "NOTSET"}
    assert conv.inputs == [image.index, w.index, sg.tensor_by_name("B").index]
    np.testing.assert_array_equal(sg.ops[2].options["value"], [-1, 8 * 48 * 64])

    branch = sg.ops[4].options
    then_sg, else_sg = g.subgraphs[branch["then_branch"]], g.subgraphs[branch["else_branch"]]
    assert (then_sg.name, else_sg.name) == ("then_body", "else_body") and len(g.subgraphs) == 3
    assert [op.opcode for op in then_sg.ops] == ["Neg"] and [op.opcode for op in else_sg.ops] == ["Identity"]
    assert g.op_histogram() == {"Conv": 1, "Constant": 1, "Identity": 1, "If": 1, "Neg": 1, "Relu": 1,
                                "Reshape": 1}


def test_external_data_inside_the_folder_is_read(tmp_path):
    path = tmp_path / "ext.onnx"
    onnx.save(_model(), path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
              size_threshold=0)
    assert (tmp_path / "weights.bin").is_file()
    np.testing.assert_array_equal(read_onnx(path).main.tensor_by_name("W").data, W)


def _with_location(tmp_path, location: str, length: int | None = None):
    model = _model()
    w = next(t for t in model.graph.initializer if t.name == "W")
    w.ClearField("raw_data")
    del w.float_data[:]
    w.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": "0", **({"length": str(length)} if length is not None else {})}
    for k, v in entries.items():
        e = w.external_data.add()
        e.key, e.value = k, v
    path = tmp_path / "model" / "bad.onnx"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("location", ["../secret.bin", "sub/../../secret.bin", "/etc/passwd", "link.bin"])
def test_external_data_outside_the_folder_is_refused(tmp_path, location):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(W.tobytes())
    path = _with_location(tmp_path, location)
    os.symlink(secret, path.parent / "link.bin")
    with pytest.raises(ModelLoadError, match="outside the model's folder"):
        read_onnx(path)


def test_external_data_range_beyond_file_is_refused(tmp_path):
    path = _with_location(tmp_path, "w.bin", length=W.nbytes)
    (path.parent / "w.bin").write_bytes(W.tobytes()[:100])
    with pytest.raises(ModelLoadError, match="beyond its 100 bytes"):
        read_onnx(path)


def test_external_data_without_folder_is_refused(tmp_path):
    path = _with_location(tmp_path, "w.bin")
    with pytest.raises(ModelLoadError, match="without a folder"):
        read_onnx_bytes(path.read_bytes(), "bad.onnx")


def test_initializer_claiming_more_than_it_holds_is_refused():
    model = _model()
    w = next(t for t in model.graph.initializer if t.name == "W")
    w.dims[0] = 1 << 40
    with pytest.raises(ModelLoadError, match="needs .* bytes but holds"):
        read_onnx_bytes(model.SerializeToString(), "huge.onnx")


@pytest.mark.parametrize("cut", [0.25, 0.5, 0.9])
def test_truncated_is_refused(cut):
    data = _model().SerializeToString()
    with pytest.raises(ModelLoadError, match="^cut.onnx: "):
        read_onnx_bytes(data[:int(len(data) * cut)], "cut.onnx")


@pytest.mark.parametrize("data", [b"", b"hello, world\n" * 3, bytes(range(256)) * 4, b"\x08\x07"])
def test_not_onnx_is_refused(data):
    with pytest.raises(ModelLoadError, match="not an ONNX model"):
        read_onnx_bytes(data, "x.onnx")


def test_beyond_protobuf_limit_is_refused_without_reading(tmp_path):
    path = tmp_path / "huge.onnx"
    with open(path, "wb") as f:
        f.truncate(2**31)                       # sparse: no disk space, and the reader must not read it
    with pytest.raises(ModelLoadError, match="2 GB"):
        read_onnx(path)


def test_dangling_input_names_the_node():
    model = _model()
    model.graph.node[1].input[0] = "nowhere"
    with pytest.raises(ModelLoadError, match="relu1 .*'nowhere'"):
        read_onnx_bytes(model.SerializeToString(), "m.onnx")
