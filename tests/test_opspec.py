"""One spec per op (issue 34): what the converter knows about a TFLite op is its `OpSpec`. The tables that must
stay in a lower layer (the IR cannot import the emitter) and the kernels' own tables are checked against the specs
here, so that a name added to one and not the other fails."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import onnx.defs
import pytest

from inspector.core.emit.ops import quant_tables, registry, table
from inspector.core.emit.ops.families import FAMILIES, FAMILY
from inspector.core.emit.ops.registry import OpSpec, op
from inspector.core.ir import shape_rules, shapes
from inspector.core.layout.plan import Category

from .conftest import ROOT

SPECS = table.load_all()


def named(fact) -> set[str]:
    return {name for name, spec in SPECS.items() if fact(spec)}


def test_every_shape_rule_and_constant_evaluation_belongs_to_a_registered_op():
    for side_table in (shape_rules.RULES, shapes.VALUES, shapes.ARITY):
        assert set(side_table) - set(SPECS) == set()
    assert set(shapes.ARITY) <= set(shapes.VALUES)
    assert SPECS["CONV_2D"].shape_rule is shape_rules.conv2d
    assert SPECS["RESHAPE"].value_rule is shapes.VALUES["RESHAPE"]
    assert SPECS["WHILE"].shape_rule is None and SPECS["WHILE"].value_rule is None


def test_an_int8_table_op_is_a_same_shape_unary_op_with_a_real_form():
    tabled = named(lambda s: s.int8_table)
    assert tabled == set(quant_tables.REAL_FORMS)
    assert set(quant_tables.FLOAT_TWINS) <= tabled
    assert all(SPECS[n].shape_rule is shape_rules.same for n in tabled)
    assert {"LOGISTIC", "TANH", "HARD_SWISH"} <= tabled and "RELU" not in tabled


def test_facts_that_only_mean_something_together_come_together():
    assert named(lambda s: not s.int16_kernel) <= named(lambda s: s.quantized == "moves")
    assert named(lambda s: s.complex_pairs) <= named(lambda s: s.quantized == "moves")
    assert named(lambda s: s.copies_integers) <= named(lambda s: s.quantized == "moves")
    assert all(set(s.copies_integers) <= {"int8", "uint8", "int16"} for s in SPECS.values())
    assert named(lambda s: s.passes_values) <= named(lambda s: s.quantized != "dequantize")
    assert named(lambda s: s.hybrid) <= named(lambda s: s.exact_int)
    assert named(lambda s: s.reframes) == {"RESHAPE", "TRANSPOSE"}
    assert named(lambda s: s.writes_nothing) == {"ASSIGN_VARIABLE", "CALL_ONCE"}
    assert named(lambda s: s.sign == "nonnegative") == {"RELU", "RELU6", "RELU_0_TO_1"}
    for name in named(lambda s: s.indexes is not None):
        at, tbl, axis = SPECS[name].indexes
        assert at != tbl and (axis is None or tbl is not None), name


def test_layout_facts_match_the_category():
    for name, spec in SPECS.items():
        assert (spec.rule is not None) >= (spec.category is Category.ATTRIBUTE), name
        assert spec.layout_inputs and min(spec.layout_inputs) >= 0, name


def test_every_onnx_type_a_spec_names_exists_and_every_kernel_wraps_a_registered_op():
    assert [(n, t) for n, s in SPECS.items() for t in s.onnx if not onnx.defs.has(t)] == []
    assert set(table.KERNELS) <= set(SPECS)
    assert table.kernels(SPECS["TANH"])[-1] is quant_tables.exact_table
    assert len(table.kernels(SPECS["RESHAPE"])) == 1 and table.kernels(SPECS["ADD"]) == ()


def test_a_spec_is_frozen_and_an_op_registers_once():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SPECS["ADD"].category = Category.TERMINATE          # type: ignore[misc]
    with pytest.raises(RuntimeError, match="ADD registered twice"):
        op("ADD", category=Category.TRANSPARENT)(lambda ctx, o: None)
    assert isinstance(registry.OPS["ADD"], OpSpec)
    with pytest.raises(TypeError):
        op("NOT_AN_OP_FOR_THIS_TEST", category=Category.TRANSPARENT, keeps_sign=True)(lambda ctx, o: None)
    registry.OPS.pop("NOT_AN_OP_FOR_THIS_TEST", None)



REGISTERED = ("import importlib, json, os, pkgutil, sys\n"
              "from inspector.core.emit.ops import families, registry\n"
              "package = 'inspector.core.emit.ops'\n"
              "def registered(modules):      # the ops that importing `modules` registers, in a forked interpreter\n"
              "    r, w = os.pipe()\n"
              "    if os.fork() == 0:\n"
              "        for m in modules:\n"
              "            importlib.import_module(f'{package}.{m}')\n"
              "        os.write(w, json.dumps(sorted(registry.OPS)).encode())\n"
              "        os._exit(0)\n"
              "    os.close(w)\n"
              "    with os.fdopen(r) as f:\n"
              "        return json.loads(f.read())\n"
              "every = [m.name for m in pkgutil.iter_modules(importlib.import_module(package).__path__)]\n"
              "print(json.dumps({'all': registered(every), 'each': {f: registered([f]) for f in families.FAMILIES}}))\n")


def test_the_family_index_names_the_module_that_registers_each_op():
    """table.load imports an op's family from families.FAMILY alone: every op any module of the package registers
    is in the index, under a module whose import registers it (each family imported alone, in a fresh process)."""
    out = subprocess.run([sys.executable, "-c", REGISTERED], capture_output=True, text=True, cwd=ROOT, timeout=300)
    got = json.loads(out.stdout.splitlines()[-1]) if out.returncode == 0 else None
    assert got, out.stderr
    assert set(got["all"]) == set(FAMILY) and len(FAMILY) == sum(len(names) for names in FAMILIES.values())
    assert {f: sorted(set(names) - set(got["each"][f])) for f, names in FAMILIES.items()} == \
        {f: [] for f in FAMILIES}
    assert set(SPECS) == set(FAMILY)
