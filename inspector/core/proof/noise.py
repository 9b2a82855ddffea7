"""The noise floor a model has by itself, measured in the same run as the comparison, and the verdict it allows.

Deep networks with random weights amplify rounding: kernels that differ in the last bits, or inputs moved by one
part in a million, move their outputs far more than a fixed tolerance allows, and the conversion is not at fault.
So each compared tensor gets a floor, the largest of
  - LiteRT's reference kernels vs its default (optimized builtin) kernels,
  - LiteRT's reference kernels on inputs moved by PERTURB relative, DRAWS times (outputs; intermediates: once),
  - ONNX Runtime fully optimised vs unoptimised (outputs only: the optimiser fuses intermediates away),
and a verdict:
  ok          error <= max(rtol * scale + ATOL, K * floor), and not `suspicious`;
  suspicious  within that tolerance, but more than FAR times the model's typical noise (the median of its measures,
              where there are more than two) on a well-conditioned model (K * floor below the tolerance): the model
              is quiet and the conversion still differs, as a small real bug would;
  fail        above the tolerance.
Several draws (the floor their largest, `fail` decided by it; `suspicious` by their median, which more draws do not
raise), because one under-estimates how far a deep net amplifies a last-bit difference at some inputs: the
error of a right conversion is one more draw of the same noise, and the larger the set the floor is the largest
of, the less often that draw lands beyond K times it (a Keras EfficientNetB0 fp32 failed at seed 0 with error
11.4 x a floor of three measures; bench/floor_sweep.py shows every float corpus model's worst ratio over seeds).
The floor is never taken below float32's epsilon times the scale. Quantized tensors are judged in steps of their
scale: ok when they meet the step rule, or are no more steps from the reference than LiteRT's own default kernels
(+ STEP_SLACK).

When LiteRT's reference kernels cannot run the model (an op version they lack: int8 TILE v3), the comparison is
with its default (builtin) kernels D, and the floor is FALLBACK x the spread of D against XNNPACK's kernels (a
plain Interpreter's), the one kernel spread left to measure. Why twice: the conversion aims at the reference R,
and |onnx - D| <= |onnx - R| + |R - D|, where |onnx - R| is allowed up to the floor, whose kernel term is
|R - D| itself; the spread of D against XNNPACK stands in for |R - D| (same order on the corpus: 35-51 steps
R vs D and 45-50 D vs XNNPACK on tfbuilt/tf_yolo_tiny_int8 with TILE run at the version R has, 2 vs 2 on
tf_edsr_sr_int8), once per term.
"""
from __future__ import annotations

import numpy as np

K = 10.0                        # errors within K x the floor are the model's own noise
FAR = 100.0                     # ... and beyond FAR x the floor of a quiet model, suspicious
PERTURB = 1e-6                  # relative move of float inputs
DRAWS = 3                       # moves of the inputs (random signs) the floor is measured on
EPS = float(np.finfo(np.float32).eps)
STEP_SLACK = 1.0
FALLBACK = 2.0                  # the floor's factor when the reference is LiteRT's default kernels (see above)


def perturbed(inputs: list[np.ndarray], seed: int, draw: int = 0) -> list[np.ndarray]:
    """Float inputs moved by PERTURB relative (random sign per element, one pattern per draw); other inputs
    unchanged."""
    rng = np.random.default_rng(seed + 7919 + 104729 * draw)
    out = []
    for x in inputs:
        if x.dtype.kind == "f":
            x = (x.astype(np.float64) * (1 + PERTURB * rng.choice([-1.0, 1.0], x.shape))).astype(x.dtype)
        out.append(x)
    return out


def spread(a: np.ndarray | None, b: np.ndarray | None) -> float | None:
    """Largest absolute difference of two runs of the same tensor (None when either is missing or shapes differ)."""
    if a is None or b is None or a.shape != b.shape or a.dtype == bool:
        return None
    if not a.size:
        return 0.0
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return float(np.max(d)) if np.all(np.isfinite(d)) else float("inf")


def floor_of(*spreads: float | None) -> float | None:
    known = [s for s in spreads if s is not None]
    return max(known) if known else None


def typical_of(*spreads: float | None) -> float | None:
    """The median of the measures, when there are more than two (else the floor: too few for a median)."""
    known = [s for s in spreads if s is not None]
    return float(np.median(known)) if len(known) > 2 else floor_of(*known)


def needs_floor(max_abs: float, scale: float, tolerance: float) -> bool:
    """Whether the floor could change this tensor's verdict: beyond the tolerance (it may be the model's noise),
    or beyond FAR x the least possible floor (it may be suspicious)."""
    return not np.isfinite(max_abs) or max_abs > tolerance or max_abs > FAR * EPS * scale


def verdict(max_abs: float, scale: float, tolerance: float, floor: float | None, typical: float | None = None
            ) -> tuple[str, float]:
    """(verdict, the absolute limit it was decided by) for a float tensor; `floor` None: not measured; `typical`:
    the median of its measures (None: the floor)."""
    if not np.isfinite(max_abs):
        return "fail", tolerance
    least = max(floor if floor is not None else 0.0, EPS * scale)
    limit = max(tolerance, K * least) if floor is not None else tolerance
    if max_abs > limit:
        return "fail", limit
    quiet = max(typical, EPS * scale) if typical is not None else least
    if floor is not None and max_abs > FAR * quiet and K * least < tolerance:
        return "suspicious", limit
    return "ok", limit


def step_verdict(rule_ok: bool, steps: float, floor_steps: float | None) -> str:
    """Quantized tensors: the step rule, or no more steps from the reference than LiteRT's default kernels are,
    plus STEP_SLACK (QuantizeLinear rounds once where TFLite rounds twice)."""
    if rule_ok or floor_steps is not None and np.isfinite(steps) and steps <= floor_steps + STEP_SLACK:
        return "ok"
    return "fail"
