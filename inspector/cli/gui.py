"""`gui [MODEL]`: the inspector window (needs PySide6; a .tflite is converted in the background)."""
from __future__ import annotations


def add_parser(sub):
    p = sub.add_parser("gui", help="open the inspector window")
    p.add_argument("model", nargs="?", help=".tflite or .onnx file to open")
    p.set_defaults(run=run)


def run(args) -> int:
    import os

    from inspector.core.errors import ModelLoadError
    if args.model and not os.path.isfile(args.model):
        raise ModelLoadError(args.model, "no such file")
    from inspector.gui.app import main
    return main(args.model)
