"""Proof you can trust: I/O layouts known rather than guessed (cubic shapes), a verdict that knows the model's own
noise floor, LiteRT's refusals as one line. Every reference is ai-edge-litert's interpreter, run by validate()."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from inspector.cli import main as cli
from inspector.core.emit import io_layout
from inspector.core.proof import noise
from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.proof.validate import validate, validate_files


def _save(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return read_tflite(path)


def _convs(shape, depth, gain, seed, gates=False) -> bytes:
    """`depth` 3x3 CONV_2Ds of random weights (std gain / sqrt(fan-in)); with `gates`, each output multiplied by a
    sigmoid of a steep 1x1 conv of itself (squeeze-excite-like gates, which amplify rounding)."""
    rng = np.random.default_rng(seed)
    c = shape[-1]
    b = ModelBuilder()
    x = b.input("x", shape)
    for i in range(depth):
        w = (rng.standard_normal((c, 3, 3, c)) * gain / np.sqrt(9 * c)).astype(np.float32)
        y = b.tensor(f"conv{i}", shape)
        bias = (rng.standard_normal(c) * 0.1).astype(np.float32)
        b.op("CONV_2D", [x, b.const(f"w{i}", w), b.const(f"b{i}", bias)], [y],
             {"padding": "SAME", "fused_activation_function": "NONE" if gates else "RELU"})
        if gates:
            z, g, m = b.tensor(f"logit{i}", shape), b.tensor(f"gate{i}", shape), b.tensor(f"gated{i}", shape)
            wg = (rng.standard_normal((c, 1, 1, c)) * 4).astype(np.float32)
            b.op("CONV_2D", [y, b.const(f"wg{i}", wg), b.const(f"bg{i}", np.zeros(c, np.float32))], [z],
                 {"padding": "SAME"})
            b.op("LOGISTIC", [z], [g])
            b.op("MUL", [y, g], [m])
            y = m
        x = y
    b.output(x)
    return b.build()


# -- layouts known, not guessed ------------------------------------------------------------------------------
def test_cubic_io_validates_from_files_as_in_process(tmp_path):
    """H == W == C: NHWC and NCHW have the same shape, so only the recorded layout tells them apart."""
    graph = _save(tmp_path, "cubic.tflite", _convs((1, 6, 6, 6), 2, 1.0, 0))
    result = convert(graph)
    rows = json.loads(next(p.value for p in result.model.metadata_props if p.key == io_layout.KEY))
    assert [(r["kind"], r["perm"], r["onnx_shape"]) for r in rows] == [("input", [0, 3, 1, 2], [1, 6, 6, 6]),
                                                                        ("output", [0, 3, 1, 2], [1, 6, 6, 6])]
    onnx.save(result.model, tmp_path / "cubic.onnx")
    own, files = validate(result, intermediates=False), validate_files(graph, str(tmp_path / "cubic.onnx"))
    assert own.verdict == files.verdict == "ok"
    assert [r["layout"] for r in files.io] == ["recorded", "recorded"]
    assert files.outputs[0].max_abs == pytest.approx(own.outputs[0].max_abs, abs=1e-6)


def _swap_kernel_axes(model: onnx.ModelProto) -> None:
    """A conversion bug: the first convolution's kernel with its spatial axes swapped (OIHW -> OIWH)."""
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    init = next(i for i in model.graph.initializer if i.name == conv.input[1])
    init.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(numpy_helper.to_array(init).swapaxes(2, 3)),
                                          init.name))


@pytest.mark.parametrize("recorded", [True, False])
def test_square_model_with_swapped_spatial_axes_fails(tmp_path, recorded):
    graph = _save(tmp_path, "cubic.tflite", _convs((1, 6, 6, 6), 2, 1.0, 0))
    model = convert(graph).model
    _swap_kernel_axes(model)
    if not recorded:
        props = [p for p in model.metadata_props if p.key != io_layout.KEY]
        del model.metadata_props[:]
        model.metadata_props.extend(props)
    onnx.save(model, tmp_path / "bad.onnx")
    v = validate_files(graph, str(tmp_path / "bad.onnx"))
    assert v.verdict == "fail" and not v.ok
    assert cli(["validate", str(tmp_path / "cubic.tflite"), str(tmp_path / "bad.onnx")]) == 1


def test_foreign_onnx_with_ambiguous_shapes_is_reported_ambiguous(tmp_path, capsys):
    graph = _save(tmp_path, "cubic.tflite", _convs((1, 6, 6, 6), 2, 1.0, 0))
    model = convert(graph).model
    props = [p for p in model.metadata_props if p.key != io_layout.KEY]   # as another converter would write it
    del model.metadata_props[:]
    model.metadata_props.extend(props)
    onnx.save(model, tmp_path / "foreign.onnx")
    code = cli(["validate", str(tmp_path / "cubic.tflite"), str(tmp_path / "foreign.onnx"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["verdict"] == "ok"
    assert [r["layout"] for r in out["io"]] == ["ambiguous", "ambiguous"]
    assert all(len(r["tried"]) == 6 and "NCHW" in r["tried"] and "NHWC" in r["tried"] for r in out["io"])
    assert out["io"][0]["perm"] == [0, 3, 1, 2]


@pytest.mark.parametrize("name", ["ops/conv-stride.float32.tflite", "ops/reshape-conv.float32.tflite"])
def test_corpus_models_with_cubic_io_validate_from_files_as_in_process(tmp_path, corpus, capsys, name):
    """The reported false FAIL: 1x16x16x16 outputs read as NHWC or NCHW alike; the recorded layout decides."""
    graph = _save(tmp_path, "m.tflite", (corpus / name).read_bytes())
    assert any(len(set(graph.main.tensors[t].shape[1:])) == 1 for t in graph.main.outputs)       # cubic
    own = validate(convert(graph), intermediates=False)
    assert cli(["convert", str(corpus / name), "-o", str(tmp_path / "m.onnx")]) == 0
    capsys.readouterr()
    assert cli(["validate", str(corpus / name), str(tmp_path / "m.onnx"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == own.verdict == "ok" and all(r["layout"] == "recorded" for r in out["io"])
    assert [r["max_abs"] for r in out["outputs"]] == pytest.approx([e.max_abs for e in own.outputs], abs=1e-6)


# -- the noise floor -----------------------------------------------------------------------------------------
def test_model_that_amplifies_rounding_is_ok_with_its_floor_reported(tmp_path, capsys):
    """Eight random 3x3 convs with steep sigmoid gates: LiteRT's own kernel families and a 1e-6 move of the input
    already disagree by more than the fixed tolerance, so the verdict rests on the floor."""
    graph = _save(tmp_path, "gated.tflite", _convs((1, 11, 9, 8), 8, 3.0, 0, gates=True))
    result = convert(graph)
    v = validate(result, seed=1, intermediates=False)
    (e,) = v.outputs
    assert e.floor is not None and e.floor / e.scale > v.rtol        # the model's own noise exceeds the tolerance
    assert e.max_rel > v.rtol                                        # a fixed tolerance would fail it: the floor decides
    assert e.verdict == "ok" and v.ok and e.max_abs <= noise.K * e.floor
    # from files, the command line says so and reports the floor and the ratio it was judged by
    onnx.save(result.model, tmp_path / "gated.onnx")
    args = ["validate", str(tmp_path / "gated.tflite"), str(tmp_path / "gated.onnx"), "--seed", "1"]
    assert cli(args) == 0
    line, *_, head = capsys.readouterr().out.splitlines()
    floor, ratio = (float(x) for x in re.search(r", floor (\S+), ratio (\S+),", line).groups())
    assert line.startswith("ok ") and floor / e.scale > v.rtol and 0 < ratio <= noise.K
    assert re.match(r"ok: worst error \S+ of the output's scale \(tolerance 0.0001, floor \S+\)$", head), head
    assert cli(args + ["--json"]) == 0
    (out,) = json.loads(capsys.readouterr().out)["outputs"]
    assert out["verdict"] == "ok" and out["floor"] == pytest.approx(floor, rel=1e-2) and out["ratio"] <= noise.K


@pytest.mark.parametrize("shift,verdict", [(0.0, "ok"), (1e-4, "suspicious"), (1e-2, "fail")])
def test_small_real_error_on_a_well_conditioned_net_is_not_ok(tmp_path, shift, verdict):
    """A bias off by 1e-4 of the output's scale is within the fixed tolerance (1e-4 of the scale + 1e-5), but far
    above this quiet model's floor: suspicious, not ok."""
    graph = _save(tmp_path, "quiet.tflite", _convs((1, 7, 5, 6), 2, 1.0, 3))
    result = convert(graph)
    scale = validate(result, intermediates=False).outputs[0].scale
    conv = [n for n in result.model.graph.node if n.op_type == "Conv"][-1]
    init = next(i for i in result.model.graph.initializer if i.name == conv.input[2])
    bias = numpy_helper.to_array(init).copy()
    bias[1] += np.float32(shift * scale)
    init.CopyFrom(numpy_helper.from_array(bias, init.name))
    v = validate(result, intermediates=False, floor=True)
    (e,) = v.outputs
    assert e.verdict == verdict and v.ok == (verdict == "ok"), (e.max_rel, e.floor, e.limit)
    assert e.floor is not None and e.floor < 1e-5 * e.scale          # well-conditioned: a quiet floor


# -- what LiteRT cannot run ----------------------------------------------------------------------------------
def _landmarks(b: ModelBuilder, x: int, out: int, subset: list[int], left: int, right: int, radians: float,
               height: int, width: int, scale: tuple[float, float]) -> None:
    """MediaPipe's Landmarks2TransformMatrix, a custom op LiteRT has no kernel for, from x to out."""
    from flatbuffers import flexbuffers
    opts = {"subset_idxs": subset, "left_rotation_idx": left, "right_rotation_idx": right,
            "target_rotation_radians": radians, "output_height": height, "output_width": width,
            "scale_x": scale[0], "scale_y": scale[1]}
    b.custom_op("Landmarks2TransformMatrix", [x], [out], bytes(flexbuffers.Dumps(opts)), version=2)


def _landmarks_model() -> bytes:
    """x [1, 7, 3] -> MUL -> ADD -> Landmarks2TransformMatrix (a MediaPipe op LiteRT has no kernel for)."""
    b = ModelBuilder()
    x = b.input("lm", (1, 7, 3))
    m, a, y = b.tensor("scaled", (1, 7, 3)), b.tensor("shifted", (1, 7, 3)), b.tensor("matrix", (1, 4, 4))
    b.op("MUL", [x, b.const("k", np.full((1, 1, 3), 50, np.float32))], [m])
    b.op("ADD", [m, b.const("c", np.full((1, 1, 3), 50, np.float32))], [a])
    _landmarks(b, a, y, [0, 3, 5, 6, 2], 2, 4, 0.3, 48, 64, (1.5, 1.25))
    b.output(y)
    return b.build()


def test_custom_op_litert_cannot_run_is_named_and_what_precedes_it_compared(tmp_path, capsys):
    graph = _save(tmp_path, "lm.tflite", _landmarks_model())
    result = convert(graph)
    v = validate(result)
    assert [e.name for e in v.intermediates] == ["scaled", "shifted"] and all(e.ok for e in v.intermediates)
    assert not v.ok and v.verdict == "fail"
    assert len(v.notes) == 1 and "Landmarks2TransformMatrix" in v.notes[0] and "cut before op 2" in v.notes[0]
    assert v.to_json()["cut"] == {"op": 2, "opcode": "Landmarks2TransformMatrix", "compared": 2, "ok": 2,
                                  "reason": "custom op Landmarks2TransformMatrix has no kernel in LiteRT"}
    onnx.save(result.model, tmp_path / "lm.onnx")
    files = validate_files(graph, str(tmp_path / "lm.onnx"))           # the same comparison from the files
    assert [(e.name, e.verdict) for e in files.intermediates] == [(e.name, e.verdict) for e in v.intermediates]
    assert files.notes == v.notes and files.verdict == v.verdict


def _conv_then_landmarks() -> bytes:
    """x [1, 7, 5, 3] -> 3x3 CONV_2D (channels-first in the ONNX file) -> RESHAPE [1, 35, 3] ->
    Landmarks2TransformMatrix: the tensors before the op LiteRT cannot run are in two layouts."""
    rng = np.random.default_rng(5)
    b = ModelBuilder()
    x = b.input("image", (1, 7, 5, 3))
    c, r, y = b.tensor("conv", (1, 7, 5, 3)), b.tensor("points", (1, 35, 3)), b.tensor("matrix", (1, 4, 4))
    w = (rng.standard_normal((3, 3, 3, 3)) * 20).astype(np.float32)
    b.op("CONV_2D", [x, b.const("w", w), b.const("b", np.full(3, 40, np.float32))], [c], {"padding": "SAME"})
    b.op("RESHAPE", [c, b.const("shape", np.asarray([1, 35, 3], np.int32))], [r], {"new_shape": [1, 35, 3]})
    _landmarks(b, r, y, [0, 9, 17, 30, 34], 1, 3, 0.0, 32, 24, (1.5, 1.5))
    b.output(y)
    return b.build()


def test_validate_from_files_cuts_before_an_op_litert_cannot_run_and_compares_what_precedes_it(tmp_path):
    """Through the real command line: the partial comparison, one note naming the op, exit 1 (the outputs are not
    proven), --json carrying it, no traceback."""
    import subprocess
    import sys
    graph = _save(tmp_path, "lm.tflite", _conv_then_landmarks())
    result = convert(graph)
    assert next(v for v in result.model.graph.value_info if v.name == "conv").type.tensor_type.shape.dim[1].dim_value \
        == 3                                            # channels-first in the file: its layout must be found
    onnx.save(result.model, tmp_path / "lm.onnx")

    def run(*extra):
        p = subprocess.run([sys.executable, "-m", "inspector", "validate", str(tmp_path / "lm.tflite"),
                            str(tmp_path / "lm.onnx"), *extra], capture_output=True, text=True, timeout=300)
        assert "Traceback" not in p.stderr and "error:" not in p.stderr, p.stderr
        return p
    p = run()
    lines = p.stdout.splitlines()
    assert p.returncode == 1, p.stdout
    assert lines[0] == "fail       matrix: not compared (computed after op 2, Landmarks2TransformMatrix)"
    assert [ln.split(":")[0].split() for ln in lines[1:3]] == [["ok", "conv"], ["ok", "points"]]
    assert lines[3] == ("note: custom op Landmarks2TransformMatrix has no kernel in LiteRT: the reference is cut "
                        "before op 2 (Landmarks2TransformMatrix); 2 tensors before it compared, the outputs not")
    assert lines[4].startswith("fail: outputs not compared (LiteRT cannot run op 2, Landmarks2TransformMatrix); "
                               "2 of 2 tensors before it ok") and len(lines) == 5
    out = json.loads(run("--json").stdout)
    assert out["cut"] == {"op": 2, "opcode": "Landmarks2TransformMatrix", "compared": 2, "ok": 2,
                          "reason": "custom op Landmarks2TransformMatrix has no kernel in LiteRT"}
    assert out["verdict"] == "fail" and not out["ok"] and out["outputs"][0]["max_abs"] is None
    assert [(r["name"], r["onnx_name"], r["verdict"]) for r in out["intermediates"]] == [
        ("conv", "conv", "ok"), ("points", "points", "ok")]
    assert all(r["floor"] is not None and r["max_rel"] < 1e-5 for r in out["intermediates"])

    # compare (and the window's Open Pair, which shares validate_pair) cuts the same way
    p = subprocess.run([sys.executable, "-m", "inspector", "compare", str(tmp_path / "lm.tflite"),
                        str(tmp_path / "lm.onnx"), "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    pv = json.loads(p.stdout)["validation"]
    assert pv["cut"]["opcode"] == "Landmarks2TransformMatrix" and pv["notes"] == [lines[3][len("note: "):]]
    assert [(r["name"], r["ok"], r["layout"]) for r in pv["tensors"]] == [("conv", True, [0, 3, 1, 2]),
                                                                         ("points", True, [0, 2, 1])]

    # another converter's names (conv -> conv_nchw): paired as `compare` pairs them, not by exact name
    renamed = onnx.ModelProto()
    renamed.CopyFrom(result.model)
    for n in renamed.graph.node:
        n.input[:] = ["conv_nchw" if x == "conv" else x for x in n.input]
        n.output[:] = ["conv_nchw" if x == "conv" else x for x in n.output]
    for vi in renamed.graph.value_info:
        vi.name = "conv_nchw" if vi.name == "conv" else vi.name
    onnx.save(renamed, tmp_path / "other.onnx")
    p = subprocess.run([sys.executable, "-m", "inspector", "validate", str(tmp_path / "lm.tflite"),
                        str(tmp_path / "other.onnx"), "--json"], capture_output=True, text=True, timeout=300)
    assert [(r["name"], r["onnx_name"], r["verdict"]) for r in json.loads(p.stdout)["intermediates"]] == [
        ("conv", "conv_nchw", "ok"), ("points", "points", "ok")]

    # A wrong conversion before the cut: the conv's kernel with its spatial axes swapped fails there.
    _swap_kernel_axes(result.model)
    onnx.save(result.model, tmp_path / "lm.onnx")
    p = run()
    assert p.returncode == 1
    assert p.stdout.splitlines()[1].startswith("fail       conv: ") and "first bad: 'conv' (fail)" in p.stdout


def test_a_long_cut_prints_only_the_tensors_not_ok(tmp_path, capsys):
    """24 ops before the op LiteRT cannot run: one line per tensor would bury the headline; beyond MAX_CUT_LINES
    only those not ok are listed (here the one a wrong constant breaks), and a count of the rest."""
    from inspector.cli.validate import MAX_CUT_LINES
    b = ModelBuilder()
    x = b.input("lm", (1, 7, 3))
    for i in range(24):
        y = b.tensor(f"t{i}", (1, 7, 3))
        b.op("ADD", [x, b.const(f"c{i}", np.full((1, 1, 3), i + 1, np.float32))], [y])
        x = y
    out = b.tensor("matrix", (1, 4, 4))
    _landmarks(b, x, out, [0, 3, 5, 6, 2], 2, 4, 0.0, 8, 8, (1.0, 1.0))
    b.output(out)
    graph = _save(tmp_path, "long.tflite", b.build())
    model = convert(graph).model
    init = next(i for i in model.graph.initializer if i.name == "c20")
    init.CopyFrom(numpy_helper.from_array(np.full((1, 1, 3), 99, np.float32), "c20"))     # t20 onwards wrong
    onnx.save(model, tmp_path / "long.onnx")
    assert cli(["validate", str(tmp_path / "long.tflite"), str(tmp_path / "long.onnx")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert 24 > MAX_CUT_LINES and len(lines) == 1 + 4 + 3
    assert [ln.split(":")[0].split() for ln in lines[1:5]] == [["fail", f"t{i}"] for i in (20, 21, 22, 23)]
    assert lines[5] == "... and 20 more tensors before op 24, all ok"
    worst = re.search(r"20 of 24 tensors before it ok, worst 't20' (\S+) of its scale; first bad: 't20' \(fail\)$",
                      lines[7])
    assert worst and float(worst.group(1)) == pytest.approx((99 - 21) / 231, rel=0.01)     # 1 + ... + 21 = 231


def test_litert_refusing_bad_kernel_parameters_is_one_error_line(tmp_path, capsys):
    """A RESHAPE whose new shape does not hold its input's elements: LiteRT refuses it while preparing."""
    b = ModelBuilder()
    x = b.input("x", (1, 4, 6))
    y = b.tensor("y", (5, 5))
    b.op("RESHAPE", [x, b.const("shape", np.asarray([5, 5], np.int32))], [y], {"new_shape": [5, 5]})
    b.output(y)
    (tmp_path / "bad.tflite").write_bytes(b.build())
    onnx.save(onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 6])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [5, 5])])), tmp_path / "bad.onnx")
    code = cli(["validate", str(tmp_path / "bad.tflite"), str(tmp_path / "bad.onnx")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.startswith("error: LiteRT cannot run the model: RESHAPE (op 0): ") and "24 != 25" in err


# -- Model Explorer ------------------------------------------------------------------------------------------
def test_model_explorer_node_data_carries_each_tensors_error_for_both_graphs(tmp_path, capsys):
    from inspector.core.proof.node_data import graph_data
    graph = _save(tmp_path, "m.tflite", _convs((1, 7, 5, 6), 3, 1.0, 4))
    result = convert(graph)
    onnx.save(result.model, tmp_path / "m.onnx")
    code = cli(["validate", str(tmp_path / "m.tflite"), str(tmp_path / "m.onnx"), "--model-explorer",
                str(tmp_path / "me")])
    out = capsys.readouterr().out
    me = (tmp_path / "me").resolve()
    assert code == 0 and "Model Explorer: both models and each of" in out
    assert f"model-explorer {me}/model.tflite,{me}/model.onnx --extensions=model_explorer_onnx " \
           f"--node_data_paths={me}/errors.json" in out
    assert sorted(p.name for p in me.iterdir()) == ["errors.json", "mapping.json", "model.onnx", "model.tflite",
                                                    "sync.json"]
    assert (me / "model.tflite").read_bytes() == (tmp_path / "m.tflite").read_bytes()
    errors, mapping = (json.loads((me / f).read_text()) for f in ("errors.json", "mapping.json"))
    assert sorted(errors) == ["m", "main"]                  # keyed by graph id: the ONNX graph's name, TFLite's main
    tfl, onx = errors["main"], errors["m"]
    names = {t.name for t in graph.main.tensors}
    assert set(tfl["results"]) == {"conv0", "conv1", "conv2"} <= names
    writer = {v: n.name for n in result.model.graph.node for v in n.output}     # ONNX nodes by name
    compared = {writer[v] for t in ("conv0", "conv1", "conv2") for v in mapping["tensors"][t][:1] if v in writer}
    assert len(compared) == 3 and compared <= set(onx["results"]) <= set(writer.values())
    assert all(-12 <= r["value"] < -4 for r in tfl["results"].values())      # log10 of a float32-level error
    assert [g["stop"] for g in tfl["gradient"]][0] == 0 and tfl["gradient"][-1]["stop"] == 1
    assert mapping["tensors"]["conv2"] and all(mapping["ops"].values())
    # generic: any value per node, explicit colours where given
    data = graph_data({"a": "NCHW", "b": "NHWC"}, colours={"a": "#00ff00"})
    assert data == {"results": {"a": {"value": "NCHW", "bgColor": "#00ff00"}, "b": {"value": "NHWC"}}}


# -- streaming -----------------------------------------------------------------------------------------------
def test_steps_feed_the_state_back_and_compare_each_call(tmp_path, capsys):
    """A buffer and a counter in resource variables: LiteRT keeps them across calls in one interpreter; the ONNX
    model gets state_out:* back as state:*. Without that feedback the counter is wrong from the second step."""
    from inspector.core.proof.steps import validate_steps

    from .test_control_flow import state_model
    graph = _save(tmp_path, "s.tflite", state_model())
    result = convert(graph)
    steps = validate_steps(result, 4)
    assert [v.verdict for v in steps] == ["ok"] * 4 and [v.seed for v in steps] == [0, 1, 2, 3]
    result = dataclasses.replace(result, state=[])     # no feedback: every call starts from the initial state
    assert [v.verdict for v in validate_steps(result, 3)] == ["ok", "fail", "fail"]
    onnx.save(convert(graph).model, tmp_path / "s.onnx")
    assert cli(["validate", str(tmp_path / "s.tflite"), str(tmp_path / "s.onnx"), "--steps", "3"]) == 0
    assert [ln.split(":")[0] for ln in capsys.readouterr().out.splitlines()] == ["step 1", "step 2", "step 3"]


# -- docs/proof.md -----------------------------------------------------------------------------------------------
def test_the_proof_docs_say_what_each_verdict_means_with_a_command_that_shows_it(tmp_path, corpus, capsys):
    """The verdict table states noise.py's rule with its constants, every `-k` it names selects a test here (the
    parametrised cases with the verdict claimed), and its `ok` command, run, gives the headline it quotes."""
    import sys
    text = (Path(__file__).parents[1] / "docs" / "proof.md").read_text()
    proof = text.split("\n## Conformance", 1)[0]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(ok|suspicious|fail)` \| ([^|]+) \|", proof, re.M)}
    k, far = f"{noise.K:g}", f"{noise.FAR:g}"
    assert rows["ok"].startswith(f"error ≤ max(tolerance, {k} × floor), and not suspicious")
    assert rows["suspicious"].startswith(f"within the tolerance, but over {far} × the typical noise (the median of "
                                         f"the measures) of a quiet model ({k} × floor below the tolerance)")
    assert rows["fail"].startswith(f"error > max(tolerance, {k} × floor)")
    assert "`rtol` = 1e-4 for float models" in proof and "rtol · scale + 1e-5" in proof
    from inspector.core.proof.validate import ATOL, RTOL
    assert (RTOL["float"], ATOL) == (1e-4, 1e-5)
    tests = [name for name in dir(sys.modules[__name__]) if name.startswith("test_")]
    selectors = re.findall(r"-k (\w+)", proof)
    assert {"amplifies", "small_real_error", "swapped", "cuts_before"} <= set(selectors)
    assert all(any(sel in t for t in tests) for sel in selectors), selectors
    assert "its `1e-4` case" in proof and "the same test's `1e-2` case" in proof
    cases = dict(test_small_real_error_on_a_well_conditioned_net_is_not_ok.pytestmark[0].args[1])
    assert (cases[1e-4], cases[1e-2]) == ("suspicious", "fail")     # the cases the table points at
    convert_cmd, validate_cmd, quoted = re.search(r"`layout-inspector (convert [^;`]+); layout-inspector "
                                                  r"(validate [^`]+)` → `([^`]+)`", proof).groups()
    here = lambda word: str(corpus / word) if word.startswith("ops/") else str(tmp_path / word)   # noqa: E731
    assert cli([here(w) if "." in w else w for w in convert_cmd.split()]) == 0
    capsys.readouterr()
    assert cli([here(w) if "." in w else w for w in validate_cmd.split()]) == 0
    head = capsys.readouterr().out.splitlines()[-1]
    shape = re.escape(quoted)
    for number in re.findall(r"\d+\.\d+e-\d+", quoted):
        shape = shape.replace(re.escape(number), r"\S+", 1)
    assert re.fullmatch(shape, head), (quoted, head)
