"""The metadata pass of a conversion: layouts -> dimension denotations, TFLite metadata -> IMAGE and Image.*."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from inspector.core.metadata.denotation import annotate, annotate_read, io_layouts
from inspector.core.metadata.lint import lint as check
from inspector.core.ir.errors import MetadataError
from inspector.core.metadata.edits import MetadataEdits
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite, read_tflite_bytes
from tests.conftest import corpus_files
from tests.test_tflite_metadata import GRAYSCALE, image, metadata_buffer

NCHW = ["DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE", "DATA_FEATURE"]
NHWC = ["DATA_BATCH", "DATA_FEATURE", "DATA_FEATURE", "DATA_CHANNEL"]


def convert(graph, **kw):
    from inspector.core.emit.convert import convert as run
    return run(graph, **kw)


def dims(vi):
    return [d.denotation for d in vi.type.tensor_type.shape.dim]


def gray_conv_model(with_metadata=True):
    """[1, 6, 10, 1] grayscale image -> CONV_2D (4 filters) -> MAX_POOL -> output [1, 3, 5, 4]."""
    b = ModelBuilder()
    x = b.input("pixels", [1, 6, 10, 1])
    w = b.const("w", np.random.default_rng(0).normal(size=(4, 3, 3, 1)).astype(np.float32))
    bias = b.const("bias", np.zeros(4, np.float32))
    c = b.tensor("c", [1, 6, 10, 4])
    y = b.tensor("y", [1, 3, 5, 4])
    b.op("CONV_2D", [x, w, bias], [c], {"padding": "SAME"})
    b.op("MAX_POOL_2D", [c], [y], {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2,
                                    "filter_width": 2})
    b.output(y)
    if with_metadata:
        b.add_metadata("TFLITE_METADATA", metadata_buffer([image(GRAYSCALE, [0.0], [255.0])], [{"name": "y"}]))
    return read_tflite_bytes(b.build(), "gray.tflite")


def test_converted_model_gets_image_denotations_from_metadata_and_layouts():
    r = convert(gray_conv_model())
    notes = annotate(r)
    x, y = r.model.graph.input[0], r.model.graph.output[0]
    assert x.type.denotation == "IMAGE" and dims(x) == NCHW
    assert dims(y) == NCHW                                       # propagated through Conv and MaxPool
    props = {p.key: p.value for p in r.model.metadata_props}
    assert props["Image.BitmapPixelFormat"] == "Gray8" and props["Image.NominalPixelRange"] == "Normalized_0_1"
    assert any("mean=0 std=255" in n for n in notes)
    assert check(r.model) == []
    onnx.checker.check_model(r.model, full_check=True)


def test_keep_io_layout_gives_nhwc_denotations_in_their_own_order():
    r = convert(gray_conv_model(), keep_io_layout=True)
    assert io_layouts(r)["pixels"] == (0, 1, 2, 3)
    annotate(r)
    assert dims(r.model.graph.input[0]) == NHWC and dims(r.model.graph.output[0]) == NHWC
    assert check(r.model) == []


def test_user_edits_win_over_the_prefill_and_invalid_ones_leave_the_model_untouched():
    r = convert(gray_conv_model())
    annotate(r, MetadataEdits(image={"Image.NominalPixelRange": "NominalRange_0_255"}, props={"k": "v"}))
    props = {p.key: p.value for p in r.model.metadata_props}
    assert props["Image.NominalPixelRange"] == "NominalRange_0_255" and props["k"] == "v"
    assert props["Image.BitmapPixelFormat"] == "Gray8"
    fresh = convert(gray_conv_model())
    before = fresh.model.SerializeToString()
    with pytest.raises(MetadataError, match="Gray8, Rgb8"):
        annotate(fresh, MetadataEdits(image={"Image.BitmapPixelFormat": "Gray16"}))
    assert fresh.model.SerializeToString() == before


def test_without_metadata_only_layout_denotations_are_set():
    r = convert(gray_conv_model(with_metadata=False))
    annotate(r)
    assert r.model.graph.input[0].type.denotation == "" and dims(r.model.graph.input[0]) == NCHW
    assert not r.model.metadata_props or all(not p.key.startswith("Image.") for p in r.model.metadata_props)


@pytest.mark.corpus
@pytest.mark.parametrize("model, tensor, pixel_range", [
    ("mediapipe_face_detection_short_range", "input", "Normalized_1_1"),
    ("mediapipe_selfie_segmentation", "input_1", "Normalized_0_1"),
])
def test_corpus_models_with_tflite_metadata_convert_with_image_denotations(corpus, model, tensor, pixel_range):
    r = convert(read_tflite(corpus / "realworld" / f"{model}.tflite"))
    annotate(r)
    x = next(i for i in r.model.graph.input if i.name == tensor)
    assert x.type.denotation == "IMAGE" and dims(x) == NCHW
    props = {p.key: p.value for p in r.model.metadata_props}
    assert props["Image.BitmapPixelFormat"] == "Rgb8" and props["Image.NominalPixelRange"] == pixel_range
    assert check(r.model) == []
    for out in r.model.graph.output:         # outputs are never claimed IMAGE (the Image.* keys would bind them)
        assert out.type.denotation == ""


@pytest.mark.corpus
def test_a_transpose_injected_into_a_converted_real_model_is_found(corpus):
    r = convert(read_tflite(corpus / "realworld" / "mediapipe_face_detection_short_range.tflite"))
    annotate(r)
    assert check(r.model) == []
    nodes = list(r.model.graph.node)
    k, pool = next((i, n) for i, n in enumerate(nodes) if n.op_type == "MaxPool")
    bad = onnx.helper.make_node("Transpose", [pool.input[0]], ["nhcw"], perm=[0, 2, 1, 3], name="injected")
    pool.input[0] = "nhcw"
    r.model.graph.node.insert(k, bad)
    (f,) = check(r.model)
    assert f.node == pool.name and "got [DATA_BATCH, DATA_FEATURE, DATA_CHANNEL, DATA_FEATURE]" in f.message


@pytest.mark.corpus
@pytest.mark.parametrize("name", corpus_files("*/*.tflite"))
def test_every_converted_corpus_model_is_denoted_without_findings(corpus, name):
    """No false positives on real models: the metadata pass and the checker agree with the converter."""
    from inspector.core.ir.errors import ConversionError
    try:
        r = convert(read_tflite(corpus / name))
    except ConversionError as e:
        pytest.xfail(f"does not convert yet: {str(e).splitlines()[0]}")
    layouts = io_layouts(r)
    notes = annotate(r)
    assert check(r.model) == []
    assert [f.code for f in check(r.model, "winml") if f.severity == "error"] == []    # Windows ML takes it too
    for vi in r.model.graph.input:          # state inputs added for variables are not TFLite inputs: no layout
        if vi.name in layouts and len(layouts[vi.name]) == 4 and not any("contradicts" in n for n in notes):
            assert "DATA_CHANNEL" in dims(vi), (vi.name, notes)


def test_unmatched_normalization_is_kept_in_metadata_props_and_every_field_says_where_it_went():
    """ImageNet's per-channel mean/std matches no Image.NominalPixelRange: the values go to a documented key."""
    import json

    from inspector.core.metadata.schema import NORMALIZATION_KEY
    from tests.test_tflite_metadata import RGB
    b = ModelBuilder()
    x = b.input("rgb", [1, 6, 10, 3])
    w = b.const("w", np.random.default_rng(0).normal(size=(4, 3, 3, 3)).astype(np.float32))
    y = b.tensor("y", [1, 6, 10, 4])
    b.op("CONV_2D", [x, w, b.const("bias", np.zeros(4, np.float32))], [y], {"padding": "SAME"})
    b.output(y)
    mean, std = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
    b.add_metadata("TFLITE_METADATA", metadata_buffer([image(RGB, mean, std)], [{"name": "y"}], author="me",
                                                      name="net"))
    r = convert(read_tflite_bytes(b.build(), "imagenet.tflite"))
    notes, _, mapping = annotate_read(r)
    props = {p.key: p.value for p in r.model.metadata_props}
    kept = json.loads(props[NORMALIZATION_KEY])
    assert list(kept) == [r.model.graph.input[0].name] and np.allclose(kept["rgb"]["mean"], mean, atol=1e-4)
    assert np.allclose(kept["rgb"]["std"], std, atol=1e-4) and "Image.NominalPixelRange" not in props
    assert any(NORMALIZATION_KEY in n and "per-channel" in n for n in notes)
    became = {m["onnx"]: m["tflite"] for m in mapping}
    assert became == {"doc_string": "name, description", "metadata_props model_author": "author",
                      "type denotation of 'rgb'": "input 'rgb' content ImageProperties",
                      "Image.BitmapPixelFormat": "input 'rgb' colour space RGB",
                      NORMALIZATION_KEY: "input 'rgb' NormalizationOptions"}
    assert [f for f in check(r.model, "winml") if f.severity == "error"] == []


def test_channels_first_input_is_denoted_as_the_graph_reads_it():
    """A PyTorch-origin input [1, 3, H, W] keeps its shape (a TRANSPOSE inside makes it NHWC for the conv): its
    dimension denotations are [BATCH, CHANNEL, FEATURE, FEATURE], not the NHWC reading the graph contradicts."""
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    x = b.input("x", [1, 3, 5, 7])
    xt = b.tensor("xt", [1, 5, 7, 3])
    b.op("TRANSPOSE", [x, b.const("perm", np.array([0, 2, 3, 1], np.int32))], [xt])
    y = b.tensor("y", [1, 5, 7, 4])
    b.op("CONV_2D", [xt, b.const("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)), None], [y],
         {"padding": "SAME"})
    b.output(y)
    result = convert(read_tflite_bytes(b.build()))
    notes = annotate(result)
    x_in = result.model.graph.input[0]
    assert [d.dim_value for d in x_in.type.tensor_type.shape.dim] == [1, 3, 5, 7]
    assert dims(x_in) == ["DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE", "DATA_FEATURE"]
    assert not any("contradicts" in n for n in notes)
    assert any("reads it channels-first" in n for n in notes)
    assert not [f for f in check(result.model) if f.severity == "error"]
