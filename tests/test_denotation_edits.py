"""Metadata schema and MetadataEdits: canonical spelling, refusals listing the allowed values, round trips."""
from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto, helper

from inspector.core.metadata import schema as ms
from inspector.core.ir.errors import MetadataError
from inspector.core.metadata.edits import MetadataEdits, layout_dim_denotations, layout_edits

NCHW = ["DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE", "DATA_FEATURE"]
NHWC = ["DATA_BATCH", "DATA_FEATURE", "DATA_FEATURE", "DATA_CHANNEL"]


def small_model(shape=(1, 3, 5, 7), dtype=TensorProto.FLOAT, props=(("keepme", "42"),)):
    """x -> Relu -> y, non-square, with one pre-existing metadata_props entry."""
    x = helper.make_tensor_value_info("x", dtype, list(shape))
    y = helper.make_tensor_value_info("y", dtype, list(shape))
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    for k, v in props:
        m.metadata_props.add(key=k, value=v)
    return m


def props(model) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}


def dims(model, name) -> list[str]:
    vi = next(v for v in list(model.graph.input) + list(model.graph.output) if v.name == name)
    return [d.denotation for d in vi.type.tensor_type.shape.dim]


# -- schema -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("given, want", [("image", "IMAGE"), ("Audio", "AUDIO"), (" text ", "TEXT"),
                                         ("tensor", "TENSOR")])
def test_type_denotations_are_canonicalised(given, want):
    assert ms.type_denotation(given) == want


def test_invalid_value_lists_the_allowed_ones():
    with pytest.raises(MetadataError) as e:
        ms.type_denotation("PICTURE")
    assert all(v in str(e.value) for v in ms.TYPE_DENOTATIONS)
    with pytest.raises(MetadataError) as e:
        ms.image_value("image.nominalpixelrange", "0_255")
    assert "NominalRange_0_255, Normalized_0_1, Normalized_1_1, NominalRange_16_235" in str(e.value)


def test_image_keys_and_values_match_case_insensitively():
    assert ms.image_value("IMAGE.BITMAPPIXELFORMAT", "bgra8") == ("Image.BitmapPixelFormat", "Bgra8")
    assert ms.image_value("image.colorspacegamma", "srgb") == ("Image.ColorSpaceGamma", "SRGB")
    assert ms.dim_denotations(["data_batch", "?", "", "Filter_Spatial"]) == ["DATA_BATCH", "", "", "FILTER_SPATIAL"]


def test_unknown_keys_are_kept_with_a_warning():
    key, value, warning = ms.metadata_entry("Image.PixelFormat", "rgb8")
    assert (key, value) == ("Image.PixelFormat", "rgb8") and "not one of" in warning
    key, value, warning = ms.metadata_entry("trained_on", "COCO")
    assert (key, value) == ("trained_on", "COCO") and "kept" in warning
    assert ms.metadata_entry("model_author", "me")[2] is None


# -- MetadataEdits ---------------------------------------------------------------------------------------------------

def test_apply_writes_canonical_spellings_and_notes_image_keys_are_global():
    m = small_model()
    notes = MetadataEdits(types={"x": "image"}, dims={"x": ["data_batch", "data_channel", "data_feature",
                                                            "data_feature"]},
                          image={"image.bitmappixelformat": "rgb8"}).apply(m)
    assert m.graph.input[0].type.denotation == "IMAGE"
    assert dims(m, "x") == NCHW
    assert props(m) == {"keepme": "42", "Image.BitmapPixelFormat": "Rgb8"}
    assert any("every tensor denoted IMAGE" in n for n in notes)


def test_invalid_edit_leaves_the_model_untouched():
    m = small_model()
    before = m.SerializeToString()
    for bad in (MetadataEdits(types={"x": "IMAGE"}, image={"Image.NominalPixelRange": "0..255"}),
                MetadataEdits(types={"x": "IMAGE"}, dims={"x": ["DATA_BATCH"]}),
                MetadataEdits(types={"nope": "IMAGE"}),
                MetadataEdits(types={"x": "IMAGE"}, dims={"y": ["DATA_BATCH", "WIDTH", "", ""]})):
        with pytest.raises(MetadataError):
            bad.apply(m)
        assert m.SerializeToString() == before


def test_unknown_tensor_error_names_inputs_and_outputs():
    with pytest.raises(MetadataError, match="inputs are x, outputs are y"):
        MetadataEdits(types={"z": "IMAGE"}).apply(small_model())


@pytest.mark.parametrize("edit", [
    MetadataEdits(types={"x": "AUDIO"}),
    MetadataEdits(dims={"y": NHWC}),
    MetadataEdits(image={"Image.ColorSpaceGamma": "Linear"}),
    MetadataEdits(props={"new": "value"}),
    MetadataEdits(props={"Image.Foo": "bar"}),
    MetadataEdits(doc_string="doc", producer="me", model_version=3),
    MetadataEdits(image={"Image.BitmapPixelFormat": None}),
])
def test_existing_metadata_entry_survives_every_edit_and_round_trips(edit, tmp_path):
    m = small_model(props=(("keepme", "42"), ("Image.BitmapPixelFormat", "Gray8")))
    edit.apply(m)
    path = tmp_path / "m.onnx"
    onnx.checker.check_model(m)
    onnx.save(m, path)
    back = onnx.load(path)
    assert props(back)["keepme"] == "42"
    # What was set reads back as set: from_model of the saved model reproduces the edit.
    state = MetadataEdits.from_model(back)
    for t, v in edit.types.items():
        assert state.types[t] == v
    for t, v in edit.dims.items():
        assert state.dims[t] == v
    for k, v in {**edit.image, **edit.props}.items():
        assert (state.image | state.props).get(k) == v
    if edit.model_version:
        assert (back.doc_string, back.producer_name, back.model_version) == ("doc", "me", 3)


def test_setting_a_key_in_other_case_replaces_the_entry_instead_of_duplicating_it():
    m = small_model(props=(("image.bitmappixelformat", "gray8"),))
    MetadataEdits(props={"IMAGE.BitmapPixelFormat": "BGR8"}).apply(m)
    assert props(m) == {"Image.BitmapPixelFormat": "Bgr8"}


def test_from_model_and_json_round_trip():
    m = small_model(props=(("keepme", "42"), ("Image.NominalPixelRange", "Normalized_0_1")))
    MetadataEdits(types={"x": "IMAGE"}, dims={"x": NCHW}).apply(m)
    state = MetadataEdits.from_model(m)
    assert state.types == {"x": "IMAGE"} and state.dims == {"x": NCHW}
    assert state.image == {"Image.NominalPixelRange": "Normalized_0_1"} and state.props == {"keepme": "42"}
    again = MetadataEdits.from_dict(json.loads(json.dumps(state.to_dict())))
    assert again == state
    own = MetadataEdits.from_model(m, values=False)             # the model's own fields, no value info read
    assert not own.types and not own.dims
    assert (own.image, own.props, own.doc_string, own.producer, own.model_version) == \
        (state.image, state.props, state.doc_string, state.producer, state.model_version)
    with pytest.raises(MetadataError, match="unknown metadata edit field"):
        MetadataEdits.from_dict({"typo": 1})


def test_merged_lets_the_later_edits_win_per_key():
    base = MetadataEdits(types={"x": "IMAGE"}, image={"Image.BitmapPixelFormat": "Rgb8"}, doc_string="a")
    over = MetadataEdits(image={"image.bitmappixelformat": "Bgr8"}, props={"k": "v"})
    out = base.merged(over)
    assert out.types == {"x": "IMAGE"} and out.doc_string == "a" and out.props == {"k": "v"}
    assert out.image == {"image.bitmappixelformat": "Bgr8"}
    assert base.image == {"Image.BitmapPixelFormat": "Rgb8"}      # not mutated


def test_edits_never_touch_the_graph_structure():
    m = small_model()
    graph_before = [(n.op_type, list(n.input), list(n.output)) for n in m.graph.node]
    MetadataEdits(types={"x": "IMAGE", "y": "TENSOR"}, dims={"x": NCHW, "y": NCHW},
                  image={"Image.BitmapPixelFormat": "Rgb8"}).apply(m)
    assert [(n.op_type, list(n.input), list(n.output)) for n in m.graph.node] == graph_before
    assert [i.name for i in m.graph.input] == ["x"] and [o.name for o in m.graph.output] == ["y"]


# -- dimension denotations from layouts ---------------------------------------------------------------------------

def test_layout_dim_denotations():
    assert layout_dim_denotations(4, (0, 3, 1, 2)) == NCHW
    assert layout_dim_denotations(4, (0, 1, 2, 3)) == NHWC
    assert layout_dim_denotations(4, None) == NHWC
    assert layout_dim_denotations(3, (0, 2, 1)) == ["DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE"]
    assert layout_dim_denotations(3, (0, 1, 2)) is None          # a kept [1, 896, 16] may be anything
    assert layout_dim_denotations(2, (0, 1)) is None


def test_layout_edits_denote_nchw_and_nhwc_io():
    m = small_model(shape=(1, 3, 5, 7))
    out = helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 5, 7, 3])
    m.graph.node.append(helper.make_node("Transpose", ["y"], ["z"], perm=[0, 2, 3, 1]))
    m.graph.output.append(out)
    edits, notes = layout_edits(m, {"x": (0, 3, 1, 2), "z": (0, 1, 2, 3), "missing": (0, 1)})
    edits.apply(m)
    assert dims(m, "x") == NCHW and dims(m, "z") == NHWC and dims(m, "y") == ["", "", "", ""]
    assert any("missing" in n for n in notes)
    assert props(m) == {"keepme": "42"}
