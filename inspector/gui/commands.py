"""Undo commands: every decision the window takes (pin, unpin, clear pins, metadata edit, loaded session) is one
QUndoCommand that changes the Session and asks the editor to re-run propagation.

Each command keeps the value it replaced, which the Session's setters return, so undo puts exactly that back.
"""
from __future__ import annotations

from PySide6.QtGui import QUndoCommand

from inspector.core.ir.names import elide
from inspector.core.metadata.edits import MetadataEdits
from .words import counted

AUTO, CHANNELS_FIRST, KEEP = None, "channels-first", "keep"      # pin texts, as layout.Layout.parse reads them
LABELS = {AUTO: "Auto", CHANNELS_FIRST: "channels-first (NHWC → NCHW)", KEEP: "keep as is"}


def short(name: str, n: int = 40) -> str:
    """A long name elided at the middle (its model and its module class and op index kept: ir.names.elide)."""
    return elide(name, n)


def pin_label(layout: str | None) -> str:
    return LABELS.get(layout, layout or "Auto")


class SessionCommand(QUndoCommand):
    def __init__(self, editor, text: str):
        super().__init__(text)
        self.editor = editor

    @property
    def session(self):
        return self.editor.session


class PinLayout(SessionCommand):
    """Pin a tensor's layout (`layout` None = Auto, i.e. unpin); the editor has had it checked (Session.check_pin)."""

    def __init__(self, editor, tensor: str, layout: str | None):
        verb = "Unpin" if layout is None else "Pin"
        tail = "" if layout is None else f" to {pin_label(layout)}"
        super().__init__(editor, f"{verb} {short(tensor)}{tail}")
        self.tensor, self.layout, self.before = tensor, layout, editor.session.pins.get(tensor)

    def redo(self):
        self.session.set_pin(self.tensor, self.layout)
        self.editor.rerun()

    def undo(self):
        self.session.set_pin(self.tensor, self.before)
        self.editor.rerun()


class ClearPins(SessionCommand):
    def __init__(self, editor):
        super().__init__(editor, f"Clear {counted(len(editor.session.pins), 'pin')}")
        self.before = dict(editor.session.pins)

    def redo(self):
        self.session.clear_pins()
        self.editor.rerun()

    def undo(self):
        for tensor, layout in self.before.items():
            self.session.set_pin(tensor, layout)
        self.editor.rerun()


class EditMetadata(SessionCommand):
    """Replace the session's metadata edits (validated before the command is made, see Editor.edit_metadata)."""

    def __init__(self, editor, edits: MetadataEdits, text: str):
        super().__init__(editor, text)
        self.after, self.before = edits, editor.session.metadata

    def redo(self):
        self.session.set_metadata(self.after)
        self.editor.rerun()

    def undo(self):
        self.session.set_metadata(self.before)
        self.editor.rerun()


def decisions_of(session) -> tuple[dict, dict, dict]:
    return dict(session.pins), session.metadata.to_dict(), session.options.to_dict()


def put_decisions(session, state: tuple[dict, dict, dict]) -> None:
    pins, metadata, options = state
    session.restore(pins, MetadataEdits.from_dict(metadata), options)


class LoadDecisions(SessionCommand):
    """A session file (or an autosave) applied as one undoable step. Reading happens here, so a bad file raises
    before anything is pushed; `warnings` says e.g. that the file was saved for another version of the model."""

    def __init__(self, editor, path: str, text: str = "Open session"):
        super().__init__(editor, text)
        s = editor.session
        self.before = decisions_of(s)
        try:
            self.warnings = s.load_decisions(path)
            self.after = decisions_of(s)
        finally:
            put_decisions(s, self.before)

    def redo(self):
        put_decisions(self.session, self.after)
        self.editor.rerun()

    def undo(self):
        put_decisions(self.session, self.before)
        self.editor.rerun()
