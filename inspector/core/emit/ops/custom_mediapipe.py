"""MediaPipe's custom TFLite ops (registered by custom code) as small ONNX subgraphs.

Their options are the kernel's C parameter struct copied into custom_options (little-endian int32 fields):
TfLiteTransposeConvParams (padding, stride_w, stride_h) and TfLitePoolParams (padding, stride_w, stride_h,
filter_w, filter_h, activation). Padding: 1 = SAME, 2 = VALID. Semantics follow MediaPipe's reference kernels
(mediapipe/util/tflite/operations), which LiteRT's XNNPACK delegate also implements.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, numpy_helper

from inspector.core.ir.errors import ConversionError
from inspector.core.ir.limits import check_built
from .conv import bias_1d
from .registry import I, X, op

PADDING = {1: "SAME", 2: "VALID"}
ACTIVATION = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH"}
FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


def struct_options(op, names: tuple[str, ...]) -> dict[str, int | str]:
    raw = op.custom_options or b""
    vals = np.frombuffer(raw[:4 * (len(raw) // 4)], "<i4")
    if len(vals) < len(names):
        raise ConversionError(f"{op.opcode}#{op.index}: custom options hold {len(vals)} int32 fields, "
                              f"need {len(names)} ({', '.join(names)})")
    codes = dict(zip(names, (int(v) for v in vals)))
    out: dict[str, int | str] = dict(codes)
    if codes.get("padding") not in PADDING:
        raise ConversionError(f"{op.opcode}#{op.index}: unknown padding code {codes.get('padding')}")
    out["padding"] = PADDING[codes["padding"]]
    if "activation" in codes:
        if codes["activation"] not in ACTIVATION:
            raise ConversionError(f"{op.opcode}#{op.index}: unsupported fused activation {codes['activation']}")
        out["activation"] = ACTIVATION[codes["activation"]]
    return out


POOL_FIELDS = ("padding", "stride_w", "stride_h", "filter_w", "filter_h", "activation")


def _static_hw(ctx, t: int, what: str) -> tuple[int, int]:
    sig = ctx.tensor(t).shape_signature or ctx.shape(t)
    if any(d < 0 for d in sig[1:3]):
        raise ConversionError(f"{what}: height and width must be static")
    return tuple(ctx.shape(t)[1:3])


@op("Convolution2DTransposeBias", category=I, onnx="ConvTranspose", layout_inputs=(0,),
    notes="MediaPipe custom op: transposed conv + bias; SAME crops max(0, k - (n-1) % s - 1), odd pixel at the end")
def conv_transpose_bias(ctx, op):
    o = struct_options(op, ("padding", "stride_w", "stride_h"))
    out_c, kh, kw, _ = ctx.shape(op.inputs[1])
    h, w = _static_hw(ctx, op.inputs[0], f"{op.opcode}#{op.index}")
    crops = []
    for n, k, s in ((h, kh, o["stride_h"]), (w, kw, o["stride_w"])):
        crops.append(max(0, k - (n - 1) % s - 1) if o["padding"] == "SAME" else 0)
    pads = [c // 2 for c in crops] + [c - c // 2 for c in crops]
    weight = ctx.input(op, 1, (3, 0, 1, 2))             # [O, KH, KW, I] -> [I, O, KH, KW]
    ctx.node("ConvTranspose", [ctx.input(op, 0), weight, bias_1d(ctx, op, 2)], [ctx.output(op)],
             kernel_shape=[kh, kw], strides=[o["stride_h"], o["stride_w"]], pads=pads)


def _activation(ctx, x: str, act: str, out: str) -> None:
    bounds: dict[str, tuple[float, float | None] | None] = {"NONE": None, "RELU": (0.0, None), "RELU6": (0.0, 6.0),
                                                           "RELU_N1_TO_1": (-1.0, 1.0)}
    bound = bounds[act] if act != "TANH" else None
    if act == "TANH":
        ctx.node("Tanh", [x], [out])
    elif bound is None:
        ctx.node("Identity", [x], [out])
    else:
        lo, hi = bound
        ctx.node("Clip", [x, ctx.scalar(lo), ctx.scalar(hi) if hi is not None else ""], [out])


@op("MaxPoolingWithArgmax2D", category=I, onnx=("MaxPool", "Div", "Mod", "Sub", "Mul", "Add", "Cast"),
    notes="MediaPipe custom op: indices are the argmax's position inside its window (dy * filter_w + dx), "
          "as float + 0.1")
def max_pool_argmax(ctx, op):
    o = struct_options(op, POOL_FIELDS)
    h, w = _static_hw(ctx, op.inputs[0], f"{op.opcode}#{op.index}")
    oh, ow = ctx.shape(op.outputs[0])[1:3]
    fh, fw, sh, sw = o["filter_h"], o["filter_w"], o["stride_h"], o["stride_w"]
    if o["padding"] == "SAME":
        top = max(((oh - 1) * sh + fh - h) // 2, 0)
        left = max(((ow - 1) * sw + fw - w) // 2, 0)
        pads = [top, left, max((oh - 1) * sh + fh - h - top, 0), max((ow - 1) * sw + fw - w - left, 0)]
    else:
        top = left = 0
        pads = [0, 0, 0, 0]
    values, flat = ctx.node("MaxPool", [ctx.input(op, 0)], 2, kernel_shape=[fh, fw], strides=[sh, sw], pads=pads)
    _activation(ctx, values, o["activation"], ctx.output(op, 0))
    # ONNX returns the flat NCHW input index; the kernel wants the offset inside the window.
    y = ctx.node("Mod", [ctx.node("Div", [flat, ctx.i64([w])], 1)[0], ctx.i64([h])], 1)[0]
    x = ctx.node("Mod", [flat, ctx.i64([w])], 1)[0]
    check_built([oh, ow], 8, f"{op.opcode}#{op.index} window offsets")
    oy = ctx.const((np.arange(oh, dtype=np.int64) * sh - top).reshape(oh, 1), "win_y")
    ox = ctx.const((np.arange(ow, dtype=np.int64) * sw - left).reshape(1, ow), "win_x")
    dy = ctx.node("Sub", [y, oy], 1)[0]
    dx = ctx.node("Sub", [x, ox], 1)[0]
    local = ctx.node("Add", [ctx.node("Mul", [dy, ctx.i64([fw])], 1)[0], dx], 1)[0]
    ctx.node("Add", [ctx.node("Cast", [local], 1, to=FLOAT)[0], ctx.scalar(0.1)], [ctx.output(op, 1)])


@op("MaxUnpooling2D", category=I, onnx=("ScatterElements", "Cast", "Where"), layout_inputs=(0, 1),
    notes="MediaPipe custom op: output is input * filter size; each value goes to its window offset, the rest 0")
def max_unpooling(ctx, op):
    o = struct_options(op, POOL_FIELDS)
    h, w = _static_hw(ctx, op.inputs[0], f"{op.opcode}#{op.index}")
    c = ctx.shape(op.inputs[0])[3]
    fh, fw, sh, sw = o["filter_h"], o["filter_w"], o["stride_h"], o["stride_w"]
    oh, ow = h * fh, w * fw
    top, left = max(((h - 1) * sh + fh - oh) // 2, 0), max(((w - 1) * sw + fw - ow) // 2, 0)
    idx = ctx.node("Cast", [ctx.input(op, 1)], 1, to=INT64)[0]       # truncates, as the kernel's (int) does
    dy = ctx.node("Div", [idx, ctx.i64([fw])], 1)[0]
    dx = ctx.node("Mod", [idx, ctx.i64([fw])], 1)[0]
    check_built([h, w], 8, f"{op.opcode}#{op.index} window bases")
    base_y = ctx.const((np.arange(h, dtype=np.int64) * sh - top).reshape(h, 1), "base_y")
    base_x = ctx.const((np.arange(w, dtype=np.int64) * sw - left).reshape(1, w), "base_x")
    y = ctx.node("Add", [dy, base_y], 1)[0]
    x = ctx.node("Add", [dx, base_x], 1)[0]
    inside = [ctx.node("GreaterOrEqual", [y, ctx.i64([0])], 1)[0], ctx.node("Less", [y, ctx.i64([oh])], 1)[0],
              ctx.node("GreaterOrEqual", [x, ctx.i64([0])], 1)[0], ctx.node("Less", [x, ctx.i64([ow])], 1)[0]]
    ok = ctx.node("And", [ctx.node("And", inside[:2], 1)[0], ctx.node("And", inside[2:], 1)[0]], 1)[0]
    target = ctx.node("Add", [ctx.node("Mul", [y, ctx.i64([ow])], 1)[0], x], 1)[0]
    target = ctx.node("Where", [ok, target, ctx.i64([oh * ow])], 1)[0]      # out of range -> a spare column
    rows = ctx.i64([-1, h * w])
    data = ctx.node("Reshape", [ctx.input(op, 0), rows], 1)[0]
    target = ctx.node("Reshape", [target, rows], 1)[0]
    zeros = ctx.node("ConstantOfShape", [ctx.node("Concat", [
        ctx.node("Slice", [ctx.node("Shape", [data], 1)[0], ctx.i64([0]), ctx.i64([1])], 1)[0],
        ctx.i64([oh * ow + 1])], 1, axis=0)[0]], 1,
        value=numpy_helper.from_array(np.zeros(1, np.float32)))[0]
    scattered = ctx.node("ScatterElements", [zeros, target, data], 1, axis=1)[0]
    kept = ctx.node("Slice", [scattered, ctx.i64([0]), ctx.i64([oh * ow]), ctx.i64([1])], 1)[0]
    ctx.node("Reshape", [kept, ctx.i64([-1, c, oh, ow])], [ctx.output(op)])


# --- landmark/affine ops (flexbuffer options) ---------------------------------------------------------------------
def flex_options(op) -> dict:
    from flatbuffers import flexbuffers
    try:
        decoded = flexbuffers.Loads(op.custom_options) if op.custom_options else {}
    except Exception as e:                          # a malformed flexbuffer: say which op
        raise ConversionError(f"{op.opcode}#{op.index}: custom options are not a flexbuffer map ({e})") from None
    if not isinstance(decoded, dict):
        raise ConversionError(f"{op.opcode}#{op.index}: custom options are not a flexbuffer map")
    return decoded


def _need(op, opts: dict, *keys):
    missing = [k for k in keys if k not in opts]
    if missing:
        raise ConversionError(f"{op.opcode}#{op.index}: custom options lack {', '.join(missing)}")


def _matrix_rows(ctx, op, slot: int) -> str:
    """The first two rows of a [.., 4, 4] transform matrix input as [2, 4]."""
    m = ctx.node("Reshape", [ctx.input(op, slot, tuple(range(ctx.tensor(op.inputs[slot]).rank))),
                             ctx.i64([4, 4])], 1)[0]
    return ctx.node("Slice", [m, ctx.i64([0]), ctx.i64([2]), ctx.i64([0])], 1)[0]


@op("TransformLandmarks", category=X, onnx=("MatMul", "Add", "Concat"),
    notes="MediaPipe custom op: x, y of each landmark through the matrix's top 2x4 (z kept)")
def transform_landmarks(ctx, op):
    x_t = op.inputs[0]
    shape = ctx.shape(x_t)
    if op.version >= 2:
        dims, scale = shape[-1], 1.0
    else:
        opts = flex_options(op)
        _need(op, opts, "dimensions")
        dims, scale = int(opts["dimensions"]), float(opts.get("scale", 1.0))
    if dims not in (2, 3):
        raise ConversionError(f"{op.opcode}#{op.index}: dimensions {dims} (2 or 3 supported)")
    rows = _matrix_rows(ctx, op, 1)
    lin = ctx.node("Slice", [rows, ctx.i64([0]), ctx.i64([2]), ctx.i64([1])], 1)[0]         # [2, 2]
    shift = ctx.node("Slice", [rows, ctx.i64([3]), ctx.i64([4]), ctx.i64([1])], 1)[0]       # [2, 1]
    shift = ctx.node("Reshape", [shift, ctx.i64([1, 2])], 1)[0]
    if scale != 1.0:
        shift = ctx.node("Mul", [shift, ctx.scalar(scale)], 1)[0]
    pts = ctx.node("Reshape", [ctx.input(op, 0, tuple(range(len(shape)))), ctx.i64([-1, dims])], 1)[0]
    xy = ctx.node("Slice", [pts, ctx.i64([0]), ctx.i64([2]), ctx.i64([1])], 1)[0]
    moved = ctx.node("Add", [ctx.node("MatMul", [xy, ctx.node("Transpose", [lin], 1, perm=[1, 0])[0]], 1)[0],
                             shift], 1)[0]
    if dims == 3:
        z = ctx.node("Slice", [pts, ctx.i64([2]), ctx.i64([3]), ctx.i64([1])], 1)[0]
        moved = ctx.node("Concat", [moved, z], 1, axis=1)[0]
    ctx.node("Reshape", [moved, ctx.i64(shape)], [ctx.output(op)])


def _tensor_bilinear(ctx, op, corner_fix: bool):
    """Output pixel (x, y) samples the input bilinearly at the matrix's image of (x, y); 0 outside the input."""
    h, w = _static_hw(ctx, op.inputs[0], f"{op.opcode}#{op.index}")
    oh, ow = _static_hw(ctx, op.outputs[0], f"{op.opcode}#{op.index} output")
    check_built([oh, ow, 4], 4, f"{op.opcode}#{op.index} pixel grid")
    ys, xs = np.meshgrid(np.arange(oh, dtype=np.float32), np.arange(ow, dtype=np.float32), indexing="ij")
    shift = 0.5 if corner_fix else 0.0              # v2 samples pixel centres: T -> S * (T * A)
    coords = np.stack([xs + shift, ys + shift, np.zeros_like(xs), np.ones_like(xs)], -1).reshape(-1, 4)
    rows = _matrix_rows(ctx, op, 1)
    tc = ctx.node("MatMul", [ctx.const(coords, "pixel_coords"), ctx.node("Transpose", [rows], 1, perm=[1, 0])[0]],
                  1)[0]                                                                    # [P, 2] = x, y
    if corner_fix:
        tc = ctx.node("Sub", [tc, ctx.scalar(0.5)], 1)[0]
    upper = ctx.const(np.array([w - 1, h - 1], np.float32), "in_bounds")
    inside = ctx.node("And", [ctx.node("GreaterOrEqual", [tc, ctx.scalar(0.0)], 1)[0],
                              ctx.node("LessOrEqual", [tc, upper], 1)[0]], 1)[0]
    both = ctx.node("ReduceMin", [ctx.node("Cast", [inside], 1, to=FLOAT)[0], ctx.i64([1], "axes")], 1,
                    keepdims=0)[0]
    mask = ctx.node("Reshape", [both, ctx.i64([1, 1, oh, ow])], 1)[0]
    norm = ctx.const(np.array([2.0 / max(w - 1, 1), 2.0 / max(h - 1, 1)], np.float32), "to_unit")
    grid = ctx.node("Sub", [ctx.node("Mul", [tc, norm], 1)[0], ctx.scalar(1.0)], 1)[0]
    grid = ctx.node("Reshape", [grid, ctx.i64([1, oh, ow, 2])], 1)[0]
    mode = "linear" if ctx.opset >= 20 else "bilinear"
    sampled = ctx.node("GridSample", [ctx.input(op, 0), grid], 1, mode=mode, padding_mode="zeros",
                       align_corners=1)[0]
    ctx.node("Mul", [sampled, mask], [ctx.output(op)])


@op("TransformTensorBilinear", category=I, onnx=("GridSample", "MatMul"), layout_inputs=(0,),
    notes="MediaPipe custom op (v2: pixel centres); zero outside the input")
def transform_tensor_bilinear(ctx, op):
    _tensor_bilinear(ctx, op, corner_fix=op.version >= 2)


@op("TransformTensor", category=I, onnx=("GridSample", "MatMul"), layout_inputs=(0,),
    notes="MediaPipe custom op, TransformTensorBilinear's v1 name (pixel corners)")
def transform_tensor(ctx, op):
    _tensor_bilinear(ctx, op, corner_fix=False)


class _Arith:
    """Elementwise ONNX arithmetic on value names, for the matrix ops' small scalar formulas."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __call__(self, op_type, *names, **attrs):
        return self.ctx.node(op_type, list(names), 1, **attrs)[0]

    def mul(self, a, b):
        return self("Mul", a, b)

    def add(self, a, b):
        return self("Add", a, b)

    def sub(self, a, b):
        return self("Sub", a, b)

    def k(self, value):
        return self.ctx.scalar(float(value))

    def col(self, v, j):
        """Column j of a [K, 2] value as [K]."""
        ctx = self.ctx
        return self("Squeeze", self("Slice", v, ctx.i64([j]), ctx.i64([j + 1]), ctx.i64([1])), ctx.i64([1], "axes"))

    def span(self, v):
        """(max - min, (max + min) / 2) of v, each [1]."""
        hi, lo = self("ReduceMax", v, keepdims=1), self("ReduceMin", v, keepdims=1)
        return self.sub(hi, lo), self.mul(self.add(hi, lo), self.k(0.5))

    def rotate(self, c, s, x, y):
        """(x, y) rotated by the angle whose cosine and sine are c and s."""
        return self.sub(self.mul(c, x), self.mul(s, y)), self.add(self.mul(s, x), self.mul(c, y))


def _landmark_xy(ctx, op, o: dict, key: str):
    """All landmarks' (x, y) as [N, 2], the direction left -> right as [1, 2], the subset's (x, y) as [K, 2]."""
    idx = [int(i) for i in o[key]]
    if len(idx) % 2:
        idx.append(idx[-1])                        # an odd list pairs its last index with itself
    pts = ctx.node("Reshape", [ctx.input(op, 0, tuple(range(ctx.tensor(op.inputs[0]).rank))), ctx.i64([-1, 3])],
                   1)[0]
    xy = ctx.node("Slice", [pts, ctx.i64([0]), ctx.i64([2]), ctx.i64([1])], 1)[0]
    ends = ctx.node("Gather", [xy, ctx.i64([int(o["left_rotation_idx"]), int(o["right_rotation_idx"])])], 1,
                    axis=0)[0]
    d = ctx.node("Sub", [ctx.node("Slice", [ends, ctx.i64([1]), ctx.i64([2]), ctx.i64([0])], 1)[0],
                         ctx.node("Slice", [ends, ctx.i64([0]), ctx.i64([1]), ctx.i64([0])], 1)[0]], 1)[0]
    return d, ctx.node("Gather", [xy, ctx.i64(idx)], 1, axis=0)[0]


def _unit(ctx, d: str) -> str:
    """d / |d| ([1, 2]); (1, 0) when d is 0, as atan2(0, 0) = 0."""
    r = ctx.node("Sqrt", [ctx.node("ReduceSum", [ctx.node("Mul", [d, d], 1)[0], ctx.i64([1], "axes")], 1,
                                   keepdims=1)[0]], 1)[0]
    zero = ctx.node("Equal", [r, ctx.scalar(0.0)], 1)[0]
    safe = ctx.node("Where", [zero, ctx.scalar(1.0), r], 1)[0]
    return ctx.node("Where", [zero, ctx.const(np.array([[1.0, 0.0]], np.float32), "east"),
                              ctx.node("Div", [d, safe], 1)[0]], 1)[0]


def _matrix_out(ctx, op, cells: list[str], tail) -> None:
    """A [1, 4, 4] output from computed cells followed by constant ones."""
    cells = [ctx.node("Reshape", [v, ctx.i64([1])], 1)[0] for v in cells]
    flat = ctx.node("Concat", cells + [ctx.const(np.asarray(tail, np.float32), "matrix_tail")], 1, axis=0)[0]
    ctx.node("Reshape", [flat, ctx.i64([1, 4, 4])], [ctx.output(op)])


@op("Landmarks2TransformMatrix", category=X, onnx=("Gather", "ReduceMax", "ReduceMin", "Concat"),
    notes="MediaPipe custom op (v1, v2): crop of a landmark subset aligned to two landmarks, as a 4x4 matrix")
def landmarks_to_transform_matrix(ctx, op):
    (_v1 if op.version < 2 else _v2)(ctx, op, flex_options(op))


def _v2(ctx, op, o: dict):
    _need(op, o, "subset_idxs", "left_rotation_idx", "right_rotation_idx", "output_height", "output_width")
    f = _Arith(ctx)
    ow, oh = float(o["output_width"]), float(o["output_height"])
    target = float(o.get("target_rotation_radians", 0.0))
    d, sub_pts = _landmark_xy(ctx, op, o, "subset_idxs")
    # rotation = target - atan2(dy, dx): only its cosine and sine are needed, from the unit direction.
    unit = _unit(ctx, d)
    cos_t, sin_t = f.col(unit, 0), f.col(unit, 1)
    c = f.add(f.mul(cos_t, f.k(np.cos(target))), f.mul(sin_t, f.k(np.sin(target))))
    s = f.sub(f.mul(cos_t, f.k(np.sin(target))), f.mul(sin_t, f.k(np.cos(target))))
    rx, ry = f.rotate(c, s, f.col(sub_pts, 0), f.col(sub_pts, 1))
    (w_, mx), (h_, my) = f.span(rx), f.span(ry)
    cx, cy = f.rotate(c, f("Neg", s), mx, my)                     # the centre, rotated back
    sx = f.mul(w_, f.k(float(o.get("scale_x", 1.0)) / ow))
    sy = f.mul(h_, f.k(float(o.get("scale_y", 1.0)) / oh))
    a, b, e, g = f.mul(c, sx), f.mul(s, sy), f("Neg", f.mul(s, sx)), f.mul(c, sy)
    shx, shy = f.k(-ow / 2.0), f.k(-oh / 2.0)
    _matrix_out(ctx, op, [a, b, f.k(0.0), f.add(cx, f.add(f.mul(a, shx), f.mul(b, shy))),
                          e, g, f.k(0.0), f.add(cy, f.add(f.mul(e, shx), f.mul(g, shy)))],
                [0, 0, 1, 0, 0, 0, 0, 1])


def _v1(ctx, op, o: dict):
    _need(op, o, "subset", "left_rotation_idx", "right_rotation_idx", "input_hw", "output_hw", "landmarks_range",
          "bbox_size_multiplier")
    f = _Arith(ctx)
    ih, iw = (float(v) for v in o["input_hw"])
    oh, ow = (float(v) for v in o["output_hw"])
    rng, mult = float(o["landmarks_range"]), float(o["bbox_size_multiplier"])
    d, sub_pts = _landmark_xy(ctx, op, o, "subset")
    # alpha = -atan(dy / dx): cos = |dx| / |d|, sin = -sign(dx) dy / |d|.
    unit = _unit(ctx, d)
    ux, uy = f.col(unit, 0), f.col(unit, 1)
    c, s = f("Abs", ux), f("Neg", f.mul(f("Sign", ux), uy))
    rx, ry = f.rotate(c, s, f.col(sub_pts, 0), f.col(sub_pts, 1))
    (w_, mx), (h_, my) = f.span(rx), f.span(ry)
    sx, sy = f.mul(w_, f.k(mult / rng)), f.mul(h_, f.k(mult / rng))
    ns = f("Neg", s)                                               # rotation by -alpha
    mid_x, mid_y = f.rotate(c, ns, mx, my)
    tx, ty = f.sub(f.mul(mid_x, f.k(2.0 / rng)), f.k(1.0)), f.sub(f.mul(mid_y, f.k(2.0 / rng)), f.k(1.0))
    # itm = to_absolute @ [rotation(-alpha) + shift] @ scale @ to_relative; the outer two are constants.
    cells = [f.mul(c, sx), f("Neg", f.mul(ns, sy)), tx, f.mul(ns, sx), f.mul(c, sy), ty]
    rs = ctx.node("Concat", [ctx.node("Reshape", [v, ctx.i64([1])], 1)[0] for v in cells] +
                  [ctx.const(np.array([0, 0, 1], np.float32), "row3")], 1, axis=0)[0]
    rs = ctx.node("Reshape", [rs, ctx.i64([3, 3])], 1)[0]
    to_abs = np.array([[(iw - 1) / 2, 0, (iw - 1) / 2], [0, (ih - 1) / 2, (ih - 1) / 2], [0, 0, 1]], np.float32)
    to_rel = np.array([[2 / (ow - 1), 0, -1], [0, 2 / (oh - 1), -1], [0, 0, 1]], np.float32)
    itm = ctx.node("MatMul", [ctx.node("MatMul", [ctx.const(to_abs, "to_absolute"), rs], 1)[0],
                              ctx.const(to_rel, "to_relative")], 1)[0]
    flat = ctx.node("Reshape", [itm, ctx.i64([9])], 1)[0]
    m = [ctx.node("Slice", [flat, ctx.i64([k]), ctx.i64([k + 1])], 1)[0] for k in range(9)]
    _matrix_out(ctx, op, [m[0], m[1], f.k(0.0), m[2], m[3], m[4], f.k(0.0), m[5], m[6], m[7], m[8], f.k(0.0)],
                [0, 0, 0, 1])
