"""Plain numpy versions of a few TFLite ops (NHWC, TFLite's SAME padding), the truth builder-made models are held to."""
from __future__ import annotations

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType


def run_litert(model: bytes | str, *inputs: np.ndarray) -> list[np.ndarray]:
    """Outputs of the reference kernels (no delegates) for the given inputs, in the model's output order."""
    kw = {"model_content": model} if isinstance(model, bytes) else {"model_path": str(model)}
    it = Interpreter(**kw, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def _pads(size: int, k: int, stride: int, dilation: int, padding: str) -> tuple[int, int, int]:
    """(out, before, after) along one spatial axis; SAME puts the odd extra pad at the end, as TFLite does."""
    eff = (k - 1) * dilation + 1
    if padding == "VALID":
        return (size - eff) // stride + 1, 0, 0
    out = -(-size // stride)
    total = max((out - 1) * stride + eff - size, 0)
    return out, total // 2, total - total // 2


def _patches(x, kh, kw, stride, dilation, padding):
    n, h, w, c = x.shape
    oh, t, b = _pads(h, kh, stride[0], dilation[0], padding)
    ow, l, r = _pads(w, kw, stride[1], dilation[1], padding)
    xp = np.pad(x, ((0, 0), (t, b), (l, r), (0, 0)))
    out = np.empty((n, oh, ow, kh, kw, c), x.dtype)
    for i in range(kh):
        for j in range(kw):
            hs, ws = i * dilation[0], j * dilation[1]
            out[:, :, :, i, j, :] = xp[:, hs:hs + oh * stride[0]:stride[0], ws:ws + ow * stride[1]:stride[1], :]
    return out


def act(y, fused: str):
    return {"NONE": y, "RELU": np.maximum(y, 0), "RELU6": np.clip(y, 0, 6), "RELU_N1_TO_1": np.clip(y, -1, 1)}[fused]


def conv2d(x, w, b, stride=(1, 1), padding="SAME", dilation=(1, 1), fused="NONE"):
    """x NHWC, w [O, H, W, I] (TFLite's filter layout)."""
    p = _patches(x.astype(np.float64), w.shape[1], w.shape[2], stride, dilation, padding)
    y = np.einsum("nhwijc,oijc->nhwo", p, w.astype(np.float64)) + (0 if b is None else b)
    return act(y, fused)


def depthwise_conv2d(x, w, b, stride=(1, 1), padding="SAME", fused="NONE"):
    """w [1, H, W, C*multiplier]; multiplier 1 here."""
    p = _patches(x.astype(np.float64), w.shape[1], w.shape[2], stride, (1, 1), padding)
    y = np.einsum("nhwijc,ijc->nhwc", p, w[0].astype(np.float64)) + (0 if b is None else b)
    return act(y, fused)


def pool2d(x, k, stride, padding="VALID", kind="max"):
    p = _patches(x.astype(np.float64), k[0], k[1], stride, (1, 1), padding)
    if kind == "max":
        if padding == "SAME":   # padded cells must not win
            ones = _patches(np.ones_like(x, np.float64), k[0], k[1], stride, (1, 1), padding)
            p = np.where(ones > 0, p, -np.inf)
        return p.max(axis=(3, 4))
    ones = _patches(np.ones_like(x, np.float64), k[0], k[1], stride, (1, 1), padding)
    return p.sum(axis=(3, 4)) / ones.sum(axis=(3, 4))


def softmax(x, axis=-1, beta=1.0):
    e = np.exp(beta * (x - x.max(axis=axis, keepdims=True)))
    return e / e.sum(axis=axis, keepdims=True)
