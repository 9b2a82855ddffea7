"""The command line's decisions (pins, a saved session, options, metadata flags) applied to a Session, for
`convert` and its batch mode alike."""
from __future__ import annotations

import sys

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
    from inspector.core.session.session import Session
    from inspector.core.session.pipeline import FLAGS
    session = Session.open(model)
    if args.session:
        session.load_decisions(args.session)
    for name, value in parse_pins(args.pin).items():
        session.set_pin(name, value)            # first: a pin it refuses is an error line, with no note before it
        if value.strip().lower() in ("nhwc", "nwc", "ndhwc"):       # meant the opposite before session version 2
            print(f"note: --pin {name}={value} keeps TFLite's order (letters name the ONNX axes); "
                  f"{name}=channels-first converts it", file=sys.stderr)
    chosen = {k: True for k in ("keep_io_layout",) + FLAGS if getattr(args, k)}
    if args.opset is not None:
        chosen["opset"] = args.opset
    session.set_options(session.options.updated(**chosen))
    session.metadata = session.metadata.merged(edits_from_args(args))
    return session
