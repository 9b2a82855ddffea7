"""What keeps a conversion cheap without changing its result (issue 15's speed work); no timings here, the bench
measures those (bench/run.py)."""
from __future__ import annotations

import gc
import itertools
import json
import os

import numpy as np
import pytest

from inspector.core.emit import io_layout
from inspector.core.emit.convert import convert, graph_name
from inspector.core.io import tflite_reader
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite_bytes
from inspector.core.ir.errors import ModelLoadError
from inspector.core.ir.graph import Graph, Subgraph, Tensor

from .test_control_flow import while_model
from .test_verified_reading import _unterminated


def _int8_conv():
    """int8 CONV_2D with per-channel weights, H != W != C (built here: test_quant's builder draws from its module's
    random generator, and drawing from it here would change that module's data)."""
    rng = np.random.default_rng(15)
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3], "int8", quant=(0.04, -3))
    scales = rng.uniform(0.005, 0.02, 4).astype(np.float32)
    w = b.const("w", rng.integers(-127, 128, (4, 3, 2, 3)).astype(np.int8),
                quant={"scales": scales, "zero_points": np.zeros(4, np.int64), "axis": 0})
    bias = b.const("b", rng.integers(-300, 300, 4).astype(np.int32),
                   quant={"scales": scales * 0.04, "zero_points": np.zeros(4, np.int64), "axis": 0})
    y = b.tensor("y", [1, 5, 4, 4], "int8", quant=(0.06, -10))
    b.op("CONV_2D", [x, w, bias], [y], {"padding": "SAME", "stride_w": 2, "fused_activation_function": "RELU"})
    b.output(y)
    return b.build()


def _cyclic_garbage(fn) -> int:
    """Objects the cyclic collector finds unreachable once fn's result is dropped (refcounting frees the rest)."""
    gc.collect()
    gc.disable()
    try:
        fn()
        return gc.collect()
    finally:
        gc.enable()


@pytest.mark.parametrize("case", ["int8 conv", "int8 conv, exact", "WHILE loop"])
def test_a_conversion_leaves_no_reference_cycles(case):
    """An emitter referring to itself (and its quantization helpers to it) left every conversion's emitter, plan,
    trace and nodes to the cyclic collector: a collection cost more than a small conversion itself."""
    graph = read_tflite_bytes(while_model() if case == "WHILE loop" else _int8_conv())
    convert(graph, exact_int="exact" in case)              # warm: imports and caches made once
    assert _cyclic_garbage(lambda: convert(graph, exact_int="exact" in case)) == 0


def test_the_io_entry_is_the_json_of_its_rows():
    """Written out by hand; the bytes json.dumps gives, with names that need escaping and rank-0 tensors."""
    names = ['in"pút\\', "out\u2028", ""]
    tensors = [Tensor(0, names[0], (1, 5, 3, 4), "float32", shape_signature=(1, -1, 3, 4)),
               Tensor(1, names[1], (2,), "float32"), Tensor(2, names[2], (), "int32")]
    sg = Subgraph("main", tensors, [], [0], [1, 2])
    got = io_layout.describe(sg, {0: ("x\t", (0, 3, 1, 2))}, {1: ("y", (0,)), 2: ("z", ())})
    rows = [{"kind": "input", "onnx": "x\t", "tflite": names[0], "tflite_shape": [1, -1, 3, 4],
             "onnx_shape": [1, 4, -1, 3], "perm": [0, 3, 1, 2]},
            {"kind": "output", "onnx": "y", "tflite": names[1], "tflite_shape": [2], "onnx_shape": [2], "perm": [0]},
            {"kind": "output", "onnx": "z", "tflite": "", "tflite_shape": [], "onnx_shape": [], "perm": []}]
    assert got == json.dumps(rows, separators=(",", ":"))


def test_the_io_entry_writes_repeated_shapes_and_perms_as_json_does():
    """Rows repeat shapes and perms (written once per entry): lists, numpy ints and a perm equal to a shape."""
    tensors = [Tensor(0, "a", [1, 3, 5, 4], "float32"), Tensor(1, "b", (1, 3, 5, 4), "float32"),
               Tensor(2, "c", (0, 1), "float32")]
    sg = Subgraph("main", tensors, [], [0], [1, 2])
    perm = tuple(np.array([0, 3, 1, 2]))
    got = io_layout.describe(sg, {0: ("a", perm)}, {1: ("b", (0, 1, 2, 3)), 2: ("c", (0, 1))})
    rows = [{"kind": "input", "onnx": "a", "tflite": "a", "tflite_shape": [1, 3, 5, 4], "onnx_shape": [1, 4, 3, 5],
             "perm": [0, 3, 1, 2]},
            {"kind": "output", "onnx": "b", "tflite": "b", "tflite_shape": [1, 3, 5, 4], "onnx_shape": [1, 3, 5, 4],
             "perm": [0, 1, 2, 3]},
            {"kind": "output", "onnx": "c", "tflite": "c", "tflite_shape": [0, 1], "onnx_shape": [0, 1],
             "perm": [0, 1]}]
    assert got == json.dumps(rows, separators=(",", ":"))


def test_the_graph_name_is_the_file_name_without_its_extension():
    """graph_name cuts the extension as os.path.splitext does (leading dots kept), on every short path."""
    for k in range(7):
        for chars in itertools.product("a./", repeat=k):
            path = "".join(chars)
            want = os.path.splitext(os.path.basename(path))[0] or "model"
            assert graph_name(Graph(format="tflite", subgraphs=[], path=path)) == want, path


def _relu() -> bytes:
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6, 5])
    y = b.tensor("y", [1, 4, 6, 5])
    b.op("RELU", [x], [y])
    b.output(y)
    return b.build()


def test_the_litert_check_falls_back_to_the_public_interpreter(monkeypatch):
    """The check calls LiteRT's wrapper directly; a LiteRT whose wrapper takes other arguments (a TypeError) gets
    the public Interpreter instead, and still refuses what LiteRT refuses."""
    from ai_edge_litert import interpreter as lite
    original, calls = lite._interpreter_wrapper.CreateWrapperFromBuffer, []

    def changed(*args):                                    # refuses the first call's arguments, as a new LiteRT might
        calls.append(len(args))
        if len(calls) == 1:
            raise TypeError("incompatible function arguments")
        return original(*args)

    monkeypatch.setattr(lite._interpreter_wrapper, "CreateWrapperFromBuffer", changed)
    monkeypatch.setattr(tflite_reader, "_LITERT", [])
    assert [op.opcode for op in read_tflite_bytes(_relu()).main.ops] == ["RELU"]
    assert len(calls) == 2                                 # ours refused, then the public class's call
    with pytest.raises(ModelLoadError, match="LiteRT refuses this file: The model is not a valid Flatbuffer"):
        read_tflite_bytes(_unterminated(), "m.tflite")
    assert len(calls) == 3 and tflite_reader._LITERT[0].__name__ == "public"     # the public class for good


def test_the_litert_check_uses_the_resolver_the_public_interpreter_names(monkeypatch):
    """The check calls LiteRT's wrapper with the op resolver's id, not through the Interpreter class (whose module
    a cold start no longer imports): the id is the one LiteRT's own Interpreter passes for that resolver."""
    from ai_edge_litert import interpreter as lite
    kind = lite.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    assert tflite_reader._RESOLVER_WITHOUT_DEFAULT_DELEGATES == lite._get_op_resolver_id(kind)
    original, ids = lite._interpreter_wrapper.CreateWrapperFromBuffer, []
    monkeypatch.setattr(lite._interpreter_wrapper, "CreateWrapperFromBuffer",
                        lambda *args: ids.append(args[1]) or original(*args))
    monkeypatch.setattr(tflite_reader, "_LITERT", [])
    read_tflite_bytes(_relu())
    lite.Interpreter(model_content=_relu(), experimental_op_resolver_type=kind)
    assert ids[0] == ids[1] == tflite_reader._RESOLVER_WITHOUT_DEFAULT_DELEGATES
