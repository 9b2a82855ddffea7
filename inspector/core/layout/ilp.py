"""The layout problem as an integer program solved by HiGHS (`highspy`, imported only here): the fallback for a
part of the graph too wide for exact.py's search, or for the whole graph when that search runs out of time."""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import layout as L
from .assign import Choice, Mode, Problem, presented
from .layout import Perm


def ilp(pb: Problem, time_budget: float, part: list[int] | None = None) -> tuple[Choice, int, bool] | None:
    """Binary y[op, mode] (one per op), z[tensor, layout] >= reads in that layout that its producer's mode does
    not give; minimise Transposes + bytes moved / (all bytes + 1). Returns (choice, count bound, optimal).
    `part`: only these ops are decided (one group of exact.components: every tensor they touch is written by one of
    them, by a one-way op or pinned), with the one-way readers of their tensors (which share its Transposes); the
    choice has the part's ops only and the bound counts the part's terms only."""
    try:
        import highspy
    except ImportError:
        return None
    sg = pb.sg
    scope = pb.modes if part is None else _scope(pb, part)
    mine = set(scope) if part is None else set(part)
    touched = None if part is None else {t for oi in part for t in (*sg.ops[oi].inputs, *sg.ops[oi].outputs)}
    col: dict[tuple[object, ...], int] = {}
    cost: list[float] = []

    def var(key: tuple[object, ...], c: float = 0.0) -> int:
        if key not in col:
            col[key] = len(cost)
            cost.append(0.0)
        cost[col[key]] += c
        return col[key]

    producers, total = pb.graph_facts()[0], float(pb.graph_facts()[3])   # so bytes never outweigh one Transpose
    weight: dict[int, float] = {}

    def w(t: int) -> float:
        if t not in weight:
            weight[t] = 1.0 + (pb.nbytes(t) + 1) / total    # + 1: an inserted Transpose is a node more
        return weight[t]

    rows: list[tuple[dict[int, float], float]] = []    # sum(coef * x) >= lower
    for oi, modes in scope.items():
        own = 1.0 + pb.nbytes(sg.ops[oi].inputs[0]) / total if sg.ops[oi].inputs else 1.0
        ys = [var(("y", oi, k), m.cost * own) for k, m in enumerate(modes)]
        rows.append(({y: 1.0 for y in ys}, 1.0))
        rows.append(({y: -1.0 for y in ys}, -1.0))

    def giving(t: int, ok: Callable[[Perm], bool]) -> tuple[dict[int, float], bool]:
        """Variables of the producer modes after which t's layout satisfies ok(layout); or (_, constant truth)."""
        if t in pb.fixed or t in pb.pins or t not in producers or producers[t] not in pb.modes:
            have = pb.fixed.get(t, (pb.pins.get(t, L.identity(pb.rank(t))), ""))[0]
            return {}, ok(have)
        p = producers[t]
        slot = sg.ops[p].outputs.index(t)
        if p not in scope:                          # outside the part: a one-way op's
            return {}, ok(pb.modes[p][0].writes[slot])
        return {col[("y", p, k)]: 1.0 for k, m in enumerate(pb.modes[p]) if ok(m.writes[slot])}, False

    for oi, modes in scope.items():
        op = sg.ops[oi]
        for k, m in enumerate(modes):
            for s, want in m.reads:
                t = op.inputs[s]
                if touched is not None and oi not in mine and t not in touched:
                    continue                        # a one-way reader's other inputs: nothing the part decides
                terms, true = giving(t, lambda h: pb.free(t, h, want))   # (called at once: no late binding)
                if true:
                    continue
                z = var(("z", t, want), 0.0)
                cost[z] = w(t)
                row = {z: 1.0, col[("y", oi, k)]: -1.0}
                for y, c in terms.items():
                    row[y] = row.get(y, 0.0) + c
                rows.append((row, 0.0))
            for slot, t in enumerate(op.outputs):
                if oi in mine and t >= 0 and t in pb.pins and not pb.free(t, m.writes[slot], pb.pins[t]):
                    z = var(("z", t, "pin"))
                    cost[z] = w(t)
                    rows.append(({z: 1.0, col[("y", oi, k)]: -1.0}, 0.0))
    for t in pb.outputs_allowed:
        if part is not None and producers.get(t) not in mine:
            continue
        terms, true = giving(t, lambda h: pb.free(t, h, presented(pb, t, h)))
        if true:
            continue
        z = var(("z", t, "out"))
        cost[z] = w(t)
        rows.append(({z: 1.0, **{y: c for y, c in terms.items()}}, 1.0))

    h = highspy._Highs()            # type: ignore[attr-defined]  # the bare solver: Highs() adds callbacks and a banner
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
    for oi, modes in (pb.modes.items() if part is None else ((oi, pb.modes[oi]) for oi in part)):
        k = max(range(len(modes)), key=lambda k: values[col[("y", oi, k)]])
        choice[oi] = modes[k]
    dual = h.getInfo().mip_dual_bound             # -inf when stopped before any bound
    bound = int(np.ceil(dual - 1 + 1e-6)) if np.isfinite(dual) else 0
    return choice, bound, status == highspy.HighsModelStatus.kOptimal


def _scope(pb: Problem, part: list[int]) -> dict[int, list[Mode]]:
    """The part's ops and the one-way readers of its tensors, in op order, with their modes."""
    ops, consumers = pb.sg.ops, pb.graph_facts()[1]
    inside = set(part)
    for oi in part:
        for t in (*ops[oi].inputs, *ops[oi].outputs):
            inside.update(o for o in consumers.get(t, ()) if o in pb.modes and len(pb.modes[o]) == 1)
    return {oi: pb.modes[oi] for oi in sorted(inside)}
