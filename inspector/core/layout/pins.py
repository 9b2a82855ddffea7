"""Pins, as the user gives them (by tensor name or index, as layout text or a permutation), made permutations."""
from __future__ import annotations

from typing import Any, Mapping

from inspector.core.ir.errors import ConversionError
from inspector.core.ir.graph import Subgraph

from . import layout as L
from .layout import Perm


def resolve_pins(sg: Subgraph, pins: Mapping[Any, Any] | None) -> dict[int, Perm]:
    """Pins by tensor name or index -> {tensor index: perm}; ConversionError names what is wrong."""
    if not pins:                                    # the usual case: no name table to build
        return {}
    by_name = names(sg)
    return dict(resolve_pin(sg, by_name, key, value) for key, value in pins.items())


def names(sg: Subgraph) -> dict[str, int]:
    """Tensor name -> index, the first tensor of a name winning (as tensor_by_name does)."""
    by_name = {}
    for ten in reversed(sg.tensors):
        by_name[ten.name] = ten.index
    return by_name


def resolve_pin(sg: Subgraph, by_name: dict[str, int], key: int | str, value: object) -> tuple[int, Perm]:
    """One pin -> (tensor index, perm), `by_name` being `names(sg)`; ConversionError names what is wrong."""
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
        perm = tuple(value) if isinstance(value, (tuple, list)) else L.parse(str(value), rank)
    except ValueError as e:
        raise ConversionError(f"pin {sg.tensors[t].name}: {e}") from None
    if sorted(perm) != list(range(rank)):
        raise ConversionError(f"pin {sg.tensors[t].name}: {value} is not a permutation of {rank} axes")
    return t, perm
