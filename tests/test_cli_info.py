"""`info` agrees with LiteRT and with the corpus manifest; its JSON keys are a stable contract."""
from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
import tflite
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from onnx import TensorProto, helper

from inspector import __version__
from inspector.cli import main

from .conftest import ROOT, corpus_files

TFLITE_KEYS = ["format", "subgraphs", "operators", "tensors", "inputs", "outputs", "op_histogram", "metadata"]


def _info_json(path, capsys) -> dict:
    assert main(["info", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return json.loads(out)


def _manifest(corpus) -> dict[str, dict]:
    with open(corpus / "MANIFEST.tsv", newline="") as f:
        return {row["file"]: row for row in csv.DictReader(f, delimiter="\t")}


def _io(details) -> list[dict]:
    return [{"name": d["name"], "shape": [int(x) for x in d["shape"]], "dtype": np.dtype(d["dtype"]).name}
            for d in details]


def _run_on_zeros(interp) -> None:
    interp.allocate_tensors()
    for d in interp.get_input_details():
        interp.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    interp.invoke()


@pytest.mark.corpus
@pytest.mark.parametrize("rel", corpus_files())
def test_json_matches_litert_and_manifest(corpus, rel, capsys):
    path = corpus / rel
    s = _info_json(path, capsys)
    assert list(s) == TFLITE_KEYS
    interp = Interpreter(str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    if any(min(d["shape_signature"], default=0) < 0 for d in interp.get_input_details()):
        _run_on_zeros(interp)                        # outputs as LiteRT computes them at the stored input sizes:
                                                     # a dynamic dim's stored size is the converter's placeholder
    assert s["format"] == "tflite"
    assert s["inputs"] == _io(interp.get_input_details())
    assert s["outputs"] == _io(interp.get_output_details())

    row = _manifest(corpus)[rel]
    assert s["subgraphs"] == int(row["subgraphs"]) and s["operators"] == int(row["operators"])
    hist = dict(item.rsplit("x", 1) for item in row["operator_histogram"].split())
    assert s["op_histogram"] == {k: int(v) for k, v in hist.items()}

    m = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    assert s["tensors"] == sum(m.Subgraphs(k).TensorsLength() for k in range(m.SubgraphsLength()))
    want_meta = {m.Metadata(j).Name().decode(): m.Buffers(m.Metadata(j).Buffer()).DataLength()
                 for j in range(m.MetadataLength())}
    assert s["metadata"] == want_meta


def test_text_output(corpus, capsys):
    path = corpus / "ops/conv.float32.tflite"
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}: tflite, 1 subgraph(s), 1 operators, 4 tensors"
    interp = Interpreter(str(path))
    d_in, d_out = interp.get_input_details()[0], interp.get_output_details()[0]
    assert out[1:5] == ["inputs:", f"  {d_in['name']}  {d_in['shape'].tolist()}  float32",
                        "outputs:", f"  {d_out['name']}  {d_out['shape'].tolist()}  float32"]
    m = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    meta = [f"  {m.Metadata(j).Name().decode()}: {m.Buffers(m.Metadata(j).Buffer()).DataLength()} bytes"
            for j in range(m.MetadataLength())]
    assert meta, "this corpus model is expected to carry metadata"
    assert out[5:] == ["operators:", "      1  CONV_2D", "metadata:", *meta]


def test_text_output_lists_metadata(capsys):
    assert main(["info", str(ROOT / "inspector" / "resources" / "sample.tflite")]) == 0
    out = capsys.readouterr().out
    assert "metadata:\n  source: " in out and " bytes" in out
    assert "      5  CONV_2D" in out


def test_onnx_json(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 5, 7])
    x.type.denotation = "IMAGE"
    for d, dn in zip(x.type.tensor_type.shape.dim, ["DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE", "DATA_FEATURE"]):
        d.denotation = dn
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 5, 7])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    helper.set_model_props(model, {"author": "tests"})
    path = tmp_path / "relu.onnx"
    onnx.save(model, path)
    s = _info_json(path, capsys)
    assert list(s) == TFLITE_KEYS + ["denotations"]
    assert s["format"] == "onnx" and s["op_histogram"] == {"Relu": 1} and s["metadata"] == {"author": "tests"}
    assert s["inputs"] == [{"name": "x", "shape": ["N", 3, 5, 7], "dtype": "float32"}]   # the symbol, not 1
    assert s["denotations"] == {"x": {"type": "IMAGE",
                                      "dims": ["DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE", "DATA_FEATURE"]}}


def test_version_and_help():
    r = subprocess.run([sys.executable, "-m", "inspector", "--version"], capture_output=True, text=True, cwd=ROOT,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"layout-inspector {__version__}"
    r = subprocess.run([sys.executable, "-m", "inspector", "info", "--help"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0 and "--json" in r.stdout


def test_process_exit_codes(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "inspector", "info", str(ROOT / "inspector" / "resources" / "sample.tflite"),
                         "--json"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert ok.returncode == 0 and json.loads(ok.stdout)["inputs"][0]["shape"] == [1, 48, 64, 3]
    usage = subprocess.run([sys.executable, "-m", "inspector", "info"], capture_output=True, text=True, cwd=ROOT,
                           timeout=60)
    assert usage.returncode == 2 and "usage" in usage.stderr and "Traceback" not in usage.stderr


def test_info_json_shows_a_metadata_entry_that_is_not_utf8_escaped(tmp_path, capsys):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.metadata_props.add(key="KEYX", value="VALX")
    path = tmp_path / "bad.onnx"
    path.write_bytes(m.SerializeToString().replace(b"KEYX", b"K\xffYX").replace(b"VALX", b"V\xfeLX"))
    assert _info_json(path, capsys)["metadata"] == {"K\\xffYX": "V\\xfeLX"}      # was a TypeError from json
