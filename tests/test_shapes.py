"""Our shape computation (ir/shapes.py) against LiteRT's on every corpus model: after one run on zeros, each
non-constant tensor of the main graph has the shape LiteRT gave it, and so has each static one of the other subgraphs
(WHILE bodies' dynamic ones hold their last iteration's shape); no correct file gets a note."""
from __future__ import annotations

import numpy as np
import pytest

from inspector.core.io.tflite_reader import read_tflite

from .conftest import corpus_files


@pytest.mark.parametrize("rel", corpus_files())
def test_shapes_are_litert_s(corpus, rel):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    path = str(corpus / rel)
    graph = read_tflite(path)
    assert graph.notes == []                         # the corpus' files declare LiteRT's shapes
    it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    try:
        it.allocate_tensors()
    except RuntimeError as e:                        # a custom op this LiteRT lacks: nothing to compare with
        assert "custom op" in str(e) and rel == "realworld/mediapipe_selfie_segmentation.tflite"
        return
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    it.invoke()
    tensors = graph.main.tensors
    details = [d for d in it.get_tensor_details() if d["index"] < len(tensors)     # (not LiteRT's scratch)
               and tensors[d["index"]].data is None]
    assert details
    got = {tensors[d["index"]].name: tuple(tensors[d["index"]].shape) for d in details}
    assert got == {tensors[d["index"]].name: tuple(int(x) for x in d["shape"]) for d in details}
    for k, sg in enumerate(graph.subgraphs[1:], 1):
        static = [d for d in it.get_tensor_details(subgraph_index=k) if d["index"] < len(sg.tensors)
                  and sg.tensors[d["index"]].data is None and not sg.tensors[d["index"]].dynamic]
        assert {d["index"]: sg.tensors[d["index"]].shape for d in static} == \
            {d["index"]: tuple(int(x) for x in d["shape"]) for d in static}, sg.name
