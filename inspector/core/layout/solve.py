"""Choosing one Mode per op (see assign.py): the greedy pass, the lower bound, and the exact searches (exact.py,
then HiGHS where that is too wide)."""
from __future__ import annotations

import itertools
import math
import time

import numpy as np

from . import layout as L
from .assign import TIME_BUDGET, Choice, Mode, Optimality, Problem, layouts, presented
from .exact import refine, resolve
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
    it pays are searched exactly (exact.refine); HiGHS's ILP runs only when one is too wide for that search.
    `previous`: the same graph's problem under other pins (pb built from it): its plan is kept wherever nothing
    around a part changed (exact.resolve), the same plan as without it."""
    start = time.perf_counter()
    free = [oi for oi, modes in pb.modes.items() if len(modes) > 1]
    if math.prod(len(pb.modes[oi]) for oi in free) <= ENUMERATE:     # a few choices: try them all, no solver
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
    if found is not None:
        best, searched = found
    else:
        best = greedy(pb)
        count = transposes(pb, best)[0]
        bound = lower_bound(pb)
        if count <= bound:
            pb.solution = best
            return best, Optimality(count, bound, "greedy plan meets the lower bound")
        found = refine(pb, best, start + time_budget)
        if found is None:
            return _highs(pb, best, count, bound, start, time_budget)
        best, searched = found
    pb.solution = best
    count, bound = transposes(pb, best)[0], lower_bound(pb)
    if count <= bound and not searched:
        return best, Optimality(count, bound, "greedy plan meets the lower bound")
    ms = (time.perf_counter() - start) * 1000
    return best, Optimality(count, count, f"greedy plan, {searched} part(s) searched exactly (variable "
                                          f"elimination), {ms:.0f} ms")


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


def _ilp(pb: Problem, time_budget: float):
    """Binary y[op, mode] (one per op), z[tensor, layout] >= reads in that layout that its producer's mode does
    not give; minimise Transposes + bytes moved / (all bytes + 1). Returns (choice, count bound, optimal)."""
    try:
        import highspy
    except ImportError:
        return None
    sg = pb.sg
    col: dict[tuple, int] = {}
    cost: list[float] = []

    def var(key, c=0.0):
        if key not in col:
            col[key] = len(cost)
            cost.append(0.0)
        cost[col[key]] += c
        return col[key]

    producers = sg.producers()
    total = sum(pb.nbytes(t.index) for t in sg.tensors) * 8 + 1.0      # so bytes never outweigh one Transpose
    weight = {}

    def w(t):
        if t not in weight:
            weight[t] = 1.0 + (pb.nbytes(t) + 1) / total    # + 1: an inserted Transpose is a node more
        return weight[t]

    rows: list[tuple[dict[int, float], float]] = []    # sum(coef * x) >= lower
    for oi, modes in pb.modes.items():
        own = 1.0 + pb.nbytes(sg.ops[oi].inputs[0]) / total if sg.ops[oi].inputs else 1.0
        ys = [var(("y", oi, k), m.cost * own) for k, m in enumerate(modes)]
        rows.append(({y: 1.0 for y in ys}, 1.0))
        rows.append(({y: -1.0 for y in ys}, -1.0))

    def giving(t, ok) -> tuple[dict[int, float], bool]:
        """Variables of the producer modes after which t's layout satisfies ok(layout); or (_, constant truth)."""
        if t in pb.fixed or t in pb.pins or t not in producers or producers[t] not in pb.modes:
            have = pb.fixed.get(t, (pb.pins.get(t, L.identity(pb.rank(t))), ""))[0]
            return {}, ok(have)
        p = producers[t]
        slot = sg.ops[p].outputs.index(t)
        return {col[("y", p, k)]: 1.0 for k, m in enumerate(pb.modes[p]) if ok(m.writes[slot])}, False

    for oi, modes in pb.modes.items():
        op = sg.ops[oi]
        for k, m in enumerate(modes):
            for s, want in m.reads:
                t = op.inputs[s]
                terms, true = giving(t, lambda h, t=t, want=want: pb.free(t, h, want))
                if true:
                    continue
                z = var(("z", t, want), 0.0)
                cost[z] = w(t)
                row = {z: 1.0, col[("y", oi, k)]: -1.0}
                for y, c in terms.items():
                    row[y] = row.get(y, 0.0) + c
                rows.append((row, 0.0))
            for slot, t in enumerate(op.outputs):
                if t >= 0 and t in pb.pins and not pb.free(t, m.writes[slot], pb.pins[t]):
                    z = var(("z", t, "pin"))
                    cost[z] = w(t)
                    rows.append(({z: 1.0, col[("y", oi, k)]: -1.0}, 0.0))
    for t, allowed in pb.outputs_allowed.items():
        terms, true = giving(t, lambda h, t=t: pb.free(t, h, presented(pb, t, h)))
        if true:
            continue
        z = var(("z", t, "out"))
        cost[z] = w(t)
        rows.append(({z: 1.0, **{y: c for y, c in terms.items()}}, 1.0))

    h = highspy._Highs()            # the bare solver: Highs() adds callbacks and prints a banner
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_budget))
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 1e-7)
    n = len(cost)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, len(rows)
    lp.col_cost_ = np.asarray(cost)
    lp.col_lower_, lp.col_upper_ = np.zeros(n), np.ones(n)
    lp.row_lower_ = np.asarray([lo for _, lo in rows], dtype=float)
    lp.row_upper_ = np.full(len(rows), highspy.kHighsInf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    starts, index, value = [0], [], []
    for row, _ in rows:
        index += list(row)
        value += list(row.values())
        starts.append(len(index))
    lp.a_matrix_.start_ = np.asarray(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.asarray(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.asarray(value, dtype=float)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    values = h.getSolution().col_value
    if len(values) != n or status not in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kTimeLimit):
        return None
    choice = {}
    for oi, modes in pb.modes.items():
        k = max(range(len(modes)), key=lambda k: values[col[("y", oi, k)]])
        choice[oi] = modes[k]
    dual = h.getInfo().mip_dual_bound             # -inf when stopped before any bound
    bound = int(np.ceil(dual - 1 + 1e-6)) if np.isfinite(dual) else 0
    return choice, bound, status == highspy.HighsModelStatus.kOptimal
