"""The metadata pass after a pin reuses what it read of the last model (metadata/parsed.py, the Propagator's kept
outcomes) and must give exactly what a whole pass gives: the notes, the annotated model's bytes, the checker's
findings and the propagated denotations. A whole pass here is one with a fresh parsed.Memo()."""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector.core.emit.incremental import Reconverter
from inspector.core.io.loader import load_model
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.metadata.denotation import Annotator, shape_view
from inspector.core.metadata.denotation_rules import Propagator
from inspector.core.metadata.edits import MetadataEdits
from inspector.core.metadata.lint import Linter
from inspector.core.metadata.parsed import Memo

B, C, F = "DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE"


def finding_rows(findings) -> list[tuple]:
    return [(f.node, f.message, f.kind, f.tensor, f.code, f.severity, f.source, f.field, f.fix_text, f.manual,
             f.fix.to_dict() if f.fix is not None else None) for f in findings]


def passes(result, memo: Memo) -> dict:
    """The metadata pass and the checker on a copy of `result`'s model, as the window runs them after a pin."""
    model = onnx.ModelProto()
    model.CopyFrom(result.model)
    r = dataclasses.replace(result, model=model)
    notes = Annotator(memo).annotate(r, MetadataEdits())
    dens, found = Propagator(shape_view(model), memo).run()
    return {"notes": notes, "model": model.SerializeToString(), "findings": finding_rows(Linter(memo).lint(model)),
            "winml": finding_rows(Linter(memo).lint(model, "winml")), "dens": dens,
            "propagated": finding_rows(found)}


def check_pins(graph, pin_steps) -> list[str]:
    """Convert after each pin step as the window does (one Reconverter), and compare the incremental pass (one Memo
    kept over the steps) with a whole one on each result; returns how shape inference was done at each step."""
    cache, memo = Reconverter(), Memo()
    transposes, how = set(), []
    for pins in [{}] + pin_steps:
        result = cache.convert(graph, pins=pins, check=False)
        transposes.add(result.transposes)
        got = passes(result, memo)
        assert got == passes(result, Memo()), pins
        if pins:
            assert memo.parsed < len(result.model.graph.node), pins     # most of the model was looked up, not read
        how.append(memo.inferred.how)
        if memo.inferred.how == "waves":                                # only the nodes the pin reached
            assert 0 < memo.inferred.redone < len(result.model.graph.node) // 4
    assert len(transposes) > 1                                          # the pins changed the graph
    return how


def generated(path, seed: int, n_ops: int = 60, dynamic_batch: bool = False):
    """A non-square net (H=6, W=10, C=3 then 5) of convolutions, skips, pools, a concat, a mean and a dense head;
    `dynamic_batch`: a batch of -1 in the signature (symbolic dims, so the checker runs shape inference)."""
    rng = random.Random(seed)
    b = ModelBuilder()
    sig = {"shape_signature": [-1, 6, 10, 3]} if dynamic_batch else {}
    x = b.input("x", [1, 6, 10, 3], **sig)
    w3 = b.const("w3", np.random.default_rng(seed).standard_normal((5, 3, 3, 3)).astype(np.float32) * 0.1)
    w5 = b.const("w5", np.random.default_rng(seed + 1).standard_normal((5, 3, 3, 5)).astype(np.float32) * 0.1)
    bias = b.const("bias", np.zeros(5, np.float32))
    shape = [1, 6, 10, 5]
    sig5 = {"shape_signature": [-1, 6, 10, 5]} if dynamic_batch else {}
    first = b.tensor("c0", shape, **sig5)
    b.op("CONV_2D", [x, w3, bias], [first], {"padding": "SAME"})
    made = [first]
    for i in range(n_ops):
        prev, y = made[-1], b.tensor(f"t{i}", shape, **sig5)
        kind = rng.random()
        if kind < 0.3:
            b.op("CONV_2D", [prev, w5, bias], [y], {"padding": "SAME"})
        elif kind < 0.55 and len(made) > 2:
            b.op("ADD", [prev, made[rng.randrange(max(0, len(made) - 10), len(made) - 1)]], [y])
        elif kind < 0.75:
            b.op("RELU", [prev], [y])
        elif kind < 0.9:
            b.op("AVERAGE_POOL_2D", [prev], [y], {"padding": "SAME", "filter_height": 3, "filter_width": 2})
        else:
            b.op("MAX_POOL_2D", [prev], [y], {"padding": "SAME", "filter_height": 2, "filter_width": 3})
        made.append(y)
    cat = b.tensor("cat", [1, 6, 10, 10])
    b.op("CONCATENATION", [made[-1], made[len(made) // 2]], [cat], {"axis": 3})
    mean = b.tensor("mean", [1, 1, 1, 10])
    b.op("MEAN", [cat, b.const("axes", np.array([1, 2], np.int32))], [mean], {"keep_dims": True})
    flat = b.tensor("flat", [1, 10])
    b.op("RESHAPE", [mean, b.const("shape", np.array([1, 10], np.int32))], [flat], {"new_shape": [1, 10]})
    b.output(flat, made[len(made) // 3])
    return load_model(b.save(path))


def conv_outputs(sg, k: int = 3) -> list[str]:
    ops = [op for op in sg.ops if op.opcode in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    return [sg.tensors[ops[len(ops) * (i + 1) // (k + 1)].outputs[0]].name for i in range(k)]


def steps(a, b, c) -> list[dict]:
    return [{a: "keep"}, {a: "keep", b: "NCHW"}, {b: "keep"}, {}, {c: "keep"}, {c: "keep", a: "keep"}]


@pytest.mark.parametrize("seed,dynamic", [(1, False), (2, True), (3, False)])
def test_incremental_pass_after_pins_is_the_whole_pass_on_generated_models(tmp_path, seed, dynamic):
    graph = generated(tmp_path / f"g{seed}.tflite", seed, dynamic_batch=dynamic)
    how = check_pins(graph, steps(*conv_outputs(graph.main)))
    assert "waves" in how                   # symbolic dims (dynamic) or a pin's new values without a value info


def test_incremental_pass_is_the_whole_pass_on_nasnet(corpus):
    graph = load_model(corpus / "keras/nasnetmobile_fp32.tflite")
    a, b, c = conv_outputs(graph.main)
    assert check_pins(graph, [{a: "keep"}, {a: "keep", b: "keep"}, {}, {c: "keep"}])[1:] == ["waves"] * 4


def test_incremental_pass_is_the_whole_pass_on_10000_ops(tmp_path):
    """gui_bench's synthetic model of 10,000 ops (a chain of 5x7x3 convolutions, adds, relus, pools)."""
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("gui_bench", Path(__file__).parent.parent / "bench" / "gui_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    graph = load_model(bench.synthetic(10_000, tmp_path / "s10k.tflite"))
    a, _, c = conv_outputs(graph.main)
    assert check_pins(graph, [{a: "keep"}, {}, {c: "keep"}]) == ["as declared", "waves", "as declared", "waves"]


# -- what the kept outcomes are keyed on: each change below alters findings while every node stays the same ---------

def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(nodes, inputs, outputs, inits=(), value_info=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(np.asarray(a), n) for n, a in inits],
                          value_info=value_info)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _denoted(m, **dims):
    MetadataEdits(dims={k: list(v) for k, v in dims.items()}).apply(m)
    return m


def _same_as_whole(models) -> list[list]:
    """Each model's checker findings with one Memo kept over the sequence; each must equal a whole pass's."""
    memo, out = Memo(), []
    for m in models:
        got = finding_rows(Linter(memo).lint(m))
        assert got == finding_rows(Linter(Memo()).lint(m))
        out.append(got)
    return out


def _add(b_shape, value_info_c=None):
    """x [1,3,4,6] NCHW + b: an Add whose broadcast axis of size 1 is no contradiction."""
    nodes = [helper.make_node("Add", ["x", "b"], ["c"], name="add"), helper.make_node("Relu", ["c"], ["y"], name="r")]
    vis = [_vi("c", value_info_c)] if value_info_c else []
    return _denoted(_model(nodes, [_vi("x", [1, 3, 4, 6]), _vi("b", b_shape)], [_vi("y", [1, 3, 4, 6])],
                           value_info=vis), x=[B, C, F, F], b=[B, F, C, F])


def test_a_changed_shape_under_an_unchanged_node_is_read_again():
    """The Add's bytes stay; only b's declared shape changes: size-1 axes broadcast (no finding), others clash."""
    ok, clash, ok_again = _same_as_whole([_add([1, 1, 1, 6]), _add([1, 3, 4, 6]), _add([1, 1, 1, 6])])
    assert not ok and not ok_again and any("axis" in row[1] for row in clash)


def test_changed_declared_denotations_under_unchanged_nodes_are_read_again():
    def pool(dens):
        nodes = [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], name="pool")]
        return _denoted(_model(nodes, [_vi("x", [1, 3, 4, 6])], [_vi("y", [1, 3, 3, 5])]), x=dens)
    clean, bad, clean_again = _same_as_whole([pool([B, C, F, F]), pool([B, F, F, C]), pool([B, C, F, F])])
    assert not clean and not clean_again and any(row[0] == "pool" for row in bad)


def test_a_changed_initializer_under_an_unchanged_node_is_read_again():
    """Resize's scales change: scaling only H and W is fine, scaling the channels is a finding."""
    def resize(scales):
        nodes = [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest", name="resize")]
        out = [int(d * s) for d, s in zip([1, 3, 4, 6], scales)]
        return _denoted(_model(nodes, [_vi("x", [1, 3, 4, 6])], [_vi("y", out)],
                               [("s", np.array(scales, np.float32))]), x=[B, C, F, F])
    fine, bad, fine_again = _same_as_whole([resize([1, 1, 2, 2]), resize([1, 2, 2, 2]), resize([1, 1, 2, 2])])
    assert not fine and not fine_again and any(row[0] == "resize" for row in bad)


def test_shapes_only_inference_gives_are_inferred_again_when_a_shape_changes():
    """'c' has no value info: its shape comes from shape inference, whose kept result must not outlive a change of
    b's shape (the Relu after it is unchanged, and reads c's shape to broadcast)."""
    def model(b_shape):
        nodes = [helper.make_node("Add", ["x", "b"], ["c"], name="add"),
                 helper.make_node("Add", ["c", "z"], ["y"], name="add2")]
        return _denoted(_model(nodes, [_vi("x", [1, 3, 1, 6]), _vi("b", b_shape), _vi("z", [1, 3, 4, 6])],
                               [_vi("y", [1, 3, 4, 6])]), x=[B, C, F, F], b=[B, C, F, F], z=[B, F, C, F])
    one, two = _same_as_whole([model([1, 3, 1, 6]), model([1, 3, 4, 6])])
    assert one and two and one != two      # c's axis 2 has size 1 in the first model only: no clash there


def test_a_type_change_is_inferred_again_down_to_where_it_stops_mattering():
    """x's declared shape changes; a, b and c have no value info, so inference gives their shapes: the waves must
    reach the Add reading c (its broadcast changes) and no further, and whole inference says the same."""
    def model(x_shape):
        nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["b"], name="r2"),
                 helper.make_node("Relu", ["b"], ["c"], name="r3"), helper.make_node("Add", ["c", "z"], ["y"], name="add")]
        nodes += [helper.make_node("Relu", [f"u{i}"], [f"u{i + 1}"], name=f"untouched{i}") for i in range(16)]
        return _denoted(_model(nodes, [_vi("x", x_shape), _vi("z", [1, 3, 4, 6]), _vi("u0", [1, 3, 4, 6])],
                               [_vi("y", [1, 3, 4, 6]), _vi("u16", [1, 3, 4, 6])]), x=[B, C, F, F], z=[B, F, C, F])
    memo = Memo()
    first = finding_rows(Linter(memo).lint(model([1, 3, 1, 6])))
    second = finding_rows(Linter(memo).lint(model([1, 3, 4, 6])))
    assert second == finding_rows(Linter(Memo()).lint(model([1, 3, 4, 6]))) and first != second
    assert memo.inferred.how == "waves" and memo.inferred.redone == 4         # r1, r2, r3, add; no 'untouched'


def test_changed_initializer_data_is_inferred_again():
    """Expand's target shape (an initializer) changes, nothing else: e's inferred shape, and so the Add's broadcast
    after it, must follow."""
    def model(target):
        nodes = [helper.make_node("Expand", ["x", "s"], ["e"], name="expand"),
                 helper.make_node("Add", ["e", "z"], ["y"], name="add")]
        nodes += [helper.make_node("Relu", [f"u{i}"], [f"u{i + 1}"], name=f"untouched{i}") for i in range(16)]
        return _denoted(_model(nodes, [_vi("x", [1, 3, 1, 6]), _vi("z", [1, 3, 4, 6]), _vi("u0", [1, 3, 4, 6])],
                               [_vi("y", [1, 3, 4, 6]), _vi("u16", [1, 3, 4, 6])], [("s", np.array(target, np.int64))]),
                        x=[B, C, F, F], z=[B, F, C, F])
    memo = Memo()
    first = finding_rows(Linter(memo).lint(model([1, 3, 1, 6])))
    second = finding_rows(Linter(memo).lint(model([1, 3, 4, 6])))
    assert second == finding_rows(Linter(Memo()).lint(model([1, 3, 4, 6]))) and first != second
    assert memo.inferred.how == "waves"


CHILD = """
import gc, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from inspector.gui import rerun_child as rc
rc._in_child = lambda: True                      # this process plays the loader's child
path = {path!r}
sg = rc._graph(path).main
convs = [sg.tensors[op.outputs[0]].name for op in sg.ops if op.opcode == "CONV_2D"]
gc.collect()
for pins in ({{}}, {{convs[1]: "keep"}}, {{}}, {{convs[1]: "keep"}}, {{convs[-1]: "NCHW"}}, {{}}):
    sent = rc.rerun(path, pins, {{}}, {{}})
    assert not gc.isenabled()                      # no automatic collection while the window waits...
    packed = rc.result_of(sent[0])
    assert packed[0] > sent[0] and not gc.isenabled()
    assert rc.CHILD.replaced                       # what they replaced is freed later, not while the window waits
    model, notes, mapping, findings = rc.annotated(sent[0])
    assert findings is not None                    # the Metadata dock's answer waits for no collection...
    assert rc.CHILD.replaced and not gc.isenabled()
    rc.finish()
    assert not rc.CHILD.replaced and gc.isenabled() and gc.get_freeze_count() > 0     # ...then what it keeps is frozen
assert isinstance(rc.rerun(path, {{"no such tensor": "keep"}}, {{}}, {{}}), str) and gc.isenabled()
from inspector.gui import graph_model
real, graph_model.from_onnx = graph_model.from_onnx, lambda model: 1 / 0
try:                                             # a failure after the conversion: collection back on too
    rc.rerun(path, {{convs[2]: "keep"}}, {{}}, {{}})
except ZeroDivisionError:
    pass
graph_model.from_onnx = real
assert gc.isenabled()
frozen = gc.get_freeze_count()
gc.unfreeze()
print(frozen, gc.collect())                      # ...and nothing it replaced was left as cyclic garbage
"""


def test_the_childs_reruns_freeze_what_they_keep_and_leave_no_cyclic_garbage(tmp_path):
    """rerun_child._settle: the re-run child's collector skips what a re-run keeps (its full collections scanned the
    whole model each re-run); frozen objects in reference cycles would never be freed, so the sequence of pins and
    undos must leave none behind. Automatic collection is off from a re-run's start until its last step (finish, after the metadata
    pass and findings), and back on after a re-run that failed (no findings follows it)."""
    import subprocess
    import sys
    from pathlib import Path
    path = tmp_path / "g.tflite"
    generated(path, 4)
    code = CHILD.format(root=str(Path(__file__).parent.parent), path=str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    frozen, garbage = map(int, out.stdout.split())
    assert frozen > 10_000 and garbage == 0


def test_a_rerun_called_in_this_process_freezes_nothing(tmp_path):
    """Only the loader's child freezes what a re-run keeps: a test or tool calling rerun() in its own process would
    otherwise have its whole heap frozen, its cyclic garbage kept until someone unfreezes."""
    import gc

    from inspector.gui import rerun_child as rc
    path = tmp_path / "g.tflite"
    generated(path, 4)
    before = gc.get_freeze_count()
    sent = rc.rerun(str(path), {}, {}, {})
    rc.result_of(sent[0])
    rc.annotated(sent[0])
    assert gc.get_freeze_count() == before


def test_a_big_constant_node_is_kept_once_by_the_memo():
    """A Constant node's record kept its parsed attributes beside the bytes that key it: two copies of its weights
    for as long as the Memo lives (ONNX models opened alone often hold their weights in Constant nodes; 20 records
    of a 4 MB Constant grew a fresh process by 68 MB that way). A big one now holds its bytes only, the Memo's key,
    and parses its attributes when asked."""
    from inspector.core.metadata.parsed import BIG_NODE, Node
    w = np.arange(4 << 18, dtype=np.float32).reshape(1, 512, 2048)        # 4 MB, non-square
    datas = [helper.make_node("Constant", [], [f"w{i}"], value=numpy_helper.from_array(w + i, f"w{i}"),
                              name=f"c{i}").SerializeToString() for i in range(20)]
    records = [Node(d) for d in datas]
    assert all(len(d) > BIG_NODE and r.data is d and r._attribute is None for r, d in zip(records, datas))
    got = numpy_helper.to_array(next(a.t for a in records[3].attribute if a.name == "value"))
    assert got.shape == (1, 512, 2048) and np.array_equal(got, w + 3)
    small = Node(helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(np.array([2, 3]), "a"))
                 .SerializeToString())
    assert [int(v) for v in numpy_helper.to_array(small.attribute[0].t)] == [2, 3]
