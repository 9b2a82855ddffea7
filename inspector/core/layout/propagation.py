"""Layout propagation: decide each tensor's layout in the ONNX graph and where Transposes are unavoidable.

One forward pass in topological order (TFLite stores ops that way):
- Implicit ops read and write channels-first (ONNX Conv is NCHW);
- Transparent ops adopt the layout most of their inputs have (a pin on the output wins);
- Attribute ops run their own rule (axis remapping; rank-changing ops derive the output layout);
- Terminate ops read the TFLite layout (a Reshape also accepts a layout that only moves size-1 axes).
Every input read in a layout it does not have becomes a Conflict: one Transpose, with its reason.
Graph inputs are channels-first when they reach an Implicit op through layout-carrying ops, unless
`keep_io_layout`; user pins override everything for the tensor they name.
"""
from __future__ import annotations

from . import layout as L
from inspector.core.ir.graph import Op, Subgraph
from .layout import Perm
from .plan import Category, Conflict, LayoutPlan

I, T, A, X = Category.IMPLICIT, Category.TRANSPARENT, Category.ATTRIBUTE, Category.TERMINATE


def reaches_implicit(sg: Subgraph, t: int, table, consumers, skip=frozenset()) -> Op | None:
    """The first Implicit op that tensor t reaches through layout-carrying ops, or None."""
    rank = sg.tensors[t].rank
    seen, stack = set(), [t]
    while stack:
        cur = stack.pop()
        if cur in seen:
            continue
        seen.add(cur)
        for oi in consumers.get(cur, []):
            op = sg.ops[oi]
            rule = table.get(op.opcode)
            if oi in skip or rule is None:
                continue
            if rule.category is I and any(op.inputs[s] == cur for s in rule.layout_inputs if s < len(op.inputs)):
                return op
            if rule.category in (T, A):
                stack.extend(o for o in op.outputs if o >= 0 and sg.tensors[o].rank == rank)
    return None


def choose_layout(perms: list[Perm], pin: Perm | None, rank: int, demands: list[Perm] = ()) -> Perm:
    """The layout an op whose inputs must agree adopts: the pin, else the one costing fewest Transposes among its
    inputs and the consumers that demand a fixed layout (one step of look-ahead), channels-first on a tie."""
    if pin is not None and len(pin) == rank:
        return pin
    if not perms:
        return L.identity(rank)
    def cost(p):
        return sum(q != p for q in perms) + sum(d != p for d in demands if len(d) == rank)
    return min(dict.fromkeys(perms), key=lambda p: (cost(p), L.is_identity(p), perms.index(p)))


def demands(sg: Subgraph, t: int, table, consumers) -> list[Perm]:
    """Layouts that t's consumers insist on: channels-first for Implicit ops' activation inputs, TFLite's for
    Terminate ops (unless going channels-first only moves size-1 axes); others adapt and say nothing."""
    out = []
    rank, dims = sg.tensors[t].rank, sg.tensors[t].dims
    for oi in consumers.get(t, []):
        op, rule = sg.ops[oi], table.get(sg.ops[oi].opcode)
        if rule is None or (rule.category is X and not L.is_trivial(dims, L.channels_first(rank))):
            out.append(L.identity(rank))
        elif rule.category is I and any(op.inputs[s] == t for s in rule.layout_inputs if s < len(op.inputs)):
            out.append(L.channels_first(sg.tensors[t].rank))
    return out


def plan_layouts(sg: Subgraph, table, pins: dict[int, Perm] | None = None, keep_io_layout: bool = False,
                 skip: set[int] | frozenset = frozenset(), constants: set[int] | None = None) -> LayoutPlan:
    """Plan one subgraph. `skip` are ops folded at conversion time; `constants` are tensors with known data."""
    pins = dict(pins or {})
    constants = constants if constants is not None else {t.index for t in sg.tensors if t.is_constant}
    plan = LayoutPlan(pins=pins)
    consumers = sg.consumers()
    rank = [len(t.shape) for t in sg.tensors]

    def cur(t: int) -> Perm:
        return plan.perms.get(t, L.identity(rank[t]))

    def label(oi: int) -> str:
        return f"{sg.ops[oi].opcode}#{oi}"

    def need(oi: int | None, slot: int, t: int, want: Perm, kind: str, reason: str) -> None:
        """Record that t is read in `want`; a Conflict when that moves data."""
        have = cur(t)
        if oi is not None:
            plan.inputs[(oi, slot)] = want
        if have == want:
            return
        step = L.compose(L.inverse(have), want)
        if L.reshapable(L.apply(sg.tensors[t].dims, have), step):
            return          # only size-1 axes move: a Reshape, not a Transpose
        plan.conflicts.append(Conflict(tensor=t, op=oi, kind=kind, reason=reason, from_perm=have, to_perm=want))

    # Graph inputs.
    for t in sg.inputs:
        if t in pins:
            plan.perms[t] = pins[t]
            plan.why[t] = f"pinned by the user to {L.name(pins[t])}"
            continue
        reach = reaches_implicit(sg, t, table, consumers, skip) if rank[t] >= 3 else None
        if reach is not None and not keep_io_layout:
            plan.perms[t] = L.channels_first(rank[t])
            plan.why[t] = f"graph input, image-like (reaches {reach.opcode}#{reach.index}): channels-first"
        else:
            plan.why[t] = ("graph input kept in the TFLite layout (--keep-io-layout)" if reach is not None
                           else "graph input, no layout-sensitive op reaches it: as in TFLite")

    for op in sg.ops:
        oi = op.index
        if oi in skip:
            for t in op.outputs:
                plan.why[t] = f"constant, folded from {label(oi)} at conversion"
            continue
        rule = table.get(op.opcode)
        acts = [(s, t) for s, t in enumerate(op.inputs) if t >= 0 and t not in constants]
        outs_rank = [rank[t] if t >= 0 else 0 for t in op.outputs]
        out_pin = pins.get(op.outputs[0]) if op.outputs and op.outputs[0] >= 0 else None
        category = rule.category if rule else X
        want: dict[int, Perm] = {}
        outs: list[Perm] | None = None
        why_out = ""
        no_rule = rule is None
        if rule is None:
            why_out = f"{label(oi)} has no layout rule: TFLite layout"
        elif category is I:
            for s, t in acts:
                want[s] = L.channels_first(rank[t]) if s in rule.layout_inputs else L.identity(rank[t])
            outs = [L.channels_first(r) for r in outs_rank]
            why_out = f"written by {label(oi)} (Implicit): channels-first"
        elif category is T:
            r0 = outs_rank[0] if outs_rank else 0
            full = [cur(t) for s, t in acts if rank[t] == r0]
            ahead = demands(sg, op.outputs[0], table, consumers) if op.outputs and op.outputs[0] >= 0 else []
            chosen = choose_layout(full, out_pin, r0, ahead)
            for s, t in acts:
                want[s] = chosen if rank[t] == r0 else L.identity(rank[t])
            outs = [chosen if r == r0 else L.identity(r) for r in outs_rank]
            why_out = f"follows {label(oi)} (Transparent): {L.name(chosen)}"
        elif rule.rule is not None:
            in_perms = [cur(t) if (t >= 0 and t not in constants) else None for t in op.inputs]
            got = rule.rule(op, sg, in_perms, out_pin)
            if got is not None:
                want, outs = got
                why_out = f"derived by {label(oi)} ({category.value}): " + L.name(outs[0] if outs else None)
            else:
                no_rule = category is not X        # a Terminate op's rule only ever relaxes it
                why_out = f"{label(oi)} has no rule for this layout: TFLite layout"
        if outs is None:                                   # Terminate, or no rule applies
            want = {s: L.identity(rank[t]) for s, t in acts}
            outs = [L.identity(r) for r in outs_rank]
            why_out = why_out or f"written by {label(oi)} (Terminate): TFLite layout"
        for s, t in acts:
            w = want.get(s, L.identity(rank[t]))
            have = cur(t)
            if have != w:
                if no_rule:
                    kind, reason = "no-rule", f"{label(oi)} has no layout rule for a {L.name(have)} input"
                elif category is X:
                    needs = "the TFLite layout" if L.is_identity(w) else L.name(w)
                    kind, reason = "terminate", (f"{sg.tensors[t].name} is {L.name(have)} but {label(oi)} "
                                                 f"(Terminate) needs {needs}")
                else:
                    kind, reason = "meet", (f"{sg.tensors[t].name} is {L.name(have)} but {label(oi)} "
                                            f"({category.value}) reads it as {L.name(w)}")
                need(oi, s, t, w, kind, reason)
            else:
                plan.inputs[(oi, s)] = w
        for slot, t in enumerate(op.outputs):
            if t < 0:
                continue
            natural = outs[slot] if slot < len(outs) else L.identity(rank[t])
            plan.produced[(oi, slot)] = natural
            final = pins.get(t, natural)
            if len(final) != rank[t]:
                final = natural
            plan.perms[t] = natural
            plan.why[t] = why_out
            if final != natural:
                need(None, slot, t, final, "pin",
                     f"{sg.tensors[t].name} pinned to {L.name(final)}; {label(oi)} writes {L.name(natural)}")
                if plan.conflicts and plan.conflicts[-1].tensor == t and plan.conflicts[-1].kind == "pin":
                    plan.conflicts[-1].op = oi
                plan.perms[t] = final
                plan.why[t] = f"pinned by the user to {L.name(final)}"

    # Graph outputs: ONNX convention is channels-first for image-like outputs; anything else goes back to TFLite's.
    for t in sg.outputs:
        have = cur(t)
        if t in pins:
            want = pins[t]
        elif keep_io_layout or have != L.channels_first(rank[t]):
            want = L.identity(rank[t])
        else:
            want = have
        plan.outputs[t] = want
        if want != have:
            reason = ("graph output kept in the TFLite layout (--keep-io-layout)" if keep_io_layout
                      else f"graph output {sg.tensors[t].name} is {L.name(have)}; presented as TFLite's")
            need(None, -1, t, want, "io", reason)
    # Tensors nobody touched keep the TFLite layout.
    for t in range(len(sg.tensors)):
        plan.why.setdefault(t, "constant" if t in constants else "TFLite layout")
    return plan
