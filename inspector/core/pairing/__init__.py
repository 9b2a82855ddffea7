"""A TFLite model paired with an ONNX model made elsewhere: the mapping, findings and validation."""
