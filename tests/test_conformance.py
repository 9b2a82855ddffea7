"""Corpus conformance: every float model the converter core covers converts, passes the ONNX checker and agrees
with the TFLite interpreter; the pure CNNs need no Transpose at all with NCHW I/O."""
from __future__ import annotations

import numpy as np
import pytest

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.proof.validate import own_kernel_steps, validate

from .conftest import corpus_files

QUANT_KEYS = ("_int8", "_uint8", "_int16x8", "_dynamic", ".uint8", "_quant")     # full-integer and dynamic-range
FLOAT = [f for f in corpus_files() if not any(k in f for k in QUANT_KEYS + ("alexa", "hey_jarvis"))]
# Models known not to convert yet, with the reason (strict: each must come off the list the moment it passes).
PENDING: dict[str, str] = {}
PURE_CNNS = ["keras/mobilenetv2_fp32.tflite", "keras/mobilenetv2_fp16.tflite", "keras/mobilenetv3small_fp32.tflite",
             "keras/efficientnetb0_fp16.tflite", "keras/nasnetmobile_fp32.tflite", "ops/mobilenet_v1_0.25_128.tflite",
             "realworld/iris_landmark.tflite"]


# strict: a pending model that starts passing fails here until it is taken off the list.
CASES = [pytest.param(f, marks=pytest.mark.xfail(strict=True, reason=PENDING[f])) if f in PENDING else f
         for f in FLOAT]


# Models whose dynamic input size is stored as a placeholder LiteRT cannot run: the sizes they validate at.
INPUT_SHAPES = {"tfbuilt/tf_melfront_dynlen_fp32.tflite": {"serving_default_wav:0": (1, 12000)}}


@pytest.mark.corpus
@pytest.mark.parametrize("rel", CASES)
def test_float_model_converts_and_validates(corpus, rel):
    result = convert(read_tflite(corpus / rel))
    v = validate(result, intermediates=False, input_shapes=INPUT_SHAPES.get(rel))
    assert v.ok, [(e.name, e.max_rel) for e in v.outputs]
    # Declared output shapes are the runtime shapes.
    for out, err in zip(result.model.graph.output, v.outputs):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in out.type.tensor_type.shape.dim]
        want = list(np.transpose(np.empty(err.shape), result.plan.outputs[err.tensor]).shape)
        assert [d for d in dims if d is not None] == [w for d, w in zip(dims, want) if d is not None]


@pytest.mark.corpus
@pytest.mark.parametrize("rel", PURE_CNNS)
def test_pure_cnns_need_no_transpose(corpus, rel):
    result = convert(read_tflite(corpus / rel))
    assert result.transposes == 0, [c.reason for c in result.plan.conflicts]
    assert not result.plan.conflicts


@pytest.mark.corpus
@pytest.mark.parametrize("rel", ["realworld/face_detection_front.tflite", "realworld/face_detection_back.tflite",
                                 "realworld/mediapipe_face_detection_short_range.tflite",
                                 "realworld/face_detection_full_range.tflite"])
def test_face_detection_transposes_only_before_its_output_reshapes(corpus, rel):
    """These heads Reshape NHWC feature maps into [1, anchors, values]: TFLite's memory order is part of the
    model's meaning, so each Reshape of a non-trivial NCHW map needs exactly one Transpose — before it, or after it
    where the Reshape carries the NCHW order to the output — and nothing else does."""
    result = convert(read_tflite(corpus / rel))
    sg = result.graph.main
    assert result.plan.conflicts and all((c.kind == "terminate" and sg.ops[c.op].opcode == "RESHAPE") or
                                         (c.kind == "io" and c.tensor in sg.outputs) for c in result.plan.conflicts)
    assert result.transposes == len(result.plan.conflicts)


@pytest.mark.corpus
@pytest.mark.parametrize("rel", ["realworld/alexa.tflite", "realworld/hey_jarvis.tflite"])
def test_streaming_state_is_stored_in_the_layout_it_is_read_in(corpus, rel):
    """State I/O are ours to lay out: variables read by convolutions are kept channels-first, the one feeding the
    final Reshape stays as in TFLite, so the only Transpose left is the audio input's (rank 3, expanded into the 4-D
    stream). Kept all in TFLite's layout they cost 12."""
    result = convert(read_tflite(corpus / rel))
    assert result.transposes == 1, [c.reason for c in result.plan.conflicts]
    layouts = [s["layout"] for s in result.state]
    assert layouts.count("NCHW") == len(layouts) - 1 and layouts.count("NHWC") == 1
    assert validate(result).ok


QUANTIZED = [f for f in corpus_files() if any(k in f for k in QUANT_KEYS + ("conv-quant",))]


@pytest.mark.corpus
@pytest.mark.parametrize("rel", QUANTIZED)
def test_quantized_model_converts_and_validates(corpus, rel):
    """QDQ output, run op by op (ONNX Runtime unoptimised, as validate() does when it reads intermediates):
    >= 99.9 % of output elements within 2 quantization steps, none beyond 5 (float outputs of fp16 / dynamic-range
    models: 1e-3 of the output scale), or no more steps off than LiteRT's default kernels + 1; int8 weights are not expanded to float. ONNX Runtime's fused integer kernels
    round differently again (MobileNetV3 int8: 4 steps, 99.4 %): --exact-int is the bit-exact alternative."""
    result = convert(read_tflite(corpus / rel))
    v = validate(result)
    if not v.ok:
        # Deep random-weight networks amplify any one-step difference: there the bar is LiteRT's own default
        # kernels against its reference kernels on the same inputs, plus one step.
        own = own_kernel_steps(result.graph)
        assert all(e.steps is not None and o is not None and e.steps <= o + 1 for e, o in zip(v.outputs, own)), \
            [(e.name, e.steps, e.within, o) for e, o in zip(v.outputs, own)]
    if any(k in rel for k in ("_int8", "_uint8", "_int16x8", ".uint8", "_quant")):
        size = len(result.model.SerializeToString())
        assert size <= 1.3 * (corpus / rel).stat().st_size or size < 4096    # tiny single-op files: headers dominate


@pytest.mark.corpus
@pytest.mark.parametrize("rel", ["keras/efficientnetb0_int8.tflite", "keras/mobilenetv3small_int8.tflite",
                                 "ops/mobilenet_v1_0.25_128_quant.tflite"])
@pytest.mark.parametrize("seed", [1, 2])
def test_exact_int_matches_litert_on_every_seed(corpus, rel, seed):
    result = convert(read_tflite(corpus / rel), exact_int=True)
    v = validate(result, seed=seed, intermediates=False)
    assert v.ok and all(e.steps == 0 for e in v.outputs), [(e.name, e.steps) for e in v.outputs]
