"""The window's views, subscribed to the Session they show.

Every view (the panes, Details, Conflicts, search, the Validation and Metadata docks, the pin bar, the status bar
and the title) subscribes here to the Session's events (core/session/events.py) and redraws itself from the Session
when one arrives; nothing that changes the Session calls a view.

The Session changes: each opened model is a new one. The views' one Listeners list is handed to the Session shown
(`bind`), so its own publish reaches them, and taken from the one it replaces (whose late events, an export's
end, then reach no view). `bind` tells the views with ModelOpened (a model is read in a worker, so Session.open
cannot announce it); `bind(None, path)` while the next model is being read, so that no view keeps showing the
previous one meanwhile.
"""
from __future__ import annotations

from typing import Callable

from inspector.core.session.events import Event, Listeners, ModelOpened


class Views:
    def __init__(self):
        self.session = None
        self.listeners = Listeners()

    def subscribe(self, listener: Callable[[Event], None], *kinds: type) -> None:
        """`listener(event)` for the current Session's events of these kinds (every kind when none), in
        subscription order: views that read what an earlier one made (the window's Document) come after it."""
        self.listeners.subscribe(listener, *kinds)

    def bind(self, session, path: str, other: str | None = None) -> None:
        """Show `session` (None: nothing, while `path`, and a pair's `other`, are being read): the views hear
        ModelOpened."""
        if self.session is not None and self.session.listeners is self.listeners:
            self.session.listeners = Listeners()
        self.session = session
        if session is not None:
            session.listeners = self.listeners
        self.listeners.publish(ModelOpened(path, other))
