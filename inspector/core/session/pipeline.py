"""The one conversion pipeline: plan -> emit -> check -> metadata pass, for the CLI, the window and the window's
child process alike (each reads the model its own way, then calls `run`)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

FLAGS = ("allow_custom", "float_io", "keep_fp16", "exact_int",     # the boolean options; a session keeps set ones
         "dynamic_as_float")


@dataclass(frozen=True)
class ConvertOptions:
    """How to convert, as the user chose it (CLI flags, the window, a session file)."""
    keep_io_layout: bool = False        # keep TFLite's NHWC graph I/O
    opset: int = 18                     # emit.convert.DEFAULT_OPSET (not imported: it loads the whole converter)
    allow_custom: bool = False          # unknown custom ops as custom-domain nodes
    float_io: bool = False              # quantized models: float32 graph I/O
    keep_fp16: bool = False             # float16 weights stay float16 + Cast
    exact_int: bool = False             # TFLite's integer arithmetic, bit for bit
    dynamic_as_float: bool = False      # dynamic-range ops on float weights dequantized once (fast, not LiteRT's)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ConvertOptions":
        """From a checked session file's or the window's options (unknown keys were refused there)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def to_dict(self) -> dict[str, Any]:
        """As session files store them: I/O layout and opset always, a flag only when set."""
        return {"keep_io_layout": self.keep_io_layout, "opset": self.opset,
                **{k: True for k in FLAGS if getattr(self, k)}}

    def updated(self, **changes) -> "ConvertOptions":
        return replace(self, **changes)


@dataclass
class Outcome:
    """A conversion with its metadata pass applied (run's result)."""
    result: Any                         # ConversionResult, its model with the metadata pass applied
    notes: list[str]                    # the converter's warnings, then the metadata pass's notes
    reading: Any = None                 # metadata_pass's denotation.Reading, when asked to keep it (lint_read's)


def run(graph, pins: Mapping[str, str] | None = None, options: ConvertOptions = ConvertOptions(), metadata=None,
        check: bool = True, metadata_failure_is_note: bool = False) -> Outcome:
    """Convert `graph` with the user's pins and options (`check`: the full onnx checker; export runs it anyway),
    then the metadata pass: denotations, TFLite metadata pre-fill, the user's `metadata` edits on top.
    A metadata pass that fails raises, or with `metadata_failure_is_note` becomes a note (a model just opened:
    nothing the user decided can be at fault). Incremental.run gives the same after a pin, with less work."""
    return metadata_pass(converted(graph, pins, options, check), metadata, metadata_failure_is_note)


def converted(graph, pins: Mapping[str, str] | None = None, options: ConvertOptions = ConvertOptions(),
              check: bool = True, weights_over: int | None = None):
    """run's first step: the ConversionResult, its model without the metadata pass (the window shows it, and
    runs metadata_pass after, in a worker or its child process). `weights_over`: see
    emit.convert.convert (a result only viewed and annotated)."""
    from inspector.core.emit.convert import convert
    return convert(graph, pins=dict(pins or {}), check=check, weights_over=weights_over, **asdict(options))


def metadata_pass(result, metadata=None, metadata_failure_is_note: bool = False, keep_reading: bool = False
                  ) -> Outcome:
    """run's second step, in place on result.model (it changes no node, value name or shape); the Outcome's
    result is `result` with the pass's metadata mapping (dataclasses.replace: results are frozen). `keep_reading`:
    the Outcome keeps what the pass read, for the checker to run next on the same model (it holds a Propagator:
    not for an Outcome kept longer)."""
    from inspector.core.metadata.denotation import annotate_read
    return _metadata_pass(annotate_read, result, metadata, metadata_failure_is_note, keep_reading)


def _metadata_pass(annotate_read, result, metadata, metadata_failure_is_note: bool, keep_reading: bool) -> Outcome:
    """metadata_pass with `annotate_read` (denotation's, or an Annotator's)."""
    from inspector.core.ir.errors import InspectorError
    from inspector.core.metadata.edits import MetadataEdits
    reading = None
    try:
        notes, reading, mapping = annotate_read(result, metadata if metadata is not None else MetadataEdits())
        notes = list(result.warnings) + notes
        if mapping is not None:
            result = replace(result, metadata_mapping=mapping)
    except InspectorError as e:
        if not metadata_failure_is_note:
            raise
        notes = [f"metadata pass failed: {e}"]
    return Outcome(result, notes, reading if keep_reading else None)


class Incremental:
    """The pipeline for one model run again after each edit (the window's re-runs after a pin): the very outcomes
    of run, converted, metadata_pass and lint, from the last run's artefacts. `converter`: an
    emit.incremental.Reconverter (it starts afresh by itself for another graph or options); `memo`: the records
    of the models the metadata pass and the checker read (metadata.parsed.Memo, content-keyed: one may serve
    several models and threads). Not thread-safe as a whole: one conversion at a time."""

    def __init__(self, converter=None, memo=None):
        from inspector.core.metadata.denotation import Annotator
        from inspector.core.metadata.lint import Linter
        self._converter = converter
        self.annotator = Annotator(memo)
        self.linter = Linter(self.annotator.memo)

    @property
    def converter(self):
        if self._converter is None:         # (made when first asked: the metadata steps need no converter)
            from inspector.core.emit.incremental import Reconverter
            self._converter = Reconverter()
        return self._converter

    def run(self, graph, pins: Mapping[str, str] | None = None, options: ConvertOptions = ConvertOptions(),
            metadata=None, check: bool = True, metadata_failure_is_note: bool = False,
            keep_reading: bool = False) -> Outcome:
        return self.metadata_pass(self.converted(graph, pins, options, check), metadata, metadata_failure_is_note,
                                  keep_reading)

    def converted(self, graph, pins: Mapping[str, str] | None = None, options: ConvertOptions = ConvertOptions(),
                  check: bool = True, weights_over: int | None = None):
        return self.converter.convert(graph, pins=dict(pins or {}), check=check, weights_over=weights_over,
                                      **asdict(options))

    def metadata_pass(self, result, metadata=None, metadata_failure_is_note: bool = False,
                      keep_reading: bool = False) -> Outcome:
        return _metadata_pass(self.annotator.annotate_read, result, metadata, metadata_failure_is_note, keep_reading)

    def lint(self, model, target: str = "onnx", dims: bool = True) -> list:
        return self.linter.lint(model, target, dims)

    def lint_read(self, reading, target: str = "onnx") -> list:
        return self.linter.lint_read(reading, target)
