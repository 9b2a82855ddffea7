"""The command line's decisions (pins, a saved session, options, metadata flags) applied to a Session, for
`convert` and its batch mode alike."""
from __future__ import annotations

from inspector.cli._metadata_args import edits_from_args
from inspector.core.ir.errors import InspectorError


def parse_pins(items: list[str]) -> dict[str, str]:
    pins = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        if not sep or not name:
            raise InspectorError(f"--pin expects TENSOR=LAYOUT, got '{item}'")
        pins[name] = value
    return pins


def prepare(args, model: str):
    """A Session for `model` with the command line's decisions and options applied."""
    from inspector.core.session.document import Session
    session = Session.open(model)
    if args.session:
        session.load_decisions(args.session)
    for name, value in parse_pins(args.pin).items():
        session.set_pin(name, value)
    if args.keep_io_layout:
        session.options["keep_io_layout"] = True
    for flag in ("allow_custom", "float_io", "keep_fp16", "exact_int"):
        if getattr(args, flag):
            session.options[flag] = True
    if args.opset is not None:
        session.options["opset"] = args.opset
    session.metadata = session.metadata.merged(edits_from_args(args))
    return session
