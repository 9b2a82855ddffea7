"""What a pin would cost before it is applied: the layout solver re-solved with the tensor pinned each way, without
emitting anything (core.layout Planner.transposes_if). Qt-free.

Also which tensors' shapes make NHWC and NCHW hard to tell apart (equal H, W, C or size-1 axes): there a wrong pin
converts without complaint and only validation shows it.
"""
from __future__ import annotations

from inspector.core.emit.convert import planner
from inspector.core.layout.pins import resolve_pins
from inspector.core.ir.errors import InspectorError
from inspector.core.layout.solve import solve

# Above this many ops the solver's answers are not worth a pause when a menu opens.
MAX_OPS = 3000


def costs(session, t: int, choices) -> dict:
    """{pin text (None = Auto): Transposes of the whole plan} for tensor t; choices that cannot apply are left out.
    Other pins of the session stay as they are."""
    sg = session.graph.main
    if len(sg.ops) > MAX_OPS:
        return {}
    name = sg.tensors[t].name
    own = {k for k, _ in session.pins.items() if _resolves_to(sg, k, t)}
    others = {k: v for k, v in session.pins.items() if k not in own}
    p = planner(session.graph, others, keep_io_layout=session.options.keep_io_layout)
    out = {}
    for choice in choices:
        if choice is None:
            out[None] = solve(p.problem, p.time_budget)[1].transposes
            continue
        try:
            perm = resolve_pins(sg, {name or str(t): choice})[t]
        except (InspectorError, KeyError):
            continue
        out[choice] = p.transposes_if(t, perm).transposes
    return out


def cheapest_fix(session, c) -> tuple[str, str, int] | None:
    """(pin name, pin text, Transposes of the whole plan) of the cheapest pin that removes conflict c with fewer
    Transposes than now — on its tensor or on its consumer's outputs, each to a layout the solver considers or to
    either standard one — or None when no single pin does (one that only moves the Transpose elsewhere is no fix)."""
    sg = session.graph.main
    if len(sg.ops) > MAX_OPS or c.subgraph:
        return None
    keep_io = session.options.keep_io_layout
    base = dict(session.pins)
    p = planner(session.graph, base, keep_io_layout=keep_io)
    now = p.plan().optimality.transposes
    tensors = [c.tensor] + ([t for t in sg.ops[c.op].outputs if t >= 0] if c.op is not None else [])
    best = None
    for t in tensors:
        rank = sg.tensors[t].rank
        perms = dict.fromkeys([*p.candidates(t), tuple(range(rank))]
                              + ([(0, rank - 1, *range(1, rank - 1))] if rank >= 3 else []))
        name = sg.tensors[t].name or str(t)
        for perm in perms:
            text = ",".join(map(str, perm))
            try:
                plan = planner(session.graph, {**base, name: text}, keep_io_layout=keep_io).plan()
            except InspectorError:
                continue
            if any(d.tensor == c.tensor and d.op == c.op for d in plan.conflicts):
                continue
            n = plan.optimality.transposes
            if n < now and (best is None or n < best[2]):
                best = (name, text, n)
    return best


def _resolves_to(sg, key: str, t: int) -> bool:
    try:
        return t in resolve_pins(sg, {key: "keep"})
    except InspectorError:
        return False


def ambiguous(shape) -> str:
    """Why NHWC and NCHW are hard to tell apart for a 4-D shape, or "" when they are not."""
    if shape is None or len(shape) != 4 or any(not isinstance(d, int) or d < 0 for d in shape):
        return ""
    _, h, w, c = shape
    if h == w == c:
        return f"H = W = C = {h}: channels-last and channels-first look the same"
    if c in (h, w) and c > 1:
        return f"C = {c} equals {'H' if c == h else 'W'}: the channel axis cannot be told from the shape"
    ones = [a for a, d in zip("HWC", (h, w, c)) if d == 1]
    if ones:
        return f"size-1 {', '.join(ones)}: a Transpose there only moves a size-1 axis"
    return ""
