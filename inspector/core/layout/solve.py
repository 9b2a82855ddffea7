"""Choosing one Mode per op (see assign.py): the greedy pass, the lower bound, and the exact searches (exact.py,
then HiGHS where that is too wide)."""
from __future__ import annotations

import itertools
import time

from . import layout as L
from .assign import TIME_BUDGET, Choice, Mode, Optimality, Problem, layouts, presented
from .exact import refine, resolve
from .ilp import ilp as _ilp
from .layout import Perm

ENUMERATE = 64              # up to this many combinations of modes are tried one by one instead of an ILP


def transposes(pb: Problem, choice: Choice) -> tuple[int, int, int]:
    """(Transposes, bytes they move, Transposes inserted rather than a TFLite TRANSPOSE's own) of a choice."""
    lay = layouts(pb, choice)
    ops = pb.sg.ops
    pairs: dict[tuple, int] = {}
    count = moved = 0
    for oi, m in choice.items():
        op = ops[oi]
        if m.cost:
            count, moved = count + m.cost, moved + pb.nbytes(op.inputs[0])
        for s, want in m.reads:
            t = op.inputs[s]
            have = (lay.get(t) or pb.identity(t))
            if not pb.free(t, have, want):
                pairs[(t, want)] = pb.nbytes(t)
        for slot, t in enumerate(op.outputs):
            if t >= 0 and t in pb.pins and not pb.free(t, m.writes[slot], pb.pins[t]):
                pairs[(t, "pin")] = pb.nbytes(t)
    for t in pb.outputs_allowed:
        have = (lay.get(t) or pb.identity(t))
        if not pb.free(t, have, presented(pb, t, have)):
            pairs[(t, "out")] = pb.nbytes(t)
    return count + len(pairs), moved + sum(pairs.values()), len(pairs)


def greedy(pb: Problem, ops: list[int] | None = None, lay: dict | None = None) -> Choice:
    """Ops in order, each taking the mode that adds fewest Transposes given what is decided so far, counting the
    consumers that can read its outputs in one layout only (one step of look-ahead); channels-first on a tie.
    `ops`, `lay`: only these ops (in order), the layouts of the tensors they read from elsewhere given."""
    lay = lay if lay is not None else {t: p for t, (p, _) in pb.fixed.items()}
    done: set[tuple] = set()
    choice: Choice = {}
    for oi, modes in (pb.modes.items() if ops is None else ((oi, pb.modes[oi]) for oi in ops)):
        op = pb.sg.ops[oi]

        def price(m: Mode):
            new = {(op.inputs[s], w) for s, w in m.reads
                   if not pb.free(op.inputs[s], (lay.get(op.inputs[s]) or pb.identity(op.inputs[s])), w)}
            ahead = 0
            for slot, t in enumerate(op.outputs):
                if t < 0:
                    continue
                have = pb.pins.get(t, m.writes[slot])
                ahead += t in pb.pins and not pb.free(t, m.writes[slot], have)
                ahead += sum(not pb.free(t, have, w) for w in pb.demands(t))
                ahead += t in pb.outputs_allowed and not pb.free(t, have, presented(pb, t, have))
            return len(new - done) + m.cost + ahead, L.is_identity(m.writes[0] if m.writes else ())

        best = min(modes, key=price) if len(modes) > 1 else modes[0]
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
    every mode, pins and outputs whose producer has no other way."""
    pairs = set()
    bound = 0
    for oi, modes in pb.modes.items():
        op = pb.sg.ops[oi]
        bound += min(m.cost for m in modes)
        if len(modes) != 1:
            continue
        for s, want in modes[0].reads:
            t = op.inputs[s]
            cand = pb.candidates(t)
            if len(cand) == 1 and not pb.free(t, cand[0], want):
                pairs.add((t, want))
        for slot, t in enumerate(op.outputs):
            if t >= 0 and t in pb.pins and not pb.free(t, modes[0].writes[slot], pb.pins[t]):
                pairs.add((t, "pin"))
    for t in pb.outputs_allowed:
        cand = pb.candidates(t)
        if len(cand) == 1 and not pb.free(t, cand[0], presented(pb, t, cand[0])):
            pairs.add((t, "out"))
    return bound + len(pairs)


def solve(pb: Problem, time_budget: float = TIME_BUDGET, previous: Problem | None = None) -> tuple[Choice, Optimality]:
    """The best choice found and what is proven about it. When greedy misses the bound, the parts of the graph where
    it pays are searched exactly (exact.refine), HiGHS's ILP (ilp.py) on a part too wide for that search, and on the
    whole graph only when that fails too (out of time).
    `previous`: the same graph's problem under other pins (pb built from it): its plan is kept wherever nothing
    around a part changed (exact.resolve), the same plan as without it."""
    start = time.perf_counter()
    free, combos = [], 1                             # (one pass, no generator: this runs on every model)
    for oi, modes in pb.modes.items():
        if len(modes) > 1:
            free.append(oi)
            combos *= len(modes)
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
    if found is not None:
        best, searched = found
    else:
        best = greedy(pb)
        count = transposes(pb, best)[0]
        if count <= bound:
            pb.solution = best
            return best, Optimality(count, bound, "greedy plan meets the lower bound")
        found = refine(pb, best, start + time_budget)
        if found is None:
            return _highs(pb, best, count, bound, start, time_budget)
        best, searched = found
    pb.solution = best
    count = transposes(pb, best)[0]
    if count <= bound and not any(searched):
        return best, Optimality(count, bound, "greedy plan meets the lower bound")
    ms = (time.perf_counter() - start) * 1000
    highs = f", {searched[1]} too wide for it by ILP (HiGHS)" if searched[1] else ""
    return best, Optimality(count, count, f"greedy plan, {searched[0]} part(s) searched exactly (variable "
                                          f"elimination){highs}, {ms:.0f} ms")


def _highs(pb: Problem, best: Choice, count: int, bound: int, start: float, time_budget: float):
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
