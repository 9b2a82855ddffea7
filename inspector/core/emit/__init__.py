"""LayoutPlan + Graph -> ONNX: the emitter context, the op handlers (ops/) and convert()."""
