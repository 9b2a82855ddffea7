"""Seeded validation inputs: integer inputs that index a table are drawn from the table's range (LiteRT refuses
an out-of-range index), traced back through casts and reshapes."""
from __future__ import annotations

import numpy as np

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.proof.validate import index_bounds, make_inputs, validate


def _lookup_model() -> bytes:
    """ids [2, 9] int32 -> EMBEDDING_LOOKUP into a 7 x 5 table; pos [6] int32 -> RESHAPE -> GATHER axis 1 of a
    3 x 11 table."""
    rng = np.random.default_rng(0)
    b = ModelBuilder()
    ids = b.input("ids", (9,), "int32")
    table = b.const("table", rng.uniform(-1, 1, (7, 5)).astype(np.float32))
    emb = b.tensor("emb", (9, 5))
    b.op("EMBEDDING_LOOKUP", [ids, table], [emb])
    pos = b.input("pos", (2, 3), "int32")
    flat = b.tensor("flat", (6,), "int32")
    b.op("RESHAPE", [pos, b.const("shape", np.asarray([6], np.int32))], [flat], {"new_shape": [6]})
    params = b.const("params", rng.uniform(-1, 1, (3, 11)).astype(np.float32))
    g = b.tensor("g", (3, 6))
    b.op("GATHER", [params, flat], [g], {"axis": 1})
    b.output(emb, g)
    return b.build()


def test_index_inputs_stay_within_the_table_they_index(tmp_path):
    path = tmp_path / "lookup.tflite"
    path.write_bytes(_lookup_model())
    graph = read_tflite(path)
    sg = graph.main
    assert index_bounds(sg) == {sg.inputs[0]: 7, sg.inputs[1]: 11}
    for seed in range(5):
        ids, pos = make_inputs(graph, seed)
        assert ids.min() >= 0 and ids.max() < 7 and pos.min() >= 0 and pos.max() < 11
    v = validate(convert(graph))
    assert v.ok and all(e.max_abs == 0 for e in v.outputs), [(e.name, e.max_abs) for e in v.outputs]
