"""Sizes the user gives an input's dynamic dimensions (`validate --input-shape NAME=D1,D2,...`, the window's
Validate field), and the one-line error when a model cannot run at the placeholder sizes its file stores: a
converter writes 1 where a dimension is dynamic, and an audio front end cannot frame 1 sample."""
from __future__ import annotations

from inspector.core.ir.errors import InspectorError

OPTION = "--input-shape"


def parse(texts) -> dict[str, tuple[int, ...]]:
    """NAME=D1,D2,... each (the name may hold '=' itself: the last one splits) -> {NAME: dims}."""
    out: dict[str, tuple[int, ...]] = {}
    for text in texts:
        name, _, dims = text.strip().rpartition("=")
        parts = dims.replace(" ", "").split(",")
        if not name or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise InspectorError(f"{OPTION} {text!r}: expected NAME=D1,D2,... with every size an integer >= 1")
        out[name] = tuple(int(p) for p in parts)
    return out


def split(text: str) -> list[str]:
    """The window's field: several NAME=D1,D2 separated by ';' or spaces."""
    return [p for p in text.replace(";", " ").split() if p]


def resolve(graph, given: dict[str, tuple[int, ...]] | None, aliases: dict[str, int] | None = None
            ) -> dict[int, tuple[int, ...]]:
    """{input tensor: dims} for the names given (a TFLite input's name, with or without ':0', or an alias: the
    ONNX input's name); refuses an unknown name, another rank, or a static dimension changed."""
    if not given:
        return {}
    sg = graph.main
    names = dict(aliases or {})
    for t in sg.inputs:
        name = sg.tensors[t].name
        names.setdefault(name, t)
        names.setdefault(name[:-2] if name.endswith(":0") else name + ":0", t)
    out = {}
    for name, dims in given.items():
        if name not in names:
            listed = ", ".join(f"'{sg.tensors[t].name}' {list(sg.tensors[t].dims)}" for t in sg.inputs)
            raise InspectorError(f"{OPTION}: the model has no input '{name}' (its inputs: {listed})")
        t = names[name]
        want = sg.tensors[t].dims
        if len(dims) != len(want):
            raise InspectorError(f"{OPTION} {name}: {len(dims)} sizes for an input of rank {len(want)} "
                                 f"({list(want)}, -1 where dynamic)")
        fixed = [k for k, (d, w) in enumerate(zip(dims, want)) if w >= 0 and d != w]
        if fixed:
            raise InspectorError(f"{OPTION} {name}: dimension {fixed[0]} is not dynamic (the model has "
                                 f"{list(want)}, -1 where dynamic)")
        out[t] = tuple(dims)
    return out


def unsized(graph, inputs) -> list[int]:
    """Inputs fed at the placeholder size of a dynamic dimension the file stores as 1."""
    sg = graph.main
    return [t for t, x in zip(sg.inputs, inputs)
            if any(w < 0 and s == 1 and n == 1 for w, s, n in zip(sg.tensors[t].dims, sg.tensors[t].shape, x.shape))]


def cannot_run(graph, ts: list[int], why: str) -> InspectorError:
    """The one line for a model LiteRT cannot run at its stored placeholder sizes."""
    sg = graph.main
    t = sg.tensors[ts[0]]
    example = ",".join("N" if w < 0 else str(w) for w in t.dims)
    more = f" (and {len(ts) - 1} more input{'s' if len(ts) > 2 else ''})" if len(ts) > 1 else ""
    return InspectorError(f"input '{t.name}'{more} has dynamic dimensions {list(t.dims)} stored as {list(t.shape)}, "
                          f"and LiteRT cannot run it at that size ({why}): give the sizes with {OPTION} "
                          f"{t.name}={example} (in the window: Validate's input shapes field)")
