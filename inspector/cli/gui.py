"""`gui [MODEL]`: the inspector window (needs PySide6; a .tflite is converted in the background)."""
from __future__ import annotations


def add_parser(sub):
    p = sub.add_parser("gui", help="open the inspector window")
    p.add_argument("model", nargs="?", help=".tflite or .onnx file to open")
    p.add_argument("other", nargs="?", help="an ONNX model made elsewhere from MODEL (a .tflite): shown beside it, "
                                            "matched op by op (see `compare`)")
    p.set_defaults(run=run)


def run(args) -> int:
    import os

    from inspector.core.errors import ModelLoadError
    for path in (args.model, args.other):
        if path and not os.path.isfile(path):
            raise ModelLoadError(path, "no such file")
    from inspector.gui.app import main
    return main(args.model, args.other)
