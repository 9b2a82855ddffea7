"""The exact plan without an ILP: min-sum variable elimination (dynamic programming) over the ops with a choice.

Each tensor prices its Transposes from the modes of its producer and of its readers: a table over those ops (a
factor). Ops are eliminated one at a time, the one whose table comes out smallest first: the factors holding it are
summed and minimised over its modes, remembering its best mode for each assignment of the rest; the best modes are
then read back in reverse. Exact, and fast while the graph stays narrow (chains, skip connections, attention blocks
keep the tables to a few entries); a part too wide for MAX_TABLE is left to HiGHS, that part alone (ilp.py).

The objective is the ILP's in integers: Transposes × BIG + bytes they move + inserted nodes (BIG exceeds any sum
of the rest, so the count comes first). Ties go to the lowest mode index, so the same problem gives the same plan.
"""
from __future__ import annotations

import heapq
import math
import time
from collections.abc import Iterable
from typing import Callable

import numpy as np

from .assign import Choice, Mode, Problem, layouts, presented
from .layout import Perm
from .ilp import ilp

MAX_TABLE = 1 << 17         # entries of one table while eliminating (1 MiB); a wider graph is left to HiGHS
SMALL_TABLE = 512           # a tensor's table up to this many entries is counted in Python (_tensor_factor)
Scope = tuple[int, ...]     # op indices, ascending: the axes of a factor's table
Factor = tuple[Scope, np.ndarray]
PerMode = list[set[Perm]]                    # per mode of a reader op, the layouts it reads a tensor in
Readers = dict[int, dict[int, PerMode]]      # tensor -> reader op -> PerMode (_readers' cache)
Greedy = Callable[[Problem, "list[int] | None", "dict[int, Perm] | None"], Choice]    # solve.greedy


class TooWide(Exception):
    """A tensor read by so many ops with a choice that its table alone exceeds MAX_TABLE."""


def components(pb: Problem) -> tuple[list[list[int]], dict[int, int]]:
    """The ops with a choice, grouped so that no tensor's Transposes depend on ops of two groups: a tensor joins
    its producer (unless its layout is pinned or decided by rule) and its readers. Also each op's group."""
    sg, modes = pb.sg, pb.modes
    parent = {oi: oi for oi, ms in modes.items() if len(ms) > 1}

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = x = parent[parent[x]]
        return x

    touch: dict[int, int] = {}                  # tensor -> a free op touching it
    for oi in parent:
        op = sg.ops[oi]
        own = [t for t in op.outputs if t >= 0 and t not in pb.pins]
        for t in [op.inputs[s] for s, _ in modes[oi][0].reads] + own:
            other = touch.setdefault(t, oi)
            a, b = root(other), root(oi)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for oi in parent:
        groups.setdefault(root(oi), []).append(oi)
    of = {oi: k for k, g in enumerate(groups.values()) for oi in g}
    return list(groups.values()), of


def factors(pb: Problem, big: int, ops: list[int], readers: Readers) -> list[Factor]:
    """Tables of the objective's terms that depend on the choices of `ops` (one group of `components`); terms no
    choice of theirs changes are left out. `readers`: tensor -> reader op -> per mode, the layouts it reads."""
    sg, modes = pb.sg, pb.modes
    inside = set(ops)
    free = _Free(modes)
    producers = pb.graph_facts()[0]
    out: list[tuple[Scope, np.ndarray]] = []
    seen: set[int] = set()
    for oi in ops:
        op, ms = sg.ops[oi], modes[oi]
        if any(m.cost for m in ms):                 # a TFLite TRANSPOSE kept as a Transpose
            nb = pb.nbytes(op.inputs[0])
            out.append(((oi,), np.array([m.cost * (big + nb) for m in ms], np.int64)))
        for t in [op.inputs[s] for s, _ in ms[0].reads] + [t for t in op.outputs if t >= 0]:
            if t in seen:
                continue
            seen.add(t)
            unit = big + pb.nbytes(t) + 1
            if t in pb.pins and producers.get(t) == oi:    # the producer's write against the pin
                pin = pb.pins[t]
                out.append(((oi,), np.array([0 if pb.free(t, w, pin) else unit for w in _writes(pb, t, oi)],
                                            np.int64)))
            haves, var = _haves(pb, t, producers, free)
            by = _readers(pb, t, readers)
            if (var not in inside) if var is not None else not any(r in inside for r in by):
                continue                            # another group's (t pinned: its readers' group)
            got = _tensor_factor(pb, t, haves, var, by, free, unit)
            if got is not None:
                out.append(got)
    return out


def _paying(pb: Problem, choice: Choice, of: dict[int, int]) -> set[int]:
    """The groups where `choice` pays a Transpose: one of their ops keeps a TRANSPOSE, reads a tensor in a layout
    it does not have, or writes one that a reader, a pin or the graph's output takes otherwise. Elsewhere every
    table of the group is at 0 (or at a value no choice of its changes): nothing to search."""
    sg, pins = pb.sg, pb.pins
    lay = layouts(pb, choice)
    producers = pb.graph_facts()[0]
    out: set[int] = set()

    def maker(t: int) -> None:
        p = producers.get(t)
        if p in of and t not in pins and t not in pb.fixed:
            out.add(of[p])

    for oi, m in choice.items():
        op = sg.ops[oi]
        if m.cost and oi in of:
            out.add(of[oi])
        for s, want in m.reads:
            t = op.inputs[s]
            if not pb.free(t, lay.get(t) or pb.identity(t), want):
                if oi in of:
                    out.add(of[oi])
                maker(t)
        for slot, t in enumerate(op.outputs):
            if t >= 0 and t in pins and oi in of and not pb.free(t, m.writes[slot], pins[t]):
                out.add(of[oi])
    for t in pb.outputs_allowed:
        have = lay.get(t) or pb.identity(t)
        if not pb.free(t, have, presented(pb, t, have)):
            maker(t)
    return out


class _Free:
    """`oi in free`: op oi has a choice (a set of them would cost a pass over every op)."""
    __slots__ = ("modes",)

    def __init__(self, modes: dict[int, list[Mode]]):
        self.modes = modes

    def __contains__(self, oi: int) -> bool:
        ms = self.modes.get(oi)
        return ms is not None and len(ms) > 1


def _readers(pb: Problem, t: int, known: Readers) -> dict[int, PerMode]:
    """Reader op -> per mode, the layouts it reads t in (kept in `known`, by t, for this search)."""
    got = known.get(t)
    if got is None:
        got = known[t] = {}
        for oi in pb.graph_facts()[1].get(t, ()):
            ms = pb.modes.get(oi)
            if ms is None or oi in got:
                continue
            inputs = pb.sg.ops[oi].inputs
            got[oi] = [{w for s, w in m.reads if inputs[s] == t} for m in ms]
    return got


def _writes(pb: Problem, t: int, oi: int) -> list[Perm]:
    slot = pb.sg.ops[oi].outputs.index(t)
    return [m.writes[slot] for m in pb.modes[oi]]


def _haves(pb: Problem, t: int, producers: dict[int, int], free: _Free) -> tuple[list[Perm], int | None]:
    """The layouts t may have, and the op whose mode decides which (None: the one layout it has)."""
    if t in pb.fixed:
        return [pb.fixed[t][0]], None
    if t in pb.pins:
        return [pb.pins[t]], None
    p = producers.get(t)
    if p not in pb.modes:
        return [pb.identity(t)], None
    return _writes(pb, t, p), (p if p in free else None)


def _tensor_factor(pb: Problem, t: int, haves: list[Perm], var: int | None, readers: dict[int, PerMode], free: _Free,
                   unit: int) -> Factor | None:
    """One table over t's producer (when it has a choice) and its readers with a choice: a Transpose for each
    distinct layout read that t's layout does not give for free, and one when a graph output is presented
    otherwise than it is computed. (An entry is `unit` × the layouts read there that its layout pays for: each
    entry counted over sets in Python, one array made at the end; numpy per layout read cost more on the few
    entries most tables have. A wide table is summed with numpy, layout by layout: _wide_factor.)"""
    fixed_wants: set[Perm] = set()
    axes, reads = ([var] if var is not None else []), []
    for oi, per in readers.items():
        if oi in free:
            axes.append(oi)
            reads.append(per)
        else:
            fixed_wants |= per[0]
    if not axes:
        return None
    hv = haves if var is not None else haves[:1]
    lead = var is not None
    shape = tuple([len(hv)] * lead + [len(per) for per in reads])
    size = math.prod(shape)
    if size > MAX_TABLE:
        raise TooWide(t)
    if size > SMALL_TABLE or len(set(axes)) < len(axes):
        return _wide_factor(pb, t, hv, axes, reads, fixed_wants, unit)
    # every layout read in some combination of the readers' modes: the union over their modes, one per entry
    unions = [set(fixed_wants)]
    for per in reads:
        unions = [u | ws for u in unions for ws in per]
    out = t in pb.outputs_allowed and lead
    read = set().union(*unions)
    flat = []
    for h in hv:
        paid = {w for w in read if not pb.free(t, h, w)}
        extra = (0 if pb.free(t, h, presented(pb, t, h)) else unit) if out else 0
        flat += [unit * len(u & paid) + extra for u in unions]
    table = np.array(flat, np.int64).reshape(shape)
    order = sorted(range(len(axes)), key=lambda a: axes[a])
    if order == list(range(len(axes))):
        return tuple(axes), table
    return tuple(axes[a] for a in order), np.ascontiguousarray(table.transpose(order))


def _wide_factor(pb: Problem, t: int, hv: list[Perm], axes: list[int], reads: list[PerMode], fixed_wants: set[Perm],
                 unit: int) -> Factor:
    """_tensor_factor's table summed with numpy, one layout read at a time (a wide table)."""
    n, lead = len(axes), len(axes) - len(reads)
    table = np.zeros(tuple([len(hv)] * lead + [len(per) for per in reads]), np.int64)
    wants = list(dict.fromkeys([w for per in reads for ws in per for w in sorted(ws)] + sorted(fixed_wants)))
    for w in wants:
        paid = np.array([0 if pb.free(t, h, w) else unit for h in hv], np.int64)
        if not paid.any():
            continue
        if w in fixed_wants:
            used = np.ones((1,) * n, bool)
        else:
            used = np.zeros((1,) * n, bool)
            for j, per in enumerate(reads):
                col = np.array([w in ws for ws in per], bool).reshape([-1 if a == lead + j else 1 for a in range(n)])
                used = used | col
        table += used * paid.reshape([-1] + [1] * (n - 1)) if lead else used * int(paid[0])
    if t in pb.outputs_allowed and lead:
        out = np.array([0 if pb.free(t, h, presented(pb, t, h)) else unit for h in hv], np.int64)
        table += out.reshape([-1] + [1] * (n - 1))
    order = sorted(range(n), key=lambda a: axes[a])
    return tuple(axes[a] for a in order), np.ascontiguousarray(table.transpose(order))


def eliminate(domains: dict[int, int], tables: list[tuple[Scope, np.ndarray]],
              deadline: float) -> dict[int, int] | None:
    """The assignment (op -> mode index) minimising the sum of the tables, or None when a table would exceed
    MAX_TABLE or the deadline passes."""
    holding: dict[int, set[int]] = {v: set() for v in domains}
    store: dict[int, tuple[Scope, np.ndarray]] = {}
    for i, (scope, arr) in enumerate(tables):
        store[i] = (scope, arr)
        for v in scope:
            holding[v].add(i)
    nxt = len(store)

    def size(v: int) -> int:            # entries of v's joint table: its tables' axes (its own when none)
        axes: set[int] = set()
        for i in holding[v]:
            axes.update(store[i][0])
        n = 1
        for u in axes or (v,):
            n *= domains[u]
        return n

    heap = [(size(v), v) for v in domains]
    heapq.heapify(heap)
    steps: list[tuple[int, Scope, np.ndarray | None]] = []
    done: set[int] = set()
    while heap:
        s, v = heapq.heappop(heap)
        if v in done:
            continue
        now = size(v)
        if now != s:
            heapq.heappush(heap, (now, v))
            continue
        if now > MAX_TABLE or time.perf_counter() > deadline:
            return None
        ids = sorted(holding[v])
        scope = tuple(sorted(set().union(*(store[i][0] for i in ids)))) if ids else (v,)
        joint = None                    # (the sum's broadcast shape is the scope's: the tables cover its axes)
        for i in ids:
            sc, arr = store.pop(i)
            joint = _spread(arr, sc, scope) if joint is None else joint + _spread(arr, sc, scope)
            for u in sc:
                holding[u].discard(i)
        if joint is None:
            joint = np.zeros(domains[v], np.int64)
        axis = scope.index(v)
        arg = joint.argmin(axis)
        rest = scope[:axis] + scope[axis + 1:]
        steps.append((v, rest, arg))
        done.add(v)
        if rest:
            store[nxt] = (rest, joint.min(axis))
            for u in rest:
                holding[u].add(nxt)
                heapq.heappush(heap, (size(u), u))
            nxt += 1
    pick: dict[int, int] = {}
    for v, rest, arg in reversed(steps):
        pick[v] = arg.item(tuple([pick[u] for u in rest])) if rest else int(arg)
    return pick


def _spread(arr: np.ndarray, scope: Scope, target: Scope) -> np.ndarray:
    """arr (axes `scope`, a subsequence of `target`) shaped to broadcast over `target`'s axes."""
    if scope == target:
        return arr
    shape = [1] * len(target)
    for u, d in zip(scope, arr.shape):
        shape[target.index(u)] = d
    return arr.reshape(shape)


def refine(pb: Problem, choice: Choice, deadline: float) -> tuple[Choice, tuple[int, ...]] | None:
    """`choice` (greedy's) made optimal group by group (`components`, _search). (The optimal choice, groups
    searched by elimination and by HiGHS), or None when a group defeats both (HiGHS out of time)."""
    big = pb.graph_facts()[3]
    if not _fits(pb, big):                      # HiGHS decides
        return None
    groups, of = components(pb)
    readers: Readers = {}
    out, searched = dict(choice), [0, 0]
    for k in sorted(_paying(pb, choice, of)):
        ops = groups[k]
        found = _search(pb, ops, choice, _tables(pb, big, ops, readers), deadline)
        if found is None:
            return None
        out.update((oi, found[0][oi]) for oi in ops)
        if found[1] is not None:
            searched[found[1]] += 1
    return out, tuple(searched)


def _fits(pb: Problem, big: int) -> bool:
    """Every sum of the tables stays within int64 (a Transpose weighs `big`; each tensor and op adds a few)."""
    return big * 16 * (len(pb.sg.tensors) + len(pb.modes) + 1) < 1 << 62


def _tables(pb: Problem, big: int, ops: list[int], readers: Readers) -> list[Factor] | None:
    try:
        return factors(pb, big, ops, readers)
    except TooWide:
        return None


def _search(pb: Problem, ops: list[int], choice: Choice, tables: list[Factor] | None, deadline: float
            ) -> tuple[Choice, int | None] | None:
    """(The best modes of one group, how: None, 0 searched, 1 by HiGHS): `choice` itself when it reaches the sum
    of the tables' minima (no choice does better) or the search finds nothing better (an equally good other plan is
    not taken: fewer plans change), else the search's; HiGHS's optimal plan of the group when it is too wide for the
    search (`tables` None: one tensor's table alone is too big). None when both fail."""
    def value(pick: dict[int, int]) -> int:
        return sum([a.item(tuple([pick[oi] for oi in sc])) for sc, a in tables or ()])  # (item: a Python int)

    mine = {oi: pb.modes[oi].index(choice[oi]) for oi in ops}
    have = value(mine)
    if tables is not None and have <= sum(int(a.min()) for _, a in tables):
        return choice, None
    pick = None if tables is None else eliminate({oi: len(pb.modes[oi]) for oi in ops}, tables, deadline)
    if pick is None:
        got = ilp(pb, max(0.0, deadline - time.perf_counter()), part=ops)
        return (got[0], 1) if got is not None and got[2] else None
    if value(pick) >= have:
        return choice, 0
    return {oi: pb.modes[oi][i] for oi, i in pick.items()}, 0


def resolve(pb: Problem, old: Problem, deadline: float, greedy: Greedy
            ) -> tuple[Choice, tuple[int, ...], set[int]] | None:
    """What refine(pb, greedy(pb)) chooses, (choice, groups searched each way, the ops greedy ran on), from `old` (the same graph's problem
    under other pins, pb built from it) and the choice solve() made there: a group with no op, neighbour or tensor
    whose modes or pin changed keeps old's modes (greedy and the search would choose them again: they see only
    the group and its neighbours); greedy and the search run on the others. None when old has no such choice,
    the op order is not topological (greedy would read other layouts) or a search fails."""
    prev = old.solution
    producers, consumers, topo, big = pb.graph_facts()
    if prev is None or not topo or not _fits(pb, big):
        return None
    modes, ops = pb.modes, pb.sg.ops
    free = _Free(modes)
    groups: dict[int, list[int]] = {}           # the groups around a change, by their first op
    found_in: set[int] = set()

    def near(*around: int) -> None:
        for o in around:
            if o in free and o not in found_in:
                group = _group(pb, o)
                groups[group[0]] = group
                found_in.update(group)

    # (after Problem._rebuild only the ops it looked at may have other modes than old's)
    for oi, ms in (modes.items() if pb.changed is None else ((o, modes[o]) for o in sorted(pb.changed) if o in modes)):
        if old.modes.get(oi) is not ms:
            near(oi)
            for t in (*ops[oi].inputs, *ops[oi].outputs):
                if t >= 0:
                    near(producers.get(t, -1), *consumers.get(t, ()))
    for t in {*pb.pins, *old.pins, *pb.fixed, *old.fixed}:
        if pb.pins.get(t) != old.pins.get(t) or pb.fixed.get(t) != old.fixed.get(t):
            near(producers.get(t, -1), *consumers.get(t, ()))
    mine = _greedy_in(pb, [oi for group in groups.values() for oi in group], prev, greedy)
    readers: Readers = {}
    searched = [0, 0]
    for k in sorted(groups):
        found = _search(pb, groups[k], mine, _tables(pb, big, groups[k], readers), deadline)
        if found is None:
            return None
        mine.update((oi, found[0][oi]) for oi in groups[k])
        if found[1] is not None:
            searched[found[1]] += 1
    redo: Iterable[int]
    if pb.changed is not None and len(prev) == len(modes):
        # every other op keeps old's modes, and with them its mode in prev (the one mode of a one-way op)
        out = dict(prev)
        redo = (o for o in sorted(pb.changed.union(mine)) if o in modes)
    else:
        out, redo = {}, modes
    for oi in redo:
        ms = modes[oi]
        got = ms[0] if len(ms) == 1 else mine.get(oi) or prev.get(oi)
        if got is None:
            return None
        out[oi] = got
    return out, tuple(searched), set(mine)


def _group(pb: Problem, start: int) -> list[int]:
    """The group of `components` that holds op `start` (which has a choice), found from it alone, in op order."""
    modes, ops, pins = pb.modes, pb.sg.ops, pb.pins
    producers, consumers = pb.graph_facts()[:2]

    def touched(oi: int) -> list[int]:          # as components() joins them
        op = ops[oi]
        return [op.inputs[s] for s, _ in modes[oi][0].reads] + [t for t in op.outputs if t >= 0 and t not in pins]

    seen, todo = {start}, [start]
    while todo:
        for t in touched(todo.pop()):
            for o in (producers.get(t, -1), *consumers.get(t, ())):
                if o not in seen and len(modes.get(o, ())) > 1 and t in touched(o):
                    seen.add(o)
                    todo.append(o)
    return sorted(seen)


def _greedy_in(pb: Problem, group_ops: list[int], prev: Choice, greedy: Greedy) -> Choice:
    """`greedy`'s (solve.greedy) choice for `group_ops` alone: it runs over them and the one-way readers of their
    tensors (whose reads it remembers), the layouts of the other tensors they read given (a pin, or what their
    producer writes: its one mode, or its mode in `prev`)."""
    producers, consumers = pb.graph_facts()[:2]
    ops, modes = pb.sg.ops, pb.modes
    run = set(group_ops)
    lay = {t: p for t, (p, _) in pb.fixed.items()}
    for oi in group_ops:
        op = ops[oi]
        for t in (*op.inputs, *op.outputs):
            run.update(o for o in consumers.get(t, ()) if o in modes and len(modes[o]) == 1)
    for oi in run:
        for t in ops[oi].inputs:
            p = producers.get(t)
            if t < 0 or t in lay or p is None or p in run or p not in modes:
                continue
            m = modes[p][0] if len(modes[p]) == 1 else prev.get(p)
            if m is not None:
                lay[t] = pb.pins.get(t, m.writes[ops[p].outputs.index(t)])
    return greedy(pb, sorted(run), lay)
