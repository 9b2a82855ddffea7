"""Choosing one Mode per op (see assign.py): the greedy pass, the lower bound, and the exact searches (exact.py,
then HiGHS where that is too wide)."""
from __future__ import annotations

import itertools
import math
import time

from typing import Sequence

from . import layout as L
from .assign import TIME_BUDGET, Choice, Mode, Optimality, Problem, layouts, left_out, presented
from .exact import refine, resolve
from .ilp import ilp as _ilp
from .layout import Perm

Pair = tuple[int, object]               # (tensor, the layout it is read in, or "pin" / "out")
Paid = tuple[int, int, tuple[tuple[Pair, int], ...]]    # _paid: (own Transposes, their bytes, (pair, bytes)...)

ENUMERATE = 64              # up to this many combinations of modes are tried one by one instead of an ILP


def transposes(pb: Problem, choice: Choice) -> tuple[int, int, int]:
    """(Transposes, bytes they move, Transposes inserted rather than a TFLite TRANSPOSE's own) of a choice."""
    lay = layouts(pb, choice)
    return _total(pb, _shares(pb, choice, lay), lay)


def _shares(pb: Problem, choice: Choice, lay: dict[int, Perm]) -> dict[int, Paid]:
    """Each op's _paid share of a choice, where it pays something."""
    share: dict[int, Paid] = {}
    for oi, m in choice.items():
        got = _paid(pb, oi, m, lay)
        if got is not None:
            share[oi] = got
    return share


def _paid(pb: Problem, oi: int, m: Mode, lay: dict[int, Perm]) -> Paid | None:
    """Op oi's share of transposes() in mode m, the tensors' layouts `lay`: (its own Transposes, the bytes they
    move, ((tensor, layout read or "pin"), bytes) of the inserted ones), None when nothing."""
    op = pb.sg.ops[oi]
    pairs: list[tuple[Pair, int]] = []
    for s, want in m.reads:
        t = op.inputs[s]
        if not pb.free(t, (lay.get(t) or pb.identity(t)), want):
            pairs.append(((t, want), pb.nbytes(t)))
    for slot, t in enumerate(op.outputs):
        if t >= 0 and t in pb.pins and not pb.free(t, m.writes[slot], pb.pins[t]):
            pairs.append(((t, "pin"), pb.nbytes(t)))
    if not m.cost and not pairs:
        return None
    return m.cost, (pb.nbytes(op.inputs[0]) if m.cost else 0), tuple(pairs)


def _total(pb: Problem, share: dict[int, Paid], lay: dict[int, Perm]) -> tuple[int, int, int]:
    """transposes() from each op's share (a pair two ops pay is one Transpose) and the graph outputs'."""
    pairs: dict[Pair, int] = {}
    count = moved = 0
    for cost, nb, paid in share.values():
        count, moved = count + cost, moved + nb
        pairs.update(paid)
    for t in pb.outputs_allowed:
        have = (lay.get(t) or pb.identity(t))
        if not pb.free(t, have, presented(pb, t, have)):
            pairs[(t, "out")] = pb.nbytes(t)
    return count + len(pairs), moved + sum(pairs.values()), len(pairs)


def _count(pb: Problem, choice: Choice, near: set[int] | None = None) -> int:
    """transposes(pb, choice)[0], each op's share kept with the choice (pb.kept["tp"]). `near`: when `choice` is
    exact.resolve's from the last plan, the ops whose mode it may have changed: then only those, the ops whose modes
    or pins changed (pb.changed) and the readers of a tensor whose layout changed are priced again."""
    last, changed = pb.base, pb.changed
    base = last.get("tp") if near is not None and last is not None and changed is not None else None
    pb.redo = None
    if base is None or near is None or last is None or changed is None or base[0] is not last["solution"] \
            or not pb.single_writers():
        lay = layouts(pb, choice)
        share = _shares(pb, choice, lay)
    else:
        old, share, lay = base[0], dict(base[1]), dict(base[2])
        ops, pins, consumers = pb.sg.ops, pb.pins, pb.graph_facts()[1]
        moved = set()
        for t, (p, _) in pb.fixed.items():
            if lay.get(t) != p:
                lay[t] = p
                moved.add(t)
        redo = {oi for oi in near | changed if oi in choice}
        for oi in redo:
            m = choice[oi]
            if m is old.get(oi) and oi not in changed:
                continue
            for slot, t in enumerate(ops[oi].outputs):
                if t >= 0 and lay.get(t, ()) != (p := pins.get(t, m.writes[slot])):
                    lay[t] = p
                    moved.add(t)
        redo.update(o for t in moved for o in consumers.get(t, ()) if o in choice)
        pb.redo = redo
        for oi in redo:
            got = _paid(pb, oi, choice[oi], lay)
            if got is None:
                share.pop(oi, None)
            else:
                share[oi] = got
    pb.kept["tp"] = (choice, share, lay)
    return _total(pb, share, lay)[0]


def greedy(pb: Problem, ops: list[int] | None = None, lay: dict[int, Perm] | None = None) -> Choice:
    """Ops in order, each taking the mode that adds fewest Transposes given what is decided so far, counting the
    consumers that can read its outputs in one layout only (one step of look-ahead); channels-first on a tie.
    `ops`, `lay`: only these ops (in order), the layouts of the tensors they read from elsewhere given."""
    lay = lay if lay is not None else {t: p for t, (p, _) in pb.fixed.items()}
    done: set[tuple[int, Perm]] = set()
    choice: Choice = {}
    pins, free = pb.pins, pb.free
    for oi, modes in (pb.modes.items() if ops is None else ((oi, pb.modes[oi]) for oi in ops)):
        op = pb.sg.ops[oi]
        if len(modes) > 1:
            # what every mode's price reads of the op's inputs and outputs, looked up once for all its modes
            ins = {s: (t, lay.get(t) or pb.identity(t)) for s, t in enumerate(op.inputs) if t >= 0}
            outs = [(slot, t, t in pins, pins.get(t, ()), pb.demands(t), t in pb.outputs_allowed)
                    for slot, t in enumerate(op.outputs) if t >= 0]

            def price(m: Mode) -> int:
                new = set()
                for s, w in m.reads:
                    t, have = ins[s]
                    if have != w and not free(t, have, w):
                        new.add((t, w))
                ahead = 0
                for slot, t, pinned, pin, wants, out in outs:
                    wrote = m.writes[slot]
                    have = pin if pinned else wrote
                    ahead += pinned and not free(t, wrote, have)
                    for w in wants:             # (a loop, not sum() over a generator: per mode of every op)
                        if have != w and not free(t, have, w):
                            ahead += 1
                    ahead += out and not free(t, have, presented(pb, t, have))
                return len(new - done) + m.cost + ahead

            # min(modes, key=(price, written as TFLite)): the first least; the tie-break looked at on a tie only
            best, key = modes[0], None
            for m in modes:
                got = price(m)
                if key is not None and got > key[0]:
                    continue
                k = (got, L.is_identity(m.writes[0] if m.writes else ()))
                if key is None or k < key:
                    best, key = m, k
        else:
            best = modes[0]
        choice[oi] = best
        for s, w in best.reads:
            t = op.inputs[s]
            if not pb.free(t, (lay.get(t) or pb.identity(t)), w):
                done.add((t, w))
        for slot, t in enumerate(op.outputs):
            if t >= 0:
                lay[t] = pb.pins.get(t, best.writes[slot])
    return choice


def lower_bound(pb: Problem) -> int:
    """Transposes every choice pays: fixed readers of fixed tensors that disagree, TRANSPOSE ops that stay one in
    every mode, pins and outputs whose producer has no other way. Each op's share is kept (pb.kept["lb"], the few
    that pay), so after a re-plan only the ops whose modes, inputs or pins may have changed are looked at again."""
    changed = pb.changed
    base = pb.base.get("lb") if pb.base is not None and changed is not None else None
    if base is None or changed is None:
        share = {}
        for oi, modes in pb.modes.items():
            got = _bound_of(pb, oi, modes)
            if got is not None:
                share[oi] = got
    else:
        share = dict(base)
        for oi in changed:
            share.pop(oi, None)
            was = pb.modes.get(oi)
            got = _bound_of(pb, oi, was) if was is not None else None
            if got is not None:
                share[oi] = got
    pb.kept["lb"] = share
    pairs: set[tuple[int, object]] = set()
    bound = 0
    for cost, paid in share.values():
        bound += cost
        pairs.update(paid)
    for t in pb.outputs_allowed:
        cand = pb.candidates(t)
        if len(cand) == 1 and not pb.free(t, cand[0], presented(pb, t, cand[0])):
            pairs.add((t, "out"))
    return bound + len(pairs)


def _bound_of(pb: Problem, oi: int, modes: Sequence[Mode]) -> tuple[int, tuple[Pair, ...]] | None:
    """Op oi's share of the lower bound: (the Transposes its cheapest mode makes, the (tensor, layout) pairs any
    of its modes pays), None when nothing."""
    cost = min(m.cost for m in modes) if len(modes) > 1 else modes[0].cost
    if len(modes) != 1:
        return (cost, ()) if cost else None
    op, pairs = pb.sg.ops[oi], list[Pair]()
    for s, want in modes[0].reads:
        t = op.inputs[s]
        cand = pb.candidates(t)
        if len(cand) == 1 and not pb.free(t, cand[0], want):
            pairs.append((t, want))
    for slot, t in enumerate(op.outputs):
        if t >= 0 and t in pb.pins and not pb.free(t, modes[0].writes[slot], pb.pins[t]):
            pairs.append((t, "pin"))
    return (cost, tuple(pairs)) if cost or pairs else None


def _free(pb: Problem) -> tuple[list[int], int]:
    """(The ops with a choice, in op order, and how many combinations of modes they have, or ENUMERATE + 1 when
    more.) The set is kept (pb.kept["free"]): a re-plan looks at the ops whose modes may have changed only."""
    changed = pb.changed
    base = pb.base.get("free") if pb.base is not None and changed is not None else None
    modes = pb.modes
    if base is None or changed is None:
        free = []                                    # (one pass, no generator: this runs on every model)
        for oi, ms in modes.items():
            if len(ms) > 1:
                free.append(oi)
        kept = set(free)
    else:
        kept = set(base)
        for oi in changed:
            if len(modes.get(oi, ())) > 1:
                kept.add(oi)
            else:
                kept.discard(oi)
        free = None
    pb.kept["free"] = kept
    if len(kept) > 6:                                # each has 2 modes at least: 2**7 > ENUMERATE
        return [], ENUMERATE + 1
    if free is None:
        free = [oi for oi in modes if oi in kept]
    return free, math.prod(len(modes[oi]) for oi in free)


def solve(pb: Problem, time_budget: float = TIME_BUDGET, previous: Problem | None = None) -> tuple[Choice, Optimality]:
    """The best choice found and what is proven about it, and over what (Optimality.left_out). When greedy misses
    the bound, the parts of the graph where it pays are searched exactly (exact.refine), HiGHS's ILP (ilp.py) on a
    part too wide for that search, and on the whole graph only when that fails too (out of time).
    `previous`: the same graph's problem under other pins (pb built from it): its plan is kept wherever nothing
    around a part changed (exact.resolve), the same plan as without it."""
    choice, optimality = _solve(pb, time_budget, previous)
    optimality.left_out = left_out(pb)
    return choice, optimality


def _solve(pb: Problem, time_budget: float, previous: Problem | None) -> tuple[Choice, Optimality]:
    start = time.perf_counter()
    free, combos = _free(pb)
    if combos <= ENUMERATE:                          # a few choices: try them all, no solver
        best = {oi: modes[0] for oi, modes in pb.modes.items()}
        score = transposes(pb, best)
        if free and not score[0]:               # no Transpose at all: nothing later in the order can beat it
            return best, Optimality(0, 0, "the first choice tried needs no Transpose")
        for picks in itertools.islice(itertools.product(*(pb.modes[oi] for oi in free)), 1, None):   # 1st: best
            choice = {**best, **dict(zip(free, picks))}
            got = transposes(pb, choice)
            if got < score:
                best, score = choice, got
        return best, Optimality(score[0], score[0], "every choice tried" if free else "every op has one way only")
    found = resolve(pb, previous, start + time_budget, greedy) if previous is not None else None
    bound = lower_bound(pb)
    near = None
    if found is not None:
        best, searched, near = found
    else:
        best = greedy(pb)
        count = _count(pb, best)
        if count <= bound:
            pb.solution = best
            return best, Optimality(count, bound, "greedy plan meets the lower bound")
        refined = refine(pb, best, start + time_budget)
        if refined is None:
            return _highs(pb, best, count, bound, start, time_budget)
        best, searched = refined
    pb.solution = best
    count = _count(pb, best, near)
    if count <= bound and not any(searched):
        return best, Optimality(count, bound, "greedy plan meets the lower bound")
    ms = (time.perf_counter() - start) * 1000
    highs = f", {searched[1]} too wide for it by ILP (HiGHS)" if searched[1] else ""
    return best, Optimality(count, count, f"greedy plan, {searched[0]} part(s) searched exactly (variable "
                                          f"elimination){highs}, {ms:.0f} ms")


def _highs(pb: Problem, best: Choice, count: int, bound: int, start: float, time_budget: float
           ) -> tuple[Choice, Optimality]:
    """solve() where a part is too wide for the exact search: HiGHS's ILP over the whole graph, else greedy's plan."""
    found = _ilp(pb, max(0.0, time_budget - (time.perf_counter() - start)))
    if found is None:
        return best, Optimality(count, bound, f"greedy plan: the ILP found no plan within {time_budget:g} s")
    choice, dual, optimal = found
    if transposes(pb, choice) < transposes(pb, best):
        best = choice
    count = transposes(pb, best)[0]
    ms = (time.perf_counter() - start) * 1000
    how = "ILP (HiGHS) optimal" if optimal else f"ILP (HiGHS) stopped at its {time_budget:g} s budget"
    return best, Optimality(count, count if optimal else max(bound, dual), f"{how}, {ms:.0f} ms")
