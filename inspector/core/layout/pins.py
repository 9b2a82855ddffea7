"""Pins, as the user gives them (by tensor name or index, as layout text or a permutation), made permutations."""
from __future__ import annotations

from inspector.core.ir.errors import ConversionError
from inspector.core.ir.graph import Subgraph

from . import layout as L
from .layout import Perm


def resolve_pins(sg: Subgraph, pins) -> dict[int, Perm]:
    """Pins by tensor name or index -> {tensor index: perm}; ConversionError names what is wrong."""
    out: dict[int, Perm] = {}
    if not pins:                                    # the usual case: no name table to build
        return out
    by_name = {}
    for ten in reversed(sg.tensors):                # the first tensor of a name wins, as tensor_by_name does
        by_name[ten.name] = ten.index
    for key, value in (pins or {}).items():
        if isinstance(key, int) or (isinstance(key, str) and key.isascii() and key.isdigit()   # not "²"
                                    and key not in by_name):
            t = int(key)
            if not 0 <= t < len(sg.tensors):
                raise ConversionError(f"pin: tensor index {t} does not exist")
        else:
            if key not in by_name:
                raise ConversionError(f"pin: no tensor named '{key}'")
            t = by_name[key]
        rank = sg.tensors[t].rank
        try:
            out[t] = tuple(value) if isinstance(value, (tuple, list)) else L.parse(str(value), rank)
        except ValueError as e:
            raise ConversionError(f"pin {sg.tensors[t].name}: {e}") from None
        if sorted(out[t]) != list(range(rank)):
            raise ConversionError(f"pin {sg.tensors[t].name}: {value} is not a permutation of {rank} axes")
    return out
