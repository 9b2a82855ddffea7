"""Convolutions, pools and resizes (Implicit ops) against LiteRT, several attribute variants each; and the
coverage rule: every builtin op in the registry has a conformance row (here or in the family tables)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from inspector.cli import main
from inspector.cli.ops import BUILTINS, support_table
from inspector.core.io.tflite_reader import read_tflite_bytes
from tests import test_ops_elementwise, test_ops_indexing, test_ops_reduce, test_ops_shape, test_ops_signal, \
    test_ops_spatial
from tests.opcase import C, Case, In, check, single, uni


def conv(opcode, x_shape, w_shape, out_shape, padding, stride, dilation=(1, 1), act="NONE"):
    def make(rng):
        opts = {"padding": padding, "stride_h": stride[0], "stride_w": stride[1],
                "dilation_h_factor": dilation[0], "dilation_w_factor": dilation[1], "fused_activation_function": act}
        if opcode == "DEPTHWISE_CONV_2D":
            opts["depth_multiplier"] = w_shape[3] // x_shape[3]
        b = C(uni(rng, (w_shape[3] if opcode != "CONV_2D" else w_shape[0],)))      # LiteRT requires the bias
        return single(opcode, [In(uni(rng, x_shape)), C(uni(rng, w_shape)), b], [(out_shape, "float32")], opts)
    return Case(f"{opcode}-{w_shape}-{padding}-s{stride}-d{dilation}-{act}", make, permuted=True, rtol=1e-4)


def tconv(x_shape, w_shape, out_shape, padding, stride, bias):
    def make(rng):
        ins = [C(out_shape, "int32"), C(uni(rng, w_shape)), In(uni(rng, x_shape))] + \
              ([C(uni(rng, (w_shape[0],)))] if bias else [])
        return single("TRANSPOSE_CONV", ins, [(out_shape, "float32")],
                      {"padding": padding, "stride_h": stride[0], "stride_w": stride[1]})
    return Case(f"TRANSPOSE_CONV-{w_shape}-{padding}-s{stride}{'-bias' if bias else ''}", make, rtol=1e-4)


def pool(opcode, x_shape, k, stride, padding, out_shape, act="NONE"):
    return Case(f"{opcode}-k{k}-s{stride}-{padding}-{act}", lambda rng: single(
        opcode, [In(uni(rng, x_shape), True)], [(out_shape, "float32")],
        {"padding": padding, "stride_h": stride[0], "stride_w": stride[1], "filter_height": k[0],
         "filter_width": k[1], "fused_activation_function": act}), permuted=True, rtol=1e-4)


def resize(opcode, x_shape, size, align, half):
    return Case(f"{opcode}-{size}-a{int(align)}-h{int(half)}", lambda rng: single(
        opcode, [In(uni(rng, x_shape), True), C(size, "int32")], [((x_shape[0], *size, x_shape[3]), "float32")],
        {"align_corners": align, "half_pixel_centers": half}), permuted=True, rtol=1e-4)


X = (1, 7, 9, 3)
CASES = [
    conv("CONV_2D", X, (4, 3, 3, 3), (1, 7, 9, 4), "SAME", (1, 1)),
    conv("CONV_2D", X, (5, 2, 3, 3), (1, 3, 4, 5), "VALID", (2, 2), act="RELU6"),
    conv("CONV_2D", X, (2, 3, 2, 3), (1, 4, 5, 2), "SAME", (2, 2)),
    conv("DEPTHWISE_CONV_2D", X, (1, 2, 3, 3), (1, 7, 9, 3), "SAME", (1, 1), dilation=(2, 2)),
    conv("CONV_2D", X, (4, 3, 3, 3), (1, 7, 9, 4), "SAME", (1, 1), dilation=(2, 3), act="RELU"),
    conv("DEPTHWISE_CONV_2D", X, (1, 3, 3, 3), (1, 7, 9, 3), "SAME", (1, 1)),
    conv("DEPTHWISE_CONV_2D", X, (1, 3, 2, 6), (1, 3, 4, 6), "VALID", (2, 2), act="RELU"),
    tconv((1, 4, 5, 3), (2, 3, 3, 3), (1, 8, 10, 2), "SAME", (2, 2), True),
    tconv((1, 4, 5, 3), (4, 2, 3, 3), (1, 5, 7, 4), "VALID", (1, 1), False),
    pool("MAX_POOL_2D", X, (2, 2), (2, 2), "SAME", (1, 4, 5, 3)),
    pool("MAX_POOL_2D", X, (3, 2), (1, 2), "VALID", (1, 5, 4, 3), "RELU"),
    pool("AVERAGE_POOL_2D", X, (3, 3), (2, 2), "SAME", (1, 4, 5, 3)),
    pool("AVERAGE_POOL_2D", X, (2, 3), (1, 1), "VALID", (1, 6, 7, 3)),
    pool("L2_POOL_2D", X, (2, 2), (2, 2), "SAME", (1, 4, 5, 3)),
    resize("RESIZE_BILINEAR", (1, 4, 5, 3), (7, 11), False, False),
    resize("RESIZE_BILINEAR", (1, 4, 5, 3), (8, 10), False, True),
    resize("RESIZE_BILINEAR", (1, 4, 5, 3), (7, 9), True, False),
    resize("RESIZE_NEAREST_NEIGHBOR", (1, 4, 5, 3), (8, 15), False, False),
    resize("RESIZE_NEAREST_NEIGHBOR", (1, 4, 5, 3), (7, 11), False, True),
    resize("RESIZE_NEAREST_NEIGHBOR", (1, 4, 5, 3), (7, 9), True, False),
]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_implicit_op_matches_litert(case):
    check(case)


TABLES = [test_ops_elementwise.CASES, test_ops_indexing.CASES, test_ops_reduce.CASES, test_ops_reduce.WINDOW_CASES,
          test_ops_reduce.SPARSE_CASES, test_ops_shape.CASES, test_ops_signal.CASES, test_ops_spatial.CASES, CASES]
# Families with their own test modules: control flow and variables (test_control_flow), sequence ops,
# quantization, and custom ops (test_custom_ops).
ELSEWHERE_MODULES = ("control_flow", "variables", "sequence", "quant", "custom", "mediapipe")


def covered_opcodes() -> set[str]:
    seen = set()
    for table in TABLES:
        for case in table:
            b, _ = case.make(np.random.default_rng(0))
            seen.update(o.opcode for o in read_tflite_bytes(b.build(), case.id).main.ops)
    return seen


def test_every_registered_builtin_has_a_conformance_model():
    from inspector.core.emit.ops.table import load_all
    table = load_all()
    def module(fn):
        return getattr(fn, "func", fn).__module__          # functools.partial emitters name their function's

    mine = {name for name, rule in table.items() if name in BUILTINS
            and not any(m in module(rule.emit) for m in ELSEWHERE_MODULES)}
    untested = sorted(mine - covered_opcodes() - {"DENSIFY"})     # DENSIFY: folded, see test below
    assert not untested, f"registered builtins without a single-op conformance model: {untested}"


def test_densify_of_an_activation_is_refused():
    from inspector.core.emit.convert import convert
    from inspector.core.ir.errors import ConversionError
    b, _ = single("DENSIFY", [In(np.zeros((3, 4), np.float32))], [((3, 4), "float32")])
    with pytest.raises(ConversionError, match="DENSIFY#0: input x0 is not a constant sparse tensor"):
        convert(read_tflite_bytes(b.build(), "densify.tflite"))


def test_ops_json_lists_registry(capsys):
    assert main(["ops", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(set(r) == {"op", "category", "onnx"} for r in rows)
    assert {r["category"] for r in rows} <= {"Implicit", "Transparent", "Attribute", "Terminate"}
    by_op = {r["op"]: r for r in rows}
    assert by_op["DEPTH_TO_SPACE"]["category"] == "Implicit" and by_op["DEPTH_TO_SPACE"]["onnx"] == ["DepthToSpace"]
    assert by_op["L2_NORMALIZATION"]["category"] == "Attribute"
    assert by_op["MEAN"]["category"] == "Attribute"
    builtin = [r for r in rows if r["op"] in BUILTINS and not r["op"].startswith("STABLEHLO_")]
    assert len(builtin) >= 140, f"only {len(builtin)} builtin ops registered"
    assert [r["op"] for r in rows] == sorted(by_op)


def test_ops_text_and_markdown_agree_with_table(capsys):
    assert main(["ops", "--markdown", "--builtin"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = support_table(builtin_only=True)
    assert lines[0].startswith("| TFLite op |") and len(lines) == 2 + len(table)
    assert all(f"| {r['op']} | {r['category']} |" in line for r, line in zip(table, lines[2:]))
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert f"{len(support_table())} operators" in out
