"""Results from the child process in short steps.

The executor unpickles a result in one call, which holds the GIL from start to end: a big re-run's result and
graph held the thread waiting for the child, and the GUI thread stood still meanwhile. So the child
keeps the big lists and dicts of what it made (recursively through the project's own objects) and sends a skeleton
naming them; the window then fetches them CHUNK items per call, each a short unpickling with the GUI thread's turn
in between. Qt-free.

A result sent against an earlier one (`pack`'s `against`, the memo of what was sent then) carries its big dicts as
what changed: a pin changes a few entries of a 10,000-op model's dozen ~10,000-entry dicts (plan, trace,
categories), whose unpickling was a large part of the window's wait for a re-run.
"""
from __future__ import annotations

from enum import Enum
from typing import Callable

CHUNK = 2500


class Chunked:
    """The skeleton of an object: small attributes as they are, nested objects of ours as skeletons, big lists and
    dicts as the numbers of the pieces the child keeps in `store`."""

    def __init__(self, obj, store: list, memo: dict | None = None, against: dict | None = None):
        self.cls = type(obj)
        self.small: dict = {}
        self.big: dict[str, tuple[type, list[int]]] = {}
        self.nested: dict[str, Chunked] = {}
        self.changed: dict[str, tuple[dict, list]] = {}     # big dicts as (changed items, removed keys)
        self.key = None                 # (top-level skeletons) what the window keeps it as, for the next diff
        self.base = None                # (top-level skeletons) the key of what `changed` is against
        if memo is not None:
            memo[""] = self.cls
        if against is not None and against.get("") is not self.cls:
            against = None
        for key, value in vars(obj).items():
            if type(value) is dict and len(value) > CHUNK and memo is not None:
                frozen = memo[key] = _frozen(value)
                was = against.get(key) if against is not None else None
                if isinstance(was, dict):
                    changed, removed = _changes(was, frozen, value)
                    if len(changed) + len(removed) <= CHUNK:
                        self.changed[key] = (changed, removed)
                        continue
            if isinstance(value, (list, dict)) and len(value) > CHUNK:
                items = value if isinstance(value, list) else list(value.items())
                ids = []
                for i in range(0, len(items), CHUNK):
                    ids.append(len(store))
                    store.append(items[i:i + CHUNK])
                self.big[key] = (type(value), ids)
            elif _ours(value):
                inner = {} if memo is not None else None
                if memo is not None:
                    memo[key] = inner
                self.nested[key] = Chunked(value, store, inner, against.get(key) if against is not None else None)
            else:
                self.small[key] = value

    def restore(self, fetch: Callable[[int], list], base=None):
        """The object; `base`: the one restored from what `changed` is against."""
        obj = self.cls.__new__(self.cls)
        state = dict(self.small)
        for key, part in self.nested.items():
            state[key] = part.restore(fetch, getattr(base, key, None))
        for key, (changed, removed) in self.changed.items():
            state[key] = applied(getattr(base, key), changed, removed)
        for key, (kind, ids) in self.big.items():
            items: list = []
            for i in ids:
                items += fetch(i)
            state[key] = items if kind is list else dict(items)
        obj.__dict__.update(state)
        return obj

    def diffed(self) -> bool:
        """Whether restoring needs the result this was sent against."""
        return bool(self.changed) or any(part.diffed() for part in self.nested.values())


def _ours(value) -> bool:
    """A plain-__dict__ object of this project (a result, trace, plan, graph view, layout)."""
    return type(value).__module__.startswith("inspector.") and hasattr(value, "__dict__") \
        and not isinstance(value, (type, Enum))


def _changes(was: dict, frozen: dict, value: dict) -> tuple[dict, list]:
    """(items of `value` whose frozen form differs from `was`, keys `was` has and `value` lacks)."""
    try:                                # hashable values (most): the differing items in one set operation
        keys = {k for k, _ in frozen.items() ^ was.items()}
    except TypeError:
        missing = object()
        keys = {k for k, v in frozen.items() if was.get(k, missing) != v} | (was.keys() - frozen.keys())
    return {k: value[k] for k in keys if k in value}, [k for k in keys if k not in value]


def applied(base: dict, changed: dict, removed) -> dict:
    """A copy of `base` with `_changes`' changed items and removed keys applied (in the window)."""
    d = dict(base)
    d.update(changed)
    for k in removed:
        del d[k]
    return d


def _frozen(d: dict) -> dict:
    """A copy of d to compare the next result's with: list values (trace entries) as tuples, so that a list changed
    in place later still shows as a change."""
    first = next(iter(d.values()), None)
    return {k: tuple(v) if type(v) is list else v for k, v in d.items()} if type(first) is list else dict(d)


def pack(objs, store: list, memo: list | None = None, against: list | None = None) -> tuple:
    """Skeletons of `objs` (others as they are); their pieces are appended to `store`. With `memo` (a list), what
    the next result's changes are worked out against is appended to it, one entry per object (a dict for the
    first, a conversion result; None for the others); with `against` (an earlier result's memo), the first object's
    big dicts are sent as their changes from it (the receiver restores them with `base`, that result as it
    restored it)."""
    out = []
    for i, o in enumerate(objs):
        if not _ours(o):
            out.append(o)
            if memo is not None:
                memo.append(None)
            continue
        # only the first object (a conversion result) is ever sent against: the others' big dicts are not copied
        mine = {} if memo is not None and i == 0 else None
        was = against[i] if against is not None and i < len(against) else None
        out.append(Chunked(o, store, mine, was if i == 0 else None))
        if memo is not None:
            memo.append(mine)
    return tuple(out)


def unpack(objs, fetch: Callable[[int], list], base=None) -> tuple:
    """The objects; `base`: the result (as restored) the skeletons' changes are against."""
    return tuple(o.restore(fetch, base[i] if base is not None and i < len(base) else None)
                 if isinstance(o, Chunked) else o for i, o in enumerate(objs))
