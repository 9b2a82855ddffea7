"""What a Session tells the views subscribed to it, one frozen dataclass per kind of change.

    unsubscribe = session.subscribe(on_plan, PlanChanged)          # only PlanChanged events
    session.subscribe(on_any)                                       # every event
    unsubscribe()

Listeners run synchronously, in subscription order, on the thread that changed the Session (the window changes
it on the GUI thread only: its workers use pipeline.run and Session.measure, then Session.show and .validated);
an exception in a listener propagates to the code that made the change.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class ModelOpened:
    """The Session holds a model (published by Session.open to the listeners it is given)."""
    path: str


@dataclass(frozen=True)
class PinsChanged:
    """A pin was set, removed or cleared; the plan follows at the next conversion (PlanChanged)."""
    pins: Mapping[str, str]


@dataclass(frozen=True)
class MetadataChanged:
    """The user's metadata edits changed; the model shows them after the next conversion (PlanChanged)."""
    metadata: Any                       # MetadataEdits


@dataclass(frozen=True)
class OptionsChanged:
    """Conversion options changed (ConvertOptions); the plan follows at the next conversion."""
    options: Any


@dataclass(frozen=True)
class PlanChanged:
    """A conversion ran: the new plan, model and trace are in session.result; `change` is what it did to the
    Transposes ("2 Transposes removed, 1 conflict left")."""
    result: Any                         # ConversionResult
    change: Any                         # Change


@dataclass(frozen=True)
class FindingsChecked:
    """A re-run's metadata pass (session.result.model, session.notes) and the checker's findings on it
    (result.findings) arrived after its PlanChanged: the window shows a re-run's graph first and annotates and
    checks its model right after (session.error: why that pass failed, if it did)."""
    findings: Any


@dataclass(frozen=True)
class ValidationDone:
    """Validation finished; session.validation holds it."""
    validation: Any


@dataclass(frozen=True)
class Exported:
    path: str


Event = (ModelOpened | PinsChanged | MetadataChanged | OptionsChanged | PlanChanged | FindingsChecked | ValidationDone
         | Exported)
