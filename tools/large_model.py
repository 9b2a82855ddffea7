"""Produce docs/hardening.md's "largest models tested" figures: a 1 GiB TFLite model (one FULLY_CONNECTED,
16384 x 16384 float32 weights) read and converted with the full ONNX check, and a 2.25 GiB one (weights stored
after the flatbuffer) read and refused at conversion with the 2 GB message. Needs ~10 GiB of memory and ~4 GB of
disk in the temporary folder; takes a few minutes.

    .venv/bin/python tools/large_model.py
"""
from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from inspector.core.emit.convert import convert
from inspector.core.ir.errors import ConversionError
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite


def fc_model(path: Path, units: int, k: int, tail: bool) -> Path:
    b = ModelBuilder()
    x = b.input("x", [1, k])
    y = b.tensor("y", [1, units])
    w = np.zeros((units, k), np.float32)
    w[np.arange(units), np.arange(units) % k] = 1.0
    b.op("FULLY_CONNECTED", [x, b.const("w", w, tail=tail), None], [y])
    b.output(y)
    return b.save(path)


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        one = fc_model(Path(d) / "fc_1gib.tflite", 16384, 16384, tail=False)
        t = time.perf_counter()
        graph = read_tflite(one)
        read = time.perf_counter() - t
        t = time.perf_counter()
        convert(graph)
        conv = time.perf_counter() - t
        print(f"{one.stat().st_size / 2**30:.2f} GiB model: read {read:.1f} s, converted with the full check in "
              f"{conv:.0f} s, peak memory {peak_gib():.1f} GiB")
        del graph
        one.unlink()
        big = fc_model(Path(d) / "fc_2gib.tflite", 36864, 16384, tail=True)
        t = time.perf_counter()
        graph = read_tflite(big)
        read = time.perf_counter() - t
        t = time.perf_counter()
        try:
            convert(graph)
            outcome = "converted (unexpected: over the 2 GB protobuf limit)"
        except ConversionError as e:
            outcome = f"refused in {time.perf_counter() - t:.0f} s: {str(e).splitlines()[0]}"
        print(f"{big.stat().st_size / 2**30:.2f} GiB model (weights after the flatbuffer): read {read:.1f} s, "
              f"{outcome}")


if __name__ == "__main__":
    main()
