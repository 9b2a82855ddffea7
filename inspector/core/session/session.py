"""The Session: one document holding a model, the user's decisions (pins, metadata edits, options) and the
latest results. The CLI and the window both drive it; views subscribe to its events (events.py). No Qt here.

Decisions are saved as JSON (`MODEL.inspector.json` beside the model by default) so what was decided in the
window can be replayed headless (`convert --session FILE`).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Mapping

from google.protobuf.message import EncodeError

from inspector.core.io import onnx_bytes
from inspector.core.ir import memory
from inspector.core.ir.errors import ConversionError, InspectorError
from inspector.core.layout import layout as L
from inspector.core.metadata.edits import MetadataEdits
from .listeners import Listeners
from .pipeline import ConvertOptions, run

if TYPE_CHECKING:
    from .events import Event


@dataclass
class Change:
    """What a re-run changed, for the status line ("2 Transposes removed, 1 conflict left")."""
    transposes_before: int | None
    transposes_after: int
    conflicts_after: int

    def __str__(self) -> str:
        parts = []
        if self.transposes_before is not None and self.transposes_before != self.transposes_after:
            d = self.transposes_after - self.transposes_before
            parts.append(f"{abs(d)} Transpose{'s' if abs(d) != 1 else ''} {'added' if d > 0 else 'removed'}")
        elif self.transposes_before is not None:
            parts.append("no change in Transposes")
        parts.append(f"{self.conflicts_after} conflict{'s' if self.conflicts_after != 1 else ''} left")
        return ", ".join(parts)


@dataclass
class Session:
    """One model, the user's decisions on it (pins, metadata edits, options) and the latest results."""
    path: str
    graph: Any                                            # inspector.core.ir.graph.Graph
    pins: dict[str, str] = field(default_factory=dict)    # tensor name -> layout text (see layout.parse)
    metadata: MetadataEdits = field(default_factory=MetadataEdits)
    options: ConvertOptions = field(default_factory=ConvertOptions)
    result: Any = None                                    # latest ConversionResult
    notes: list[str] = field(default_factory=list)
    validation: Any = None
    error: str = ""
    target: str = "onnx"                                  # the consumer whose metadata rules export enforces
    listeners: Listeners = field(default_factory=Listeners, repr=False, compare=False)   # who hears its events
    _counted: tuple = field(default=(None, None), repr=False)     # (result shown, its Transposes)

    # --- what this kind of session can do: the window asks these, never which class a session is ------------
    can_pin = True                       # pins steer the conversion of the TFLite model
    can_validate = True                  # a TFLite model to run against the ONNX one
    can_export_onnx = True
    can_save_session = True              # decisions in a session file beside the model, and autosaved
    can_export_model_explorer = True     # both graphs and their mapping
    converts = True                      # a re-run converts the TFLite model (else: edits applied to an ONNX file)
    other: str | None = None             # a pair's ONNX model made elsewhere (the file its export starts from)
    why_not: ClassVar[Mapping[str, str]] = {}     # capability ("pin", "validate", ...) -> why it is off, in plain words


    # --- life cycle ----------------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike, listeners: tuple[Callable[[Event], None], ...] = ()) -> "Session":
        """Read the model; `listeners` (subscribed to every event) hear its ModelOpened."""
        from inspector.core.io.loader import load_model
        session = cls(path=str(path), graph=load_model(os.fspath(path)))
        for fn in listeners:
            session.subscribe(fn)
        session._publish("ModelOpened", session.path)
        return session

    # --- events (see events.py) ----------------------------------------------------------------------------
    def subscribe(self, listener: Callable[[Event], None], *kinds: type) -> Callable[[], None]:
        """Call `listener(event)` for each event of the given kinds (every event when none are given); returns
        the function that unsubscribes it."""
        return self.listeners.subscribe(listener, *kinds)

    def publish(self, event: Event) -> None:
        self.listeners.publish(event)

    def _publish(self, kind: str, *fields) -> None:
        """Publish the event events.<kind>(*fields), made only when someone listens: a Session nobody watches (the
        command line's) does not import the events."""
        if self.listeners.entries:
            from . import events
            self.publish(getattr(events, kind)(*fields))

    @property
    def is_tflite(self) -> bool:
        return self.graph.format == "tflite"

    # --- decisions (each a small, reversible edit; the window wraps them in undo commands) -------------------
    def check_pin(self, tensor: str, layout: str | None) -> None:
        """Raise ConversionError naming what is wrong if set_pin would refuse this pin; nothing changes."""
        if self.graph.main.tensor_by_name(tensor) is None:
            raise ConversionError(f"pin: no tensor named '{tensor}'")
        if layout is not None and layout.lower() != "auto":
            from inspector.core.layout.pins import resolve_pins
            resolve_pins(self.graph.main, {tensor: layout})      # validate now, not at the next run

    def set_pin(self, tensor: str, layout: str | None) -> str | None:
        """Pin (or with None unpin) a tensor; returns the previous value so the edit can be undone."""
        self.check_pin(tensor, layout)
        before = self.pins.get(tensor)
        if layout is None or layout.lower() == "auto":
            self.pins.pop(tensor, None)
        else:
            self.pins[tensor] = layout
        self._publish("PinsChanged", dict(self.pins))
        return before

    def clear_pins(self) -> dict[str, str]:
        before, self.pins = dict(self.pins), {}
        self._publish("PinsChanged", {})
        return before

    def set_metadata(self, edits: MetadataEdits) -> MetadataEdits:
        edits.normalized()                                   # raises MetadataError listing allowed values
        before, self.metadata = self.metadata, edits
        self._publish("MetadataChanged", edits)
        return before

    def set_options(self, options: ConvertOptions) -> ConvertOptions:
        before, self.options = self.options, options
        self._publish("OptionsChanged", options)
        return before

    def restore(self, pins: Mapping[str, str], metadata: MetadataEdits, options: Mapping[str, Any]) -> None:
        """Put back a snapshot of the decisions (undo/redo of a loaded session file); `options` as to_dict gives."""
        self.pins, self.metadata = dict(pins), metadata
        self.options = self.options.updated(**options)
        self._publish("PinsChanged", dict(self.pins))
        self._publish("MetadataChanged", metadata)
        self._publish("OptionsChanged", self.options)

    # --- results -------------------------------------------------------------------------------------------
    def convert(self, check: bool = True):
        """Re-run propagation, emission and the metadata pass; returns the Change for the status line."""
        with memory.collection_paused():
            outcome = run(self.graph, self.pins, self.options, self.metadata, check=check)
        return self.show(outcome.result, outcome.notes)

    def show(self, result, notes: list[str], view=None) -> Change:
        """Take a conversion run elsewhere (the window's worker or child process) as this Session's result; `view`
        travels in its PlanChanged (what the worker made for the views: the window's laid-out graph)."""
        # the shown result's count as counted when it was shown (a count walks every ONNX node)
        before = self._counted[1] if self._counted[0] is self.result else \
            self.result.transposes if self.result is not None else None
        self.result, self.notes, self.validation, self.error = result, list(notes), None, ""
        change = Change(before, result.transposes, len(result.plan.conflicts))
        self._counted = (result, change.transposes_after)
        self._publish("PlanChanged", result, change, view)
        return change

    def checked(self, result, findings: list, model=None, notes=None, mapping=None, error: str = "") -> bool:
        """What follows a result shown before its metadata pass (the window's re-runs): the pass's `model`, `notes`
        and metadata `mapping`, and the checker's findings on it; or the pass's `error` (the result is then not
        exported). Kept (and published) only while it is still this Session's result, so an older run's never
        pass for the current."""
        if result is not self.result:
            return False
        shown = result
        if model is not None:
            result = replace(result, model=model, metadata_mapping=mapping if mapping is not None else [])
        if notes is not None:
            self.notes = list(notes)
        self.error = error
        self.result = replace(result, findings=findings, checking=False)
        if self._counted[0] is shown:           # the pass changes no node: the count stands
            self._counted = (self.result, self._counted[1])
        self._publish("FindingsChecked", findings, shown)
        return True

    def validate(self, **kwargs):
        if self.result is None:
            self.convert()
        return self.validated(self.measure(**kwargs))

    def measure(self, **kwargs):
        """Validate the current result without changing the Session (a worker thread may run this; the GUI thread
        then hands the outcome to `validated`)."""
        from inspector.core.proof.validate import validate
        if self.result is None:
            raise InspectorError("nothing converted yet")
        return validate(self.result, **kwargs)

    def node_errors(self, validation) -> dict[str, float]:
        """ONNX node name -> the largest relative error among the tensors of the TFLite op it came from."""
        worst: dict[int, float] = {}
        for e in validation.outputs + validation.intermediates:
            if e.op is not None:
                worst[e.op] = max(worst.get(e.op, 0.0), e.max_rel)
        trace = self.result.trace
        return {name: worst[op] for op, names in trace.op_nodes.items() if op in worst for name in names}

    def validated(self, validation):
        self.validation = validation
        self._publish("ValidationDone", validation)
        return validation

    def pieces(self) -> tuple[int, Iterator[bytes]]:
        """(length, pieces) of the result's model: its serialised bytes one piece after another, never all held at
        once (onnx_bytes.pieces); an allocation protobuf cannot make is said in words."""
        try:
            length, pieces = onnx_bytes.pieces(self.result.model)
        except (MemoryError, EncodeError):                     # what protobuf says when an allocation fails
            raise self._out_of_memory() from None

        def each() -> Iterator[bytes]:
            try:
                yield from pieces
            except (MemoryError, EncodeError):
                raise self._out_of_memory() from None
            except ValueError as e:                             # a weight's bytes disagree with its shape
                raise ConversionError(f"the converted model fails the ONNX checker: {e}") from None
        return length, each()

    def _out_of_memory(self) -> "memory.OutOfMemory":
        return memory.OutOfMemory(os.path.basename(self.path), memory.need(self.graph))

    def export(self, path: str, overwrite_source: bool = False, out=None) -> None:
        """Write the model, then check it fully; atomic: never replaces the source model unless asked. With `out`
        (an atomic.OutputSet) the file is only staged there, renamed with the run's other outputs at its commit, and
        Exported is the caller's to publish once it has. Metadata errors (metadata.lint.gate) refuse the write; its
        warnings join the notes. The checker reads the model without its big weights (check_model, `written`: the
        pieces written checked their sizes)."""
        from contextlib import nullcontext
        from inspector.core.emit.convert import check_model
        from inspector.core.io.atomic import OutputSet
        from inspector.core.metadata.lint import gate
        if self.result is None:
            self.convert()
        if self.error:
            raise InspectorError(f"the last re-run's metadata pass failed ({self.error}): undo the edit that "
                                 "caused it, then export")
        for f in gate(self.result.model, self.target):
            if f"warning: {f.message}" not in self.notes:
                self.notes.append(f"warning: {f.message}")
        own = out is None
        if own:
            out = OutputSet([] if overwrite_source else [self.path])
            out.add(path)
        with out if own else nullcontext():
            staged = out.write(path, self.pieces()[1])
            try:
                check_model(self.result.model, written=True)
            except BaseException as e:
                Path(staged).unlink(missing_ok=True)       # a batch's parent adopts whatever temporary exists
                if isinstance(e, MemoryError):
                    raise self._out_of_memory() from None
                raise
        if own:
            self._publish("Exported", path)

    def report(self) -> dict:
        r = self.result
        if r is None:
            raise InspectorError("nothing converted yet")
        sg = self.graph.main
        return {
            "model": self.path,
            "transposes": r.transposes,
            "nodes": len(r.model.graph.node),
            "conflicts": [{"tensor": sg.tensors[c.tensor].name, "reason": c.reason, "kind": c.kind,
                           "node": c.node} for c in r.plan.conflicts],
            "pins": dict(self.pins),
            "layout_plan": r.plan.optimality.to_dict() if r.plan.optimality else None,
            "io_layouts": [{"tensor": sg.tensors[t].name, "layout": _io_name(r.plan.outputs.get(t, r.plan.perm(
                t, sg.tensors[t].rank))), "rule": why} for t, why in r.plan.io_rules.items()],
            "unsupported": [],
            "options": self.options.to_dict(),
            "metadata": self.metadata.to_dict(),
            "notes": list(self.notes),
            "state": getattr(r, "state", None) or [],
            "quantization": {sg.tensors[t].name: q for t, q in (getattr(r, "quantization", None) or {}).items()},
            "metadata_mapping": list(getattr(r, "metadata_mapping", None) or []),
        }

    # --- session files -------------------------------------------------------------------------------------
    def decisions(self) -> dict:
        from .session_file import SESSION_VERSION      # (session files are the window's: a convert reads none)
        return {"version": SESSION_VERSION, "model": os.path.basename(self.path),
                "model_sha256": file_sha256(self.path),
                "pins": dict(self.pins), "options": self.options.to_dict(), "metadata": self.metadata.to_dict()}

    def default_session_path(self) -> str:
        return str(Path(self.path).with_suffix("")) + ".inspector.json"

    def save(self, path: str | None = None) -> str:
        from inspector.core.io.atomic import write_atomic
        path = path or self.default_session_path()
        write_atomic(path, (json.dumps(self.decisions(), indent=2) + "\n").encode(), protect=[self.path])
        return path

    def load_decisions(self, path: str) -> list[str]:
        """Apply a saved session's pins, options and metadata; returns warnings (e.g. model changed). The file is
        read and checked whole first (session_file): a SessionError lists every problem and nothing is applied."""
        from .session_file import read_decisions
        d = read_decisions(path, self.graph)
        warnings = []
        if d.model_sha256 not in (None, file_sha256(self.path)):
            warnings.append(f"{path} was saved for a different version of {d.model}")
        self.restore(d.pins, d.metadata, d.options)
        return warnings


def file_sha256(path: str) -> str:
    """The model file's hash; autosave asks on every edit, so it is computed once per file version (the window
    asks first while opening, off the GUI thread: hashing a large model takes a while)."""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    return _sha256_of(path, st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=8)
def _sha256_of(path: str, mtime_ns: int, size: int) -> str:
    import hashlib                    # (here: loading OpenSSL is a cost every cold `convert` would pay)
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return ""
    return h.hexdigest()


def _io_name(perm) -> str:
    return "as TFLite" if L.is_identity(perm) else L.name(perm)
