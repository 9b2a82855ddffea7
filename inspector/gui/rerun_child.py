"""A re-run in the loader's forkserver child, for big models: the converter holds the GIL for seconds, which
would freeze the window if it ran in a thread. Qt-free, so the child never imports Qt.

The child keeps the last model it read (keyed by path, size and mtime), so a pin after the first re-run reads
nothing; it runs the same pipeline as the Session (session.pipeline), in two calls: `rerun` converts and sends the
ONNX graph view, which the window lays out while `annotated` runs the metadata pass. The result comes back without
its source graph (the window re-attaches its own), without a layout (the window places the graph where the last one
was) and without the data of big weights; big models also export here (export): their weights are never serialised in the
window's process.
"""
from __future__ import annotations

import gc
import multiprocessing
import os

_GRAPH: tuple[tuple, object] | None = None      # ((path, size, mtime_ns), Graph) of the last model read
_RECONVERTER = None                             # its conversion's pieces, for the re-runs after a pin
_PIECES: list = [0, []]                         # (number of the last result sent, its big parts: gui.chunked)


def send(*objs) -> tuple:
    """What the window gets back: (number, skeletons of objs) (gui.chunked); their big parts are kept for `piece`
    until the next result is sent."""
    from .chunked import pack
    _PIECES[0] += 1
    _PIECES[1] = []
    return (_PIECES[0], *pack(objs, _PIECES[1]))


def piece(number: int, i: int) -> list:
    """Piece i of result `number` (a window that asks for an older result's pieces has dropped that result)."""
    if number != _PIECES[0]:
        raise RuntimeError(f"result {number} was replaced by result {_PIECES[0]}")
    return _PIECES[1][i]


def reconverter():
    """The child's Reconverter (it starts afresh by itself when the graph or options differ)."""
    global _RECONVERTER
    if _RECONVERTER is None:
        from inspector.core.emit.incremental import Reconverter
        _RECONVERTER = Reconverter()
    return _RECONVERTER


def _graph(path: str):
    global _GRAPH
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if _GRAPH is None or _GRAPH[0] != key:
        from inspector.core.io.loader import load_model
        gc.unfreeze()                   # what the last model's re-runs left (see _settle) may be garbage now
        _GRAPH = (key, load_model(path))
    return _GRAPH[1]


def _in_child() -> bool:
    """Whether this is the loader's child process: a test or tool that calls rerun() in its own process must not
    have its whole heap frozen (its cyclic garbage would wait for someone's unfreeze)."""
    return multiprocessing.parent_process() is not None


def _settle() -> None:
    """What a re-run leaves alive (the model, the Reconverter's records, the metadata pass's memo, what is being
    sent) lives until the next one: frozen, so that the collector no longer scans it (a full collection here went
    through ~350,000 objects: 0.2-0.5 s of each re-run of the 10,000-op model at load 4, ~30 ms once frozen); the
    window's gc_guard.settle freezes in the same way. What a re-run replaces is freed by its reference counts (pin,
    undo and pin again on that model left no cyclic garbage); reading another model thaws it all (_graph)."""
    if not _in_child():
        return
    gc.collect()                        # only what is not frozen: this re-run's objects (its cyclic garbage must
    gc.freeze()                         # not be frozen)
    gc.enable()                         # (see _hold)


def _hold() -> None:
    """No automatic collection from a re-run's start to its _settle: each full one scanned all that the re-run
    had made so far (~10^5 objects on 10,000 ops: 20-50 ms, at random points of what the window waits for)."""
    if _in_child():
        gc.disable()


def settle() -> None:
    """_settle after an open, asked for by the window once it has the opened model's pieces (the child is idle
    while the window builds its scene): the first pin no longer pays the full collection of what the open left
    (0.3 s of the 10,000-op model's first pin at load 4)."""
    _settle()


def findings_of(model) -> list:
    """The denotation findings the Metadata dock lists, computed off the GUI thread (1.8 s on 10k ops)."""
    from inspector.core.metadata.findings import Finding
    from inspector.core.metadata.lint import lint
    try:
        return lint(model)
    except Exception as e:      # the checker is advice: a failure is listed, never fatal
        return [Finding("", f"checker failed: {e}")]


def with_findings(result):
    """findings_of its model, kept on the result they describe as `findings`."""
    result.findings = findings_of(result.model)
    return result


STRIP_BYTES = 64 << 10        # weights this big come back from the child as name, type and dims only (a model of
                              # 2,000 ops with 0.1-0.6 MB weights came back whole: parsing its 88 MB held the GIL)


def leave_out_weights(result, kept: list | None = None):
    """Clear the data of initializers over STRIP_BYTES (as the denotation pass's shape view does): parsing them back
    in the window's process would hold the GIL for as long as copying them. `weights_left_out` tells export and
    validation to convert again (in the child, or in their worker). `kept` gets (tensor, data) of each, to put
    them back."""
    for t in result.model.graph.initializer:
        if t.HasField("raw_data") and len(t.raw_data) > STRIP_BYTES:
            if kept is not None:
                kept.append((t, t.raw_data))
            t.ClearField("raw_data")
            result.weights_left_out = True
    return result


_CHECK: list = [0, None, []]    # (number of the last re-run sent, its model, the weights left out of what was sent)


def findings(number: int) -> list | None:
    """findings_of re-run `number`'s model, with its weights back (None when a newer re-run replaced it). A re-run
    is sent before its metadata is checked: the window draws the graph meanwhile. The re-run's last step: what
    it keeps is settled here (_settle), once the window has the graph, not in `rerun` or `annotated`, which the
    window waits for before it repaints."""
    try:
        if number != _CHECK[0]:
            return None
        for t, data in _CHECK[2]:
            t.raw_data = data
        _CHECK[2] = []
        return findings_of(_CHECK[1])
    finally:
        _settle()


_SENT: dict = {}       # (in the child) the nodes of the last ONNX view sent, by its key
_GOT: dict = {}        # (in the window) the nodes of the last few ONNX views received, by key
_VIEW_COUNT = [0]


def view_out(vg, have=None):
    """(In the child) vg as sent: the nodes the window has in view `have` (from_onnx hands back the same Node for
    an unchanged ONNX node) as their indices there, so that it neither unpickles them again nor compares them
    (10,000 nodes: ~15 ms of unpickling and as much of comparing, and their garbage to collect)."""
    import copy
    old = _SENT.get(have) if have is not None else None
    _VIEW_COUNT[0] += 1
    key = (os.getpid(), _VIEW_COUNT[0])          # a child started again counts from 1 again
    _SENT.clear()
    _SENT[key] = vg.nodes
    out = copy.copy(vg)
    out.view, out.against = key, None
    if old is not None:
        at = {id(n): i for i, n in enumerate(old)}
        out.nodes, out.against = [at.get(id(n), n) for n in vg.nodes], have
    return out


def view_in(vg) -> bool:
    """(In the window) vg as received made whole again with the nodes of the view it was sent against; False when
    that view is no longer kept (the caller asks again without one)."""
    if vg.against is not None:
        old = _GOT.get(vg.against)
        if old is None:
            return False
        vg.nodes = [old[x] if type(x) is int else x for x in vg.nodes]
    _GOT[vg.view] = vg.nodes
    while len(_GOT) > 4:                # (two windows may re-run at once)
        del _GOT[next(iter(_GOT))]
    del vg.view, vg.against
    return True


def last_view():
    """(In the window) the key of the view received last, to send the next one against."""
    return next(reversed(_GOT), None)


_CONVERTED: list = [0, None]   # (number of the view sent by `rerun`, its ConversionResult and metadata edits)


def rerun(path: str, pins: dict, options: dict, metadata: dict, have=None):
    """A re-run's first step: convert, and send the ONNX ViewGraph as `send` packs it (or the error's message),
    against the window's view `have` (view_out).
    The window lays the graph out while `annotated` runs the metadata pass here: the two processes overlap
    (the metadata pass changes no node, value or shape the view shows)."""
    from inspector.core.ir.errors import InspectorError
    from inspector.core.session.pipeline import ConvertOptions, converted

    from . import graph_model
    _hold()
    try:
        result = converted(_graph(path), pins, ConvertOptions.from_dict(options), check=False, cache=reconverter())
    except Exception as e:
        _settle()                        # no `findings` follows
        if isinstance(e, InspectorError):   # as text: exception classes with custom __init__ do not unpickle
            return str(e)
        raise
    sent = send(view_out(graph_model.from_onnx(result.model), have))
    _CONVERTED[:] = [sent[0], (result, metadata)]
    return sent


def annotated(number: int):
    """A re-run's second step: the metadata pass on re-run `number`'s model; (ConversionResult without graph and
    findings, notes) as `send` packs them (the window calls loader_job.received, then `findings`), the error's
    message, or None when another re-run replaced it."""
    from inspector.core.ir.errors import InspectorError
    from inspector.core.metadata.edits import MetadataEdits
    from inspector.core.session.pipeline import metadata_pass
    if number != _CONVERTED[0] or _CONVERTED[1] is None:
        return None                     # another window's re-run came in between: the caller runs again
    result, metadata = _CONVERTED[1]
    _CONVERTED[1] = None
    try:
        outcome = metadata_pass(result, MetadataEdits.from_dict(metadata))
    except Exception as e:
        _settle()                       # no `findings` follows
        if isinstance(e, InspectorError):
            return str(e)
        raise
    outcome.result.graph, outcome.result.findings = None, None       # findings: asked for next (`findings`)
    kept: list = []
    sent = send(leave_out_weights(outcome.result, kept), outcome.notes)
    _CHECK[:] = [sent[0], outcome.result.model, kept]
    return sent


def export(path: str, pins: dict, options: dict, metadata: dict, out: str, overwrite: bool) -> str | None:
    """Convert with the window's decisions, check and write `out` (Session.export); None, or the error's message."""
    from inspector.core.ir.errors import InspectorError
    from inspector.core.metadata.edits import MetadataEdits
    from inspector.core.session.document import Session
    from inspector.core.session.pipeline import ConvertOptions
    try:
        s = Session(path=path, graph=_graph(path), pins=dict(pins), metadata=MetadataEdits.from_dict(metadata),
                    options=ConvertOptions.from_dict(options))
        s.convert(check=False)
        s.export(out, overwrite_source=overwrite)
    except InspectorError as e:
        return str(e)
    return None
