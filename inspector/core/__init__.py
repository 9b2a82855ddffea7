"""Qt-free core: readers, layout propagation, ONNX emission, metadata, validation, the Session document."""
