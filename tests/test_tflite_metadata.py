"""TFLite Support metadata read with plain flatbuffers: corpus models, hand-built buffers, malformed input."""
from __future__ import annotations

import flatbuffers
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.core.metadata.schema import NORMALIZATION_KEY
from inspector.core.metadata.tflite import edits_from_metadata, field_mapping, parse_metadata, read_tflite_metadata
from inspector.core.io.tflite_reader import read_tflite

RGB, GRAYSCALE = 1, 2


def metadata_buffer(inputs, outputs=(), name="Test model", description="for tests", author="", license=""):
    """A metadata flatbuffer with the field slots of tflite-support's metadata_schema.fbs.

    Each tensor is a dict: name, description, color (ColorSpaceType or None for feature content), mean, std,
    stats (max, min), files.
    """
    b = flatbuffers.Builder(256)

    def strings(values):
        offs = [b.CreateString(v) for v in values]
        return vector(offs)

    def vector(offs):
        b.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    def table(slots):
        """slots: {slot: ("off", offset) | ("u8", value)} in one table."""
        b.StartObject(max(slots) + 1 if slots else 0)
        for slot, (kind, value) in slots.items():
            if kind == "off":
                b.PrependUOffsetTRelativeSlot(slot, value, 0)
            else:
                b.PrependUint8Slot(slot, value, 0)
        return b.EndObject()

    def tensor(t):
        slots = {0: ("off", b.CreateString(t["name"])), 1: ("off", b.CreateString(t.get("description", "")))}
        if "color" in t:
            props = table({0: ("u8", t["color"])} if t["color"] else {})
            slots[3] = ("off", table({0: ("u8", 2), 1: ("off", props)}))      # ImageProperties
        else:
            slots[3] = ("off", table({0: ("u8", 1), 1: ("off", table({}))}))  # FeatureProperties
        if "mean" in t:
            mean = b.CreateNumpyVector(np.asarray(t["mean"], np.float32))
            std = b.CreateNumpyVector(np.asarray(t["std"], np.float32))
            norm = table({0: ("off", mean), 1: ("off", std)})
            slots[4] = ("off", vector([table({0: ("u8", 1), 1: ("off", norm)})]))
        if "stats" in t:
            mx = b.CreateNumpyVector(np.asarray(t["stats"][0], np.float32))
            mn = b.CreateNumpyVector(np.asarray(t["stats"][1], np.float32))
            slots[5] = ("off", table({0: ("off", mx), 1: ("off", mn)}))
        if "files" in t:
            slots[6] = ("off", vector([table({0: ("off", b.CreateString(f))}) for f in t["files"]]))
        return table(slots)

    ins = vector([tensor(t) for t in inputs])
    outs = vector([tensor(t) for t in outputs])
    sg = table({2: ("off", ins), 3: ("off", outs)})
    root = {0: ("off", b.CreateString(name)), 1: ("off", b.CreateString(description)),
            3: ("off", vector([sg]))}
    if author:
        root[4] = ("off", b.CreateString(author))
    if license:
        root[5] = ("off", b.CreateString(license))
    b.Finish(table(root), file_identifier=b"M001")
    return bytes(b.Output())


def image(color=RGB, mean=None, std=None, **kw):
    t = {"name": "image", "description": "an image", "color": color, **kw}
    if mean is not None:
        t.update(mean=mean, std=std)
    return t


# -- corpus -----------------------------------------------------------------------------------------------------------

@pytest.mark.corpus
@pytest.mark.parametrize("model, tensor, pixel_range, source", [
    ("mediapipe_face_detection_short_range", "input", "Normalized_1_1",
     "TFLite metadata: input 'input' normalization mean=127.5 std=127.5"),
    ("mediapipe_selfie_segmentation", "input_1", "Normalized_0_1",
     "TFLite metadata: input 'input_1' normalization mean=0 std=255"),
])
def test_corpus_models_with_metadata(corpus, model, tensor, pixel_range, source):
    meta = read_tflite_metadata(read_tflite(corpus / "realworld" / f"{model}.tflite"))
    assert meta.warnings == []
    assert meta.types == {tensor: "IMAGE"}
    assert meta.image == {"Image.BitmapPixelFormat": "Rgb8", "Image.NominalPixelRange": pixel_range}
    assert meta.sources["Image.NominalPixelRange"] == source
    assert meta.inputs[0].tensor == tensor and meta.inputs[0].name == "image" and meta.inputs[0].description
    assert meta.inputs[0].color_space == "RGB"
    edits = edits_from_metadata(meta)
    assert edits.types == {tensor: "IMAGE"} and edits.image == meta.image and meta.name in edits.doc_string


@pytest.mark.corpus
def test_corpus_value_ranges_and_output_descriptions(corpus):
    face = read_tflite_metadata(read_tflite(corpus / "realworld" / "mediapipe_face_detection_short_range.tflite"))
    assert (face.inputs[0].min, face.inputs[0].max) == ([-1.0], [1.0])
    assert [o.tensor for o in face.outputs] == ["regressors", "classificators"]
    assert all(o.description and o.content == "feature" for o in face.outputs)
    selfie = read_tflite_metadata(read_tflite(corpus / "realworld" / "mediapipe_selfie_segmentation.tflite"))
    (out,) = selfie.outputs
    assert out.content == "image" and out.color_space == "GRAYSCALE" and out.files == ["labels.txt"]
    assert "activation_10" not in selfie.types           # an output mask is not claimed as an Rgb8 IMAGE
    assert any("activation_10" in n for n in selfie.notes)


def test_model_without_metadata_gives_none(corpus):
    assert read_tflite_metadata(read_tflite(corpus / "ops" / "conv.float32.tflite")) is None


# -- hand-built buffers ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mean, std, dtype, want", [
    ([0.0], [1.0], "float32", "NominalRange_0_255"),
    ([0.0], [255.0], "float32", "Normalized_0_1"),
    ([127.5], [127.5], "float32", "Normalized_1_1"),
    ([127.5, 127.5, 127.5], [127.5, 127.5, 127.5], "float32", "Normalized_1_1"),
    ([127.5], [127.5], "uint8", "NominalRange_0_255"),
])
def test_normalization_to_pixel_range(mean, std, dtype, want):
    meta = parse_metadata(metadata_buffer([image(RGB, mean, std)]), [("in", dtype)])
    assert meta.image["Image.NominalPixelRange"] == want
    assert meta.types == {"in": "IMAGE"} and meta.warnings == []


@pytest.mark.parametrize("mean, std, words", [
    ([128.0], [128.0], "-1..0.992188"),
    ([123.7, 116.3, 103.5], [58.4, 57.1, 57.4], "per-channel"),
])
def test_other_normalizations_give_no_range_and_a_note(mean, std, words):
    meta = parse_metadata(metadata_buffer([image(RGB, mean, std)]), [("in", "float32")])
    assert "Image.NominalPixelRange" not in meta.image
    assert any(words in n and NORMALIZATION_KEY in n for n in meta.notes), meta.notes
    assert meta.normalization == {"in": {"mean": [round(m, 6) for m in np.float32(mean).tolist()],
                                         "std": [round(s, 6) for s in np.float32(std).tolist()]}}
    (kept,) = [m for m in field_mapping(meta) if m["onnx"] == NORMALIZATION_KEY]
    assert kept["tflite"] == "input 'in' NormalizationOptions" and "NominalPixelRange" in kept["why"]


def test_grayscale_unknown_colour_and_feature_content():
    meta = parse_metadata(metadata_buffer([image(GRAYSCALE)]), [("g", "float32")])
    assert meta.image == {"Image.BitmapPixelFormat": "Gray8"} and meta.types == {"g": "IMAGE"}
    meta = parse_metadata(metadata_buffer([image(None)]), [("u", "float32")])
    assert meta.types == {"u": "IMAGE"} and meta.image == {} and any("UNKNOWN" in n for n in meta.notes)
    meta = parse_metadata(metadata_buffer([{"name": "features", "stats": ([6.0], [-2.0])}]), [("f", "float32")])
    assert meta.types == {} and meta.inputs[0].content == "feature"
    assert (meta.inputs[0].max, meta.inputs[0].min) == ([6.0], [-2.0])


def test_two_image_inputs_with_different_colour_spaces_keep_the_first_and_say_so():
    meta = parse_metadata(metadata_buffer([image(RGB), image(GRAYSCALE)]), [("a", "float32"), ("b", "float32")])
    assert meta.types == {"a": "IMAGE", "b": "IMAGE"} and meta.image["Image.BitmapPixelFormat"] == "Rgb8"
    assert any("model-wide" in n for n in meta.notes)


def test_model_fields_and_prefill():
    meta = parse_metadata(metadata_buffer([image(RGB, [0.0], [255.0], files=["labels.txt"])],
                                          author="A. Author", license="Apache-2.0"), [("x", "float32")])
    assert (meta.name, meta.description, meta.author, meta.license) == ("Test model", "for tests", "A. Author",
                                                                       "Apache-2.0")
    assert meta.inputs[0].files == ["labels.txt"]
    e = edits_from_metadata(meta)
    assert e.props == {"model_author": "A. Author", "model_license": "Apache-2.0"}
    assert e.doc_string == "Test model - for tests"
    assert edits_from_metadata(None).is_empty()


def test_count_mismatch_is_a_warning_and_matches_by_position():
    meta = parse_metadata(metadata_buffer([image(RGB), image(RGB)]), [("only", "float32")])
    assert meta.types == {"only": "IMAGE"} and any("describes 2 input" in w for w in meta.warnings)


# -- malformed input never raises ----------------------------------------------------------------------------------

def test_wrong_identifier_and_truncation_are_warnings():
    good = metadata_buffer([image(RGB, [0.0], [255.0])], [{"name": "out", "files": ["l.txt"]}])
    assert parse_metadata(b"\x00" * 3).warnings
    assert "M001" in parse_metadata(good[:4] + b"XXXX" + good[8:]).warnings[0]
    for cut in (9, 20, len(good) // 2):
        meta = parse_metadata(good[:cut], [("x", "float32")])
        assert meta.warnings and "malformed" in meta.warnings[0]


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=300), st.integers(0, 400), st.integers(0, 255))
def test_corrupted_buffers_never_raise(noise, where, value):
    good = bytearray(metadata_buffer([image(RGB, [127.5], [127.5])], [{"name": "o", "stats": ([1.0], [0.0])}]))
    good[where % len(good)] = value
    for buf in (bytes(good), b"\x08\x00\x00\x00M001" + noise):
        meta = parse_metadata(buf, [("x", "float32")], [("o", "float32")])
        assert isinstance(meta.warnings, list) and isinstance(meta.image, dict)
