"""Reading and writing files: guarded opens, TFLite/ONNX readers, the TFLite builder, atomic writes."""
