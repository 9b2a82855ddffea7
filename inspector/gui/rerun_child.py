"""A re-run in the loader's forkserver child, for big models: the converter holds the GIL for seconds, which
would freeze the window if it ran in a thread. Qt-free, so the child never imports Qt.

The child reads the model again and replays the decisions through a Session of its own; the result comes back
without its source graph (the window re-attaches its own).
"""
from __future__ import annotations


def rerun(path: str, pins: dict, options: dict, metadata: dict):
    """(ConversionResult without graph, notes, ONNX ViewGraph, Layout), or the error's message."""
    from inspector.core.ir.errors import InspectorError
    from inspector.core.metadata.edits import MetadataEdits
    from inspector.core.session.document import Session

    from . import graph_layout, graph_model
    try:
        s = Session.open(path)
        s.pins, s.metadata = dict(pins), MetadataEdits.from_dict(metadata)
        s.options.update(options)
        s.convert(check=False)
    except InspectorError as e:          # as text: exception classes with custom __init__ do not unpickle
        return str(e)
    vg = graph_model.from_onnx(s.result.model)
    layout = graph_layout.compute(vg)
    s.result.graph = None
    return s.result, s.notes, vg, layout
