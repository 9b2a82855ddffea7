"""`gui [MODEL [OTHER]]`: the inspector window (a .tflite is converted in the background); without a model, the
start page."""
from __future__ import annotations


def add_parser(sub):
    p = sub.add_parser("gui", help="open the inspector window")
    p.add_argument("model", nargs="?", help=".tflite or .onnx file to open")
    p.add_argument("other", nargs="?", help="an ONNX model made elsewhere from MODEL (a .tflite): shown beside it, "
                                            "matched op by op (see `compare`)")
    p.add_argument("--sample", action="store_true", help="open the bundled sample model")
    p.set_defaults(run=run)


def run(args) -> int:
    import os

    from inspector.core.ir.errors import InspectorError, ModelLoadError
    if args.sample:
        if args.model:
            raise InspectorError("--sample opens the bundled sample model: give it no MODEL")
        from inspector.resources import SAMPLE, path as resource
        args.model = str(resource(SAMPLE))
    for path in (args.model, args.other):
        if path and not os.path.isfile(path):
            raise ModelLoadError(path, "no such file")
    from inspector.gui.app import main
    return main(args.model, args.other)
