"""Metadata checks per consumer (`check --target`), safe fixes (`edit --fix`) and the check before every write."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector.cli import main
from inspector.core.metadata.lint import RULES, fix, lint
from inspector.core.io.tflite_builder import ModelBuilder
from tests.conftest import corpus_files

B, C, F = "DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE"
NCHW, NHWC = [B, C, F, F], [B, F, F, C]


def image_model(shape=(1, 3, 6, 10), dtype=TensorProto.FLOAT, denotation="IMAGE", dims=NCHW, props=()):
    """x (IMAGE) -> 1x1 Conv with 2 filters -> y: a real graph, so byte comparisons have nodes and weights."""
    channels = shape[1] if dims == NCHW or dims is None else shape[3]
    w = numpy_helper.from_array(np.arange(2 * channels, dtype=np.float32).reshape(2, channels, 1, 1), "w")
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT, name="cast")]
    src = "xf"
    if dims == NHWC:
        nodes.append(helper.make_node("Transpose", ["xf"], ["xt"], perm=[0, 3, 1, 2], name="to_nchw"))
        src = "xt"
    nodes.append(helper.make_node("Conv", [src, "w"], ["y"], name="conv"))
    h, wd = (shape[2], shape[3]) if src == "xf" else (shape[1], shape[2])
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", dtype, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [shape[0], 2, h, wd])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    vi = m.graph.input[0]
    vi.type.denotation = denotation
    for d, v in zip(vi.type.tensor_type.shape.dim, dims or []):
        d.denotation = v
    for k, v in props:
        m.metadata_props.add(key=k, value=v)
    onnx.checker.check_model(m, full_check=True)
    return m


RGB = ("Image.BitmapPixelFormat", "Rgb8")


def duplicated(m, props):
    """`m` with `props` appended after the checker ran (onnx.checker refuses a repeated key)."""
    for k, v in props:
        m.metadata_props.add(key=k, value=v)
    return m


VIOLATIONS = {   # name -> (model, the error codes `check --target winml` reports, fixable by `edit --fix`)
    "lowercase value": (image_model(props=[("Image.BitmapPixelFormat", "rgb8")]), ["winml-spelling"], True),
    "lowercase key": (image_model(props=[("image.bitmappixelformat", "Bgr8")]), ["winml-spelling"], True),
    "lowercase IMAGE": (image_model(denotation="image", props=[RGB]), ["winml-spelling"], True),
    "Rgba8 on 3 channels": (image_model(props=[("Image.BitmapPixelFormat", "Rgba8")]),
                            ["pixel-format-channels", "winml-pixel-format"], True),
    "Rgba8 on 4 channels": (image_model(shape=(1, 4, 6, 10), props=[("Image.BitmapPixelFormat", "Rgba8")]),
                            ["winml-pixel-format"], False),
    "NominalRange_16_235": (image_model(props=[RGB, ("Image.NominalPixelRange", "NominalRange_16_235")]),
                            ["winml-pixel-range"], False),
    "Linear gamma": (image_model(props=[RGB, ("Image.ColorSpaceGamma", "Linear")]), ["winml-gamma"], False),
    "int8 IMAGE": (image_model(dtype=TensorProto.INT8, props=[RGB]), ["winml-image-type"], False),
    "NHWC IMAGE": (image_model(shape=(1, 6, 10, 3), dims=NHWC, props=[RGB]), ["winml-image-layout"], False),
    "Gray8 then Rgb8": (duplicated(image_model(), [("Image.BitmapPixelFormat", "Gray8"), RGB]), ["duplicate-key"],
                        True),
    "Rgb8 then gray8 spelled otherwise": (duplicated(image_model(), [RGB, ("image.bitmappixelformat", "gray8")]),
                                          ["duplicate-key", "pixel-format-channels", "winml-spelling"], True),
    "a free-form key twice": (duplicated(image_model(props=[RGB]), [("model_author", "a"), ("model_author", "b")]),
                              ["duplicate-key"], True),
}


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def without_metadata(m) -> bytes:
    """The model's bytes with every denotation and metadata_props entry removed: what a metadata edit must keep."""
    m = onnx.load_from_string(m.SerializeToString())
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        vi.type.denotation = ""
        for d in vi.type.tensor_type.shape.dim:
            d.denotation = ""
    del m.metadata_props[:]
    m.doc_string = ""
    return m.SerializeToString()


@pytest.mark.parametrize("name", VIOLATIONS)
def test_each_winml_rule_violation_has_its_code_and_only_winml_errs(name, tmp_path, capsys):
    m, codes, _ = VIOLATIONS[name]
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    code, out, _ = run(capsys, "check", path, "--target", "winml", "--json")
    found = json.loads(out)["findings"]
    assert code == 1 and sorted(f["code"] for f in found if f["severity"] == "error") == sorted(codes)
    for f in found:
        assert f["source"] == RULES[f["code"]].source
        if f["code"].startswith("winml-"):
            assert "OnnxruntimeDescriptorConverter.cpp" in f["source"]
    onnx_errors = sorted(f.code for f in lint(m, "onnx") if f.severity == "error")
    assert onnx_errors == sorted(c for c in codes if not c.startswith("winml-"))


@pytest.mark.parametrize("name", [n for n, v in VIOLATIONS.items() if v[2]])
def test_edit_fix_clears_every_error_and_keeps_the_graph_byte_identical(name, tmp_path, capsys):
    m, _, _ = VIOLATIONS[name]
    src, out_path = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(m, src)
    code, out, _ = run(capsys, "edit", src, "-o", out_path, "--fix", "--target", "winml")
    assert code == 0 and "fixed:" in out
    fixed = onnx.load(out_path)
    assert [f.code for f in lint(fixed, "winml") if f.severity == "error"] == []
    assert without_metadata(fixed) == without_metadata(m)
    assert run(capsys, "check", out_path, "--target", "winml")[0] == 0


@pytest.mark.parametrize("name", [n for n, v in VIOLATIONS.items() if not v[2]])
def test_edit_fix_lists_what_is_not_safe_to_fix_and_writes_nothing(name, tmp_path, capsys):
    m, codes, _ = VIOLATIONS[name]
    src, out_path = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(m, src)
    code, _, err = run(capsys, "edit", src, "-o", out_path, "--fix", "--target", "winml")
    assert code == 1 and not out_path.exists()
    for c in codes:
        assert f"[{c}]; to decide:" in err


def test_the_fixes_are_the_documented_ones():
    m = image_model(dims=None, props=[("image.bitmappixelformat", "rgba8")])
    done, left = fix(m, "winml")
    props = {p.key: p.value for p in m.metadata_props}
    assert props == {"Image.BitmapPixelFormat": "Rgb8"}             # spelled, then Rgba8 -> Rgb8 on 3 channels
    assert [d.denotation for d in m.graph.input[0].type.tensor_type.shape.dim] == NCHW   # read off the shape
    assert [f for f in left if f.severity == "error"] == []
    unused = image_model(denotation="", props=[RGB, ("Image.ColorSpaceGamma", "SRGB")])
    (f,) = [f for f in lint(unused) if f.code == "image-metadata-unused"]
    fix(unused)
    assert list(unused.metadata_props) == []                        # nothing denoted IMAGE: the keys go


def test_a_repeated_key_keeps_the_entry_that_fits_and_passes_the_checker():
    m = duplicated(image_model(), [RGB, ("image.bitmappixelformat", "gray8"), ("model_author", "a"),
                                   ("model_author", "b")])
    (rgb, author) = [f for f in lint(m, "winml") if f.code == "duplicate-key"]
    assert rgb.fix_text == "keep only Image.BitmapPixelFormat=Rgb8"            # the 3-channel one, though first
    assert author.fix_text == "keep only model_author=b" and "onnx/checker.cc" in RULES["duplicate-key"].source
    fix(m, "winml")
    assert sorted((p.key, p.value) for p in m.metadata_props) == [RGB, ("model_author", "b")]
    onnx.checker.check_model(m, full_check=True)


@pytest.mark.parametrize("target", ["onnx", "winml"])
@pytest.mark.parametrize("shape", [(1, 3, 5, 3), (1, 1, 7, 1)])
def test_a_shape_that_fits_nchw_and_nhwc_is_ambiguous_for_both_targets(shape, target):
    fmt = "Rgb8" if shape[1] == 3 else "Gray8"
    m = image_model(shape=shape, props=[("Image.BitmapPixelFormat", fmt)])
    codes = [f.code for f in lint(m, target)]
    assert "image-ambiguous" in codes
    bare = image_model(shape=shape, dims=None, props=[("Image.BitmapPixelFormat", fmt)])
    (axis,) = [f for f in lint(bare, target) if f.code == "image-channel-axis"]
    assert axis.fix is None and axis.manual                         # the shape cannot say where DATA_CHANNEL is


def test_data_channel_size_against_the_pixel_format():
    m = image_model(shape=(1, 3, 6, 10), props=[("Image.BitmapPixelFormat", "Gray8")])
    (f,) = [f for f in lint(m) if f.severity == "error"]
    assert f.code == "pixel-format-channels" and f.fix is None and "Gray8 means 1" in f.message


def three_channel_tflite(path):
    b = ModelBuilder()
    x = b.input("pixels", [1, 6, 10, 3])
    w = b.const("w", np.random.default_rng(0).normal(size=(4, 3, 3, 3)).astype(np.float32))
    bias = b.const("bias", np.zeros(4, np.float32))
    y = b.tensor("y", [1, 6, 10, 4])
    b.op("CONV_2D", [x, w, bias], [y], {"padding": "SAME"})
    b.output(y)
    path.write_bytes(b.build())
    return path


def test_convert_refuses_metadata_with_an_error_and_writes_nothing(tmp_path, capsys):
    src, out_path = three_channel_tflite(tmp_path / "rgb.tflite"), tmp_path / "out.onnx"
    code, _, err = run(capsys, "convert", src, "-o", out_path, "--denote", "pixels=IMAGE", "--pixel-format", "Gray8")
    assert code == 1 and not out_path.exists() and list(tmp_path.iterdir()) == [src]
    assert "nothing written" in err and "[pixel-format-channels]" in err and "Gray8 means 1" in err
    code, out, err = run(capsys, "convert", src, "-o", out_path, "--denote", "pixels=IMAGE", "--pixel-format", "Rgb8",
                         "--pixel-range", "NominalRange_0_255")
    assert code == 0 and out_path.exists() and "warning: IMAGE tensor 'pixels'" in out    # warnings: written, shown


def first_of_each_folder() -> list[str]:
    seen = {}
    for f in corpus_files("*/*.tflite"):
        seen.setdefault(f.split("/")[0], f)
    return list(seen.values())


@pytest.mark.corpus
@pytest.mark.parametrize("rel", first_of_each_folder())
def test_an_onnx_made_by_the_project_edited_alone_keeps_every_node(corpus, rel, tmp_path):
    """What the window's Export does for an .onnx opened alone (OnnxSession): metadata edits, nothing else."""
    from inspector.core.session.onnx_session import OnnxSession
    from inspector.core.session.session import Session
    made = tmp_path / "made.onnx"
    s = Session.open(corpus / rel)
    s.export(str(made))
    original = onnx.load(made)
    alone = OnnxSession.of(str(made), original)
    first = original.graph.input[0].name
    alone.set_metadata(alone.metadata.merged(type(alone.metadata)(
        types={first: "TENSOR"}, props={"model_author": "me"}, doc_string="edited alone")))
    alone.convert()
    alone.target = "winml"
    out = tmp_path / "edited.onnx"
    alone.export(str(out))
    edited = onnx.load(out)
    assert edited.graph.input[0].type.denotation == "TENSOR" and edited.doc_string == "edited alone"
    assert {p.key: p.value for p in edited.metadata_props}["model_author"] == "me"
    assert without_metadata(edited) == without_metadata(original)
    assert made.read_bytes() == original.SerializeToString()
