"""Write encoder52.tflite: a BERT-style encoder with random weights, docs/performance.md's real architecture past 2,000 ops.

Dev tooling only: it needs TensorFlow, which neither the app nor its tests ever import, so run it with the bench's
peers venv (bench/peers.py `ensure_venv()` makes bench/.peers-venv with tensorflow-cpu 2.21.0):

    bench/.peers-venv/bin/python tools/make_encoder.py OUT.tflite [--layers 52 --hidden 192 --heads 3
        --ffn 768 --tokens 128 --seed 0]

The input is float embeddings [1, tokens, hidden] rather than token ids, so no embedding lookup (GATHER) is needed;
each layer is MultiHeadAttention and a GELU Dense FFN, each with a residual and a LayerNormalization after it.
Weights are seeded, float32; the converter keeps to TFLite builtin ops.
At the defaults: 2,132 TFLite ops, 92 MB (~40 s; Keras names may not contain '/', hence layer0_attention).
"""
from __future__ import annotations

import argparse
import os
import warnings


def build(layers: int, hidden: int, heads: int, ffn: int, tokens: int, seed: int):
    import keras

    keras.utils.set_random_seed(seed)
    x = inputs = keras.Input((tokens, hidden), batch_size=1, name="embeddings")
    for i in range(layers):
        att = keras.layers.MultiHeadAttention(heads, hidden // heads, name=f"layer{i}_attention")(x, x)
        x = keras.layers.LayerNormalization(name=f"layer{i}_attention_norm")(x + att)
        h = keras.layers.Dense(ffn, activation="gelu", name=f"layer{i}_ffn_in")(x)
        h = keras.layers.Dense(hidden, name=f"layer{i}_ffn_out")(h)
        x = keras.layers.LayerNormalization(name=f"layer{i}_ffn_norm")(x + h)
    return keras.Model(inputs, x, name=f"encoder{layers}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    for name, default in (("layers", 52), ("hidden", 192), ("heads", 3), ("ffn", 768), ("tokens", 128),
                          ("seed", 0)):
        ap.add_argument(f"--{name}", type=int, default=default)
    args = ap.parse_args()
    if args.hidden % args.heads:
        ap.error("--hidden must be a multiple of --heads")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter, not the model's
    import tensorflow as tf

    model = build(args.layers, args.hidden, args.heads, args.ffn, args.tokens, args.seed)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    data = converter.convert()
    with open(args.out, "wb") as f:
        f.write(data)
    with warnings.catch_warnings():  # tf.lite.Interpreter's deprecation notice; it still counts ops fine
        warnings.simplefilter("ignore")
        ops = len(tf.lite.Interpreter(model_content=data)._get_ops_details())
    print(f"{args.out}: {ops} TFLite ops, {len(data) / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
