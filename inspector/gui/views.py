"""The window's views, subscribed to the Session they show.

Every view (the panes, Details, Conflicts, search, the Validation and Metadata docks, the pin bar, the status bar
and the title) subscribes here to the Session's events (core/session/events.py) and redraws itself from the Session
when one arrives; nothing that changes the Session calls a view.

The hub exists because the Session changes: each opened model is a new one. `bind` moves every subscription to the
new Session and tells the views with ModelOpened (a model is read in a worker, so Session.open cannot announce it);
`bind(None, path)` while the next model is being read, so that no view keeps showing the previous one meanwhile.
"""
from __future__ import annotations

from typing import Callable

from inspector.core.session.events import Event, ModelOpened


class Views:
    def __init__(self):
        self.session = None
        self._listeners: list[tuple[Callable[[Event], None], tuple[type, ...]]] = []
        self._stop: Callable[[], None] | None = None

    def subscribe(self, listener: Callable[[Event], None], *kinds: type) -> None:
        """`listener(event)` for the current Session's events of these kinds (every kind when none), in
        subscription order: views that read what an earlier one made (the window's Document) come after it."""
        self._listeners.append((listener, kinds))

    def bind(self, session, path: str) -> None:
        """Show `session` (None: nothing, while `path` is being read): the views hear ModelOpened(path)."""
        if self._stop is not None:
            self._stop()
            self._stop = None
        self.session = session
        if session is not None:
            self._stop = session.subscribe(self._relay)
        self._relay(ModelOpened(path))

    def _relay(self, event: Event) -> None:
        for listener, kinds in list(self._listeners):
            if not kinds or isinstance(event, kinds):
                listener(event)
