"""Results from the child process in short steps.

The executor unpickles a result in one call, which holds the GIL from start to end: a 10,000-op re-run's result
and graph took 0.26 s on the thread waiting for the child, and the GUI thread stood still meanwhile. So the child
keeps the big lists and dicts of what it made (recursively through the project's own objects) and sends a skeleton
naming them; the window then fetches them CHUNK items per call, each a short unpickling with the GUI thread's turn
in between. Qt-free.
"""
from __future__ import annotations

from enum import Enum
from typing import Callable

CHUNK = 2500


class Chunked:
    """The skeleton of an object: small attributes as they are, nested objects of ours as skeletons, big lists and
    dicts as the numbers of the pieces the child keeps in `store`."""

    def __init__(self, obj, store: list):
        self.cls = type(obj)
        self.small: dict = {}
        self.big: dict[str, tuple[type, list[int]]] = {}
        self.nested: dict[str, Chunked] = {}
        for key, value in vars(obj).items():
            if isinstance(value, (list, dict)) and len(value) > CHUNK:
                items = value if isinstance(value, list) else list(value.items())
                ids = []
                for i in range(0, len(items), CHUNK):
                    ids.append(len(store))
                    store.append(items[i:i + CHUNK])
                self.big[key] = (type(value), ids)
            elif _ours(value):
                self.nested[key] = Chunked(value, store)
            else:
                self.small[key] = value

    def restore(self, fetch: Callable[[int], list]):
        obj = self.cls.__new__(self.cls)
        state = dict(self.small)
        for key, part in self.nested.items():
            state[key] = part.restore(fetch)
        for key, (kind, ids) in self.big.items():
            items: list = []
            for i in ids:
                items += fetch(i)
            state[key] = items if kind is list else dict(items)
        obj.__dict__.update(state)
        return obj


def _ours(value) -> bool:
    """A plain-__dict__ object of this project (a result, trace, plan, graph view, layout)."""
    return type(value).__module__.startswith("inspector.") and hasattr(value, "__dict__") \
        and not isinstance(value, (type, Enum))


def pack(objs, store: list) -> tuple:
    """Skeletons of `objs` (others as they are); their pieces are appended to `store`."""
    return tuple(Chunked(o, store) if _ours(o) else o for o in objs)


def unpack(objs, fetch: Callable[[int], list]) -> tuple:
    return tuple(o.restore(fetch) if isinstance(o, Chunked) else o for o in objs)
