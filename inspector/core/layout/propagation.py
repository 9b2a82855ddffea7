"""Layout planning: decide each tensor's layout in the ONNX graph and where Transposes are unavoidable.

`plan_layouts` solves the whole graph at once: assign.py lists each op's modes (the layouts it can read and
write), solve.py picks one per op with the fewest Transposes (greedy, then HiGHS when greedy misses the lower
bound) and `assemble` turns the choice into a LayoutPlan. What the ops allow:
- Implicit ops read and write channels-first (ONNX Conv is NCHW);
- Transparent ops read all same-rank inputs and write in one layout, any of their candidates;
- Attribute ops run their own rule for each combination of input layouts (axes remapped);
- Terminate ops read the TFLite layout (a Reshape also accepts a layout that only moves size-1 axes);
- a TFLite TRANSPOSE by q reading p and writing r emits compose(p⁻¹, q∘r): nothing, a Reshape or a Transpose.
Every input read in a layout it does not have becomes a Conflict: one Transpose, with its reason. Graph inputs are
decided by rule first (assign.input_layout); user pins are hard constraints.
"""
from __future__ import annotations

from copy import copy
from typing import AbstractSet, Any, Sequence

from . import layout as L
from inspector.core.ir.graph import Graph, Op, Subgraph
from .assign import TIME_BUDGET, Choice, Mode, Optimality, Problem, presented
from .io_rules import image_output, input_layout
from .layout import Perm
from .nested import Subplans
from .plan import Category, Conflict, LayoutPlan, OpTable
from .solve import solve

Boundary = tuple[Sequence[Perm], Sequence[Perm], str]   # a subgraph's (input layouts, output layouts, who chose)
Assembled = tuple[Any, ...]     # (choice, perms, why, inputs, produced, {op: its Conflicts}): _assemble_all's


def choose_layout(perms: list[Perm], pin: Perm | None, rank: int) -> Perm:
    """The layout an op whose inputs must agree adopts given its inputs' layouts: the pin, else the one most of
    them have, channels-first on a tie (the planner weighs what its readers want)."""
    if pin is not None and len(pin) == rank:
        return pin
    if not perms:
        return L.identity(rank)
    return min(dict.fromkeys(perms), key=lambda p: (-perms.count(p), L.is_identity(p), perms.index(p)))


def plan_layouts(sg: Subgraph, table: OpTable, pins: dict[int, Perm] | None = None, keep_io_layout: bool = False,
                 skip: set[int] | frozenset[int] = frozenset(), constants: set[int] | None = None,
                 time_budget: float = TIME_BUDGET, graph: Graph | None = None, subplans: Subplans | None = None,
                 boundary: Boundary | None = None) -> LayoutPlan:
    """Plan one subgraph. `skip` are ops folded at conversion time; `constants` are tensors with known data.
    `graph`, `subplans`: the whole Graph and its subgraphs' plans (nested.Subplans): IF and WHILE are planned with
    this graph. `boundary`: (input layouts, output layouts, who chose them) of a subgraph planned so.
    (Replanner.plan gives the same plan after a pin from the last run's problem.)"""
    pb = problem(sg, table, pins, keep_io_layout, skip, constants, graph=graph, subplans=subplans, boundary=boundary)
    choice, optimality = solve(pb, time_budget)
    plan = assemble(pb, choice, optimality, keep=False)
    pb.base = pb.changes = None
    return plan


class Replanner:
    """plan_layouts for one subgraph planned again and again (the window's re-runs after a pin): `problem` keeps
    the last problem (same skip, constants and I/O option), so a re-plan rebuilds only the ops the pin reaches
    (Problem.build) and re-solves only the parts of the graph around them (exact.resolve). After each plan,
    `plan_tables`: the plan's own tables (assemble's, never changed), and `plan_changes`: (the last plan's
    tables, the keys of perms, inputs and produced whose values differ from them) when the plan was updated from
    the last one, else None (what the re-emission compares with the last plan: emit/incremental.py)."""

    def __init__(self) -> None:
        self.problem: Problem | None = None
        self.plan_tables: Assembled | None = None
        self.plan_changes: tuple[Any, ...] | None = None

    def plan(self, sg: Subgraph, table: OpTable, pins: dict[int, Perm] | None = None, keep_io_layout: bool = False,
             skip: set[int] | frozenset[int] = frozenset(), constants: set[int] | None = None,
             time_budget: float = TIME_BUDGET, graph: Graph | None = None, subplans: Subplans | None = None,
             boundary: Boundary | None = None) -> LayoutPlan:
        """plan_layouts' plan, from the last problem where it still holds."""
        old = self.problem
        pb = problem(sg, table, pins, keep_io_layout, skip, constants, reuse=old, graph=graph, subplans=subplans,
                     boundary=boundary)
        self.problem = pb
        pb.graph_facts()        # what the re-plan after a pin reads (Problem._rebuild): now, not on the first pin
        choice, optimality = solve(pb, time_budget, previous=old)
        plan = assemble(pb, choice, optimality, keep=True)
        self.plan_tables, self.plan_changes = pb.kept["plan"], pb.changes
        pb.base = pb.changes = None     # the last problem's figures, updated into this one's: not kept twice
        return plan


def solved_problem(sg: Subgraph, table: OpTable, skip: AbstractSet[int] = frozenset(),
                   constants: set[int] | None = None, graph: Graph | None = None, subplans: Subplans | None = None,
                   boundary: Boundary | None = None) -> tuple[Problem, Choice, Optimality]:
    """(problem, choice, optimality) of a subgraph at a `boundary` (plan_layouts's) without a LayoutPlan yet:
    what pricing an IF or WHILE mode needs; assemble() makes the plan of the one chosen."""
    pb = problem(sg, table, None, False, skip, constants, graph=graph, subplans=subplans, boundary=boundary)
    return (pb, *solve(pb))


def problem(sg: Subgraph, table: OpTable, pins: dict[int, Perm] | None = None, keep_io_layout: bool = False,
            skip: AbstractSet[int] = frozenset(), constants: set[int] | None = None, reuse: Problem | None = None,
            graph: Graph | None = None, subplans: Subplans | None = None, boundary: Boundary | None = None
            ) -> Problem:
    """The modes of every op, graph inputs decided by rule (or by `boundary`), graph outputs' allowed
    presentations."""
    pins = dict(pins or {})
    constants = constants if constants is not None else {t.index for t in sg.tensors if t.is_constant}
    if boundary is not None:                        # a subgraph planned with its parent: its I/O layouts are given
        ins, outs, why = boundary
        fixed = {t: (p, f"subgraph input, {L.name(p)}: {why}") for t, p in zip(sg.inputs, ins) if t not in constants}
        allowed: dict[int, tuple[Perm, ...]] = {t: (p,) for t, p in zip(sg.outputs, outs)}
        return Problem(sg, table, pins, fixed, frozenset(skip), set(constants), allowed, False, graph, subplans,
                       why).build(reuse)
    # The I/O rules walk the graph for an Implicit op or a TRANSPOSE; a graph with neither (most small ones) has
    # nothing for them to find: no walk, the same answers.
    walk = False                                     # (a loop, not any() over a generator; not named `op`:
    for o in sg.ops:                                 # convert._culprit reads that name in the planner's frames)
        if o.index not in skip and (o.opcode == "TRANSPOSE" or (o.opcode in table and table[o.opcode].category
                                                                 is Category.IMPLICIT)):
            walk = True
            break
    # (a re-plan takes the graph's from the last problem, which keeps them: no walk over the graph per pin)
    facts = reuse.graph_facts() if reuse is not None and walk else None
    consumers = (facts[1] if facts else sg.consumers()) if walk else {}
    fixed = {}
    for t in sg.inputs:
        if t in pins:
            fixed[t] = (pins[t], f"pinned by the user to {L.name(pins[t])}")
        elif t not in constants:
            fixed[t] = input_layout(sg, t, table, consumers, skip, keep_io_layout)
    allowed = {}
    for t in sg.outputs:
        r = sg.tensors[t].rank
        image = r >= 3 and not keep_io_layout and walk and image_output(sg, t, table, skip,
                                                                        facts[0] if facts else None)
        allowed[t] = (pins[t],) if t in pins else (L.identity(r), L.channels_first(r)) if image else (L.identity(r),)
    return Problem(sg, table, pins, fixed, frozenset(skip), set(constants), allowed, keep_io_layout, graph,
                   subplans).build(reuse)


def assemble(pb: Problem, choice: Choice, optimality: Optimality, keep: bool = True) -> LayoutPlan:
    """The LayoutPlan of a choice: layouts, what each op reads and writes, and a Conflict for every Transpose.
    (No closures: three function objects made per plan were a tenth of a single-op model's planning.)
    With `keep`, what each op adds is kept (pb.kept["plan"]): after a re-plan only the ops whose mode, pins or
    inputs' layouts changed (pb.redo, solve._count's) are assembled again, into copies of the last plan's tables.
    Without (nothing will re-plan from pb: plan_layouts), the plan takes the tables themselves."""
    sg, pins = pb.sg, pb.pins
    plan = LayoutPlan(pins=dict(pins), optimality=optimality)
    tensors = sg.tensors
    last = pb.base
    base = last.get("plan") if last is not None and pb.redo is not None else None
    if base is not None and last is not None and base[0] is last["solution"] and \
            pb.kept.get("tp", (None,))[0] is choice:
        kept = _assemble_again(pb, choice, base)
    else:
        kept = None
    if kept is None:
        kept = _assemble_all(pb, choice)
    _, perms, why_of, ins, produced, conflicts = kept
    if keep:
        pb.kept["plan"] = kept
        # the plan gets its own copies: the kept tables are the next re-plan's starting point
        plan.perms, plan.why, plan.inputs, plan.produced = dict(perms), dict(why_of), dict(ins), dict(produced)
        plan.conflicts = [copy(c) for oi in sorted(conflicts) for c in conflicts[oi]]
    else:
        plan.perms, plan.why, plan.inputs, plan.produced = perms, why_of, ins, produced
        plan.conflicts = [c for oi in sorted(conflicts) for c in conflicts[oi]]
    for t, (perm, why) in pb.fixed.items():
        plan.io_rules[t] = why
    perms = plan.perms
    for t in sg.outputs:
        have = perms.get(t) or L.identity(tensors[t].rank)
        want = presented(pb, t, have)
        plan.outputs[t] = want
        keep = pb.keep_io_layout and t not in pins and tensors[t].rank >= 3
        if pb.io_note:
            plan.io_rules.setdefault(t, f"subgraph output presented as {L.name(want)}: {pb.io_note}")
        plan.io_rules.setdefault(t, "graph output kept in the TFLite layout (--keep-io-layout)" if keep
                                 else "graph output presented " + ("as TFLite" if L.is_identity(want)
                                                                   else f"as {L.name(want)}") +
                                 (" (pinned)" if t in pins else " (as it is computed)" if want == have
                                  else " (TFLite's layout)"))
        if want != have and not pb.free(t, have, want):
            reason = ("graph output kept in the TFLite layout (--keep-io-layout)" if keep
                      else f"graph output {tensors[t].name} is {L.name(have)}; presented as TFLite's")
            plan.conflicts.append(Conflict(tensor=t, op=None, kind="io", reason=reason, from_perm=have,
                                           to_perm=want))
    return plan


def _assemble_all(pb: Problem, choice: Choice) -> Assembled:
    """(choice, perms, why, inputs, produced, {op: its Conflicts}) of every op, in op order."""
    sg = pb.sg
    perms: dict[int, Perm] = {}
    why_of: dict[int, str] = {}
    ins: dict[tuple[int, int], Perm] = {}
    produced: dict[tuple[int, int], Perm] = {}
    conflicts: dict[int, list[Conflict]] = {}
    for t, (perm, why) in pb.fixed.items():
        perms[t], why_of[t] = perm, why
    names: dict[Perm, str] = {}         # L.name of each layout written (a few, each ~thousands of times)
    tables = perms, why_of, ins, produced, conflicts, names
    for op in sg.ops:
        oi = op.index
        if oi in pb.skip:
            for t in op.outputs:
                why_of[t] = f"constant, folded from {op.opcode}#{oi} at conversion"
            continue
        _assemble_op(pb, op, choice[oi], tables)
    for t in range(len(sg.tensors)):
        if t not in why_of:
            why_of[t] = "constant" if t in pb.constants else "TFLite layout"
    return choice, perms, why_of, ins, produced, conflicts


def _assemble_again(pb: Problem, choice: Choice, base: Assembled) -> Assembled | None:
    """_assemble_all from the last plan's tables, assembling only the ops in pb.redo again (every other op reads
    and writes as it did); None when that would add an entry the last plan did not have (then in full)."""
    perms, why_of, ins, produced, conflicts = (dict(x) for x in base[1:])
    sizes = len(perms), len(why_of), len(ins), len(produced)
    for t, (perm, why) in pb.fixed.items():
        perms[t], why_of[t] = perm, why
    tables: tuple[Any, ...] = (perms, why_of, ins, produced, conflicts, {})
    ops, redo = pb.sg.ops, pb.redo or set()         # (set: _assemble_again runs after a re-plan)
    for oi in sorted(redo):
        if oi not in pb.skip:
            conflicts.pop(oi, None)
            _assemble_op(pb, ops[oi], choice[oi], tables)
    if sizes != (len(perms), len(why_of), len(ins), len(produced)):
        return None
    # which entries now differ from the last plan's: those the ops assembled again (and the rules) wrote
    old_perms, old_ins, old_produced = base[1], base[3], base[4]
    moved = {t for t in pb.fixed if perms[t] != old_perms[t]}
    moved_in: set[tuple[int, int]] = set()
    moved_out: set[tuple[int, int]] = set()
    for oi in redo:
        if oi in pb.skip:
            continue
        op = ops[oi]
        moved_in.update(k for s, _ in choice[oi].reads if ins[k := (oi, s)] != old_ins[k])
        for slot, t in enumerate(op.outputs):
            if t >= 0:
                if produced[(oi, slot)] != old_produced[(oi, slot)]:
                    moved_out.add((oi, slot))
                if perms[t] != old_perms[t]:
                    moved.add(t)
    pb.changes = base, moved, moved_in, moved_out
    return choice, perms, why_of, ins, produced, conflicts


def _assemble_op(pb: Problem, op: Op, m: Mode, tables: tuple[Any, ...]) -> None:
    """One op's entries of the plan's tables in mode m (its inputs' layouts are in perms already)."""
    perms, why_of, ins, produced, conflicts, names = tables
    pins, tensors, oi = pb.pins, pb.sg.tensors, op.index
    w = m.writes[0] if m.writes else None
    why = m.why.replace("{layout}", (names.get(w) or names.setdefault(w, L.name(w))) if w else "as TFLite") \
        if "{layout}" in m.why else m.why
    found = []
    for s, w in m.reads:
        t = op.inputs[s]
        ins[(oi, s)] = w
        have = perms.get(t) or L.identity(tensors[t].rank)
        if have == w or pb.free(t, have, w):
            continue
        if m.kind == "no-rule":
            reason = f"{op.opcode}#{oi} has no layout rule for a {L.name(have)} input"
        elif m.kind == "terminate":
            needs = "the TFLite layout" if L.is_identity(w) else L.name(w)
            reason = f"{tensors[t].name} is {L.name(have)} but {op.opcode}#{oi} (Terminate) needs {needs}"
        else:
            category = pb.table[op.opcode].category.value if op.opcode in pb.table else "Terminate"
            reason = f"{tensors[t].name} is {L.name(have)} but {op.opcode}#{oi} ({category}) reads it as " \
                     f"{L.name(w)}"
        found.append(Conflict(tensor=t, op=oi, kind=m.kind, reason=reason, from_perm=have, to_perm=w))
    for slot, t in enumerate(op.outputs):
        if t < 0:
            continue
        natural = m.writes[slot]
        produced[(oi, slot)] = natural
        perms[t], why_of[t] = natural, why
        if t in pins and pins[t] != natural:
            if not pb.free(t, natural, pins[t]):
                found.append(Conflict(tensor=t, op=oi, kind="pin", reason=(
                    f"{tensors[t].name} pinned to {L.name(pins[t])}; {op.opcode}#{oi} writes {L.name(natural)}"),
                    from_perm=natural, to_perm=pins[t]))
            perms[t], why_of[t] = pins[t], f"pinned by the user to {L.name(pins[t])}"
    if found:
        conflicts[oi] = found


class Planner:
    """One subgraph's layout problem, kept to answer "what if" without emitting ONNX: `transposes_if(t, perm)`
    re-solves with t pinned to perm (the Transposes the plan causes; emitters' own internal ones not counted),
    `plan()` is what convert() would use. `inspector.core.emit.convert.planner(graph, pins)` builds one for a Graph.
    Each what-if starts from this problem and its plan (Problem.build's reuse, solve's previous): only the ops and
    parts of the graph the pin reaches are looked at again."""

    def __init__(self, sg: Subgraph, table: OpTable, pins: dict[int, Perm] | None = None, keep_io_layout: bool = False,
                 skip: AbstractSet[int] = frozenset(), constants: set[int] | None = None,
                 time_budget: float = TIME_BUDGET, graph: Graph | None = None, subplans: Subplans | None = None):
        self.args = (sg, table, dict(pins or {}), keep_io_layout, skip, constants)
        self.graph, self.subplans = graph, subplans
        self.time_budget = time_budget
        self.problem = problem(*self.args, graph=graph, subplans=subplans)
        self._solved: tuple[Choice, Optimality] | None = None

    def solved(self) -> tuple[Choice, Optimality]:
        """solve() of this problem, once."""
        if self._solved is None:
            self._solved = solve(self.problem, self.time_budget)
        return self._solved

    def plan(self) -> LayoutPlan:
        return assemble(self.problem, *self.solved())

    def candidates(self, t: int) -> list[Perm]:
        """Layouts the planner considers for tensor t (what a pin menu can offer as cheap choices)."""
        return list(self.problem.candidates(t))

    def transposes_if(self, t: int, perm: Perm) -> Optimality:
        sg, table, pins, keep, skip, constants = self.args
        self.solved()
        pb = problem(sg, table, {**pins, t: tuple(perm)}, keep, skip, constants, reuse=self.problem,
                     graph=self.graph, subplans=self.subplans)
        return solve(pb, self.time_budget, previous=self.problem)[1]
