"""A verdict when LiteRT's reference kernels cannot run the model (issue 31): TF 2.21 writes int8 TILE version 3 and
DEPTH_TO_SPACE version 2, which the reference resolver does not register. The comparison falls back to LiteRT's
default kernels, the headline and the JSON say so (`reference: "default"`), and the floor is widened (noise.py)."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from inspector.cli import main as cli
from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.proof import noise
from inspector.core.proof.validate import headline, validate

from .test_quant import bias_for, per_channel, save

SX, SY = 0.05, 0.04


def conv_tile(tmp_path, version: int):
    """int8 x [1, 4, 6, 3] -> 3x3 CONV_2D [1, 4, 6, 5] -> TILE x2 on H (at `version`) -> [1, 8, 6, 5]."""
    rng = np.random.default_rng(11)
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 3], "int8", quant=(SX, 2))
    wq, wquant = per_channel(rng.uniform(-1, 1, (5, 3, 3, 3)), axis=0)
    bq, bquant = bias_for(rng.uniform(-0.3, 0.3, 5), SX, wquant["scales"])
    y = b.tensor("y", [1, 4, 6, 5], "int8", quant=(SY, -1))
    b.op("CONV_2D", [x, b.const("w", wq, quant=wquant), b.const("b", bq, quant=bquant)], [y], {"padding": "SAME"})
    z = b.tensor("z", [1, 8, 6, 5], "int8", quant=(SY, -1))
    b.op("TILE", [y, b.const("m", np.array([1, 2, 1, 1], np.int32))], [z], version=version)
    b.output(z)
    return save(b, tmp_path, f"tile_v{version}.tflite")


def test_tile_v3_gets_a_verdict_against_the_default_kernels_and_says_so(tmp_path):
    result = convert(conv_tile(tmp_path, 3))
    v = validate(result)
    assert v.verdict == "ok" and v.reference == "default" and "TILE version 3" in v.lacks
    assert v.to_json()["reference"] == "default"
    assert headline(v).endswith("; against LiteRT's default kernels (its reference kernels lack TILE version 3)")
    assert any("2 x the spread" in n for n in v.notes)
    # The same model at a version the reference kernels have is compared with them, and says nothing more.
    same = validate(convert(conv_tile(tmp_path, 1)))
    assert same.reference == "reference" and "default" not in headline(same) and same.to_json()["reference"] == \
        "reference"


def test_a_wrong_kernel_still_fails_against_the_default_kernels(tmp_path):
    """The widened floor is the default kernels' spread, not a licence: the conv's kernel with its spatial axes
    swapped fails."""
    result = convert(conv_tile(tmp_path, 3))
    w = next(i for i in result.model.graph.initializer if numpy_helper.to_array(i).shape == (5, 3, 3, 3))
    w.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(numpy_helper.to_array(w).swapaxes(2, 3)), w.name))
    v = validate(result)
    assert v.reference == "default" and v.verdict == "fail"


def test_the_floor_is_twice_the_default_kernels_spread_against_xnnpack(tmp_path):
    from ai_edge_litert.interpreter import OpResolverType

    from inspector.core.proof.validate import compare_steps, make_inputs, quant_step, run_tflite
    graph = conv_tile(tmp_path, 3)
    v = validate(convert(graph), floor=True, seed=2)
    x = make_inputs(graph, 2)
    t = graph.main.outputs[0]
    builtin = run_tflite(graph, x, keep_all=False, resolver=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    xnnpack = run_tflite(graph, x, keep_all=False, resolver=OpResolverType.AUTO)
    spread = compare_steps(builtin[t], xnnpack[t], *quant_step(graph.main, t))[4]
    assert v.outputs[0].floor == noise.FALLBACK * spread


@pytest.mark.corpus
@pytest.mark.parametrize("rel,lacks", [("tfbuilt/tf_yolo_tiny_int8.tflite", "TILE version 3"),
                                       ("tfbuilt/tf_edsr_sr_int8.tflite", "DEPTH_TO_SPACE version 2")])
def test_corpus_models_the_reference_kernels_cannot_run_get_a_verdict(corpus, tmp_path, capsys, rel, lacks):
    assert cli(["convert", str(corpus / rel), "-o", str(tmp_path / "m.onnx")]) == 0
    capsys.readouterr()
    code = cli(["validate", str(corpus / rel), str(tmp_path / "m.onnx"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["reference"] == "default" and out["verdict"] == "ok" and code == 0, out["outputs"]
    assert any(lacks in n for n in out["notes"])
    assert cli(["validate", str(corpus / rel), str(tmp_path / "m.onnx")]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"(its reference kernels lack {lacks})")
    onnx.load(str(tmp_path / "m.onnx"))
