"""Metadata checks per consumer (a Target, registered in metadata/targets/): what every target shares (the
denotation consistency findings, dimension denotation propagation, the reuse of a previous reading) and the gate and
fixes built on them.

Every finding has a stable `code`, a `severity` (error: the consumer will ignore or mis-read the metadata;
warning: legal but suspicious) and the `source` of its rule (its target's `rules`). Where a fix cannot change what
the model means the finding carries it as MetadataEdits; otherwise `manual` says what to choose.
"""
from __future__ import annotations

from inspector.core.ir.errors import InspectorError

from . import targets
from .findings import Finding
from .edits import MetadataEdits
from .parsed import Memo

RULES = targets.all_rules()                   # the built-in targets' rules, by code
KIND_CODES = {"format": "dims-format", "mismatch": "dims-mismatch"}


class MetadataCheckError(InspectorError):
    """Errors of the metadata check: the model is not written. `findings` holds every finding (errors first)."""

    def __init__(self, findings: list[Finding], target: str):
        self.findings, self.target = findings, target
        errors = [f for f in findings if f.severity == "error"]
        super().__init__(f"{len(errors)} metadata error(s) for {target}, nothing written: "
                         + "; ".join(f"{f.message} [{f.code}]" for f in errors))


def lint(model, target: str = "onnx", dims: bool = True) -> list[Finding]:
    """Every finding for `target`, errors first; `dims=False` skips dimension denotation propagation (which only
    ever warns) for the pre-write gate. (A Linter gives the same from the records of the models it read before.)"""
    return Linter().lint(model, target, dims)


class Linter:
    """lint for models checked one after another (the window's re-runs after a pin): `memo`, the records of the
    models read before (parsed.Memo; an Annotator's, for the checker after its metadata pass), makes only what
    changed be read again. The same findings as lint."""

    def __init__(self, memo: Memo | None = None):
        self.memo = memo if memo is not None else Memo()

    def lint(self, model, target: str = "onnx", dims: bool = True) -> list[Finding]:
        """lint (see there)."""
        from .denotation import shape_view
        from .denotation_rules import Propagator
        consumer, memo = targets.get(target), self.memo
        parts = memo.parts(model)
        return _findings(model, parts, consumer,
                         (lambda: Propagator(shape_view(model), memo, parts).run()) if dims else None)

    def lint_read(self, reading, target: str = "onnx") -> list[Finding]:
        """lint of the model the metadata pass just edited, from what the pass read of it (its denotation.Reading;
        nothing else changed the model since): its records and Propagator are reused, the same findings at a
        fraction of the cost."""
        consumer, memo = targets.get(target), self.memo
        parts = memo.reread(reading.propagator.parts, reading.model, reading.edited)
        if parts is None:               # nothing the pass read applies: everything is read again
            return self.lint(reading.model, target)
        return _findings(reading.model, parts, consumer, lambda: reading.propagator.redeclared(parts, memo).run())


def _findings(model, parts, consumer, propagated) -> list[Finding]:
    """What lint returns, from the parsed model and `propagated()` (dimension propagation's findings; None: not
    asked for)."""
    from .denotation import consistency_findings
    shared = consistency_findings(model, parts)
    out = shared + consumer.check(model, parts, shared)
    if propagated is not None:
        for f in propagated()[1]:
            f.code = f.code or KIND_CODES.get(f.kind, "dims-mismatch")
            out.append(f)
    for f in out:
        rule = consumer.rules[f.code]
        f.severity, f.source = rule.severity, rule.source
    return sorted(out, key=lambda f: f.severity != "error")


def gate(model, target: str = "onnx", dims: bool = False) -> list[Finding]:
    """The check run before any write: MetadataCheckError when there is an error; else the warnings to show
    (errors never come from dimension propagation, so it runs only when `dims` asks for its warnings too)."""
    found = lint(model, target, dims=dims)
    if any(f.severity == "error" for f in found):
        raise MetadataCheckError(found, target)
    return found


def fix(model, target: str = "onnx", rounds: int = 3) -> tuple[list[Finding], list[Finding]]:
    """Apply every safe fix in place (a fix may reveal another, so up to `rounds` passes); returns (the findings
    fixed, the findings left). Only metadata changes: value infos' denotations and metadata_props."""
    done: list[Finding] = []
    linter = Linter()                   # each round reads again only what the last one's fixes changed
    for _ in range(rounds):
        fixable = [f for f in linter.lint(model, target, dims=False) if f.fix is not None]
        fixable.sort(key=lambda f: f.code == "duplicate-key")     # merged last: the entry it keeps wins
        if not fixable:
            break
        edits = MetadataEdits()
        for f in fixable:
            edits = edits.merged(f.fix)
        edits.apply(model)
        done += fixable
    return done, linter.lint(model, target)
