"""Opening a model off the GUI thread: read, lay out the TFLite graph (shown at once), convert, lay out the ONNX graph.

Python cannot interrupt a running conversion: cancel marks the job stale and its results are dropped.
"""
from __future__ import annotations

import os
import threading
import traceback
from contextlib import ExitStack
from dataclasses import replace
from concurrent.futures.process import BrokenProcessPool

from PySide6.QtCore import QObject, QRunnable, Signal

from inspector.core.ir.errors import InspectorError
from inspector.core.io.loader import sniff
from inspector.core.io.tflite_reader import op_count, read_tflite
from inspector.core.session.layers import conversion_layers, graph_layers
from inspector.core.session.session import file_sha256

from . import graph_layout, graph_model
from .document import Document
from .folding import FOLD_OPS, Layers
from .rerun_child import derived, leave_out_weights


_EXECUTOR = None
_EXECUTOR_LOCK = threading.Lock()     # the warm-up's thread and the loader's may ask for it at once


def executor():
    return _executor()


def _executor():
    """The child's pool, made once (tests count calls to executor(); the warm-up's own go here)."""
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor
            ctx = multiprocessing.get_context("forkserver")     # never fork a process that runs Qt threads
            ctx.set_forkserver_preload(["inspector.core.session.pipeline", "inspector.core.emit.convert",
                                        "inspector.gui.graph_model", "inspector.gui.graph_layout",
                                        "inspector.gui.rerun_child"])
            from .rerun_child import watch_parent
            # threading's exit hooks run before atexit's, and the last registered first: this one runs before
            # concurrent.futures' (which waits for the pool's manager) and multiprocessing's (which joins children).
            # Registered first: once exit has begun it refuses, and no pool is made that the hook would miss.
            threading._register_atexit(_end_child)
            _EXECUTOR = ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=watch_parent)
    return _EXECUTOR


EXIT_WAIT = 30.0        # s the exit waits for the child's job under way (an export), as Editor.close waits for its own
_EXITING = threading.Event()


def _end_child() -> None:
    """At the window process's exit: let the child's job under way finish (bounded), then end the child. A process
    that ended while the warm-up was still starting the child hung for ever: finalization froze the warm-up's
    daemon thread inside `submit`, holding the pool's shutdown lock, and the pool's weakref callback then waited for
    that lock (or the child, started late, read semaphores the exit had removed). Here, before finalization, the
    lock is waited for, and the pool's manager has ended before concurrent.futures' own hook wakes it."""
    _EXITING.set()
    if _EXECUTOR is None:
        return
    with _EXECUTOR._shutdown_lock:      # taken once a submit under way (a warm-up's spawn) has added its worker
        ours = list((_EXECUTOR._processes or {}).values())    # only the pool's: other children are joined as usual
        manager = _EXECUTOR._executor_manager_thread
    _EXECUTOR.shutdown(wait=False, cancel_futures=True)       # queued jobs are dropped, the running one finishes
    if manager is not None:
        manager.join(EXIT_WAIT)         # it stops the worker once that job is done, then ends
    for child in ours:
        if child.is_alive():            # stuck: past the wait
            child.kill()
            child.join(5)
    if manager is not None:
        manager.join(5)                 # a killed worker breaks the pool: the manager cleans up and ends


_WARM = threading.Event()             # the child has answered the warm-up: work sent to it starts at once
_WARMING: list = []                   # a warm-up was started


def warm() -> None:
    """Start the child now (its forkserver, imports and worker take a while, more under load), in a thread of
    its own: the first submit waits for the worker's fork. The window asks for it as it opens, so that a model
    opened from the start page has its big graph laid out there without waiting for the child to start."""
    with _EXECUTOR_LOCK:
        if _WARMING or _WARM.is_set():
            return
        _WARMING.append(True)
    threading.Thread(target=_warm, name="warm child", daemon=True).start()


def _warm() -> None:
    try:
        _executor().submit(os.getpid).result()
    except (BrokenProcessPool, RuntimeError):
        if _EXITING.is_set():           # the pool refused or was ended by _end_child: nothing to say
            return
        raise
    _WARM.set()


def warmed() -> bool:
    return _WARM.is_set()


def received(outcome) -> tuple:
    """In the window (a worker thread): what the child's rerun_child.send packed, its pieces fetched one call at a
    time (each a short unpickling: the GUI thread runs in between)."""
    from .chunked import Chunked, unpack
    from .rerun_child import piece, result_in
    number, *objs = outcome
    top = next((o for o in objs if isinstance(o, Chunked)), None)
    key = top.key if top is not None else None
    needed = [i for i, o in enumerate(objs) if isinstance(o, Chunked) and o.diffed()]
    base = top.base if top is not None and needed else None
    return result_in(key, base, lambda had: unpack(objs, lambda i: executor().submit(piece, number, i).result(),
                                                   had), needed)


PROCESS_BYTES = 64 << 20      # a file this big converts in the child too: its weights' copies hold the GIL


def in_child(path: str, graph=None, ops: int | None = None) -> bool:
    """Convert (and re-run) in the forkserver child rather than a thread of the window's process. The op count is
    `graph`'s, or `ops` (the file's, before it is read: tflite_reader.op_count)."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    return (len(graph.main.ops) if graph is not None else ops or 0) >= LoadJob.PROCESS_OPS or size >= PROCESS_BYTES


def convert_and_lay_out(source, converter=None, lay_out: bool = True):
    """(ConversionResult, notes, ONNX ViewGraph, Geometry), or the conversion error's message. `source` is a Graph,
    or a path when run in a child process (the result then comes back without its source graph). The pipeline
    includes the metadata pass; the denotation findings are computed here too, off the GUI thread. `converter` (a
    Reconverter; the child's own there) keeps the conversion's pieces for the re-runs after a pin."""
    from .rerun_child import incremental, with_findings
    child = isinstance(source, str)
    if child:                           # in the child: kept there for the re-runs after pins (rerun_child)
        from .rerun_child import _graph, _hold, reconverter
        _hold()                         # no automatic collection until the window's `settle`, as in a re-run
        graph, converter = _graph(source), reconverter()
    else:
        graph = source
    try:
        # the full onnx checker holds the GIL throughout (serialising and checking the whole model), which
        # froze the window when it ran in a thread of it; there it is left to export, as after a pin
        # the metadata pass's reading kept: the checker then reads again only what the pass changed
        outcome = incremental(converter).run(graph, metadata_failure_is_note=True, check=child, keep_reading=True)
    except InspectorError as e:         # as text: exception classes with custom __init__ do not unpickle
        return str(e)
    result = with_findings(outcome.result, outcome.reading)
    outcome.reading = None              # (it holds a Propagator)
    result.transposes                   # counted here: the GUI thread shows the result with it
    vg = graph_model.from_onnx(result.model)
    layout = graph_layout.compute(vg) if lay_out else None     # not for a model that opens collapsed (folding)
    if child:                           # back to the window in pieces it unpickles in short steps
        from .rerun_child import send, view_out
        return send(leave_out_weights(replace(result, graph=None)), outcome.notes, view_out(vg), layout, diff=True)
    return result, outcome.notes, vg, layout


def _settle_later() -> None:
    """After an open that stopped before its conversion's result was taken: the child collects again once done."""
    from .rerun_child import settle
    try:
        executor().submit(settle)
    except (BrokenProcessPool, RuntimeError):  # a child that died, or a pool shut down at exit
        pass


def in_the_child(sizes, edges) -> tuple:
    """graph_layout.placed run in the child (graph_layout.compute's `elsewhere`), or here when the child failed
    (it may have died: the open then lays out as it did before the child existed)."""
    try:
        return executor().submit(graph_layout.placed, sizes, edges).result()
    except Exception:                   # noqa: BLE001 - the same layout, made here
        return graph_layout.placed(sizes, edges)


# One window's exchange with the child at a time: the child keeps only the last result's pieces and the last
# re-run (rerun_child), so two windows' interleaved exchanges made each other's fail and start again, without end
# (two windows pinning at once: 17,000 re-runs for 8 pins in a review's experiment).
CHILD_TURN = threading.RLock()


class JobSignals(QObject):
    stage = Signal(str)
    tfliteReady = Signal(object, object, object)    # Document, ViewGraph, Geometry
    onnxReady = Signal(object, object, object)
    failed = Signal(str, str)                        # message, details
    conversionFailed = Signal(str)
    done = Signal()


class LoadJob(QRunnable):
    # From this many ops on, conversion runs in a child process: the converter and onnx's checker hold the GIL
    # for long stretches, which would freeze the window while it converts.
    PROCESS_OPS = 2000
    # From this many nodes on, the TFLite graph is laid out in the child: igraph's Sugiyama holds the GIL for a
    # visible stall on 10,000; on 2,136 (encoder52) for less than sending the graph there costs to first paint.
    LAYOUT_NODES = 5000

    def __init__(self, path: str, convert: bool = True):
        super().__init__()
        self.path, self.convert = path, convert
        self.signals = JobSignals()
        self.cancelled = False
        self.folds = False              # the model opens collapsed: the ONNX graph is laid out folded, not whole
        self.setAutoDelete(False)

    def cancel(self) -> None:
        self.cancelled = True

    def _emit(self, signal, *args) -> bool:
        if not self.cancelled:
            signal.emit(*args)
        return not self.cancelled

    def run(self) -> None:
        try:
            self._run()
        except InspectorError as e:
            self._emit(self.signals.failed, str(e), "")
        except MemoryError:     # where no estimate caught it first: one line all the same
            from inspector.core.ir.memory import OutOfMemory, need_for_file
            self._emit(self.signals.failed, str(OutOfMemory(os.path.basename(self.path), need_for_file(self.path))), "")
        except Exception as e:  # the dialog shows the message; details carry the traceback for a bug report
            self._emit(self.signals.failed, f"{type(e).__name__}: {e}", traceback.format_exc())
        finally:
            self._emit(self.signals.done)

    def _tflite_pane(self, graph=None):
        """Read the TFLite model (unless given) and show its laid-out graph; (graph, document), or None when
        cancelled."""
        graph = read_tflite(self.path) if graph is None else graph
        doc = Document(self.path, graph=graph)
        if self.cancelled:
            return None
        self._emit(self.signals.stage, "Laying out…")
        vg = graph_model.from_tflite(graph)
        layers = doc.layers = Layers.of(graph_layers(graph.main, graph.format), len(graph.main.ops))
        layers.set_whole(graph_model.TFLITE, vg)
        if layers.folds:                # a big model opens collapsed: only its boxes are laid out
            folded, layout = layers.laid_out(graph_model.TFLITE)
            return (graph, doc) if self._emit(self.signals.tfliteReady, doc, folded.shown, layout) else None
        # a big graph is laid out in the child when the child is up: an open right after the window started (from
        # the command line) would wait for it (a much later first paint)
        child = len(vg.nodes) >= self.LAYOUT_NODES and warmed()
        if not self._emit(self.signals.tfliteReady, doc, vg, graph_layout.compute(vg, in_the_child if child else None)):
            return None
        return graph, doc

    def _run(self) -> None:
        s = self.signals
        self._emit(s.stage, "Reading model…")
        if sniff(self.path) == "onnx":
            from inspector.core.io.onnx_reader import load_proto, read_onnx
            read_onnx(self.path)            # size, nesting and external-data limits, with their messages
            model = load_proto(self.path)   # the same guards: a FIFO named as external data is never opened
            doc = Document(self.path, model=model)
            file_sha256(self.path)          # as below: before the window gets the model
            self._onnx(doc)
            return
        taken: list = []                # the early conversion's result was taken (its exchange then settles the child)
        with ExitStack() as turn:
            early = self._early(turn, taken)
            graph = read_tflite(self.path)
            if early is not None and self.folds != (len(graph.main.ops) >= FOLD_OPS):
                raise InspectorError(f"{os.path.basename(self.path)} changed while it was being opened")
            self.folds = len(graph.main.ops) >= FOLD_OPS
            if early is None and self.convert and in_child(self.path, graph):
                early = self._early(turn, taken, graph)
            shown = self._tflite_pane(graph)
            if shown is None:
                return
            graph, doc = shown
            # before the result is emitted: the window's autosave check hashes the model as soon as it gets it (on
            # the GUI thread, a stall on a large model); hashlib lets the GUI thread run meanwhile
            file_sha256(self.path)
            if not self.convert:
                return
            self._emit(s.stage, "Converting to ONNX…")
            if early is not None:
                taken.append(True)
                outcome = self._in_child(early)
        if early is None:
            from inspector.core.emit.incremental import Reconverter
            doc.reconverter = Reconverter()
            outcome = convert_and_lay_out(graph, doc.reconverter, not doc.layers.folds)
        if isinstance(outcome, str):
            self._emit(s.conversionFailed, outcome)
            return
        result, notes, vg, layout = outcome
        if self.cancelled:
            return
        result, received_as = replace(result, graph=graph), result
        derived(received_as, result)
        doc.result, doc.model, doc.notes, doc.onnx_shapes = result, result.model, notes, dict(vg.shapes)
        doc.onnx_categories()               # both panes' colours, worked out here rather than on the GUI thread
        doc.layers = self._layers(doc.layers, result, vg)
        self._emit(s.onnxReady, doc, vg, layout)

    def _early(self, turn: ExitStack, taken: list, graph=None):
        """The conversion submitted to the child, which converts while this thread reads the model (without `graph`:
        its op count from the file's header, for a file under PROCESS_BYTES), draws the TFLite pane and builds its
        layers (2 cores: the 50,000-op chain's both panes seconds sooner); None when it converts here. The child is
        this window's until it answers."""
        if graph is None:
            try:
                small = os.path.getsize(self.path) < PROCESS_BYTES
            except OSError:
                small = False
            if not (self.convert and small):        # (a big file: submitted once read, whatever its op count)
                return None
            ops = op_count(self.path)
            if not in_child(self.path, ops=ops):
                return None
            self.folds = ops >= FOLD_OPS
        turn.enter_context(CHILD_TURN)
        early = executor().submit(convert_and_lay_out, self.path, None, not self.folds)
        turn.callback(lambda: taken or _settle_later())     # not waited for: cancelled, or failed
        return early

    @staticmethod
    def _layers(layers: Layers, result, vg) -> Layers:
        """The conversion's layers (each group's ONNX nodes, conflicts and Transposes: the badges), the groups
        open as they were; both panes folded and laid out here when some group is closed."""
        out = Layers(conversion_layers(result, tree=layers.tree), set(layers.open))
        out.counted = result.trace
        out.set_whole(graph_model.TFLITE, layers.whole[graph_model.TFLITE])
        out.set_whole(graph_model.ONNX, vg)
        if out.folds:
            out.laid_out(graph_model.TFLITE)
            out.laid_out(graph_model.ONNX)
        return out

    def _in_child(self, sent=None):
        """convert_and_lay_out in the child (`sent`: already submitted there): its result, or the error's message."""
        from .rerun_child import Replaced, settle, view_in
        with CHILD_TURN:
            try:
                while True:     # again when something else was sent before all its pieces came
                    if sent is None:
                        sent = executor().submit(convert_and_lay_out, self.path, None, not self.folds)
                    outcome, sent = sent.result(), None
                    if isinstance(outcome, str):
                        return outcome
                    try:
                        outcome = received(outcome)
                    except Replaced:
                        continue
                    view_in(outcome[2])     # sent whole: the re-runs after a pin send what they share with it
                    return outcome
            finally:            # not waited for: the child freezes what the open left (and collects again)
                try:
                    executor().submit(settle)
                except (BrokenProcessPool, RuntimeError):  # a child that died, or a pool shut down at exit
                    pass

    def _onnx(self, doc: Document) -> None:
        from inspector.core.session.onnx_session import file_sources

        from .rerun_child import findings_of
        self._emit(self.signals.stage, "Checking its metadata…")
        doc.findings, doc.sources = findings_of(doc.model), file_sources(doc.model, doc.path)
        self._emit(self.signals.stage, "Laying out the ONNX graph…")
        vg = graph_model.from_onnx(doc.model)
        doc.onnx_shapes = dict(vg.shapes)
        if doc.layers is not None and doc.result is not None:      # a pair: its mapping groups the ONNX nodes
            doc.layers = self._layers(doc.layers, doc.result, vg)
        folds = doc.layers is not None and doc.layers.folds
        self._emit(self.signals.onnxReady, doc, vg, None if folds else graph_layout.compute(vg))
