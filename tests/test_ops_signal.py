"""RFFT2D with its complex accessors against LiteRT: the complex tensor lives as float pairs inside the ONNX graph."""
from __future__ import annotations

import numpy as np
import pytest

from inspector.core.emit.convert import convert
from inspector.core.ir.errors import ConversionError
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite_bytes
from tests.opcase import Case, check, uni


def rfft(shape, fft_length, parts=("REAL", "IMAG", "COMPLEX_ABS")):
    def make(rng):
        b = ModelBuilder()
        x = b.input("x", shape)
        fl = b.const("fft_length", np.asarray(fft_length, np.int32))
        out = (*shape[:-2], fft_length[0], fft_length[1] // 2 + 1)
        z = b.tensor("spectrum", out, "complex64")
        b.op("RFFT2D", [x, fl], [z])
        for name in parts:
            y = b.tensor(name.lower(), out)
            b.op(name, [z], [y])
            b.output(y)
        return b, [uni(rng, shape)]
    return Case(f"RFFT2D-{shape}-{fft_length}-{'+'.join(parts)}", make, rtol=1e-4)


CASES = [rfft((2, 4, 8), (4, 8)), rfft((5, 8), (4, 8), ("REAL",)), rfft((1, 3, 4, 6), (4, 8), ("COMPLEX_ABS",)),
         rfft((7, 16), (8, 16), ("IMAG", "REAL")),
         rfft((3, 1, 20), (1, 32)),                     # a spectrogram's frames: H of 1, W zero-padded
         rfft((2, 5, 40), (4, 32)), rfft((6, 1, 64), (1, 64), ("COMPLEX_ABS",))]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_rfft2d_matches_litert(case):
    check(case)


def test_rfft2d_at_opset_21_where_dft_takes_its_axis_as_an_input():
    case = rfft((2, 4, 8), (4, 8))
    case.opset = 21
    res = check(case)
    dfts = [n for n in res.model.graph.node if n.op_type == "DFT"]       # over H; over W it is a MatMul
    assert len(dfts) == 1 and all(len(n.input) == 3 and all(a.name != "axis" for a in n.attribute) for n in dfts)


def test_rfft2d_of_one_row_is_one_matmul_without_dft_nor_pad():
    """A spectrogram's RFFT2D (fft_length [1, N] on frames zero-padded to N) was a DFT over W, a Pad and a DFT of
    length 1 over H, which ONNX Runtime ran 5x slower than the whole rest of the model: now one MatMul by a DFT
    matrix of the frame's own rows, folded by ONNX Runtime from a table of N twiddles (the file stays small)."""
    res = check(rfft((3, 1, 20), (1, 32), ("COMPLEX_ABS",)))
    ops = [n.op_type for n in res.model.graph.node]
    assert "DFT" not in ops and "Pad" not in ops and ops.count("MatMul") == 1
    sizes = {i.name: tuple(i.dims) for i in res.model.graph.initializer}
    assert max(np.prod(d) for d in sizes.values()) == 32 * 2          # the twiddle table, not a 20 x 34 matrix


def test_complex_graph_output_is_refused():
    b = ModelBuilder()
    x = b.input("x", (4, 8))
    z = b.tensor("spectrum", (4, 5), "complex64")
    b.op("RFFT2D", [x, b.const("fl", np.asarray([4, 8], np.int32))], [z])
    b.output(z)
    with pytest.raises(ConversionError, match="complex graph output"):
        convert(read_tflite_bytes(b.build(), "c.tflite"))
