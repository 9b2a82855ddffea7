"""Sessions declare what they can do; the window asks those flags, never which class a session is (issue 36)."""
from __future__ import annotations

from inspector.core.session.session import Session
from inspector.core.session.onnx_session import OnnxSession
from inspector.core.session.pair_session import PairSession

CAPABILITIES = ("pin", "validate", "export_onnx", "save_session", "export_model_explorer")


def test_each_kind_of_session_says_what_it_can_do():
    def can(kind):
        return {c for c in CAPABILITIES if getattr(kind, f"can_{c}")}
    assert can(Session) == set(CAPABILITIES) and Session.converts and Session.other is None
    assert can(OnnxSession) == {"export_onnx", "save_session"} and not OnnxSession.converts
    assert can(PairSession) == {"validate", "export_onnx", "export_model_explorer"} and not PairSession.converts


def test_every_capability_turned_off_says_why():
    for kind in (Session, OnnxSession, PairSession):
        off = {c for c in CAPABILITIES if not getattr(kind, f"can_{c}")}
        assert off <= set(kind.why_not), (kind.__name__, off - set(kind.why_not))
        assert all(kind.why_not[c].strip() for c in off)
