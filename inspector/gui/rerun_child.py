"""A re-run in the loader's forkserver child, for big models: the converter holds the GIL for seconds, which
would freeze the window if it ran in a thread. Qt-free, so the child never imports Qt.

The child keeps the last model it read (keyed by path, size and mtime), so a pin after the first re-run reads
nothing; it runs the same pipeline as the Session (session.pipeline), in three calls: `rerun` converts and sends the
ONNX graph view, which the window lays out while `result_of` packs the conversion result, which the window shows while
`annotated` runs the metadata pass and the checker (their model, notes and findings follow the repaint). The result
comes back without
its source graph (the window re-attaches its own), without a layout (the window places the graph where the last one
was) and without the data of big weights; big models also export here (export): their weights are never serialised in the
window's process.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import threading
import weakref
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass
class Child:
    """What the child keeps from one call to the next (one per process: CHILD)."""
    graph: tuple[tuple, Any] | None = None      # ((path, size, mtime_ns), Graph) of the last model read
    reconverter: Any = None                     # its conversion's pieces, for the re-runs after a pin
    number: int = 0                             # of the last result sent
    pieces: list = field(default_factory=list)  # that result's big parts (gui.chunked)
    replaced: list = field(default_factory=list)    # what a re-run replaced, freed by _settle (see `dropped`)
    memo_key: tuple | None = None               # key and chunked.pack memo of the last result sent with `diff`
    memo: list | None = None
    sent: dict = field(default_factory=dict)    # the last ONNX view sent, by its key
    views: int = 0                              # ONNX views sent
    indexed: Any = None                         # the last view sent, whose _index is `index`, made while idle
    index: tuple | None = None
    converted_number: int = 0                   # of the re-run sent by `rerun`
    converted: tuple | None = None              # its ConversionResult and metadata edits
    records: Any = None                         # metadata.parsed.Memo of this process (the window's has its own):
                                                # see `incremental`


@dataclass
class Window:
    """What the window's process keeps of what crossed (one per process: WINDOW)."""
    got: dict = field(default_factory=dict)     # the last few ONNX views received, by key
    # the last few results received from a `diff` send, by key: weak references to them (the window's document
    # keeps what it shows; a result kept here had its TFLite graph and the open's view and layout alive after its
    # window closed)
    had: dict = field(default_factory=dict)
    lock: Any = field(default_factory=threading.Lock)   # the loader's and each window's re-run threads receive
                                                        # views at the same time


CHILD, WINDOW = Child(), Window()


def watch_parent() -> None:
    """(In the child, as its pool starts it) end when the window's process ends: a window killed by a signal never
    shuts its pool down, and the worker, which holds both ends of its own call queue, would wait on it for ever
    (and keep the forkserver and resource tracker with it)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def wait() -> None:
        from multiprocessing.connection import wait as ready
        ready([parent.sentinel])
        os._exit(0)

    threading.Thread(target=wait, name="watch parent", daemon=True).start()


def send(*objs, diff: bool = False, have=None) -> tuple:
    """What the window gets back: (number, skeletons of objs) (gui.chunked); their big parts are kept for `piece`
    until the next result is sent. With `diff` (a conversion result), the next such result can be sent as its
    changes from this one: it is, when the window says it `have`s this one (loader_job.received)."""
    from .chunked import Chunked, pack
    c = CHILD
    c.number += 1
    dropped(c.pieces)
    c.pieces = []
    memo = [] if diff else None
    against = c.memo if diff and have is not None and have == c.memo_key else None
    skeletons = pack(objs, c.pieces, memo, against)
    if diff:
        dropped(c.memo)
        c.memo_key, c.memo = (os.getpid(), c.number), memo
        for sk in skeletons:
            if isinstance(sk, Chunked):
                sk.key, sk.base = c.memo_key, have if against is not None else None
    return (c.number, *skeletons)


class Replaced(RuntimeError):
    """A result's pieces were asked for after another result was sent (another window's re-run or open came in
    between): the caller asks for its result again. (No custom __init__: it crosses the process boundary.)"""


def dropped(obj) -> None:
    """Keep `obj`, which a re-run replaces, until _settle: freeing the last result (its pieces, model, plan and
    trace: ~10^5 objects on 10,000 ops) held up `rerun` and as much `annotated`, which the window waits for."""
    if _in_child():                     # (a test calling rerun() in its own process frees at once)
        CHILD.replaced.append(obj)


def piece(number: int, i: int) -> list:
    """Piece i of result `number` (a window that asks for an older result's pieces has dropped that result)."""
    if number != CHILD.number:
        raise Replaced(f"result {number} was replaced by result {CHILD.number}")
    return CHILD.pieces[i]


def reconverter():
    """The child's Reconverter (it starts afresh by itself when the graph or options differ)."""
    if CHILD.reconverter is None:
        from inspector.core.emit.incremental import Reconverter
        CHILD.reconverter = Reconverter()
    return CHILD.reconverter


def records():
    """This process's metadata.parsed.Memo: the records of the models its metadata passes and checkers read (one
    per process: its re-runs read one model after another, so only what a pin changed is read again)."""
    if CHILD.records is None:
        from inspector.core.metadata.parsed import Memo
        CHILD.records = Memo()
    return CHILD.records


def incremental(converter):
    """The pipeline's reuse for a run in this process (session.pipeline.Incremental): `converter`, a Reconverter
    (None: each conversion from scratch), and this process's records()."""
    from inspector.core.session.pipeline import Incremental
    if converter is None:
        from inspector.core.emit.convert import Fresh
        converter = Fresh()
    return Incremental(converter, records())


def _graph(path: str):
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if CHILD.graph is None or CHILD.graph[0] != key:
        from inspector.core.io.loader import load_model
        gc.unfreeze()                   # what the last model's re-runs left (see _settle) may be garbage now
        CHILD.graph = (key, load_model(path))
    return CHILD.graph[1]


def _in_child() -> bool:
    """Whether this is the loader's child process: a test or tool that calls rerun() in its own process must not
    have its whole heap frozen (its cyclic garbage would wait for someone's unfreeze)."""
    return multiprocessing.parent_process() is not None


def _settle() -> None:
    """What a re-run leaves alive (the model, the Reconverter's records, the metadata pass's memo, what is being
    sent) lives until the next one: frozen, so that the collector no longer scans it (a full collection here went
    through ~350,000 objects of the 10,000-op model on each re-run, and far fewer once frozen); the
    window's gc_guard.settle freezes in the same way. What a re-run replaces is freed by its reference counts (pin,
    undo and pin again on that model left no cyclic garbage); reading another model thaws it all (_graph)."""
    CHILD.replaced.clear()
    if not _in_child():
        return
    gc.collect()                        # only what is not frozen: this re-run's objects (its cyclic garbage must
    gc.freeze()                         # not be frozen)
    gc.enable()                         # (see _hold)


def _hold() -> None:
    """No automatic collection from a re-run's start to its _settle: each full one scanned all that the re-run
    had made so far (~10^5 objects on 10,000 ops, at random points of what the window waits for)."""
    if _in_child():
        gc.disable()


def settle() -> None:
    """_settle after an open, asked for by the window once it has the opened model's pieces (the child is idle
    while the window builds its scene): the first pin no longer pays the full collection of what the open left."""
    _settle()


def findings_of(model, since=None) -> list:
    """The denotation findings the Metadata dock lists, computed off the GUI thread (long on a big model); `since`:
    the metadata pass's denotation.Reading of this very model (Linter.lint_read)."""
    from inspector.core.metadata.findings import Finding
    try:
        from inspector.core.metadata.lint import Linter
        linter = Linter(records())
        return linter.lint_read(since) if since is not None and since.model is model else linter.lint(model)
    except Exception as e:      # the checker is advice: a failure is listed, never fatal
        return [Finding("", f"checker failed: {e}")]


def with_findings(result, since=None):
    """The result with findings_of its model as its `findings` (`since`: see findings_of)."""
    return replace(result, findings=findings_of(result.model, since))


STRIP_BYTES = 64 << 10        # weights this big come back from the child as name, type and dims only (a model of
                              # 2,000 ops with 0.1-0.6 MB weights came back whole: parsing its 88 MB held the GIL)


def leave_out_weights(result):
    """Clear the data of initializers over STRIP_BYTES (as the denotation pass's shape view does): parsing them back
    in the window's process would hold the GIL for as long as copying them. `weights_left_out` tells export and
    validation to convert again (in the child, or in their worker). (A re-run's conversion leaves them out
    itself: convert's weights_over.)"""
    from inspector.core.emit.convert import raw_length
    left_out = result.weights_left_out
    for t in result.model.graph.initializer:
        if raw_length(t) > STRIP_BYTES:
            t.ClearField("raw_data")
            left_out = True
    return replace(result, weights_left_out=left_out)


def finish() -> None:
    """A re-run's last step, submitted with `annotated` so that it runs after it, whatever that did: what the
    re-run keeps is settled here (_settle), not in `rerun`, which the window waits for before it repaints, nor in
    `annotated`, whose answer the Metadata dock waits for (the settle's collection is long on a big model)."""
    index_sent()
    _settle()


_DIFF = "diff"         # a dict sent as (_DIFF, changed items, removed keys) against the view the window has


def view_out(vg, have=None):
    """(In the child) vg as sent against the window's view `have`: what the window has crosses as references.
    Nodes it has (from_onnx hands back the same Node for an unchanged ONNX node) as their indices there; edges
    between such nodes with the same tensor and label as the index of the old edge; the value shapes and names as
    what changed. A pin on 10,000 ops sends a few nodes, ~13,000 small ints and a few dict items instead of
    every object to unpickle (and as much garbage to collect)."""
    import copy
    c = CHILD
    old = c.sent.get(have) if have is not None else None
    c.views += 1
    key = (os.getpid(), c.views)                 # a child started again counts from 1 again
    c.sent.clear()
    c.sent[key] = vg
    dropped(old)                        # (its ~10^4 edges freed by the settle, not on the way to the repaint)
    out = copy.copy(vg)
    out.view, out.against = key, None
    if old is None:
        return out
    at, ends = _index(old)
    was = [at.pop(id(n), -1) for n in vg.nodes]      # (pop: an old node stands for one new node at most)
    out.nodes = [n if j < 0 else j for n, j in zip(vg.nodes, was)]
    edges = []
    for e in vg.edges:
        same = ends.get((was[e.src], was[e.dst], e.tensor))
        j = same.pop() if same else -1
        if j >= 0:
            o = old.edges[j]
            if o.label == e.label and o.first == e.first and o.count == e.count:
                edges.append(j)
                continue
        edges.append(e)
    out.edges = edges
    out.shapes, out.tensor_names = _dict_out(old.shapes, vg.shapes), _dict_out(old.tensor_names, vg.tensor_names)
    out.against = have
    return out


def _index(vg, keep: bool = False) -> tuple[dict, dict]:
    """({id(node): index}, {(src, dst, tensor): edge indices, last first}) of a view sent, for view_out to send
    the next against it: made by `index_sent` (`keep`) while the child waits for the next
    pin; view_out takes its entries out."""
    idx = CHILD.index if CHILD.indexed is vg else None
    if idx is None:
        ends: dict = {}
        for j, e in reversed(list(enumerate(vg.edges))):
            ends.setdefault((e.src, e.dst, e.tensor), []).append(j)
        idx = ({id(n): i for i, n in enumerate(vg.nodes)}, ends)
    CHILD.indexed, CHILD.index = (vg, idx) if keep else (None, None)
    return idx


def index_sent() -> None:
    """_index of the view sent last, made after a re-run, off the way to the next one's repaint."""
    for vg in CHILD.sent.values():
        _index(vg, keep=True)


def _dict_out(old: dict, new: dict) -> tuple:
    from .chunked import _changes
    return (_DIFF, *_changes(old, new, new))         # (shapes and names: hashable values, their own frozen form)


def _dict_in(old: dict, sent) -> dict:
    from .chunked import applied
    return applied(old, *sent[1:]) if type(sent) is tuple else sent


def view_in(vg) -> bool:
    """(In the window) vg as received made whole again with the view it was sent against (view_out); False when
    that view is no longer kept (the caller asks again without one). Edges kept between nodes that moved in the
    list are new Edge objects with the new indices; the others are the old objects (the shown graph's)."""
    from .graph_model import Edge
    with WINDOW.lock:
        if vg.against is not None:
            old = WINDOW.got.get(vg.against)
            if old is None:
                return False
            now = [-1] * len(old.nodes)         # old node index -> new
            nodes = vg.nodes
            for i, x in enumerate(nodes):
                if type(x) is int:
                    now[x] = i
            vg.nodes = [old.nodes[x] if type(x) is int else x for x in nodes]
            edges = []
            for x in vg.edges:
                if type(x) is int:
                    o = old.edges[x]
                    s, d = now[o.src], now[o.dst]
                    x = o if s == o.src and d == o.dst else Edge(s, d, o.tensor, o.label, o.first, o.count)
                edges.append(x)
            # which of the old view's nodes and edges each one is, for live_layout.diff against it
            vg.__dict__["_was"] = (weakref.ref(old), [x if type(x) is int else -1 for x in nodes],
                                   [x if type(x) is int else -1 for x in vg.edges])
            vg.edges = edges
            vg.shapes, vg.tensor_names = _dict_in(old.shapes, vg.shapes), _dict_in(old.tensor_names, vg.tensor_names)
        WINDOW.got[vg.view] = vg
        while len(WINDOW.got) > 4:          # (two windows may re-run at once)
            del WINDOW.got[next(iter(WINDOW.got))]
        del vg.view, vg.against
    return True


def result_in(key, base_key, fetch_all, needed=()):
    """(In the window) `fetch_all(base)` of a result sent against the one received as `base_key` (None: whole),
    kept as `key` for the next; Replaced when that one, or the part of it at an index in `needed`, is no longer
    kept (the caller asks again, against another)."""
    base = None
    if base_key is not None:
        with WINDOW.lock:
            refs = WINDOW.had.get(base_key)
            base = tuple(r() if r is not None else None for r in refs) if refs is not None else None
            if base is None or any(base[i] is None for i in needed):
                WINDOW.had.pop(base_key, None)
                raise Replaced(f"result {base_key} is no longer kept")
    got = fetch_all(base)
    if key is not None:
        from .chunked import _ours
        with WINDOW.lock:
            WINDOW.had[key] = tuple(weakref.ref(o) if _ours(o) else None for o in got)
            while len(WINDOW.had) > 3:
                del WINDOW.had[next(iter(WINDOW.had))]
    return got


def derived(old, new) -> None:
    """(In the window) `new`, made from the received result `old` with dataclasses.replace (results are frozen:
    a graph attached, the metadata pass's model), is kept as the base of the next result's changes in old's place:
    they share every part that was sent."""
    with WINDOW.lock:
        for key, refs in WINDOW.had.items():
            if refs and refs[0] is not None and refs[0]() is old:
                WINDOW.had[key] = (weakref.ref(new), *refs[1:])


def last_result():
    """(In the window) the key of the result received last and still kept, to send the next one against."""
    with WINDOW.lock:
        return next((k for k, refs in reversed(WINDOW.had.items()) if refs[0] is not None and refs[0]() is not None),
                    None)


def last_view():
    """(In the window) the key of the view received last, to send the next one against."""
    with WINDOW.lock:
        return next(reversed(WINDOW.got), None)


def rerun(path: str, pins: dict, options: dict, metadata: dict, have=None):
    """A re-run's first step: convert, and send the ONNX ViewGraph as `send` packs it (or the error's message),
    against the window's view `have` (view_out). The window lays the graph out while `result_of` packs the
    ConversionResult here, and shows it while `annotated` runs the metadata pass: the processes overlap (the
    metadata pass changes no node, value or shape)."""
    from inspector.core.ir.errors import InspectorError
    from inspector.core.session.pipeline import ConvertOptions

    from . import graph_model
    _hold()
    try:            # big weights are left out of the model as the window gets it: never parsed in to be cleared
        result = incremental(reconverter()).converted(_graph(path), pins, ConvertOptions.from_dict(options),
                                                      check=False, weights_over=STRIP_BYTES)
        sent = send(view_out(graph_model.from_onnx(result.model), have))
    except Exception as e:
        _settle()                        # no `finish` follows (and collection must not stay off)
        if isinstance(e, InspectorError):   # as text: exception classes with custom __init__ do not unpickle
            return str(e)
        raise
    CHILD.converted_number, CHILD.converted = sent[0], (result, metadata)
    return sent


def result_of(number: int, have=None):
    """A re-run's second step: re-run `number`'s ConversionResult, its model before the metadata pass and without
    its source graph (the window re-attaches its own), as `send` packs it against the result the window `have`s;
    None when another re-run replaced it."""
    if number != CHILD.converted_number or CHILD.converted is None:
        return None
    result = replace(CHILD.converted[0], graph=None)     # (the metadata pass reads it)
    result.transposes                                   # counted here: the GUI thread shows the result with it
    return send(result, diff=True, have=have)


def annotated(number: int):
    """A re-run's last step, submitted with `finish` behind it: the metadata pass on re-run `number`'s model and
    the checker's findings on it, as (model, notes, metadata mapping, findings); the error's message; or None when
    another re-run replaced it (the window then runs the pass itself). `result_of` sent the model already: the
    pass changes its inputs' and outputs' types and its properties, so it crosses again, whole (~1 MB on 10,000
    ops, without its big weights)."""
    from inspector.core.ir.errors import InspectorError
    from inspector.core.metadata.edits import MetadataEdits
    if number != CHILD.converted_number or CHILD.converted is None:
        return None
    result, metadata = CHILD.converted
    CHILD.converted = None
    try:
        answer = annotated_and_checked(result, MetadataEdits.from_dict(metadata))
    except InspectorError as e:
        return str(e)
    dropped(result)                     # freed by `finish`, not while the window waits
    return answer


def annotated_and_checked(result, metadata) -> tuple:
    """The metadata pass on `result` (in place on its model) and the checker's findings on the annotated model:
    (model, notes, metadata mapping, findings). `annotated` runs it in the child, the window's re-run worker on a
    copy (editing._annotated_here)."""
    from inspector.core.session.pipeline import Incremental
    done = Incremental(memo=records()).metadata_pass(result, metadata, keep_reading=True)   # (for the checker)
    return done.result.model, done.notes, done.result.metadata_mapping, findings_of(done.result.model, done.reading)


def export(path: str, pins: dict, options: dict, metadata: dict, out: str, overwrite: bool, report_path: str,
           report: bytes) -> str | None:
    """Convert with the window's decisions, check and write `out` (Session.export) and its report, both or neither;
    None, or the error's message."""
    from inspector.core.io.atomic import OutputSet
    from inspector.core.ir.errors import InspectorError
    from inspector.core.metadata.edits import MetadataEdits
    from inspector.core.session.session import Session
    from inspector.core.session.pipeline import ConvertOptions
    try:
        s = Session(path=path, graph=_graph(path), pins=dict(pins), metadata=MetadataEdits.from_dict(metadata),
                    options=ConvertOptions.from_dict(options))
        s.convert(check=False)
        files = OutputSet([] if overwrite else [path])
        files.add(out)
        files.add(report_path)
        with files:
            s.export(out, overwrite_source=overwrite, out=files)
            files.write(report_path, report)
    except InspectorError as e:
        return str(e)
    return None
