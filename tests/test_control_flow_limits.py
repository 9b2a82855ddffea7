"""Control flow measured before it is emitted: a 2 KB chain of WHILEs whose cond and body are the same next
subgraph took 88 s and 1.1 GB to fail, a 37 KB chain of 200 ran past 60 s (issue 22). Now the call graph is measured
in one linear pass and refused beyond the limits in inspector/core/ir/limits.py, and a cycle is named."""
from __future__ import annotations

import pytest

from inspector.cli import main
from inspector.core.emit.convert import convert
from inspector.core.ir.errors import ConversionError
from inspector.core.ir.limits import MAX_EXPANDED_OPS, MAX_NESTING
from inspector.core.io.tflite_reader import read_tflite_bytes

from .fuzz_structural import while_chain


def _refusal(data: bytes) -> str:
    with pytest.raises(ConversionError) as e:
        convert(read_tflite_bytes(data, "chain.tflite"))
    return str(e.value)


@pytest.mark.parametrize("depth", [3, 6])
def test_a_shallow_chain_still_converts_and_runs_each_use(depth):
    r = convert(read_tflite_bytes(while_chain(depth)))

    def loops(g) -> int:
        return sum(1 + sum(loops(a.g) for a in n.attribute if a.HasField("g")) for n in g.node
                   if n.op_type == "Loop") + sum(loops(a.g) for n in g.node if n.op_type != "Loop"
                                                 for a in n.attribute if a.HasField("g"))
    assert loops(r.model.graph) == sum(3 ** k for k in range(depth))      # each level: cond twice, body once


def test_a_ten_deep_chain_is_refused_by_its_expanded_size():
    assert 3 ** 10 > MAX_EXPANDED_OPS and 10 <= MAX_NESTING
    assert f"control flow would emit over {MAX_EXPANDED_OPS:,} ops" in _refusal(while_chain(10))


def test_a_long_if_chain_is_refused_too():
    assert "would emit over" in _refusal(while_chain(20, kind="IF"))


def test_a_200_deep_chain_is_refused_by_its_nesting(tmp_path, capsys):
    path = tmp_path / "chain.tflite"
    path.write_bytes(while_chain(200))
    assert main(["convert", str(path), "-o", str(tmp_path / "o.onnx")]) == 1
    err = capsys.readouterr().err
    assert err == f"error: control flow nested more than {MAX_NESTING} subgraphs deep (subgraph 175, s175); refused\n"
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("depth", [1, 5])
def test_a_subgraph_running_itself_is_a_cycle_not_a_recursion_error(depth):
    assert "runs itself through WHILE/IF/CALL_ONCE (a cycle)" in _refusal(while_chain(depth, cycle=True))


def test_a_very_long_chain_is_measured_without_recursion():
    """The measuring pass is iterative: 5,000 levels neither exhaust Python's stack nor slip through."""
    assert "nested more than" in _refusal(while_chain(5000))
