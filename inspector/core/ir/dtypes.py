"""TFLite/numpy dtype names -> ONNX TensorProto element types, for every stage that writes ONNX."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from .errors import ConversionError

_ONNX_DTYPES: dict[str, int] = {"string": TensorProto.STRING}


def onnx_dtype(dtype: str) -> int:
    code = _ONNX_DTYPES.get(dtype)
    if code is None:
        try:
            code = _ONNX_DTYPES[dtype] = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        except (TypeError, KeyError):
            raise ConversionError(f"tensor type {dtype} has no ONNX equivalent") from None
    return code
