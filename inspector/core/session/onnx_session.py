"""OnnxSession: an ONNX model opened alone (made by tf2onnx, onnx2tf, PyTorch's exporter or by us), whose
denotations and metadata are edited like a conversion's, and nothing else.

It stands where a Session does (the window's undo commands, Metadata dock, session files, autosave and Export
read the same attributes). There is no TFLite model, so no pins, conversion options or validation: `convert`
applies the metadata edits to a copy of the model as read, and `export` writes that copy through the same
checks as any other export (metadata gate, onnx.checker, atomic write), nodes and initializers untouched.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import onnx

from inspector.core.ir.errors import InspectorError
from inspector.core.metadata.edits import MetadataEdits
from .session import Change, Session
from .events import Exported


REASON = ("Pins and validation need a TFLite model. An ONNX model opened alone is never converted: only its "
          "metadata and denotations can be edited here.")


@dataclass(frozen=True)
class OnnxResult:
    """What an ONNX model opened alone shows where a conversion's result stands: the model with the edits, no
    plan, no trace. Frozen like a ConversionResult (dataclasses.replace to derive)."""
    model: Any
    transposes: int
    plan: Any = field(default_factory=lambda: SimpleNamespace(conflicts=[]))
    trace: Any = None
    warnings: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    findings: list[Any] | None = None       # the metadata checker's, once the window has them
    checking: bool = False


@dataclass
class OnnxSession(Session):
    can_pin = can_validate = can_export_model_explorer = converts = False     # no TFLite model
    why_not = {"pin": REASON, "validate": REASON, "export_model_explorer": REASON}
    model: Any = None                                     # the onnx.ModelProto as read; never changed
    sources: Any = None                                   # metadata_sources(), once (a walk of every value info)

    @classmethod
    def of(cls, path: str, model) -> "OnnxSession":
        s = cls(path=str(path), graph=None, model=model)
        s.convert()
        return s

    @property
    def is_tflite(self) -> bool:
        return False

    def check_pin(self, tensor: str, layout: str | None) -> None:      # set_pin checks first
        raise InspectorError("pins steer a TFLite conversion: an ONNX model opened alone has none")

    def convert(self, check: bool = False) -> Change:
        """The model with the metadata edits applied (a copy; without edits the model as read, which nothing
        changes: copying a model of many inputs held the window's GUI thread as it opened the file); MetadataError
        when they do not fit it. Like a pair's, it publishes nothing: the window's worker runs it and the GUI thread
        then `show`s the result."""
        if self.metadata.is_empty():
            model, notes = self.model, []
        else:
            model = onnx.ModelProto()
            model.CopyFrom(self.model)
            notes = self.metadata.apply(model)
        transposes = sum(n.op_type == "Transpose" for n in model.graph.node)
        before = self.result.transposes if self.result is not None else None
        self.result = OnnxResult(model=model, transposes=transposes)
        self.notes, self.validation = [self.header()] + notes, None
        return Change(before, transposes, 0)

    def header(self) -> str:
        return (f"These are the denotations and metadata of {Path(self.path).name}. Export writes that model with "
                "these edits only: its nodes and initializers stay as they are.")

    def measure(self, **kwargs):
        raise InspectorError("an ONNX model opened alone has no TFLite model to be validated against")

    validate = measure

    def export(self, path: str, overwrite_source: bool = False, out=None) -> None:
        from inspector.core.pairing.pair import write_with_metadata
        self.notes += [n for n in write_with_metadata(self.model, self.metadata, path, target=self.target,
                                                      protect=[] if overwrite_source else [self.path], out=out)
                       if n not in self.notes]
        if out is None:
            self.publish(Exported(path))

    def report(self) -> dict:
        model = self.result.model
        return {"model": self.path, "graph": "unchanged (metadata edits only)", "transposes": self.result.transposes,
                "nodes": len(model.graph.node), "conflicts": [], "pins": {}, "metadata": self.metadata.to_dict(),
                "notes": list(self.notes[1:])}

    def metadata_sources(self) -> dict[str, str]:
        """Field -> where the value shown comes from: the file (edited fields are marked by the dock)."""
        if self.sources is None:
            self.sources = file_sources(self.model, self.path)
        return self.sources

    def load_decisions(self, path: str) -> list[str]:
        """A session file saved for this model: its metadata edits (pins and options have no meaning here)."""
        from .session_file import SessionError, check, parse
        data = parse(path)
        if data.get("pins"):
            raise SessionError(path, ["pins steer a TFLite conversion: an ONNX model opened alone has none"])
        d = check({**data, "options": {}}, None, path)
        d.metadata.apply(_copy(self.model))              # every tensor it names must be in this model
        warnings = []
        from .session import file_sha256
        if d.model_sha256 not in (None, file_sha256(self.path)):
            warnings.append(f"{path} was saved for a different version of {d.model}")
        self.restore({}, d.metadata, {})
        return warnings


def _copy(model):
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def file_sources(model, path: str) -> dict[str, str]:
    """Metadata field -> "from FILE" for every field `model` (read from `path`) sets."""
    from inspector.core.metadata import schema as ms
    src = f"from {Path(path).name}"
    found = MetadataEdits.from_model(model)
    out = {k: src for k in found.types}
    out.update({f"dims:{k}": src for k in found.dims})
    out.update({ms.image_key(k) or k: src for k in found.image})
    for name in ("doc_string", "producer", "model_version"):
        if getattr(found, name):
            out[name] = src
    return out
