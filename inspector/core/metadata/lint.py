"""Metadata checks per consumer (a Target): the ONNX documents' rules, and what Windows ML actually accepts.

Every finding has a stable `code`, a `severity` (error: the consumer will ignore or mis-read the metadata;
warning: legal but suspicious) and the `source` of its rule. Where a fix cannot change what the model means
(canonical spelling, Rgba8 -> Rgb8 on a 3-channel tensor, dimension denotations read off an unambiguous shape,
Image.* keys nobody uses) the finding carries it as MetadataEdits; otherwise `manual` says what to choose.

Windows ML's rules come from ONNX Runtime's descriptor converter (WINML below): it looks the Image.* keys up by
exact name and compares values with strcmp; an IMAGE tensor must be float32 and is read as NCHW; anything it does
not support is bound as a plain tensor without an error.
"""
from __future__ import annotations

from dataclasses import dataclass

from inspector.core.ir.errors import InspectorError

from . import schema as ms
from .findings import Finding
from .edits import MetadataEdits
from .parsed import SHARED, Memo, Parts

TARGETS = ms.TARGETS
META, DIMS, TYPES = "ONNX docs/MetadataProps.md", "ONNX docs/DimensionDenotation.md", "ONNX docs/TypeDenotation.md"
WINML = "ONNX Runtime winml/lib/Api.Ort/OnnxruntimeDescriptorConverter.cpp"
CHECKER = "ONNX onnx/checker.cc (check_model: duplicate keys in metadata_props)"
WINML_FORMATS = ("Gray8", "Rgb8", "Bgr8")                     # its supported list
WINML_RANGES = ("NominalRange_0_255", "Normalized_0_1", "Normalized_1_1")
WINML_BLOCKED_GAMMA = ("Linear",)                             # a blocked list, unlike the other two
FLOAT32 = 1


@dataclass(frozen=True)
class Rule:
    severity: str
    source: str
    summary: str


RULES: dict[str, Rule] = {
    "image-rank": Rule("error", TYPES, "an IMAGE tensor must be 4-D"),
    "image-channel-axis": Rule("warning", DIMS, "an IMAGE tensor should say which axis is DATA_CHANNEL"),
    "image-ambiguous": Rule("warning", DIMS, "the shape of an IMAGE tensor fits both NCHW and NHWC"),
    "pixel-format-channels": Rule("error", META, "the DATA_CHANNEL axis must have the pixel format's channels"),
    "range-unnormalised-float": Rule("warning", META, "an 8-bit pixel range on a float input"),
    "range-normalised-int": Rule("error", META, "a normalised pixel range on an 8-bit integer tensor"),
    "image-no-metadata": Rule("warning", META, "an IMAGE tensor without Image.* metadata"),
    "image-metadata-unused": Rule("warning", META, "Image.* metadata while no tensor is denoted IMAGE"),
    "invalid-value": Rule("error", META, "an Image.* value outside the documented list"),
    "spelling": Rule("warning", META, "a key or value not in its canonical spelling"),
    "dims-format": Rule("warning", DIMS, "an op fed axes that contradict its format"),
    "dims-mismatch": Rule("warning", DIMS, "declared dimension denotations the graph contradicts"),
    "duplicate-key": Rule("error", CHECKER, "a metadata_props key given more than once"),
    "winml-spelling": Rule("error", WINML, "keys and values are matched exactly (strcmp)"),
    "winml-pixel-format": Rule("error", WINML, "Image.BitmapPixelFormat must be Gray8, Rgb8 or Bgr8"),
    "winml-pixel-range": Rule("error", WINML, "Image.NominalPixelRange must be NominalRange_0_255, Normalized_0_1 "
                                             "or Normalized_1_1"),
    "winml-gamma": Rule("error", WINML, "Image.ColorSpaceGamma=Linear is blocked"),
    "winml-image-type": Rule("error", WINML, "an IMAGE tensor must be float32"),
    "winml-image-layout": Rule("error", WINML, "an IMAGE tensor is read as NCHW"),
}
KIND_CODES = {"format": "dims-format", "mismatch": "dims-mismatch"}


class MetadataCheckError(InspectorError):
    """Errors of the metadata check: the model is not written. `findings` holds every finding (errors first)."""

    def __init__(self, findings: list[Finding], target: str):
        self.findings, self.target = findings, target
        errors = [f for f in findings if f.severity == "error"]
        super().__init__(f"{len(errors)} metadata error(s) for {target}, nothing written: "
                         + "; ".join(f"{f.message} [{f.code}]" for f in errors))


def lint(model, target: str = "onnx", dims: bool = True, memo: Memo | None = None, since=None) -> list[Finding]:
    """Every finding for `target`, errors first; `dims=False` skips dimension denotation propagation (which only
    ever warns) for the pre-write gate. `memo`: parsed.Memo of the models read before (parsed.SHARED when None).
    `since`: the metadata pass's denotation.Reading of this very model, just before its edits (nothing else
    changed it since): its records and Propagator are reused, the same findings at a fraction of the cost."""
    if target not in TARGETS:
        raise InspectorError(f"unknown check target '{target}': choose one of {', '.join(TARGETS)}")
    from .denotation import consistency_findings, propagate
    memo = SHARED if memo is None else memo
    parts = None
    if since is not None and since.model is model:
        parts = memo.reread(since.propagator.parts, model, since.edited)
    reuse = parts is not None           # else nothing the pass read applies: everything is read again
    if parts is None:
        parts = memo.parts(model)
    shared = consistency_findings(model, parts)
    out = shared + _duplicates(model, parts) + _spelling(model, parts, target) + _images(model, shared, parts)
    if target == "winml":
        out += _winml(model, parts)
    if dims:
        found = since.propagator.redeclared(parts, memo).run() if reuse else propagate(model, memo, parts)
        for f in found[1]:
            f.code = f.code or KIND_CODES.get(f.kind, "dims-mismatch")
            out.append(f)
    for f in out:
        rule = RULES[f.code]
        f.severity, f.source = rule.severity, rule.source
    return sorted(out, key=lambda f: f.severity != "error")


def gate(model, target: str = "onnx", dims: bool = False) -> list[Finding]:
    """The check run before any write: MetadataCheckError when there is an error; else the warnings to show
    (errors never come from dimension propagation, so it runs only when `dims` asks for its warnings too)."""
    found = lint(model, target, dims=dims)
    if any(f.severity == "error" for f in found):
        raise MetadataCheckError(found, target)
    return found


def fix(model, target: str = "onnx", rounds: int = 3) -> tuple[list[Finding], list[Finding]]:
    """Apply every safe fix in place (a fix may reveal another, so up to `rounds` passes); returns (the findings
    fixed, the findings left). Only metadata changes: value infos' denotations and metadata_props."""
    done: list[Finding] = []
    for _ in range(rounds):
        fixable = [f for f in lint(model, target, dims=False) if f.fix is not None]
        fixable.sort(key=lambda f: f.code == "duplicate-key")     # merged last: the entry it keeps wins
        if not fixable:
            break
        edits = MetadataEdits()
        for f in fixable:
            edits = edits.merged(f.fix)
        edits.apply(model)
        done += fixable
    return done, lint(model, target)


# -- rules ------------------------------------------------------------------------------------------------------

def canonical_value(key: str, value: str) -> str | None:
    low = value.strip().lower()
    return next((a for a in ms.IMAGE_KEYS[key] if a.lower() == low), None)


def _shape(vi) -> list[int | None] | None:
    return None if vi.shape is None else list(vi.shape)


def channel_candidates(shape, channels: int | None) -> list[int]:
    """Axes 1 and 3 of a 4-D shape that could hold the channels (NCHW or NHWC): the pixel format's count, or any
    of 1, 3 and 4 when it is unknown."""
    sizes = (channels,) if channels else (1, 3, 4)
    return [a for a in (1, 3) if shape[a] in sizes]


def layout_dims(axis: int) -> list[str]:
    B, C, F = ms.DATA_BATCH, ms.DATA_CHANNEL, ms.DATA_FEATURE
    return [B, C, F, F] if axis == 1 else [B, F, F, C]


def _spelling(model, parts: Parts, target: str) -> list[Finding]:
    """Keys, values and denotations spelled otherwise than the documents do (ONNX: a warning, matched
    case-insensitively; WinML: an error, it compares exactly); values outside the documented lists."""
    code = "winml-spelling" if target == "winml" else "spelling"
    why = ("Windows ML compares it exactly, so it will not see it" if target == "winml"
           else "consumers that compare exactly will not see it")
    out = []
    for ck, (key, value) in ms.image_props(model).items():
        cv = canonical_value(ck, value)
        if cv is None:
            out.append(Finding("", f"{ck}={value!r} is not one of {', '.join(ms.IMAGE_KEYS[ck])}", "metadata",
                               code="invalid-value", field=ck,
                               manual=f"choose one of {', '.join(ms.IMAGE_KEYS[ck])}"))
        elif (key, value) != (ck, cv):
            out.append(Finding("", f"'{key}={value}' is spelled '{ck}={cv}' in the ONNX documents: {why}",
                               "metadata", code=code, field=ck, fix=MetadataEdits(image={ck: cv}),
                               fix_text=f"write {ck}={cv}"))
    for vi in parts.values():
        d = vi.denotation
        if d and d != d.upper() and d.upper() in ms.TYPE_DENOTATIONS:
            out.append(Finding("", f"type denotation '{d}' of '{vi.name}' is spelled '{d.upper()}': {why}",
                               "metadata", vi.name, code=code, field=f"type:{vi.name}",
                               fix=MetadataEdits(types={vi.name: d.upper()}), fix_text=f"write {d.upper()}"))
        dens = list(vi.dims) if vi.tensor and any(vi.dims) else []
        upper = [x.upper() for x in dens]
        if dens != upper and all(not x or x in ms.DIM_DENOTATIONS for x in upper):
            out.append(Finding("", f"dimension denotations of '{vi.name}' are spelled {upper}: {why}", "metadata",
                               vi.name, code=code, field=f"dims:{vi.name}", fix=MetadataEdits(dims={vi.name: upper}),
                               fix_text="write them in capitals"))
    return _unique(out)


def _duplicates(model, parts: Parts) -> list[Finding]:
    """A key given more than once (an Image.* key in any spelling): onnx.checker refuses the model, and readers
    disagree on which entry counts. The fix keeps one: for the pixel format the only value whose channels every
    IMAGE tensor has, else the last (the one this check, like ONNX Runtime, reads)."""
    groups: dict[str, list] = {}
    for p in model.metadata_props:
        groups.setdefault(ms.image_key(p.key) or p.key, []).append(p)
    out = []
    for key, entries in groups.items():
        if len(entries) < 2:
            continue
        keep = entries[-1].value
        if key == ms.PIXEL_FORMAT:
            counts = {_channels(vi) for vi in parts.images()}
            fits = {v for p in entries if ms.PIXEL_FORMAT_CHANNELS.get(v := canonical_value(key, p.value) or "")
                    in counts and len(counts) == 1}
            keep = fits.pop() if len(fits) == 1 else keep
        edit = MetadataEdits(image={key: keep}) if ms.image_key(key) else MetadataEdits(props={key: keep})
        listed = ", ".join(f"{p.key}={p.value!r}" for p in entries)
        out.append(Finding("", f"metadata key {key} is given {len(entries)} times ({listed}): onnx.checker "
                               "refuses the model and readers differ on which one counts", "metadata",
                           code="duplicate-key", field=key, fix=edit, fix_text=f"keep only {key}={keep}"))
    return out


def _images(model, shared: list[Finding], parts: Parts) -> list[Finding]:
    """Both targets: an IMAGE whose channel axis its shape cannot tell, dimension denotations a shape implies,
    Image.* keys no tensor uses (their safe fix: drop them)."""
    values = ms.image_props(model)
    fmt = canonical_value(ms.PIXEL_FORMAT, values[ms.PIXEL_FORMAT][1]) if ms.PIXEL_FORMAT in values else None
    channels = ms.PIXEL_FORMAT_CHANNELS.get(fmt)
    out = []
    images = parts.images()
    for vi in images:
        shape = _shape(vi)
        if shape is None or len(shape) != 4:
            continue
        dens = [d.upper() for d in vi.dims]
        axes = channel_candidates(shape, channels) or channel_candidates(shape, None)
        if len(axes) == 2:
            out.append(Finding("", f"IMAGE tensor '{vi.name}' has shape {_fmt_shape(shape)}: axis 1 and axis 3 "
                                   "could both be its channels, so only its dimension denotations say which",
                               "image", vi.name, code="image-ambiguous", field=f"dims:{vi.name}",
                               manual="check that DATA_CHANNEL is on the axis that holds the colours"))
        if ms.DATA_CHANNEL not in dens:
            f = next((f for f in shared if f.tensor == vi.name and f.code == "image-channel-axis"), None)
            if f is not None and len(axes) == 1:
                f.fix = MetadataEdits(dims={vi.name: layout_dims(axes[0])})
                f.fix_text = f"denote its axes {ms_fmt(layout_dims(axes[0]))} (its shape is only read that way)"
            elif f is not None:
                f.manual = "denote DATA_CHANNEL on the axis that holds the colours"
    for f in shared:
        if f.code != "pixel-format-channels":
            continue
        if fmt in ("Rgba8", "Bgra8") and all(_channels(vi) == 3 for vi in images):
            f.fix, f.fix_text = MetadataEdits(image={ms.PIXEL_FORMAT: fmt[:3] + "8"}), f"write {fmt[:3]}8"
        else:
            f.manual = (f"set the pixel format the model was trained on ({', '.join(ms.IMAGE_KEYS[ms.PIXEL_FORMAT])}"
                        ") or fix the DATA_CHANNEL axis")
    if values and not images:
        f = next((f for f in shared if f.code == "image-metadata-unused"), None)
        if f is not None:
            f.fix = MetadataEdits(image={k: None for k in values})
            f.fix_text = "remove " + ", ".join(values)
    return out


def _winml(model, parts: Parts) -> list[Finding]:
    values = {k: canonical_value(k, v) or v for k, (_key, v) in ms.image_props(model).items()}
    images = parts.images()
    out = []
    if not images:
        return out                       # WinML reads the Image.* keys only for IMAGE tensors
    fmt = values.get(ms.PIXEL_FORMAT)
    if fmt is not None and fmt not in WINML_FORMATS and fmt in ms.IMAGE_KEYS[ms.PIXEL_FORMAT]:
        three = fmt[:3] + "8"
        counts = {_channels(vi) for vi in images}
        f = Finding("", f"{ms.PIXEL_FORMAT}={fmt} is not in Windows ML's supported list "
                        f"({', '.join(WINML_FORMATS)}): every IMAGE input is bound as a plain tensor",
                    "metadata", code="winml-pixel-format", field=ms.PIXEL_FORMAT)
        if counts == {3}:
            f.fix, f.fix_text = MetadataEdits(image={ms.PIXEL_FORMAT: three}), f"write {three} (the tensor has 3 " \
                                                                               "channels)"
        else:
            f.manual = ("Windows ML has no 4-channel image format: give the model a 3-channel input, or denote "
                        "the input TENSOR")
        out.append(f)
    rng = values.get(ms.PIXEL_RANGE)
    if rng is not None and rng not in WINML_RANGES and rng in ms.IMAGE_KEYS[ms.PIXEL_RANGE]:
        out.append(Finding("", f"{ms.PIXEL_RANGE}={rng} is not in Windows ML's supported list "
                               f"({', '.join(WINML_RANGES)}): every IMAGE input is bound as a plain tensor",
                           "metadata", code="winml-pixel-range", field=ms.PIXEL_RANGE,
                           manual="choose the range the model's first layer expects (NominalRange_0_255 for raw "
                                  "8-bit values), or remove the key"))
    if values.get(ms.GAMMA) in WINML_BLOCKED_GAMMA:
        out.append(Finding("", f"{ms.GAMMA}=Linear is blocked by Windows ML: every IMAGE input is bound as a plain "
                               "tensor", "metadata", code="winml-gamma", field=ms.GAMMA,
                           manual="remove the key (Windows ML then assumes SRGB) or set SRGB, if the model was "
                                  "trained on sRGB pixels"))
    for vi in images:
        if vi.elem_type != FLOAT32:
            out.append(Finding("", f"IMAGE tensor '{vi.name}' is {_dtype(vi.elem_type)}: Windows ML binds only "
                                   "float32 images, so it is bound as a plain tensor", "image", vi.name,
                               code="winml-image-type", field=f"type:{vi.name}",
                               manual="denote it TENSOR, or convert with float inputs (convert --float-io)"))
        shape = _shape(vi)
        if shape is None or len(shape) != 4:
            continue
        dens = [d.upper() for d in vi.dims]
        at = dens.index(ms.DATA_CHANNEL) if ms.DATA_CHANNEL in dens else None
        axes = channel_candidates(shape, ms.PIXEL_FORMAT_CHANNELS.get(fmt))
        if (at is not None and at != 1) or (at is None and axes == [3]):
            out.append(Finding("", f"IMAGE tensor '{vi.name}' {_fmt_shape(shape)} has its channels on axis "
                                   f"{at if at is not None else 3}: Windows ML reads axes 2 and 3 as height and "
                                   "width (NCHW)", "image", vi.name, code="winml-image-layout",
                               field=f"dims:{vi.name}",
                               manual="convert with channels-first inputs (the default, without --keep-io-layout), "
                                      "or denote it TENSOR"))
    return out


# -- helpers ------------------------------------------------------------------------------------------------------
def _channels(vi) -> int | None:
    """The channel count: on the DATA_CHANNEL axis, else on the one axis an image shape allows."""
    shape = _shape(vi)
    dens = [d.upper() for d in vi.dims]
    if shape and ms.DATA_CHANNEL in dens:
        return shape[dens.index(ms.DATA_CHANNEL)]
    axes = channel_candidates(shape, None) if shape and len(shape) == 4 else []
    return shape[axes[0]] if len(axes) == 1 else None


def _dtype(elem_type: int) -> str:
    import onnx
    return onnx.helper.tensor_dtype_to_np_dtype(elem_type).name if elem_type else "of unknown type"


def _fmt_shape(shape) -> str:
    return "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"


def ms_fmt(dens) -> str:
    return "[" + ", ".join(dens) + "]"


def _unique(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        if (f.code, f.message) not in seen:
            seen.add((f.code, f.message))
            out.append(f)
    return out
