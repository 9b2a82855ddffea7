"""int8/uint8 AVERAGE_POOL_2D in the default QDQ mode rounds a window's mean as LiteRT's kernels do: half away from
zero in the stored integers (TFLite's (sum +- count / 2) / count), where QuantizeLinear rounds half to even and the
float pool's own rounding puts a tie on either side. Every tie was one step off (5 of the 256 pooled values of
MobileNet v1 0.25 uint8 at seed 0, where XNNPACK is 0)."""
from __future__ import annotations

import numpy as np
import pytest

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder

from .test_quant import nodes, save
from .test_quant_seeds import litert_and_onnx

RNG = np.random.default_rng(23)


@pytest.mark.parametrize("dtype, q, kernel, stride, padding", [
    ("uint8", (0.04, 128), (2, 4), (2, 3), "VALID"),
    ("uint8", (0.11, 3), (3, 3), (1, 1), "SAME"),      # edge windows divide by fewer elements
    ("int8", (0.05, -9), (2, 2), (2, 2), "VALID"),     # negative means: ties away from zero, downwards
    ("int8", (0.02, 40), (4, 3), (1, 2), "SAME"),
])
def test_average_pool_rounds_ties_as_litert(tmp_path, dtype, q, kernel, stride, padding):
    """Against LiteRT on random integers (ties are frequent with even window counts): 0 steps everywhere, by
    default as with --exact-int, and the pool stays between DequantizeLinear and QuantizeLinear."""
    shape = [1, 9, 14, 5]
    b = ModelBuilder()
    x = b.input("x", shape, dtype, quant=q)
    oh = (shape[1] - kernel[0]) // stride[0] + 1 if padding == "VALID" else -(-shape[1] // stride[0])
    ow = (shape[2] - kernel[1]) // stride[1] + 1 if padding == "VALID" else -(-shape[2] // stride[1])
    y = b.tensor("y", [1, oh, ow, 5], dtype, quant=q)
    b.op("AVERAGE_POOL_2D", [x], [y], {"padding": padding, "filter_height": kernel[0], "filter_width": kernel[1],
                                        "stride_h": stride[0], "stride_w": stride[1]})
    b.output(y)
    graph = save(b, tmp_path)
    info = np.iinfo(dtype)
    xs = [RNG.integers(info.min, info.max + 1, shape).astype(dtype) for _ in range(3)]
    result = convert(graph)
    assert nodes(result, "AveragePool") and nodes(result, "QuantizeLinear")
    for x in xs:
        (ref,), (got,) = litert_and_onnx(graph, result, [x])
        np.testing.assert_array_equal(got, ref)
    (ref,), (got,) = litert_and_onnx(graph, convert(graph, exact_int=True), xs[:1])
    np.testing.assert_array_equal(got, ref)
