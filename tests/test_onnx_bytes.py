"""The exported file is written in pieces (onnx_bytes.pieces) that are SerializeToString()'s bytes exactly, and an
export holds no whole copy of the model in memory: serialising it whole held the weights twice more (protobuf's
buffer and the bytes object) and the checker, given those bytes, a third time (4.5 GB for a 1.1 GB model)."""
from __future__ import annotations

import hashlib
import tracemalloc

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from inspector.core.emit.convert import convert
from inspector.core.io import onnx_bytes
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.session.session import Session

# a WHILE with nested subgraphs, float16 weights, int8 with per-channel scales, a hybrid model, an LSTM
CORPUS = ["keras/custom_lstm_text_fp32.tflite", "keras/mobilenetv2_fp16.tflite", "keras/mobilenetv2_int8.tflite",
          "keras/mobilenetv2_dynamic.tflite", "onnx2tf/bilstm_classifier.tflite", "torch/googlenet.tflite"]


def fc_chain(path, widths=(1536, 1152, 1280, 896)):
    """FULLY_CONNECTED layers of non-square float32 weights (about 1.5-7 MB each)."""
    rng = np.random.default_rng(0)
    b = ModelBuilder()
    x = b.input("x", [3, widths[0]])
    for k, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
        y = b.tensor(f"fc{k}", [3, n_out])
        b.op("FULLY_CONNECTED", [x, b.const(f"w{k}", rng.standard_normal((n_out, n_in)).astype(np.float32)),
                                 b.const(f"b{k}", rng.standard_normal(n_out).astype(np.float32))], [y])
        x = y
    b.output(x)
    path.write_bytes(b.build())
    return path


def joined(model, big):
    length, pieces = onnx_bytes.pieces(model, big)
    data = b"".join(pieces)
    assert length == len(data)
    return data


@pytest.mark.parametrize("name", CORPUS)
def test_pieces_are_the_serialised_model_byte_for_byte(corpus, name):
    """Every initializer with raw_data cut out of its tensor (big=0), and with the default threshold."""
    model = convert(read_tflite(str(corpus / name)), check=False).model
    whole = model.SerializeToString()
    assert joined(model, 0) == whole
    assert joined(model, None) == whole


def test_pieces_keep_every_field_of_model_graph_and_tensor(tmp_path):
    """Fields on both sides of each cut: the model's doc_string and metadata_props, the graph's doc_string and
    value_info, a tensor's doc_string and metadata around its raw_data, and a typed-data tensor beside them."""
    model = convert(read_tflite(str(fc_chain(tmp_path / "m.tflite"))), check=False).model
    model.doc_string = "before graph"
    model.metadata_props.add(key="after", value="graph")
    model.graph.doc_string = "after initializers"
    model.graph.value_info.add().CopyFrom(helper.make_tensor_value_info("v", onnx.TensorProto.FLOAT, [2, 5]))
    model.graph.initializer[0].doc_string = "after raw_data"
    model.graph.initializer[0].metadata_props.add(key="k", value="v")
    model.graph.initializer.append(helper.make_tensor("typed", onnx.TensorProto.FLOAT, [2, 3], [1, 2, 3, 4, 5, 6]))
    whole = model.SerializeToString()
    assert joined(model, 0) == whole
    assert joined(model, 2_000_000) == whole
    assert onnx.load_from_string(joined(model, 0)) == model


def test_a_raw_data_of_the_wrong_size_is_refused_not_written():
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    w.raw_data = b"\0" * 44
    model = helper.make_model(helper.make_graph([], "g", [], [], [w]))
    length, pieces = onnx_bytes.pieces(model, 0)
    with pytest.raises(ValueError, match="'w': 44 bytes of raw_data where its type and shape say 48"):
        b"".join(pieces)


def test_export_writes_the_serialised_model_without_a_whole_copy(tmp_path, monkeypatch):
    """The largest Python allocation alive at once while exporting (tracemalloc sees the bytes objects protobuf
    returns, not its C buffers) stays under half the model: one weight at a time, where SerializeToString() made
    the whole model one bytes object."""
    monkeypatch.setattr(onnx_bytes, "BIG", 1 << 20)
    session = Session.open(str(fc_chain(tmp_path / "m.tflite")))
    session.convert(check=False)
    whole = session.result.model.SerializeToString()
    out = tmp_path / "m.onnx"
    tracemalloc.start()
    try:
        session.export(str(out))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(whole).digest()
    largest = max(len(t.raw_data) for t in session.result.model.graph.initializer)
    assert len(whole) > 2 * largest
    assert peak < largest + len(whole) / 4, (peak, largest, len(whole))


def test_a_model_the_checker_refuses_is_not_left_staged(tmp_path):
    """When the checker refuses the model written, nothing is written and no temporary is left (a
    batch's parent adopts whatever temporary exists)."""
    from inspector.core.ir.errors import ConversionError
    session = Session.open(str(fc_chain(tmp_path / "m.tflite")))
    session.convert(check=False)
    session.result.model.graph.node[0].op_type = "NoSuchOp"
    with pytest.raises(ConversionError, match="fails the ONNX checker"):
        session.export(str(tmp_path / "m.onnx"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.tflite"]


def test_cutting_a_big_weight_and_leaving_its_data_out_never_copy_the_data():
    """The head and tail around a big tensor's raw_data, and a tensor without its data (what the window keeps of a
    big weight), are made without reading raw_data: reading it copies it out (ListFields did, for each cut)."""
    from inspector.core.emit.convert import without_data
    weight = numpy_helper.from_array(np.ones((8, 1024, 1024), np.float32), "w")      # 32 MiB
    tracemalloc.start()
    try:
        cut = onnx_bytes._big(weight, 1)
        light = without_data(weight)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert cut is not None and cut[1] == weight.ByteSize() - len(cut[0]) - len(cut[2]) - 5      # tag + length
    assert list(light.dims) == [8, 1024, 1024] and not light.HasField("raw_data")
    assert peak < 1 << 20, f"{peak} bytes allocated: the weight's data was copied"


def test_a_tensor_added_from_its_fields_is_the_tensor_appended():
    """add_tensor (a big weight set from its fields, not append's MergeFrom) gives what append gives, byte for byte:
    a plain big one, one with more fields, one with no name, a small one and a typed-data one."""
    rng = np.random.default_rng(0)
    plain = numpy_helper.from_array(rng.standard_normal((96, 80, 3)).astype(np.float32), "w")   # 90 KiB
    more = numpy_helper.from_array(rng.standard_normal((80, 96, 3)).astype(np.float32), "m")
    more.doc_string = "after raw_data"
    more.metadata_props.add(key="k", value="v")
    nameless = numpy_helper.from_array(rng.standard_normal((3, 96, 80)).astype(np.float32))
    small = numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3), "s")
    typed = helper.make_tensor("typed", onnx.TensorProto.FLOAT, [2, 3], [1, 2, 3, 4, 5, 6])
    tensors = [plain, more, nameless, small, typed]
    appended, added = onnx.GraphProto(), onnx.GraphProto()
    for t in tensors:
        appended.initializer.append(t)
        onnx_bytes.add_tensor(added.initializer, t)
    assert added.SerializeToString() == appended.SerializeToString()
    assert [onnx_bytes.raw_length(t) >= onnx_bytes.BIG for t in tensors] == [True, True, True, False, False]
