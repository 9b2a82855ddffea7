"""What a Session tells the views subscribed to it, one frozen dataclass per kind of change.

    unsubscribe = session.subscribe(on_plan, PlanChanged)          # only PlanChanged events
    session.subscribe(on_any)                                       # every event
    unsubscribe()

Listeners run synchronously, in subscription order, on the thread that changed the Session (the window changes
it on the GUI thread only: its workers use pipeline.run and Session.measure, then Session.show and .validated);
an exception in a listener propagates to the code that made the change.

A Session's listeners are a `Listeners` list (listeners.py; a Session makes an event only when someone listens, so
a headless run never imports this module); the window hands its one list to each Session it shows
(gui/views.py), so the Session's publish is the only path from a change to the views.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .listeners import Listeners as Listeners     # (the window imports its list from here)


@dataclass(frozen=True)
class ModelOpened:
    """The Session holds a model (published by Session.open to the listeners it is given); `other`: a pair's ONNX
    model made elsewhere."""
    path: str
    other: str | None = None


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
    Transposes ("2 Transposes removed, 1 conflict left"); `view`: what a worker made for the views to show it
    with (the window's laid-out graph), None when they make it themselves."""
    result: Any                         # ConversionResult
    change: Any                         # Change
    view: Any = None


@dataclass(frozen=True)
class FindingsChecked:
    """A re-run's metadata pass (session.result.model, session.notes) and the checker's findings on it
    (result.findings) arrived after its PlanChanged: the window shows a re-run's graph first and annotates and
    checks its model right after (session.error: why that pass failed, if it did). session.result is a new
    ConversionResult then (results are frozen): `shown` is the one PlanChanged carried, which it replaces."""
    findings: Any
    shown: Any = None                   # ConversionResult


@dataclass(frozen=True)
class ValidationDone:
    """Validation finished; session.validation holds it."""
    validation: Any


@dataclass(frozen=True)
class Exported:
    """The model was written to `path`."""
    path: str


Event = (ModelOpened | PinsChanged | MetadataChanged | OptionsChanged | PlanChanged | FindingsChecked | ValidationDone
         | Exported)
