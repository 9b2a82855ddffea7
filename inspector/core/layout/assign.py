"""Global layout assignment: each op picks one Mode (the layouts it reads and writes); the plan with the fewest
Transposes, ties broken by bytes moved, wins.

A tensor's layout is what its producer's mode writes (or its pin). A consumer mode reading it in another layout
costs one Transpose per distinct (tensor, layout) — none when only size-1 axes move (a Reshape, or Squeeze and
Unsqueeze when two dims are dynamic) — and a TFLite TRANSPOSE op is a choice like any other: it reads one of its
input's layouts and writes any layout, costing one unless its perm composed with those layouts is the identity or
only moves size-1 axes; an IF or WHILE costs what its subgraphs need at the boundary layouts it reads and writes
(nested.py). solve.py picks the modes: every combination when there are few, else a greedy forward pass (an upper
bound) and, only when it misses a lower bound (the Transposes no choice avoids), an exact search of the parts where
it pays (exact.py), or an ILP (HiGHS, imported then) when a part is too wide for it, within a time budget. Graph
inputs are decided by rule before (io_rules.py), pins are hard constraints.
"""
from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence

import numpy as np

from . import layout as L
from . import nested
from inspector.core.ir.graph import Op, Subgraph
from .layout import Perm
from .plan import Category, OpTable

I, T, A, X = Category.IMPLICIT, Category.TRANSPARENT, Category.ATTRIBUTE, Category.TERMINATE
MAX_CANDIDATES = 6            # layouts per tensor the search considers
MAX_COMBOS = 16               # input-layout combinations an Attribute rule is asked about
TIME_BUDGET = 2.0             # seconds HiGHS may search one subgraph


class Mode(NamedTuple):                       # a tuple: made by the thousand, cheaply
    """One way to run an op: the layout each activation input is read in and each output is written in."""
    reads: tuple[tuple[int, Perm], ...]       # (input slot, layout)
    writes: tuple[Perm, ...]                  # per output slot (-1 outputs get ())
    cost: int = 0                             # Transposes the op emits itself (a TFLite TRANSPOSE kept as one)
    kind: str = "meet"                        # conflict kind when an input is read in another layout
    why: str = ""                             # why the outputs have their layout ({layout}: the first's name)


Choice = dict[int, Mode]                      # op -> the mode it runs in


WHOLE = "the whole model: every op's layouts, its TRANSPOSE ops and its IF/WHILE subgraphs included"


@dataclass
class Optimality:
    """What the report says about the plan: its Transposes (its subgraphs' included), the proven lower bound, how
    it was found, and what the space it is proven over leaves out ("" nothing: WHOLE)."""
    transposes: int
    bound: int
    method: str
    left_out: str = ""

    @property
    def proven(self) -> bool:
        return self.transposes <= self.bound

    @property
    def over(self) -> str:
        return WHOLE if not self.left_out else f"{WHOLE}, except {self.left_out}"

    def to_dict(self) -> dict[str, object]:
        return {"transposes": self.transposes, "lower_bound": self.bound, "proven_optimal": self.proven,
                "method": self.method, "over": self.over}

    def describe(self) -> str:
        gap = "proven optimal" if self.proven else f"gap {self.transposes - self.bound} to the lower bound"
        over = f"; over the model except {self.left_out}" if self.left_out else ""
        return f"{self.transposes} Transpose(s), {gap} ({self.method}{over})"


_ID: dict[int, Perm] = {}
_CF: dict[int, Perm] = {}


def _id(rank: int) -> Perm:
    return _ID.get(rank) or _ID.setdefault(rank, L.identity(rank))


def _cf(rank: int) -> Perm:
    return _CF.get(rank) or _CF.setdefault(rank, L.channels_first(rank))


def nbytes(sg: Subgraph, t: int) -> int:
    ten = sg.tensors[t]
    size = _ITEMSIZE.get(ten.dtype)
    if size is None:
        size = _ITEMSIZE[ten.dtype] = np.dtype(ten.dtype).itemsize if ten.dtype in np.sctypeDict else 4
    for d in ten.dims:                  # (a loop, not a generator: this runs for every tensor of every plan)
        if d > 1:
            size *= d
    return size


_ITEMSIZE: dict[str, int] = {}      # dtype name -> bytes per element (4 for a name numpy does not know)


def _label(op: Op) -> str:
    return f"{op.opcode}#{op.index}"


@dataclass
class Problem:
    """The modes of every op of one subgraph, with candidate layouts propagated forward."""
    sg: Subgraph
    table: OpTable
    pins: dict[int, Perm]
    fixed: dict[int, tuple[Perm, str]]                 # graph input -> (layout, rule that decided it)
    skip: frozenset[int] | set[int]
    constants: set[int]
    outputs_allowed: dict[int, tuple[Perm, ...]]       # graph output -> layouts it may be presented in
    keep_io_layout: bool = False
    graph: Any = None                                  # the whole Graph, with subplans: IF/WHILE priced with it
    subplans: Any = None                               # nested.Subplans: the subgraphs' plans at given boundaries
    io_note: str = ""                                  # a subgraph's: who chose its boundary layouts
    narrowed: dict[int, str] = field(default_factory=dict)   # op -> what its modes leave out (nested.modes)
    modes: dict[int, list[Mode]] = field(default_factory=dict)
    cand: dict[int, list[Perm]] = field(default_factory=dict)
    _free: dict[tuple[int, Perm, Perm], bool] = field(default_factory=dict, repr=False)
    _bytes: dict[int, int] = field(default_factory=dict, repr=False)
    _demands: dict[int, list[Perm]] | None = field(default=None, repr=False)
    _graph: list[Any] = field(default_factory=list, repr=False)     # graph_facts() and single_writers(), shared
    solution: Choice | None = None      # the choice solve() made, when exact.resolve may start from it
    # After a re-plan from `reuse` (_rebuild): the ops whose modes, inputs' candidates or output pins may differ
    # from reuse's (every other op's are the same), and reuse's kept figures (its lower bound's, its solution's
    # Transposes and plan: solve.py, propagation.assemble), which the re-plan updates at those ops only.
    changed: set[int] | None = field(default=None, repr=False)
    kept: dict[str, Any] = field(default_factory=dict, repr=False)
    base: dict[str, Any] | None = field(default=None, repr=False)
    redo: set[int] | None = field(default=None, repr=False)     # solve._count's: the ops priced again
    changes: tuple[Any, ...] | None = field(default=None, repr=False)  # propagation._assemble_again's

    def rank(self, t: int) -> int:
        return self.sg.tensors[t].rank

    def acts(self, op: Op) -> list[tuple[int, int]]:
        return [(s, t) for s, t in enumerate(op.inputs) if t >= 0 and t not in self.constants]

    def candidates(self, t: int) -> list[Perm]:
        return self.cand.get(t) or [self.identity(t)]

    def identity(self, t: int) -> Perm:
        """Tensor t's TFLite layout."""
        return _id(self.sg.tensors[t].rank)

    def nbytes(self, t: int) -> int:
        if t not in self._bytes:
            self._bytes[t] = nbytes(self.sg, t)
        return self._bytes[t]

    def free(self, t: int, have: Perm, want: Perm) -> bool:
        """Reading t (layout `have`) in `want` needs no Transpose."""
        if have == want:
            return True
        key = (t, have, want)
        got = self._free.get(key)
        if got is None:
            got = self._free[key] = L.reads_free(self.sg.tensors[t].dims, have, want)
        return got

    def demands(self, t: int) -> list[Perm]:
        """Layouts t's consumers read it in whatever mode they take (a consumer with one way only). Per tensor, when
        asked (greedy asks about a few after a pin; a table of every tensor's would cost a re-plan dearly)."""
        if self._demands is None:
            self._demands = {}
        got = self._demands.get(t)
        if got is None:
            got = self._demands[t] = []
            ops, last = self.sg.ops, -1
            for oi in self.graph_facts()[1].get(t, ()):     # in op order; an op reading t twice is listed twice
                modes = self.modes.get(oi)
                if oi == last or modes is None:
                    continue
                last = oi
                for s, x in self.acts(ops[oi]):
                    if x == t:
                        ways = {w for m in modes for slot, w in m.reads if slot == s}
                        if len(ways) == 1:
                            got.append(next(iter(ways)))
        return got

    def build(self, reuse: Problem | None = None) -> Problem:
        """Every op's modes and every tensor's candidates. `reuse`: the same graph's problem under other pins; an
        op whose inputs' candidates and output pin are unchanged keeps its modes from there (_modes depends on
        nothing else), so the result is the same as built afresh. Then only the ops a changed pin reaches are
        looked at (_rebuild)."""
        for t, (perm, _) in self.fixed.items():
            self.cand[t] = [perm]
        if reuse is not None:               # facts about the graph and a tensor's shape alone: shared
            self._free, self._bytes, self._graph = reuse._free, reuse._bytes, reuse._graph
            self.narrowed = dict(reuse.narrowed)
            if self._topological():
                return self._rebuild(reuse)
        old_modes = reuse.modes if reuse is not None else {}
        for op in self.sg.ops:
            if op.index in self.skip:
                continue
            modes = old_modes.get(op.index)
            if modes is None or reuse is None or not self._same_inputs(op, reuse):
                modes = self._modes(op)
            self.modes[op.index] = modes
            self._outputs(op, modes)
        return self

    def _rebuild(self, reuse: Problem) -> Problem:
        """build() from `reuse` by following the change: the ops writing or reading a tensor whose pin or rule-decided
        layout changed, then the readers of every tensor whose candidates come out otherwise, in op order (a
        producer before its readers: _topological). Every other op would keep its modes and candidates."""
        self.modes, cand = dict(reuse.modes), dict(reuse.cand)
        cand.update(self.cand)
        self.cand = cand
        producers, consumers = self.graph_facts()[:2]
        changed = {t for t in set(self.pins) | set(reuse.pins) if self.pins.get(t) != reuse.pins.get(t)}
        changed |= {t for t in set(self.fixed) | set(reuse.fixed) if self.fixed.get(t) != reuse.fixed.get(t)}
        todo = sorted({o for t in changed for o in consumers.get(t, ())} |
                      {producers[t] for t in changed if t in producers})
        ops, seen = self.sg.ops, set(todo)
        self.changed, self.base = seen, dict(reuse.kept, solution=reuse.solution)
        heapq.heapify(todo)
        while todo:
            op = ops[heapq.heappop(todo)]
            if op.index in self.skip:
                continue
            modes = reuse.modes.get(op.index)
            if modes is None or not self._same_inputs(op, reuse):
                new = self._modes(op)
                modes = modes if new == modes else new      # the same object: exact.resolve sees no change
            self.modes[op.index] = modes
            self._outputs(op, modes)
            for t in op.outputs:
                if t >= 0 and self.cand.get(t) != reuse.cand.get(t):
                    for o in consumers.get(t, ()):
                        if o not in seen:
                            seen.add(o)
                            heapq.heappush(todo, o)
        return self

    def graph_facts(self) -> tuple[dict[int, int], dict[int, list[int]], bool, int]:
        """(producers, consumers, whether every op comes after the producers of its inputs, 8 × the bytes of all
        tensors + 1: exact.py's weight of one Transpose), once per graph."""
        if not self._graph:
            sg = self.sg
            producers, consumers = sg.producers(), sg.consumers()
            topo = True                     # (loops, not generators: once per plan of every model)
            for t, readers in consumers.items():
                if producers.get(t, -1) >= min(readers):
                    topo = False
                    break
            big = 0
            for ten in sg.tensors:
                big += self.nbytes(ten.index)
            big = big * 8 + 1
            written = 0
            for op in sg.ops:
                for t in op.outputs:
                    written += t >= 0
            single = len(producers) == written and producers.keys().isdisjoint(sg.inputs)
            self._graph.extend([producers, consumers, topo, big, single])
        producers, consumers, topo, big = self._graph[:4]
        return producers, consumers, topo, big

    def single_writers(self) -> bool:
        """Every tensor is written by one op at most, and no graph input by any (a tensor's layout is then its
        producer's or its rule's alone: what the re-plan's updates of the kept figures assume)."""
        self.graph_facts()
        return bool(self._graph[4])

    def _topological(self) -> bool:
        return self.graph_facts()[2]

    def _outputs(self, op: Op, modes: list[Mode]) -> None:
        """The candidates of op's outputs: a pin, what its one mode writes, or what its modes write (a few)."""
        for slot, t in enumerate(op.outputs):
            if t < 0:
                continue
            if t in self.pins:
                self.cand[t] = [self.pins[t]]
                continue
            rank = self.sg.tensors[t].rank
            if len(modes) == 1:
                w = modes[0].writes[slot]
                self.cand[t] = [w if len(w) == rank else _id(rank)]
                continue
            seen = list(dict.fromkeys([m.writes[slot] for m in modes if len(m.writes[slot]) == rank]))
            self.cand[t] = seen[:MAX_CANDIDATES] or [_id(rank)]

    def _same_inputs(self, op: Op, other: Problem) -> bool:
        """Would _modes(op) see the same here as in `other`: its inputs' candidates and its first output's pin."""
        out = op.outputs[0] if op.outputs else -1
        if out >= 0 and self.pins.get(out) != other.pins.get(out):
            return False
        return all(self.candidates(t) == other.candidates(t) for _, t in self.acts(op))

    def _modes(self, op: Op) -> list[Mode]:
        if self.subplans is not None and op.opcode in ("IF", "WHILE"):
            got = nested.modes(self, op, _nested_mode)
            self.narrowed.pop(op.index, None)
            if got is not None:
                if got[1]:
                    self.narrowed[op.index] = got[1]
                return got[0]
        rule = self.table.get(op.opcode)
        acts = self.acts(op)
        tensors = self.sg.tensors
        ranks = [tensors[t].rank if t >= 0 else 0 for t in op.outputs]
        cat = rule.category if rule is not None else None
        if rule is not None and cat is I:
            reads = tuple([(s, _cf(tensors[t].rank) if s in rule.layout_inputs else _id(tensors[t].rank))
                           for s, t in acts])
            return [Mode(reads, tuple([_cf(r) for r in ranks]),
                         why=f"written by {_label(op)} (Implicit): channels-first")]
        if cat is T:
            return self._transparent(op, acts, ranks)
        if rule is not None and op.opcode == "TRANSPOSE":
            transposed = self._transpose(op)
            if transposed:
                return transposed
        ident = Mode(tuple([(s, _id(tensors[t].rank)) for s, t in acts]), tuple([_id(r) for r in ranks]),
                     kind="no-rule" if cat is not X else "terminate",
                     why=f"{_label(op)} has no layout rule: TFLite layout" if rule is None
                     else f"{_label(op)} has no rule for this layout: TFLite layout" if cat is A
                     else f"written by {_label(op)} (Terminate): TFLite layout")
        if rule is None:
            return [ident]
        if rule.rule is None:
            return [ident]
        out_pin = self.pins.get(op.outputs[0]) if op.outputs and op.outputs[0] >= 0 else None
        unique: dict[tuple[Any, ...], Mode] = {}
        kind, why = "terminate" if cat is X else "meet", f"derived by {_label(op)} ({rule.category.value}): {{layout}}"
        for combo in self._combos(acts):
            in_perms: list[Perm | None] = [None] * len(op.inputs)
            for (s, _), p in zip(acts, combo):
                in_perms[s] = p
            got = rule.rule(op, self.sg, in_perms, out_pin)
            if got is None:
                continue
            want, outs = got
            reads = tuple([(s, tuple(want[s]) if s in want else _id(tensors[t].rank)) for s, t in acts])
            writes = tuple([tuple(outs[k]) if k < len(outs) else _id(r) for k, r in enumerate(ranks)])
            if (reads, writes) not in unique:
                unique[reads, writes] = Mode(reads, writes, kind=kind, why=why)
        unique.setdefault((ident.reads, ident.writes), ident)   # the same layouts under another name: one mode
        return list(unique.values())

    def _combos(self, acts: list[tuple[int, int]]) -> list[tuple[Perm, ...]]:
        lists = [self.candidates(t) for _, t in acts]
        if len(lists) == 1:
            return [(p,) for p in lists[0]]
        if math.prod(len(c) for c in lists) <= MAX_COMBOS:
            return list(itertools.product(*lists))
        first = lists[0]        # too many: every input in the first input's layout where it can be
        return [tuple(p if p in c else c[0] for c in lists) for p in first]

    def _transparent(self, op: Op, acts: list[tuple[int, int]], ranks: list[int]) -> list[Mode]:
        r0 = ranks[0] if ranks else 0
        out_pin = self.pins.get(op.outputs[0]) if op.outputs and op.outputs[0] >= 0 else None
        options = [p for s, t in acts if self.rank(t) == r0 for p in self.candidates(t)]
        options += [_cf(r0), _id(r0)] + ([out_pin] if out_pin and len(out_pin) == r0 else [])
        why = f"follows {_label(op)} (Transparent): {{layout}}"
        act_ranks = [(s, self.rank(t)) for s, t in acts]
        modes = []
        for p in list(dict.fromkeys(options))[:MAX_CANDIDATES]:
            reads = tuple([(s, p if r == r0 else _id(r)) for s, r in act_ranks])
            modes.append(Mode(reads, tuple([p if r == r0 else _id(r) for r in ranks]), why=why))
        return modes

    def _transpose(self, op: Op) -> list[Mode]:
        """A TFLite TRANSPOSE by q reads p and writes r; free when compose(p⁻¹, q∘r) only moves size-1 axes."""
        q_t = op.inputs[1] if len(op.inputs) > 1 else -1
        if q_t < 0 or self.sg.tensors[q_t].data is None or op.inputs[0] in self.constants:
            return []
        q = tuple(np.asarray(self.sg.tensors[q_t].data).reshape(-1).tolist())
        x, y = op.inputs[0], op.outputs[0]
        if sorted(q) != list(range(self.rank(x))) or self.rank(y) != len(q):
            return []
        ins, q_inv, dims = self.candidates(x), L.inverse(q), self.sg.tensors[x].dims
        outs = list(dict.fromkeys([L.compose(q_inv, p) for p in ins] + [_id(len(q)), _cf(len(q))]))
        # (compose, is_trivial and is_identity written out over lists: this pair of loops runs per TFLite
        # TRANSPOSE, for up to MAX_CANDIDATES² pairs of layouts)
        then = [(r, [q[a] for a in r]) for r in outs[:MAX_CANDIDATES]]       # compose(q, r)
        whys = {what: f"written by {_label(op)} (TRANSPOSE, {what} here): {{layout}}"
                for what in ("Transpose", "an Identity", "a Reshape")}
        ident = list(range(len(q)))
        free, paid = [], []                 # the modes in order, those that cost nothing first (a stable sort)
        for p in ins:
            p_inv, seen, read = L.inverse(p), [dims[a] for a in p], ((0, p),)
            for r, qr in then:
                net = [p_inv[a] for a in qr]                                      # compose(p_inv, compose(q, r))
                moved = [a for a in net if seen[a] != 1]
                if moved == sorted(moved):                                        # is_trivial(seen, net)
                    free.append(Mode(read, (r,), 0, "meet", whys["an Identity" if net == ident else "a Reshape"]))
                else:
                    paid.append(Mode(read, (r,), 1, "meet", whys["Transpose"]))
        return free + paid


def _nested_mode(reads: Sequence[tuple[int, Perm]], writes: Sequence[Perm], cost: int, why: str) -> Mode:
    return Mode(tuple(reads), tuple(writes), cost=cost, kind="terminate", why=why)


def left_out(pb: Problem) -> str:
    """What the space the plan is proven over leaves out ("" nothing): IF/WHILE boundaries priced at some of their
    layout combinations only, subgraph plans not proven optimal."""
    return "; ".join(dict.fromkeys(pb.narrowed[oi] for oi in sorted(pb.narrowed) if oi in pb.modes))


def presented(pb: Problem, t: int, have: Perm) -> Perm:
    """The layout graph output t is presented in: its own when allowed, else the first allowed one."""
    allowed = pb.outputs_allowed[t]
    if have in allowed:
        return have
    return next((a for a in allowed if pb.free(t, have, a)), allowed[0])


def layouts(pb: Problem, choice: Choice) -> dict[int, Perm]:
    """Every tensor's layout under `choice` (pins override what the producer writes)."""
    lay = {t: p for t, (p, _) in pb.fixed.items()}
    for oi, m in choice.items():
        for slot, t in enumerate(pb.sg.ops[oi].outputs):
            if t >= 0:
                lay[t] = pb.pins.get(t, m.writes[slot])
    return lay
