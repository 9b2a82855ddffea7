"""A metadata consumer (a Target): its name, its label, the rules it may report and its check. The registry that
metadata.lint, the CLI's --target and the window's "Check for" combo all read."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from inspector.core.ir.errors import InspectorError

if TYPE_CHECKING:
    from ..findings import Finding
    from ..parsed import Parts

DEFAULT = "onnx"


@dataclass(frozen=True)
class Rule:
    """A finding code's severity, the document its rule comes from and what it says."""
    severity: str
    source: str
    summary: str


Check = Callable[[Any, "Parts", "list[Finding]"], "list[Finding]"]


@dataclass(frozen=True)
class Target:
    """`check(model, parts, shared)`: the target's findings beyond denotation.consistency_findings (`shared`, whose
    fixes it may fill in) and dimension propagation (both metadata.lint runs for every target). `rules`: every code
    a finding for this target may carry, with its severity and source."""
    name: str
    label: str                   # the window's "Check for" combo
    summary: str                 # the CLI's description of --target
    rules: Mapping[str, Rule]
    check: Check


REGISTRY: dict[str, Target] = {}


def target(name: str, label: str, summary: str, rules: Mapping[str, Rule]) -> Callable[[Check], Check]:
    """Register the decorated check as the consumer `name` (a module in this package is found on its own)."""
    def register(check: Check) -> Check:
        if name in REGISTRY:
            raise ValueError(f"metadata target '{name}' is registered twice")
        for code, rule in rules.items():
            if any(t.rules.get(code, rule) != rule for t in REGISTRY.values()):
                raise ValueError(f"rule code '{code}' of target '{name}' means another rule elsewhere")
        REGISTRY[name] = Target(name, label, summary, dict(rules), check)
        return check
    return register


def get(name: str) -> Target:
    if name not in REGISTRY:
        raise InspectorError(f"unknown check target '{name}': choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]


def names() -> list[str]:
    """The registered targets, in registration order (the default first)."""
    return list(REGISTRY)


def all_rules() -> dict[str, Rule]:
    return {code: rule for t in REGISTRY.values() for code, rule in t.rules.items()}
