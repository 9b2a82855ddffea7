"""inspector/core/io/tflite_schema.py is derived from the `tflite` package's generated readers (field slots, scalar
types, defaults, enum names), so the reader never imports that package (~45 ms of every CLI start).

This test regenerates the table and fails when it drifts from the package; `python tests/test_tflite_schema.py`
rewrites it after a `tflite` upgrade.
"""
from __future__ import annotations

import pprint
import re
import sys
from pathlib import Path

import flatbuffers.number_types as N
import tflite
from tflite.utils import BUILTIN_OPCODE2NAME

from inspector.core.io.tflite_reader import option_fields as accessor_fields
from inspector.core.io.tflite_reader import _slot

TARGET = Path(__file__).resolve().parent.parent / "inspector" / "core" / "io" / "tflite_schema.py"
# Tables the reader walks field by field (options tables are described separately, by union type).
TABLES = ["Model", "SubGraph", "Tensor", "Operator", "OperatorCode", "Buffer", "QuantizationParameters",
          "SparsityParameters", "DimensionMetadata", "Int32Vector", "Uint16Vector", "Uint8Vector", "Metadata",
          "SignatureDef", "TensorMap"]
ENUM_FIELDS = {
    "padding": "Padding", "fused_activation_function": "ActivationFunctionType", "mode": "MirrorPadMode",
    "combiner": "CombinerType", "type": "LSHProjectionType", "kernel_type": "LSTMKernelType",
    "weights_format": "FullyConnectedOptionsWeightsFormat",
}
DTYPES = {
    "FLOAT32": "float32", "FLOAT16": "float16", "INT32": "int32", "UINT8": "uint8", "INT64": "int64",
    "STRING": "string", "BOOL": "bool", "INT16": "int16", "COMPLEX64": "complex64", "INT8": "int8",
    "FLOAT64": "float64", "COMPLEX128": "complex128", "UINT64": "uint64", "RESOURCE": "resource",
    "VARIANT": "variant", "UINT32": "uint32", "UINT16": "uint16", "INT4": "int4", "BFLOAT16": "bfloat16",
}
_SKIP = re.compile(r"^(Init|GetRootAs.*|.*BufferHasIdentifier|.*Length|.*IsNone|.*AsNumpy)$")
_FLAGS = {name: getattr(N, name).packer_type.format for name in dir(N) if name.endswith("Flags")
          and name != "UOffsetTFlags" and hasattr(getattr(N, name), "packer_type")}


def _enum(cls) -> dict[int, str]:
    return {v: k for k, v in vars(cls).items() if not k.startswith("_")}


def _flag(fn) -> str:
    names = [n for n in fn.__code__.co_names if n in _FLAGS]
    assert len(names) == 1, (fn, fn.__code__.co_names)
    return _FLAGS[names[0]]


def _empty(cls):
    """An instance over a table with no fields present: every accessor returns its default."""
    obj = cls()
    obj.Init(bytearray(b"\x04\x00\x04\x00\x04\x00\x00\x00"), 4)
    return obj


def _fields(cls) -> tuple:
    """(snake_name, slot, kind, default) per field, sorted by name as the options dict is. kind: a struct
    format for scalars, 's' for strings, 'v' + a numpy dtype for scalar vectors, 't' for a sub-table."""
    out = []
    empty = _empty(cls)
    for snake, name, vector in accessor_fields(cls):
        fn = getattr(cls, name)
        if vector:
            out.append((snake, _slot(cls, name), "v" + _flag(getattr(cls, name + "AsNumpy")), None))
            continue
        names = fn.__code__.co_names
        kind = "s" if "String" in names else "t" if "Indirect" in names else _flag(fn)
        out.append((snake, _slot(cls, name), kind, getattr(empty, name)()))
    return tuple(out)


def _options(union) -> dict:
    out = {}
    for code, name in sorted(_enum(union).items()):
        cls = getattr(tflite, name, None)
        out[code] = (name, _fields(cls) if cls is not None and name != "NONE" else None)
    return out


def _table_slots(name: str) -> dict[str, int]:
    cls = getattr(tflite, name)
    return {acc: _slot(cls, acc) for acc, fn in vars(cls).items()
            if callable(fn) and not acc.startswith("_") and not _SKIP.match(acc)}


def generate() -> str:
    assert BUILTIN_OPCODE2NAME == _enum(tflite.BuiltinOperator)
    parts = {
        "BUILTIN_OPERATORS": dict(sorted(BUILTIN_OPCODE2NAME.items())),
        "CUSTOM": tflite.BuiltinOperator.CUSTOM,
        "TENSOR_TYPES": {v: DTYPES.get(k, k.lower()) for v, k in sorted(_enum(tflite.TensorType).items())},
        "ENUM_NAMES": {f: dict(sorted(_enum(getattr(tflite, c)).items())) for f, c in ENUM_FIELDS.items()},
        "OPTIONS": _options(tflite.BuiltinOptions),
        "OPTIONS2": _options(tflite.BuiltinOptions2),
        "SLOTS": {name: _table_slots(name) for name in TABLES},
    }
    body = "\n\n".join(f"{k} = {pprint.pformat(v, width=118, sort_dicts=False)}" for k, v in parts.items())
    return ('"""TFLite schema facts the reader needs: operator and type names, option fields (name, vtable slot, kind,\n'
            "default), table slots. Generated from the `tflite` package by tests/test_tflite_schema.py; do not edit.\n"
            "\nA field kind is a struct format for a scalar, 's' a string, 'v<dtype>' a vector, 't' a sub-table.\n"
            '"""\n# flake8: noqa\n\n' + body + "\n")


def test_schema_table_matches_the_tflite_package():
    assert TARGET.read_text() == generate(), "run `python tests/test_tflite_schema.py` to regenerate"


def test_reader_does_not_import_tflite():
    import subprocess
    code = ("import sys; from inspector.core.io.tflite_reader import read_tflite; "
            "print(sorted(m for m in sys.modules if m == 'tflite' or m.startswith('tflite.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


if __name__ == "__main__":
    TARGET.write_text(generate())
    print(f"wrote {TARGET}")
