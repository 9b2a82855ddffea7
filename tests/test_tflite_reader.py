"""The TFLite reader agrees with the ai-edge-litert interpreter on every corpus model."""
from __future__ import annotations

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from inspector.core.io.tflite_reader import read_tflite

from .conftest import corpus_files

MODELS = corpus_files()


@pytest.mark.corpus
@pytest.mark.parametrize("rel", MODELS)
def test_reader_matches_litert(corpus, rel):
    path = corpus / rel
    graph = read_tflite(path)
    sg = graph.main
    interp = Interpreter(str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    details = interp.get_tensor_details()
    assert len(sg.tensors) == len(details)
    for d in details:
        t = sg.tensors[d["index"]]
        assert t.name == d["name"]
        sig = list(t.shape_signature if t.shape_signature is not None else t.shape)
        assert sig == list(d["shape_signature"]), t.name
        # A dynamic dim's stored size is a placeholder: ours is what LiteRT computes from the stored input sizes
        # once it runs (test_shapes checks that); the file holds the converter's placeholder (1) there.
        assert [x for x, g in zip(t.shape, sig) if g >= 0] == [int(x) for x, g in zip(d["shape"], sig) if g >= 0], \
            t.name
        if d["dtype"] is not None and t.dtype not in ("resource", "variant", "string"):
            assert np.dtype(t.dtype) == np.dtype(d["dtype"]), t.name
    ops = interp._get_ops_details()
    assert len(sg.ops) == len(ops)
    for op, d in zip(sg.ops, ops):
        name = op.opcode if not op.custom else d["op_name"]
        assert name == d["op_name"]
        assert op.inputs == list(d["inputs"])
        assert op.outputs == list(d["outputs"])
    assert [sg.tensors[i].name for i in sg.inputs] == [d["name"] for d in interp.get_input_details()]


def test_constants_are_zero_copy_views(corpus):
    sg = read_tflite(corpus / "ops/conv.float32.tflite").main
    w = next(t for t in sg.tensors if t.data is not None and t.rank == 4)
    assert w.data.shape == (16, 3, 3, 8)
    assert not w.data.flags.owndata and not w.data.flags.writeable


def test_options_decoded_by_name(corpus):
    op = read_tflite(corpus / "ops/conv-relu.float32.tflite").main.ops[0]
    assert op.options["padding"] in ("SAME", "VALID")
    assert op.options["fused_activation_function"] == "RELU"
    assert op.options["stride_h"] == 1
