"""Re-conversion after a pin that reuses the last conversion's pieces, with the very bytes a full conversion gives.

A `Reconverter` converts one model again and again (`Reconverter.convert`, convert.convert's steps taken from the
last run's pieces; it starts afresh by itself when the graph or options differ). The first run records, per TFLite op,
what its emission read (plan entries, memoised values, tensor names) and what it did (names taken, nodes,
initializers, trace entries). A later run with other pins re-plans, then walks the ops in order: an op whose
recorded reads all still hold and whose names come out the same is replayed from its record; any other op is
emitted again (and recorded anew). Emission is a function of exactly those reads, so the model is the one a full
conversion makes (tests/test_incremental.py compares the bytes).

Only what the records cover is incremental: quantized tensors, subgraphs and resource variables keep state outside
them, so such models (and very large weights, whose copies the records would keep) convert in full every time.
"""
from __future__ import annotations

from dataclasses import replace
from itertools import chain
from operator import itemgetter
from typing import Any

from inspector.core.ir.diff import changed
from inspector.core.ir.errors import ConversionError
from inspector.core.layout.propagation import Replanner

from . import peephole
from .convert import Fresh, _guarded, _ranks_checked
from .emitter import Emitter, _varint, clean_base, next_free

MISSING = object()
RECORD_BYTES = 128 << 20        # weights past this are not kept again: the records' copies and their wire forms
                                # (Reconverter.wire) are two on top of the model's own


_TAG_KEY = itemgetter(0, 1)         # (tag, key) of a read (tag, key, value)


class Cursor:
    """The segment being recorded, which the Logged dicts write to. They point at this, not at the Recorder that
    owns them: that was a reference cycle, which the window's frozen collector kept for good after every pin."""
    __slots__ = ("seg",)

    def __init__(self):
        self.seg: "Segment | None" = None


class Logged(dict):
    """A dict whose reads and writes during an op's emission go to that op's record (reads of keys the op wrote
    itself are internal to it and not kept). `norm` maps a read value to what the record keeps (a Conflict to
    "is there one")."""
    __slots__ = ("rec", "tag", "norm")

    def __init__(self, data, rec: Cursor, tag: str, norm=None):
        super().__init__(data)
        self.rec, self.tag, self.norm = rec, tag, norm

    def _read(self, key, value):
        seg = self.rec.seg
        if seg is not None and (self.tag, key) not in seg.wrote:
            seg.reads.append((self.tag, key, self.norm(value) if self.norm is not None else value))

    def __getitem__(self, key):
        value = dict.__getitem__(self, key)
        self._read(key, value)
        return value

    def get(self, key, default=None):
        value = dict.get(self, key, MISSING)
        self._read(key, value)
        return default if value is MISSING else value

    def __contains__(self, key):
        value = dict.get(self, key, MISSING)
        self._read(key, value)
        return value is not MISSING

    def __setitem__(self, key, value):
        seg = self.rec.seg
        if seg is not None:
            seg.wrote.add((self.tag, key))
            seg.writes.append((self.tag, key, value))
        dict.__setitem__(self, key, value)

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]


class Segment:
    """One op's emission: what it read, the names it took, and its nodes, initializers, trace and warnings;
    once recorded, `keys`: the (dict, key) pairs it read and `bases`: the name bases it asked fresh names of, and
    `replay`: what replaying it does, in bulk (see _compiled, _applier)."""
    __slots__ = ("reads", "wrote", "writes", "names", "nodes", "inits", "trace", "warnings", "keys", "bases",
                 "replay", "wire", "tpos")
    keys: frozenset[tuple[Any, ...]]                # set once recorded (Reconverter.emit_ops)
    bases: frozenset[str]
    replay: tuple[Any, ...]

    def __init__(self):
        self.reads: list[tuple] = []
        self.wrote: set = set()
        self.writes: list[tuple] = []
        self.names: list[tuple[str, str, str]] = []     # ("fresh", base, name) or ("use", name, name)
        self.trace: list[tuple] = []                # ("node", op, name), ("note", t, name), ("inserted", name, key)
        self.nodes = self.inits = self.warnings = ()
        self.wire: bytes | None = None              # its nodes on GraphProto's wire (Reconverter.node_wire)
        self.tpos: list | None = None               # where its Transpose and Identity nodes are among them


CHUNK = 64      # ops per Chunk: a pin re-emits a few ops, so nearly every chunk of 10,000 ops is replayed whole


class Chunk:
    """CHUNK consecutive ops' records (folded ops included) merged into one replay: what applying each record in
    turn does (see _applier), done in one update per container (not one per record: thousands a pin); with
    the union of what they read (`keys`) and the name bases they drew from, to tell at once that none changed."""
    __slots__ = ("segs", "count", "keys", "bases", "used", "taken", "memo", "names", "nodes", "inits", "warnings",
                 "indices", "op_nodes", "node_op", "values", "tensors", "others", "last", "wire", "tpos")

    def __init__(self, entries: list):
        """entries: (op index, its Segment, or None for a folded op), in op order."""
        self.segs = segs = [seg for _, seg in entries if seg is not None]
        replays = [seg.replay for seg in segs]
        self.count = len(segs)
        self.keys = frozenset().union(*[seg.keys for seg in segs])
        self.bases = frozenset().union(*[seg.bases for seg in segs])
        self.used = frozenset().union(*[r[0] for r in replays])
        # dict(pairs) keeps a key's first place and last value, as the updates in turn do
        self.taken = dict(chain.from_iterable(r[1].items() for r in replays))
        self.memo = dict(chain.from_iterable(r[2].items() for r in replays))
        self.names = dict(chain.from_iterable(r[3].items() for r in replays))
        self.node_op = dict(chain.from_iterable(r[5].items() for r in replays))
        self.nodes = list(chain.from_iterable(seg.nodes for seg in segs))
        self.inits = list(chain.from_iterable(seg.inits for seg in segs))
        self.warnings = list(chain.from_iterable(seg.warnings for seg in segs))
        self.indices = [index for index, _ in entries]
        self.op_nodes = [seg.replay[4] if seg is not None else () for _, seg in entries]
        last = [r[4][-1] for r in replays if r[4]]
        self.last = last[-1] if last else None
        entries_ = [e for r in replays for e in r[6]]
        self.others = [(a, b) for kind, a, b in entries_ if kind != "note"]
        # the trace's notes (note_value's setdefaults, merged): tensor -> its values, value -> its first tensor
        self.values: dict[int, tuple[str, ...]] = {}
        self.tensors: dict[str, int] = {}
        values, tensors = self.values, self.tensors
        for kind, a, b in entries_:
            if kind == "note":
                values[a] = values.get(a, ()) + (b,)
                if b not in tensors:
                    tensors[b] = a
        self.wire: bytes | None = None
        self.tpos: list | None = None


class Recorder(Emitter):
    """An Emitter whose plan lookups, memo and tensor names are Logged, and which notes every name it takes."""

    def __init__(self, sg, plan, opset, constants, trace=None, parent=None):
        self.cursor = cur = Cursor()
        view = replace(plan, perms=Logged(plan.perms, cur, "perm"), inputs=Logged(plan.inputs, cur, "in"),
                       produced=Logged(plan.produced, cur, "out"))
        super().__init__(sg, view, opset, constants, trace, parent)
        self.conflict_at = Logged(self.conflict_at, cur, "at", norm=_present)
        self.pin_conflicts = Logged(self.pin_conflicts, cur, "pin", norm=_present)
        self.memo = Logged({}, cur, "memo")
        self._vname = Logged({}, cur, "name")

    @property
    def seg(self) -> Segment | None:
        return self.cursor.seg

    @seg.setter
    def seg(self, seg: Segment | None) -> None:
        self.cursor.seg = seg

    def fresh(self, base: str) -> str:
        name = super().fresh(base)
        if self.seg is not None:
            self.seg.names.append(("fresh", base, name))
        return name

    def reserve(self, t: int, name: str) -> None:
        super().reserve(t, name)
        if self.seg is not None:
            self.seg.names.append(("use", name, name))

    def claim(self, *names: str) -> None:
        super().claim(*names)
        if self.seg is not None:
            self.seg.names += [("use", n, n) for n in names]

    def note_value(self, t: int, name: str) -> None:
        super().note_value(t, name)
        if self.seg is not None:
            self.seg.trace.append(("note", t, name))

    def node(self, op_type, inputs, outputs, domain="", name=None, **attrs):
        outs = super().node(op_type, inputs, outputs, domain, name, **attrs)
        if self.seg is not None and self.op is not None:
            self.seg.trace.append(("node", self.op.index, self.last_node))
        return outs


def _present(value) -> bool:
    return value is not MISSING and bool(value)


class Reconverter(Fresh):
    """One model's conversion pieces for the next run (see the module's doc). Not thread-safe: one run at a time."""

    def __init__(self):
        self.key = None
        self.prepared = None            # (op table, folded ops, constants) of the main subgraph
        self.replanner = Replanner()    # the layout problem of the last run
        self._nested: dict | None = None        # convert._nested's: the subgraphs' plans (Subplans)
        self.segments: dict[int, Segment] = {}
        self.usable = False             # the last run's records may be replayed
        self._bounds: dict[int, list] = {}      # id(initializer) -> [it, its size bound, its raw bytes or None]
        self._wire: dict[int, list] = {}        # id(initializer) -> [it, wire, wire without data]: see `wire`
        self._infos: dict[tuple, bytes] = {}    # (tensor, name, layout) -> its value_info's wire: see `value_infos`
        self._nodes: dict[int, tuple] = {}      # id(node) -> (it, its wire): see `node_wire`
        self._chunks: dict[int, Chunk] = {}     # ops [k*CHUNK, (k+1)*CHUNK) -> their records merged, for k
        self._pieces: list[tuple] = []          # (start, end, Segment or Chunk) of the last run's nodes
        self._categories: dict | None = None    # convert.op_categories
        self._runs = 0                  # emit_ops that completed
        self._moved: set | None = None  # tensors whose layout differs from the last run's plan (None: unknown)
        self._values: tuple | None = None       # the last value_infos': (run, its inputs, values, parts, where,
                                                # info_index)
        self.transposes_at: list[int] = []      # node_wire's: where the graph's Transposes and Identities are
        self.node_bytes = self.info_bytes = 0   # the wire bytes of the last run's nodes and value infos
        self.replayed = self.emitted = 0
        self.checked = 0                # records checked read by read in the last run (the others met no change)
        self.bulk = 0                   # chunks replayed whole in the last run
        self._last: dict | None = None  # _inputs of the last run

    def start(self, graph, options: tuple) -> bool:
        """Is this run for the same model and options as the last? (Otherwise everything is forgotten.)"""
        if self.key is not None and self.key[0] is graph and self.key[1] == options:
            return True
        self.key, self.prepared, self.segments, self.usable = (graph, options), None, {}, False
        self.replanner, self._nested = Replanner(), None
        self._bounds, self._wire, self._infos, self._nodes, self._chunks = {}, {}, {}, {}, {}
        self._values = self._categories = None
        return False

    def categories(self, sg, table) -> dict:
        """convert.op_categories, once per model and options (a copy each run: the result's own)."""
        if self._categories is None:
            from .convert import op_categories
            self._categories = op_categories(sg, table)
        return dict(self._categories)

    def size_bound(self, tensor) -> int:
        """convert._size_bound of an initializer, once per initializer object (not ListFields on each of them on
        every run)."""
        return self._sizes(tensor)[1]

    def raw_size(self, tensor) -> int:
        """convert.raw_length of an initializer, once per initializer object."""
        got = self._sizes(tensor)
        if got[2] is None:
            from .convert import raw_length
            got[2] = raw_length(tensor)
        return got[2]

    def _sizes(self, tensor) -> list:
        got = self._bounds.get(id(tensor))
        if got is None or got[0] is not tensor:
            from .convert import _size_bound
            got = self._bounds[id(tensor)] = [tensor, _size_bound(tensor), None]
        return got

    def wire(self, tensor, data: bool = True) -> bytes:
        """An initializer as GraphProto's field holds it on the wire (tag, length, message), once per initializer
        object: the graph parses it in (one copy of its weights), where extend serialises and parses each
        initializer again (two copies of the weights on every re-run).
        Without `data`: convert.without_data of it, kept the same way."""
        got = self._wire.get(id(tensor))
        if got is None or got[0] is not tensor:
            got = self._wire[id(tensor)] = [tensor, None, None]
        if got[1 + (not data)] is None:
            if data:
                body = tensor.SerializeToString()
            else:
                from .convert import without_data
                body = without_data(tensor).SerializeToString()
            got[1 + (not data)] = b"\x2a" + _varint(len(body)) + body                     # field 5, bytes
        return got[1 + (not data)]

    def value_infos(self, em: Emitter, io_names: set, constants) -> bytes:
        """GraphProto's value_info entries (convert.value_names) on the wire. When the values and their names are
        the last run's, only those whose layout the plan changed are built again (a pin changes a few; the
        others' entries are kept in order from the last run); otherwise each is kept by tensor, name and layout
        from the last run (not built again for every tensor on each re-run)."""
        items = list(dict.items(em._vname))
        last, moved = self._values, self._moved
        perms, get = em.plan.perms, dict.get
        if last is not None and moved is not None and last[0] == self._runs - 1 and last[1] == items and \
                last[2] == io_names and last[3] is constants:
            values, parts, where = last[4], list(last[5]), last[6]
            for t in moved:
                for i in where.get(t, ()):
                    name = values[i][1]
                    p = get(perms, t)
                    p = p if p is not None else em.perm(t)
                    parts[i] = _info_wire(em.value_info_for(t, name, p))
        else:
            from .convert import value_names
            values = value_names(em, io_names, constants)
            known, kept, parts, where = self._infos, {}, [], {}
            for i, (t, name) in enumerate(values):
                p = get(perms, t)
                p = p if p is not None else em.perm(t)
                key = (t, name, p if type(p) is tuple else tuple(p))
                data = known.get(key)
                if data is None:
                    data = _info_wire(em.value_info_for(t, name, p))
                kept[key] = data
                parts.append(data)
                where.setdefault(t, []).append(i)
            self._infos = kept
        self._values = (self._runs, items, io_names, constants, values, parts, where, None)
        out = b"".join(parts)
        self.info_bytes = len(out)
        return out

    def node_wire(self, nodes) -> bytes:
        """GraphProto's node entries on the wire: a record's or a chunk's nodes as one piece kept with it (a pin
        re-emits a few ops: the rest are the very NodeProtos of the last run), any other node's kept by node object
        from the last run. One parse of 10,000 nodes is ~4x faster than extend's copy of each. Also notes where
        the Transposes and Identities are (`transposes_at`, for peephole.clean) and the bytes (`node_bytes`)."""
        known, kept, parts, where, at = self._nodes, {}, [], [], 0

        def loose(upto: int) -> None:
            for k, n in enumerate(nodes[at:upto], at):
                got = known.get(id(n))
                if got is None or got[0] is not n:
                    got = (n, _node_wire(n))
                kept[id(n)] = got
                parts.append(got[1])
                if n.op_type in peephole.KINDS:
                    where.append(k)

        for start, end, owner in self._pieces:
            loose(start)
            at = start
            if nodes[start:end] == owner.nodes:         # (the same objects: compared by identity first)
                if owner.wire is None:
                    owner.wire = b"".join([_piece_wire(seg) for seg in owner.segs]) if type(owner) is Chunk \
                        else b"".join([_node_wire(n) for n in owner.nodes])
                    owner.tpos = [k for k, n in enumerate(owner.nodes) if n.op_type in peephole.KINDS]
                parts.append(owner.wire)
                where += [start + k for k in owner.tpos]
                at = end
        loose(len(nodes))
        self._nodes, self.transposes_at = kept, where
        out = b"".join(parts)
        self.node_bytes = len(out)
        return out

    def info_index(self) -> dict[str, int]:
        """Value name -> position of its (last) value_info in the graph value_infos made."""
        values = self._values
        assert values is not None, "asked after value_infos ran"
        if values[7] is None:
            self._values = values = values[:7] + ({name: i for i, (_, name) in enumerate(values[4])},)
        return values[7]

    def info_positions(self, names: set[str]) -> list[int]:
        """The positions of the value_infos named in `names` among the graph's (from the names value_infos made,
        not a walk over the graph's)."""
        values = self._values
        assert values is not None, "asked after value_infos ran"
        return [i for i, (_, name) in enumerate(values[4]) if name in names]

    def rest_bound(self, model) -> int:
        """An upper bound of model.ByteSize() (convert._add_initializers' measure of the model without its
        initializers) from the bytes of the nodes and value infos this run parsed in, the graph's other fields
        measured (each with <= 16 bytes of tag and length): ByteSize would serialise every node again."""
        known = {"node": self.node_bytes, "value_info": self.info_bytes}
        size = 0
        for f, v in model.ListFields():
            if f.name == "graph":
                size += 16 + sum(known[gf.name] if gf.name in known else _field_bound(gf, gv)
                                 for gf, gv in v.ListFields())
            else:
                size += _field_bound(f, v)
        return size

    def emitter(self, sg, plan, opset, constants, trace) -> Emitter:
        return Recorder(sg, plan, opset, constants, trace)

    # --- the steps of convert.Fresh._convert (Fresh takes them from scratch) ------------------------------------
    def plan(self, sg, *args, **kwargs):
        """Replanner.plan, checked as Fresh.plan checks plan_layouts': only the perms it changed, when it was
        updated from the last plan (which passed). A plan that fails is not kept as the next one's start."""
        rp = self.replanner
        plan = _guarded(sg, lambda: rp.plan(sg, *args, **kwargs))
        changes = rp.plan_changes
        try:
            return _ranks_checked(sg, plan, changes[1] if changes is not None else None)
        except ConversionError:
            rp.problem = None
            raise

    def nested(self, graph, table) -> dict:
        """convert._nested's Subplans, kept while the model and options are the same: an IF or WHILE body's plan
        depends only on its boundary layouts, which key it, so a pin re-solves no body at a boundary solved
        before."""
        if self._nested is None:
            self._nested = super().nested(graph, table)
        return self._nested

    def add_initializers(self, model, initializers: list, weights_over: int | None) -> bool:
        """Fresh.add_initializers; when the records hold them, each parsed in from its kept wire form."""
        if not self.usable:
            return super().add_initializers(model, initializers, weights_over)
        merge, raw_size, left_out = model.graph.MergeFromString, self.raw_size, False
        for t in initializers:
            big = weights_over is not None and raw_size(t) > weights_over
            left_out |= big
            merge(self.wire(t, data=not big))
        return left_out

    def add_value_infos(self, g, em: Emitter, io_names: set, constants) -> None:
        g.MergeFromString(self.value_infos(em, io_names, constants))

    def add_nodes(self, g, nodes) -> None:
        g.MergeFromString(self.node_wire(nodes))

    def clean(self, g, trace, nodes) -> list[str]:
        """peephole.clean, knowing where the graph's Transposes and Identities are (node_wire's) and the position
        of each value name's last value_info: no walk over 10,000 nodes and value infos."""
        at = self.transposes_at
        if not at:
            return []
        return peephole.clean_nodes(g, trace, at,
                                    lambda wanted: peephole.value_infos_at(g, wanted, self.info_index()),
                                    self.info_positions)

    def emit_ops(self, em: Emitter, folded: set[int], emit_one) -> None:
        """Every op in order: replayed from its record when that still holds, else emitted and recorded.

        A record holds when nothing it read and no name base it drew from changed since the last run: `dirty`
        starts as the plan entries and conflicts that differ from the last run's (when the names and values
        taken before the first op are the same) and grows by what each op emitted again wrote and named. Only
        records that meet it are checked read by read (_holds); the others are replayed at once, a whole Chunk
        at a time where none of its records meets it."""
        assert isinstance(em, Recorder), "the emitter this Reconverter made (emitter())"
        old, last = self.segments if self.usable else {}, self._last
        tables, changes = self.replanner.plan_tables, self.replanner.plan_changes     # (this run's plan)
        now = _inputs(em, tables)
        if changes is not None and last is not None and changes[0] is last["tables"]:
            moved, plan_moved = changes[1], {("in", k) for k in changes[2]} | {("out", k) for k in changes[3]}
        else:
            moved = changed(now["perm"], last["perm"]) if last is not None else None
            plan_moved = None
        dirty = _dirty(now, last, moved, plan_moved) if old else None
        bases: set[str] = set()
        new: dict[int, Segment] = dict(old)
        trace, nodes = em.trace, em.nodes
        apply, apply_chunk, get, replayed = _applier(em), _chunk_applier(em), old.get, 0
        chunks = self._chunks if dirty is not None else {}
        ops, redone = em.sg.ops, []
        pieces: list[tuple[int, int, Chunk | Segment]] = []
        self.replayed = self.emitted = self.checked = self.bulk = 0
        i, n = 0, len(ops)
        while i < n:
            if not i % CHUNK:
                ch = chunks.get(i // CHUNK)
                if ch is not None and dirty is not None and dirty.isdisjoint(ch.keys) and bases.isdisjoint(ch.bases):
                    start = len(nodes)
                    apply_chunk(ch)
                    pieces.append((start, len(nodes), ch))
                    replayed += ch.count
                    self.bulk += 1
                    i += CHUNK
                    continue
            op = ops[i]
            i += 1
            if op.index in folded:
                trace.op_nodes[op.index] = []
                continue
            seg = get(op.index)
            start = len(nodes)
            if seg is not None and dirty is not None and dirty.isdisjoint(seg.keys) and bases.isdisjoint(seg.bases):
                em.op = op                  # em.begin(op), whose list of the op's nodes `apply` makes
                apply(op.index, seg)
                replayed += 1
            elif seg is not None and _counted(self) and _holds(em, seg):
                em.begin(op)
                apply(op.index, seg)
                replayed += 1
            else:
                was = seg
                seg = Segment()
                n_nodes, n_inits, n_warn, n_ins = len(em.nodes), len(em.initializers), len(em.warnings), \
                    len(trace.inserted)
                em.seg = seg
                try:
                    em.begin(op)
                    emit_one(em, op)
                finally:
                    em.seg = None
                seg.nodes, seg.inits = em.nodes[n_nodes:], em.initializers[n_inits:]
                seg.warnings = em.warnings[n_warn:]
                if len(trace.inserted) > n_ins:
                    for node, c in list(trace.inserted.items())[n_ins:]:
                        seg.trace.append(("inserted", node, ("pin", c.tensor) if c.kind == "pin"
                                          else ("at", (c.tensor, c.to_perm))))
                seg.keys = frozenset(map(_TAG_KEY, seg.reads))
                seg.bases = frozenset(clean_base(base) for kind, base, _ in seg.names if kind == "fresh")
                seg.replay = _compiled(seg)
                if dirty is not None:       # what it wrote or named, then or now, may differ for the ops after it
                    for s in (was, seg) if was is not None else (seg,):
                        dirty.update((tag, key) for tag, key, _ in s.writes)
                        bases.update(_touched(s))
                new[op.index] = seg
                redone.append(i - 1)
                self.emitted += 1
            if len(nodes) > start:
                pieces.append((start, len(nodes), seg))
        em.begin(None)
        self.replayed = replayed
        # together: a run that fails half-way changes none of them
        self.segments, self._last, self._pieces, self._moved = new, now, pieces, moved
        self._runs += 1
        if not old:
            self._chunks = {}
        for k in {i // CHUNK for i in redone}:
            self._chunks.pop(k, None)
        self._chunk(ops, folded)

    def _chunk(self, ops, folded) -> None:
        """Merge the records of every chunk not merged yet (after a pin, those whose ops were emitted again)."""
        segments, chunks = self.segments, self._chunks
        for k in range((len(ops) + CHUNK - 1) // CHUNK):
            if k in chunks:
                continue
            entries = []
            for op in ops[k * CHUNK:(k + 1) * CHUNK]:
                seg = None if op.index in folded else segments.get(op.index)
                if seg is None and op.index not in folded:
                    break
                entries.append((op.index, seg))
            else:
                chunks[k] = Chunk(entries)

    def finish(self, em: Emitter, graph, initializer_bytes: int) -> None:
        """Whether the next run may replay: only when the records hold all the emission's state."""
        self.usable = (em.state is None and not em.subgraphs and not em.q.q and len(graph.subgraphs) == 1
                       and initializer_bytes <= RECORD_BYTES)
        if not self.usable:
            self.segments, self._chunks = {}, {}
        live = {id(t) for t in em.initializers}                 # only the initializers the records still hold
        self._bounds = {k: v for k, v in self._bounds.items() if k in live} if self.usable else {}
        self._wire = {k: v for k, v in self._wire.items() if k in live} if self.usable else {}


def _field_bound(f, v) -> int:
    size = 0
    for x in (v if f.is_repeated else [v]):
        size += 16 + (x.ByteSize() if f.message_type is not None else len(x.encode()) if isinstance(x, str)
                      else len(x) if isinstance(x, bytes) else 0)
    return size


def _info_wire(info) -> bytes:
    data = info.SerializeToString()
    return b"\x6a" + _varint(len(data)) + data           # field 13, bytes


def _node_wire(node) -> bytes:
    data = node.SerializeToString()
    return b"\x0a" + _varint(len(data)) + data           # field 1, bytes


def _piece_wire(seg: Segment) -> bytes:
    if seg.wire is None:
        seg.wire = b"".join([_node_wire(n) for n in seg.nodes])
    return seg.wire


def _counted(rc: Reconverter) -> bool:
    rc.checked += 1
    return True


def _inputs(em: Recorder, tables: tuple | None) -> dict:
    """What the ops' emission reads that is set before the first op: the plan, the conflicts, and the names,
    values and memo taken by the graph's inputs and outputs. `tables`: the plan's own (propagation.assemble's,
    never changed: no copy) when known."""
    plan = em.plan
    if tables is not None and tables[1] == plan.perms and tables[3] == plan.inputs and tables[4] == plan.produced:
        perms, ins, produced = tables[1], tables[3], tables[4]
    else:
        tables, perms, ins, produced = None, dict(plan.perms), dict(plan.inputs), dict(plan.produced)
    return {"tables": tables, "perm": perms, "in": ins, "out": produced,
            "at": {k for k, v in dict.items(em.conflict_at) if _present(v)},
            "pin": {k for k, v in dict.items(em.pin_conflicts) if _present(v)},
            "start": (frozenset(em._used), dict(em._taken), dict(dict.items(em._vname)), dict(dict.items(em.memo)))}


def _dirty(now: dict, last: dict | None, moved: set, plan_moved: set | None) -> set | None:
    """(dict, key) pairs whose value differs from the last run's (`moved`: the plan's perms that do; `plan_moved`:
    its inputs and produced entries that do, if known); None when the state before the first op differs (every
    record is then checked)."""
    if last is None or now["start"] != last["start"]:
        return None
    out = {("perm", k) for k in moved}
    if plan_moved is not None:
        out |= plan_moved
    else:
        for tag in ("in", "out"):
            out.update((tag, k) for k in changed(now[tag], last[tag]))
    for tag in ("at", "pin"):
        out.update((tag, k) for k in now[tag] ^ last[tag])
    return out


def _touched(seg: Segment):
    """The name bases whose next fresh name may change if `seg`'s names change: the bases it drew from, and for
    each name it took, that name and the base it would be numbered from ("x_3": "x"). (Like _dirty's plan and
    conflict entries, a superset: more is only checked read by read.)"""
    for kind, base, name in seg.names:
        if kind == "fresh":
            yield clean_base(base)
        yield name
        head, _, k = name.rpartition("_")
        if head and k.isdigit():
            yield head


def _holds(em: Recorder, seg: Segment) -> bool:
    """Would emitting the op now read what it read then, and take the same names?"""
    dicts: dict[str, dict[Any, Any]] = {"perm": em.plan.perms, "in": em.plan.inputs, "out": em.plan.produced,
                                        "at": em.conflict_at, "pin": em.pin_conflicts, "memo": em.memo,
                                        "name": em._vname}
    get = dict.get
    for tag, key, value in seg.reads:
        got = get(dicts[tag], key, MISSING)
        if tag in ("at", "pin"):
            got = _present(got)
        if got is not value and got != value:
            return False
    used, taken = em._used, em._taken
    extra: set[str] = set()
    extra_taken: dict[str, int] = {}
    for kind, base, name in seg.names:
        if kind == "use":
            extra.add(name)
            continue
        b = clean_base(base)
        if b not in used and b not in extra:
            got = b
        else:
            got, k = next_free(b, used, extra_taken.get(b, taken.get(b, 1)), extra)
            extra_taken[b] = k
        if got != name:
            return False
        extra.add(got)
    return True


def _compiled(seg: Segment) -> tuple:
    """What replaying `seg` does to the emitter, as whole-segment updates (names taken, last number taken per
    base, memo and value-name writes, trace entries by kind): a per-entry loop was most of a 10,000-op
    re-run's replay. Each dict keeps its entries' order, and a key written twice keeps its last value, as the
    loop did."""
    taken = {}
    for kind, base, name in seg.names:
        if kind == "fresh":
            b = clean_base(base)
            if name != b:
                taken[b] = int(name[len(b) + 1:])
    writes: dict[str, dict[Any, Any]] = {"memo": {}, "name": {}}
    for tag, key, value in seg.writes:
        writes[tag][key] = value
    nodes = [b for kind, _, b in seg.trace if kind == "node"]
    others = tuple(e for e in seg.trace if e[0] != "node")
    return (tuple(name for _, _, name in seg.names), taken, writes["memo"], writes["name"], nodes,
            {b: a for kind, a, b in seg.trace if kind == "node"}, others)


def _chunk_applier(em: Recorder):
    """apply(chunk): what applying each of its records in turn does (_applier), one update per container. (A key
    written twice keeps its last value and its first place, as the updates in turn leave it.)"""
    used_update, taken_update, dict_update = em._used.update, em._taken.update, dict.update
    memo, vname, nodes_extend, inits, warnings = em.memo, em._vname, em.nodes.extend, em.initializers, em.warnings
    trace = em.trace
    op_nodes_update, node_op_update = trace.op_nodes.update, trace.node_op.update
    tensor_values, value_tensor = trace.tensor_values, trace.value_tensor
    values_keys, values_update = tensor_values.keys(), tensor_values.update
    tensors_keys, tensors_update = value_tensor.keys(), value_tensor.update

    def apply(ch: Chunk) -> None:
        used_update(ch.used)
        if ch.taken:
            taken_update(ch.taken)
        if ch.memo:
            dict_update(memo, ch.memo)
        if ch.names:
            dict_update(vname, ch.names)
        nodes_extend(ch.nodes)
        if ch.inits:
            inits.extend(ch.inits)
        if ch.warnings:
            warnings.extend(ch.warnings)
        op_nodes_update(zip(ch.indices, map(list, ch.op_nodes)))
        node_op_update(ch.node_op)
        if ch.last is not None:
            em.last_node = ch.last
        if values_keys.isdisjoint(ch.values):       # the usual case: tensors noted by these ops alone
            values_update(zip(ch.values, map(list, ch.values.values())))
        else:
            for a, names in ch.values.items():
                got = tensor_values.get(a)
                if got is None:
                    tensor_values[a] = list(names)
                else:
                    got += names
        if tensors_keys.isdisjoint(ch.tensors):
            tensors_update(ch.tensors)
        else:
            for b, a in ch.tensors.items():
                value_tensor.setdefault(b, a)
        for a, (which, key) in ch.others:
            for c in (dict.get(em.pin_conflicts, key, ()) if which == "pin"
                      else [dict.__getitem__(em.conflict_at, key)]):
                c.node = a
                trace.inserted[a] = c
    return apply


def _applier(em: Recorder):
    """apply(op index, seg): do what the record says the op did (its reads hold and its names come out the same:
    see _holds), with em's containers looked up once per run rather than once per op (10,000 replays a pin)."""
    used_update, taken_update, dict_update = em._used.update, em._taken.update, dict.update
    memo, vname, nodes_extend, inits, warnings = em.memo, em._vname, em.nodes.extend, em.initializers, em.warnings
    trace = em.trace
    op_nodes, node_op_update = trace.op_nodes, trace.node_op.update

    def apply(index: int, seg: Segment) -> None:
        used, taken, memo_writes, names, nodes, node_op, others = seg.replay
        used_update(used)
        if taken:
            taken_update(taken)
        if memo_writes:
            dict_update(memo, memo_writes)
        if names:
            dict_update(vname, names)
        nodes_extend(seg.nodes)
        if seg.inits:
            inits.extend(seg.inits)
        if seg.warnings:
            warnings.extend(seg.warnings)
        op_nodes[index] = list(nodes)
        if nodes:
            node_op_update(node_op)
            em.last_node = nodes[-1]
        for kind, a, b in others:
            if kind == "note":
                trace.tensor_values.setdefault(a, []).append(b)
                trace.value_tensor.setdefault(b, a)
            else:
                which, key = b
                for c in (dict.get(em.pin_conflicts, key, ()) if which == "pin"
                          else [dict.__getitem__(em.conflict_at, key)]):
                    c.node = a
                    trace.inserted[a] = c
    return apply
