"""Write inspector/resources/sample.tflite: a small image classifier so `make run` always has a model to show.

Float32, input [1, 48, 64, 3] (H != W != C), 16 ops: a stem conv, a depthwise block with a residual ADD, a pool,
two branches joined by CONCATENATION, a per-channel MUL, a pool, MEAN, RESHAPE, FULLY_CONNECTED and SOFTMAX.
Weights are random but seeded, so the file is the same on every run.

    python tools/make_sample.py [OUT]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from inspector.core.io.tflite_builder import ModelBuilder  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "inspector" / "resources" / "sample.tflite"
CLASSES = 10


def build_sample(seed: int = 2026) -> bytes:
    rng = np.random.default_rng(seed)
    b = ModelBuilder(description="layout-inspector sample: a small seeded image classifier")

    def weights(name, shape, fan_in):
        return b.const(name, (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32))

    def bias(name, n):
        return b.const(name, (rng.standard_normal(n) * 0.05).astype(np.float32))

    def conv(name, x, cin, cout, k, shape, stride=1, act="RELU6"):
        y = b.tensor(f"{name}/out", shape)
        b.op("CONV_2D", [x, weights(f"{name}/kernel", (cout, k, k, cin), k * k * cin), bias(f"{name}/bias", cout)],
             [y], {"padding": "SAME", "stride_h": stride, "stride_w": stride, "fused_activation_function": act})
        return y

    def depthwise(name, x, c, shape, act="RELU6"):
        y = b.tensor(f"{name}/out", shape)
        b.op("DEPTHWISE_CONV_2D", [x, weights(f"{name}/kernel", (1, 3, 3, c), 9), bias(f"{name}/bias", c)], [y],
             {"padding": "SAME", "depth_multiplier": 1, "fused_activation_function": act})
        return y

    def pool(kind, name, x, shape):
        y = b.tensor(f"{name}/out", shape)
        b.op(kind, [x], [y], {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2,
                              "filter_width": 2})
        return y

    image = b.input("image", [1, 48, 64, 3])
    stem = conv("stem", image, 3, 16, 3, [1, 24, 32, 16], stride=2)
    dw = depthwise("block1/depthwise", stem, 16, [1, 24, 32, 16])
    proj = conv("block1/project", dw, 16, 16, 1, [1, 24, 32, 16], act="NONE")
    res = b.tensor("block1/add", [1, 24, 32, 16])
    b.op("ADD", [stem, proj], [res])
    pooled = pool("MAX_POOL_2D", "pool1", res, [1, 12, 16, 16])

    wide = conv("branch_a/conv", pooled, 16, 24, 3, [1, 12, 16, 24], act="RELU")
    narrow = conv("branch_b/pointwise", depthwise("branch_b/depthwise", pooled, 16, [1, 12, 16, 16]),
                  16, 8, 1, [1, 12, 16, 8], act="RELU")
    joined = b.tensor("concat", [1, 12, 16, 32])
    b.op("CONCATENATION", [wide, narrow], [joined], {"axis": 3})
    mixed = conv("mix", joined, 32, 32, 1, [1, 12, 16, 32])
    scaled = b.tensor("channel_scale/out", [1, 12, 16, 32])
    b.op("MUL", [mixed, b.const("channel_scale", rng.uniform(0.5, 1.5, 32).astype(np.float32))], [scaled])
    pooled2 = pool("AVERAGE_POOL_2D", "pool2", scaled, [1, 6, 8, 32])

    gap = b.tensor("global_pool", [1, 1, 1, 32])
    b.op("MEAN", [pooled2, b.const("global_pool/axes", np.array([1, 2], np.int32))], [gap], {"keep_dims": True})
    flat = b.tensor("flatten", [1, 32])
    b.op("RESHAPE", [gap, b.const("flatten/shape", np.array([1, 32], np.int32))], [flat], {"new_shape": [1, 32]})
    logits = b.tensor("logits", [1, CLASSES])
    b.op("FULLY_CONNECTED", [flat, weights("head/kernel", (CLASSES, 32), 32), bias("head/bias", CLASSES)],
         [logits], {"fused_activation_function": "NONE"})
    probs = b.tensor("probabilities", [1, CLASSES])
    b.op("SOFTMAX", [logits], [probs], {"beta": 1.0})
    b.output(probs)
    b.signature("serving_default", {"image": image}, {"probabilities": probs})
    b.add_metadata("source", f"tools/make_sample.py, seed {seed}")
    return b.build()


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else OUT
    out.write_bytes(build_sample())
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
