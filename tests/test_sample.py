"""The bundled sample model is what tools/make_sample.py writes, and LiteRT runs it as numpy predicts."""
from __future__ import annotations

import importlib.util

import numpy as np

from inspector.core.io.tflite_reader import read_tflite

from .conftest import ROOT
from .reference import conv2d, depthwise_conv2d, pool2d, run_litert, softmax

SAMPLE = ROOT / "inspector" / "resources" / "sample.tflite"


def _make_sample():
    spec = importlib.util.spec_from_file_location("make_sample", ROOT / "tools" / "make_sample.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_sample_is_current():
    assert _make_sample().build_sample() == SAMPLE.read_bytes(), "run: python tools/make_sample.py"


def test_sample_shape_and_size():
    g = read_tflite(SAMPLE)
    sg = g.main
    assert 15 <= len(sg.ops) <= 25
    assert sg.tensors[sg.inputs[0]].shape == (1, 48, 64, 3)
    assert sg.tensors[sg.outputs[0]].shape == (1, 10)
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "CONCATENATION", "MEAN", "RESHAPE", "FULLY_CONNECTED",
            "SOFTMAX", "MAX_POOL_2D"} <= set(g.op_histogram())
    assert SAMPLE.stat().st_size < 64 * 1024


def _forward(sg, x):
    """The sample's graph written out in numpy, with its weights taken from the file by name."""
    w = {t.name: t.data for t in sg.tensors if t.data is not None}

    def conv(name, v, stride=1, act="RELU6"):
        return conv2d(v, w[f"{name}/kernel"], w[f"{name}/bias"], (stride, stride), "SAME", fused=act)

    def dw(name, v):
        return depthwise_conv2d(v, w[f"{name}/kernel"], w[f"{name}/bias"], fused="RELU6")

    stem = conv("stem", x, 2)
    res = stem + conv("block1/project", dw("block1/depthwise", stem), act="NONE")
    p = pool2d(res, (2, 2), (2, 2), kind="max")
    joined = np.concatenate([conv("branch_a/conv", p, act="RELU"),
                             conv("branch_b/pointwise", dw("branch_b/depthwise", p), act="RELU")], axis=3)
    scaled = conv("mix", joined) * w["channel_scale"]
    gap = pool2d(scaled, (2, 2), (2, 2), kind="avg").mean(axis=(1, 2)).reshape(1, 32)
    return softmax(gap @ w["head/kernel"].T.astype(np.float64) + w["head/bias"])


def test_sample_runs_in_litert_as_numpy_predicts():
    sg = read_tflite(SAMPLE).main
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.uniform(-1, 1, (1, 48, 64, 3)).astype(np.float32)
        (got,) = run_litert(str(SAMPLE), x)
        want = _forward(sg, x)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        assert abs(got.sum() - 1) < 1e-5
