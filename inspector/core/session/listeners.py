"""Who hears a Session's events (events.py): kept apart from the events so that a Session with no listener (the
command line) never imports them."""
from __future__ import annotations

from typing import Any, Callable


class Listeners:
    """(listener, kinds) in subscription order; an empty `kinds` hears every event."""

    def __init__(self):
        self.entries: list[tuple[Callable[[Any], None], tuple[type, ...]]] = []

    def subscribe(self, listener: Callable[[Any], None], *kinds: type) -> Callable[[], None]:
        entry = (listener, kinds)
        self.entries.append(entry)

        def unsubscribe() -> None:
            if entry in self.entries:
                self.entries.remove(entry)
        return unsubscribe

    def publish(self, event) -> None:
        for listener, kinds in list(self.entries):
            if not kinds or isinstance(event, kinds):
                listener(event)
