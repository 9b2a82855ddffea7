"""Layout Inspector: TFLite to ONNX conversion you can see, fix and prove."""
__version__ = "0.2.0"
