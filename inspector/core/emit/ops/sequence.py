"""Recurrent ops: LSTM/RNN (one step), their unidirectional and bidirectional sequence forms, and SVDF.

They are Terminate (sequences have no image layout). Their hidden/cell states are TFLite variable tensors the
interpreter keeps between invocations, so each becomes explicit state (ops/variables.py): input
`state:<tensor>` (default zeros) and output `state_out:<tensor>` (its value after the call).

ONNX's LSTM/RNN ops carry the maths; TFLite gate order i, f, c, o becomes ONNX's i, o, f, c. Variants ONNX's LSTM
cannot express (CIFG, projection, layer norm, cell clipping, auxiliary inputs) are refused by name.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from inspector.core.ir.errors import ConversionError
from .registry import X, op
from .variables import State

RNN_ACT = {"TANH": "Tanh", "RELU": "Relu"}
ACT_CHAIN = {"NONE": None, "RELU": ("Relu", None), "RELU6": ("Clip", (0.0, 6.0)), "TANH": ("Tanh", None),
             "RELU_N1_TO_1": ("Clip", (-1.0, 1.0))}


def _present(op, slot: int) -> bool:
    return slot < len(op.inputs) and op.inputs[slot] >= 0


def _weights(ctx, op, slots, what: str) -> np.ndarray:
    """Constant float weights stacked along the first axis (ONNX concatenates gates that way)."""
    arrays = []
    for s in slots:
        t = op.inputs[s]
        if not ctx.is_const(t):
            raise ConversionError(f"{op.opcode}#{op.index}: {what} (input {s}) must be a constant")
        data = ctx.data(t)
        if ctx.tensor(t).quantization is not None and data.dtype != np.float32:
            raise ConversionError(f"{op.opcode}#{op.index}: hybrid-quantized {what} are not supported")
        arrays.append(np.asarray(data, np.float32))
    return np.concatenate(arrays, axis=0)


def _refuse(op, cond: bool, what: str) -> None:
    if cond:
        raise ConversionError(f"{op.opcode}#{op.index}: {what} is not supported")


def _activation(ctx, op, x: str, out: str | list) -> str:
    act = op.options.get("fused_activation_function", "NONE")
    if act not in ACT_CHAIN:
        raise ConversionError(f"{op.opcode}#{op.index}: activation {act} is not supported")
    step = ACT_CHAIN[act]
    if step is None:
        return ctx.node("Identity", [x], out)[0]
    if step[1] is None:
        return ctx.node(step[0], [x], out)[0]
    return ctx.node("Clip", [x, ctx.scalar(step[1][0]), ctx.scalar(step[1][1])], out)[0]


def _rnn_act(op) -> str:
    act = op.options.get("fused_activation_function", "TANH")
    if act not in RNN_ACT:
        raise ConversionError(f"{op.opcode}#{op.index}: activation {act} is not supported by ONNX's RNN/LSTM")
    return RNN_ACT[act]


def _time_major_input(ctx, op, step: bool) -> str:
    """Input 0 as [T, B, I] (a one-step op's [B, I] gets T = 1)."""
    x = ctx.input(op, 0, tuple(range(ctx.tensor(op.inputs[0]).rank)))
    if step:
        return ctx.node("Unsqueeze", [x, ctx.i64([0], "axes")], 1)[0]
    if not op.options.get("time_major", False):
        x = ctx.node("Transpose", [x], 1, perm=[1, 0, 2])[0]
    return x


def _sequence_output(ctx, op, y: str, slot: int, step: bool) -> None:
    """ONNX Y [T, 1, B, H] -> TFLite's output layout."""
    if step:
        ctx.node("Squeeze", [y, ctx.i64([0, 1], "axes")], [ctx.output(op, slot)])
        return
    y = ctx.node("Squeeze", [y, ctx.i64([1], "axes")], 1)[0]
    if op.options.get("time_major", False):
        ctx.node("Identity", [y], [ctx.output(op, slot)])
    else:
        ctx.node("Transpose", [y], [ctx.output(op, slot)], perm=[1, 0, 2])


def _states(ctx, op, slots) -> list[str]:
    """Variable-tensor inputs as [1, B, H] initial states."""
    state = State.of(ctx)
    out = []
    for s in slots:
        if not ctx.tensor(op.inputs[s]).is_variable:
            raise ConversionError(f"{op.opcode}#{op.index}: state input {s} is not a variable tensor")
        out.append(ctx.node("Unsqueeze", [state.tensor_input(ctx, op.inputs[s]), ctx.i64([0], "axes")], 1)[0])
    return out


def _store(ctx, op, slots, finals: list[str], direction: int = 0) -> None:
    """The final states (ONNX [D, B, H]) become the variable tensors' new values."""
    state = State.of(ctx)
    for s, final in zip(slots, finals):
        one = ctx.node("Gather", [final, ctx.i64([direction])], 1, axis=0)[0]
        state.assign(ctx, op.inputs[s], ctx.node("Squeeze", [one, ctx.i64([0], "axes")], 1)[0])


# --- LSTM ------------------------------------------------------------------------------------------------------
# TFLite input slots of one direction, relative to its first weight: W i,f,c,o; R i,f,c,o; peepholes i,f,o;
# biases i,f,c,o; projection weight, bias.
LSTM_W, LSTM_R, LSTM_P, LSTM_B, LSTM_PROJ = (0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10), (11, 12, 13, 14), (15, 16)
IOFC = (0, 3, 1, 2)                               # ONNX gate order from TFLite's i, f, c, o


def _lstm_direction(ctx, op, base: int):
    """W, R, B, P (or None) of the direction whose weights start at input `base`."""
    s = [base + k for k in range(17)]
    _refuse(op, not _present(op, s[0]), "CIFG (no input gate)")
    _refuse(op, any(_present(op, s[k]) for k in LSTM_PROJ), "an LSTM projection")
    w = _weights(ctx, op, [s[LSTM_W[g]] for g in IOFC], "input weights")
    r = _weights(ctx, op, [s[LSTM_R[g]] for g in IOFC], "recurrent weights")
    b = _weights(ctx, op, [s[LSTM_B[g]] for g in IOFC], "biases")
    peep = [s[k] for k in LSTM_P]
    p = None
    if any(_present(op, k) for k in peep):
        p = _weights(ctx, op, [peep[0], peep[2], peep[1]], "peephole weights")      # ONNX order i, o, f
    return w, r, np.concatenate([b, np.zeros_like(b)]), p


def _lstm(ctx, op, step: bool):
    _refuse(op, op.options.get("kernel_type", "FULL") not in ("FULL", 0), "the BASIC LSTM kernel")
    _refuse(op, any(_present(op, s) for s in range(20, 24)), "layer-normalised LSTM")
    _refuse(op, bool(op.options.get("cell_clip", 0.0)), "cell clipping")
    w, r, b, p = _lstm_direction(ctx, op, 1)
    units = r.shape[1]
    h0, c0 = _states(ctx, op, (18, 19))
    ins = [_time_major_input(ctx, op, step), ctx.const(w[None], "lstm_W"), ctx.const(r[None], "lstm_R"),
           ctx.const(b[None], "lstm_B"), "", h0, c0] + ([ctx.const(p[None], "lstm_P")] if p is not None else [])
    act = _rnn_act(op)
    y, yh, yc = ctx.node("LSTM", ins, 3, hidden_size=units, activations=["Sigmoid", act, act])
    _sequence_output(ctx, op, y, 0, step)
    _store(ctx, op, (18, 19), [yh, yc])


op("UNIDIRECTIONAL_SEQUENCE_LSTM", category=X, onnx="LSTM", notes="states are state:/state_out: I/O")(
    partial(_lstm, step=False))
op("LSTM", category=X, onnx="LSTM", notes="one time step; states are state:/state_out: I/O")(partial(_lstm, step=True))


@op("BIDIRECTIONAL_SEQUENCE_LSTM", category=X, onnx="LSTM", notes="direction=bidirectional")
def bidirectional_sequence_lstm(ctx, op):
    _refuse(op, _present(op, 39), "an auxiliary input")
    _refuse(op, bool(op.options.get("cell_clip", 0.0)), "cell clipping")
    fw, bw = _lstm_direction(ctx, op, 1), _lstm_direction(ctx, op, 18)
    _refuse(op, (fw[3] is None) != (bw[3] is None), "peepholes in one direction only")
    stacked = [np.stack([a, c]) if a is not None else None for a, c in zip(fw, bw)]
    units = fw[1].shape[1]
    h_fw, c_fw, h_bw, c_bw = _states(ctx, op, (35, 36, 37, 38))
    h0 = ctx.node("Concat", [h_fw, h_bw], 1, axis=0)[0]
    c0 = ctx.node("Concat", [c_fw, c_bw], 1, axis=0)[0]
    names = ["lstm_W", "lstm_R", "lstm_B", "lstm_P"]
    ins = [_time_major_input(ctx, op, False)] + [ctx.const(a, n) for a, n in zip(stacked[:3], names)]
    ins += ["", h0, c0] + ([ctx.const(stacked[3], names[3])] if stacked[3] is not None else [])
    act = _rnn_act(op)
    y, yh, yc = ctx.node("LSTM", ins, 3, hidden_size=units, direction="bidirectional",
                         activations=["Sigmoid", act, act] * 2)
    _bidirectional_outputs(ctx, op, y, units)
    _store(ctx, op, (35, 36), [yh, yc], 0)
    _store(ctx, op, (37, 38), [yh, yc], 1)


def _bidirectional_outputs(ctx, op, y: str, units: int) -> None:
    """Y [T, 2, B, H] -> one merged [.., 2H] output or forward and backward outputs, in TFLite's time order."""
    batch_major = not op.options.get("time_major", False)
    order = [2, 0, 1, 3] if batch_major else [0, 2, 1, 3]        # [B, T, 2, H] or [T, B, 2, H]
    y = ctx.node("Transpose", [y], 1, perm=order)[0]
    if op.options.get("merge_outputs", False):
        ctx.node("Reshape", [y, ctx.i64([0, 0, 2 * units])], [ctx.output(op, 0)])
        return
    fw, bw = ctx.node("Split", [y], 2, axis=2, num_outputs=2)
    for slot, part in ((0, fw), (1, bw)):
        ctx.node("Squeeze", [part, ctx.i64([2], "axes")], [ctx.output(op, slot)])


# --- RNN -------------------------------------------------------------------------------------------------------
def _rnn_weights(ctx, op, w_slot: int):
    w = _weights(ctx, op, [w_slot], "input weights")
    r = _weights(ctx, op, [w_slot + 1], "recurrent weights")
    b = _weights(ctx, op, [w_slot + 2], "bias")
    return w, r, np.concatenate([b, np.zeros_like(b)])


def _rnn(ctx, op, step: bool):
    w, r, b = _rnn_weights(ctx, op, 1)
    (h0,) = _states(ctx, op, (4,))
    ins = [_time_major_input(ctx, op, step), ctx.const(w[None], "rnn_W"), ctx.const(r[None], "rnn_R"),
           ctx.const(b[None], "rnn_B"), "", h0]
    y, yh = ctx.node("RNN", ins, 2, hidden_size=r.shape[1], activations=[_rnn_act(op)])
    _sequence_output(ctx, op, y, 0, step)
    _store(ctx, op, (4,), [yh])


op("UNIDIRECTIONAL_SEQUENCE_RNN", category=X, onnx="RNN", notes="hidden state is state:/state_out: I/O")(
    partial(_rnn, step=False))
op("RNN", category=X, onnx="RNN", notes="one time step; hidden state is state:/state_out: I/O")(partial(_rnn, step=True))


@op("BIDIRECTIONAL_SEQUENCE_RNN", category=X, onnx="RNN", notes="direction=bidirectional")
def bidirectional_sequence_rnn(ctx, op):
    _refuse(op, _present(op, 9), "an auxiliary input")
    fw, bw = _rnn_weights(ctx, op, 1), _rnn_weights(ctx, op, 5)
    units = fw[1].shape[1]
    h_fw, h_bw = _states(ctx, op, (4, 8))
    h0 = ctx.node("Concat", [h_fw, h_bw], 1, axis=0)[0]
    ins = [_time_major_input(ctx, op, False)] + [ctx.const(np.stack([a, c]), n)
                                                  for a, c, n in zip(fw, bw, ["rnn_W", "rnn_R", "rnn_B"])]
    act = _rnn_act(op)
    y, yh = ctx.node("RNN", ins + ["", h0], 2, hidden_size=units, direction="bidirectional", activations=[act, act])
    _bidirectional_outputs(ctx, op, y, units)
    _store(ctx, op, (4,), [yh], 0)
    _store(ctx, op, (8,), [yh], 1)


# --- SVDF ------------------------------------------------------------------------------------------------------
@op("SVDF", category=X, onnx=("MatMul", "Concat", "ReduceSum"),
    notes="state [B, filters*memory] shifts left by one each call; state:/state_out: I/O")
def svdf(ctx, op):
    rank = int(op.options.get("rank", 1))
    wf = _weights(ctx, op, [1], "feature weights")              # [F, I]
    wt = _weights(ctx, op, [2], "time weights")                 # [F, M]
    filters, memory = wt.shape
    units = filters // rank
    state = State.of(ctx)
    s_t = op.inputs[4]
    if not ctx.tensor(s_t).is_variable:
        raise ConversionError(f"SVDF#{op.index}: input 4 (state) is not a variable tensor")
    s = ctx.node("Reshape", [state.tensor_input(ctx, s_t), ctx.i64([0, filters, memory])], 1)[0]
    kept = ctx.node("Slice", [s, ctx.i64([1]), ctx.i64([memory]), ctx.i64([2])], 1)[0]
    x = ctx.input(op, 0, (0, 1))
    newest = ctx.node("MatMul", [x, ctx.const(wf.T.copy(), "svdf_wf")], 1)[0]
    shifted = ctx.node("Concat", [kept, ctx.node("Unsqueeze", [newest, ctx.i64([2], "axes")], 1)[0]], 1, axis=2)[0]
    state.assign(ctx, s_t, ctx.node("Reshape", [shifted, ctx.i64([0, filters * memory])], 1)[0])
    per_filter = ctx.node("ReduceSum", [ctx.node("Mul", [shifted, ctx.const(wt, "svdf_wt")], 1)[0],
                                        ctx.i64([2], "axes")], 1, keepdims=0)[0]
    out = ctx.node("ReduceSum", [ctx.node("Reshape", [per_filter, ctx.i64([0, units, rank])], 1)[0],
                                 ctx.i64([2], "axes")], 1, keepdims=0)[0]
    if _present(op, 3):
        out = ctx.node("Add", [out, ctx.input(op, 3, (0,))], 1)[0]
    _activation(ctx, op, out, [ctx.output(op)])
