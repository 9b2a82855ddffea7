"""Which keys of two dicts differ: what a re-run after a pin compares (plan tables, value names, denotations)."""
from __future__ import annotations

from typing import Any, Mapping, TypeVar

K = TypeVar("K")


def changed(old: Mapping[K, Any], new: Mapping[K, Any]) -> set[K]:
    """The keys whose values differ, or that one dict lacks. Set operations in C where the values hash (a loop over
    the names of a large model's dicts costs a re-run dearly); a loop where one does not."""
    if old is new:
        return set()
    try:
        return {k for k, _ in old.items() ^ new.items()}
    except TypeError:                   # an unhashable value (a layout held as a list)
        get, missing = new.get, object()
        out = {k for k, v in old.items() if get(k, missing) != v}
        out.update(new.keys() - old.keys())
        return out
