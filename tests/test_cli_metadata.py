"""`check` and `edit` commands, and the metadata flags shared with `convert`."""
from __future__ import annotations

import argparse
import json
import os

import onnx
import pytest

from inspector.cli import main
from inspector.cli._metadata_args import add_metadata_arguments, edits_from_args
from inspector.core.ir.errors import MetadataError
from tests.test_denotation_check import conv_net, nhcw_pool
from tests.test_denotation_edits import NCHW, dims, props, small_model


@pytest.fixture
def models(tmp_path):
    paths = {}
    for name, m in (("clean", conv_net()), ("nhcw", nhcw_pool()), ("small", small_model())):
        paths[name] = tmp_path / f"{name}.onnx"
        onnx.save(m, paths[name])
    return paths


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- check ------------------------------------------------------------------------------------------------------------

def test_check_exit_codes_and_text(models, capsys):
    code, out, _ = run(capsys, "check", models["clean"])
    assert code == 0 and "no findings" in out
    code, out, _ = run(capsys, "check", models["nhcw"])       # a contradiction in the graph warns: exit 0
    assert code == 0 and "0 error(s), 1 warning(s)" in out and "AveragePool 'pool'" in out


def test_check_json(models, capsys):
    code, out, _ = run(capsys, "check", models["nhcw"], "--json")
    data = json.loads(out)
    assert code == 0 and [(f["node"], f["code"], f["severity"]) for f in data["findings"]] == [
        ("pool", "dims-format", "warning")]
    assert "DATA_CHANNEL" in data["findings"][0]["message"]
    code, out, _ = run(capsys, "check", models["clean"], "--json")
    assert code == 0 and json.loads(out) == {"target": "onnx", "findings": []}


def test_check_refuses_a_tflite_or_garbage_file(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage that is not protobuf \xff\xff\xff")
    code, _, err = run(capsys, "check", bad)
    assert code == 1 and err.startswith("error:") and "Traceback" not in err


# -- edit -------------------------------------------------------------------------------------------------------------

def test_edit_writes_denotations_and_keeps_existing_metadata(models, tmp_path, capsys):
    out_path = tmp_path / "out.onnx"
    code, out, err = run(capsys, "edit", models["small"], "-o", out_path, "--denote", "x=image",
                         "--dims", "x=data_batch,DATA_CHANNEL,data_feature,data_feature", "--pixel-format", "RGB8",
                         "--gamma", "srgb", "--pixel-range", "normalized_0_1", "--metadata", "author=me",
                         "--doc-string", "edited", "--model-version", "7")
    assert code == 0 and "wrote" in out and "every tensor denoted IMAGE" in err
    m = onnx.load(out_path)
    assert m.graph.input[0].type.denotation == "IMAGE" and dims(m, "x") == NCHW
    assert props(m) == {"keepme": "42", "Image.BitmapPixelFormat": "Rgb8", "Image.ColorSpaceGamma": "SRGB",
                        "Image.NominalPixelRange": "Normalized_0_1", "author": "me"}
    assert (m.doc_string, m.model_version) == ("edited", 7)
    # A second edit on the result keeps everything the first one set.
    again = tmp_path / "again.onnx"
    assert run(capsys, "edit", out_path, "-o", again, "--metadata", "author=")[0] == 0
    m2 = onnx.load(again)
    assert "author" not in props(m2) and props(m2)["keepme"] == "42" and dims(m2, "x") == NCHW
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp")] == []


@pytest.mark.parametrize("flags, allowed", [
    (["--pixel-format", "rgb9"], "Gray8, Rgb8, Bgr8, Rgba8, Bgra8"),
    (["--gamma", "2.2"], "Linear, SRGB"),
    (["--pixel-range", "0-255"], "NominalRange_0_255, Normalized_0_1, Normalized_1_1, NominalRange_16_235"),
    (["--denote", "x=PICTURE"], "TENSOR, IMAGE, AUDIO, TEXT"),
    (["--dims", "x=BATCH,DATA_CHANNEL,DATA_FEATURE,DATA_FEATURE"], "DATA_BATCH, DATA_CHANNEL, DATA_TIME"),
    (["--metadata", "image.nominalpixelrange=full"], "NominalRange_0_255"),
])
def test_invalid_values_exit_1_with_the_allowed_list_and_write_nothing(models, tmp_path, capsys, flags, allowed):
    out_path = tmp_path / "out.onnx"
    code, _, err = run(capsys, "edit", models["small"], "-o", out_path, *flags)
    assert code == 1 and allowed in err
    assert not out_path.exists()


@pytest.mark.parametrize("flags, words", [
    (["--denote", "nope=IMAGE"], "no tensor named 'nope'"),
    (["--dims", "x=DATA_BATCH"], "4 axes but 1"),
    (["--denote", "IMAGE"], "TENSOR=TYPE"),
    ([], "nothing to edit"),
])
def test_other_edit_errors(models, tmp_path, capsys, flags, words):
    code, _, err = run(capsys, "edit", models["small"], "-o", tmp_path / "o.onnx", *flags)
    assert code == 1 and words in err


def test_edit_never_overwrites_the_input_without_force(models, capsys):
    before = models["small"].read_bytes()
    code, _, err = run(capsys, "edit", models["small"], "-o", models["small"], "--denote", "x=IMAGE")
    assert code == 1 and "--force" in err and models["small"].read_bytes() == before
    code, _, _ = run(capsys, "edit", models["small"], "-o", models["small"], "--denote", "x=IMAGE", "--force")
    assert code == 0 and onnx.load(models["small"]).graph.input[0].type.denotation == "IMAGE"


def test_edit_reports_findings_as_warnings(models, tmp_path, capsys):
    code, _, err = run(capsys, "edit", models["small"], "-o", tmp_path / "o.onnx", "--denote", "x=IMAGE")
    assert code == 0 and "warning: IMAGE tensor 'x'" in err


# -- the helpers `convert` uses ------------------------------------------------------------------------------------

def test_edits_from_args_for_convert():
    p = argparse.ArgumentParser()
    add_metadata_arguments(p)
    e = edits_from_args(p.parse_args(["--denote", "in:0=audio", "--dims", "in:0=data_batch,?,data_time",
                                      "--pixel-range", "NORMALIZED_1_1", "--metadata", "a=b=c"]))
    assert e.types == {"in:0": "AUDIO"} and e.dims == {"in:0": ["DATA_BATCH", "", "DATA_TIME"]}
    assert e.image == {"Image.NominalPixelRange": "Normalized_1_1"} and e.props == {"a": "b=c"}
    assert edits_from_args(p.parse_args([])).is_empty()
    with pytest.raises(MetadataError, match="Linear, SRGB"):
        edits_from_args(p.parse_args(["--gamma", "sRGB2"]))
