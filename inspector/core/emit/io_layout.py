"""The `layout_inspector.io` metadata entry: for every graph input and output of a model we write, its TFLite
tensor, TFLite shape, ONNX shape and the permutation between them (`onnx = transpose(tflite, perm)`).

Validation reads the layout from here instead of guessing it from shapes, which cannot tell NHWC from NCHW when
H == W == C. Models made elsewhere have no such entry; their layouts are found by trying every fitting perm.
"""
from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _str      # what json.dumps quotes strings with

import onnx


KEY = "layout_inspector.io"


def describe(sg, inputs: dict[int, tuple[str, tuple]], outputs: dict[int, tuple[str, tuple]]) -> str:
    """JSON for the entry; `inputs`/`outputs` map TFLite tensor index -> (ONNX name, perm). Written out by hand,
    the bytes json.dumps(rows, separators=(",", ":")) gives, without building an encoder and dicts on every
    conversion."""
    tensors, rows = sg.tensors, []
    texts: dict[tuple[int, ...], str] = {}
    for head, table in (('{"kind":"input","onnx":', inputs), ('{"kind":"output","onnx":', outputs)):
        for t, (name, perm) in table.items():
            ten = tensors[t]
            shape = ten.dims
            rows.append(f'{head}{_str(name)},"tflite":{_str(ten.name)},"tflite_shape":{_ints(shape, texts)},'
                        f'"onnx_shape":{_ints(tuple(map(shape.__getitem__, perm)), texts)},'
                        f'"perm":{_ints(perm, texts)}}}')
    return "[" + ",".join(rows) + "]"


def _ints(values, texts: dict) -> str:
    """A list of ints as json.dumps writes it (str of a numpy integer is its digits too). `texts`: those written
    so far in this entry: its rows repeat their shapes and perms, and turning ints into text was most of its cost."""
    key = values if type(values) is tuple else tuple(values)
    text = texts.get(key)
    if text is None:
        text = texts[key] = "[" + ",".join(map(str, key)) + "]"
    return text


def read(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """ONNX I/O name -> perm, from the entry when present and well-formed (else empty: layouts unknown)."""
    raw = next((p.value for p in model.metadata_props if p.key == KEY), None)
    if raw is None:
        return {}
    try:
        rows = json.loads(raw)
        out = {}
        for r in rows:
            perm = tuple(int(p) for p in r["perm"])
            if sorted(perm) != list(range(len(perm))):
                return {}
            out[str(r["onnx"])] = perm
        return out
    except (ValueError, TypeError, KeyError, RecursionError):
        return {}                   # an edited or foreign entry: fall back to trying every fitting layout
