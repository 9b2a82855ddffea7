"""The ONNX documents' rules (MetadataProps.md, DimensionDenotation.md, TypeDenotation.md, onnx.checker), which
every target checks; the default target.

Where a fix cannot change what the model means (canonical spelling, Rgba8 -> Rgb8 on a 3-channel tensor, dimension
denotations read off an unambiguous shape, Image.* keys nobody uses) the finding carries it as MetadataEdits;
otherwise `manual` says what to choose.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import schema as ms
from ..edits import MetadataEdits
from ..findings import Finding
from .base import Rule, target

if TYPE_CHECKING:
    from ..parsed import Parts

META, DIMS, TYPES = "ONNX docs/MetadataProps.md", "ONNX docs/DimensionDenotation.md", "ONNX docs/TypeDenotation.md"
CHECKER = "ONNX onnx/checker.cc (check_model: duplicate keys in metadata_props)"
SPELLING = ("spelling", "consumers that compare exactly will not see it")   # a warning: matched case-insensitively

RULES: dict[str, Rule] = {      # the ONNX documents' rules, for every target
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
}


@target("onnx", label="ONNX (the documents' rules)", summary="checks the ONNX documents' rules (the default)",
        rules=RULES)
def check(model, parts: Parts, shared: list[Finding]) -> list[Finding]:
    return documents(model, parts, shared)


def documents(model, parts: Parts, shared: list[Finding], spelling: tuple[str, str] = SPELLING) -> list[Finding]:
    """The documents' findings; `spelling`: the code and the reason a finding on a spelling gives (a consumer
    that compares exactly makes it an error of its own)."""
    return _duplicates(model, parts) + _spelling(model, parts, *spelling) + _images(model, shared, parts)


# -- rules ------------------------------------------------------------------------------------------------------

def canonical_value(key: str, value: str) -> str | None:
    low = value.strip().lower()
    return next((a for a in ms.IMAGE_KEYS[key] if a.lower() == low), None)


def shape_of(vi) -> list[int | None] | None:
    return None if vi.shape is None else list(vi.shape)


def channel_candidates(shape, channels: int | None) -> list[int]:
    """Axes 1 and 3 of a 4-D shape that could hold the channels (NCHW or NHWC): the pixel format's count, or any
    of 1, 3 and 4 when it is unknown."""
    sizes = (channels,) if channels else (1, 3, 4)
    return [a for a in (1, 3) if shape[a] in sizes]


def layout_dims(axis: int) -> list[str]:
    B, C, F = ms.DATA_BATCH, ms.DATA_CHANNEL, ms.DATA_FEATURE
    return [B, C, F, F] if axis == 1 else [B, F, F, C]


def _spelling(model, parts: Parts, code: str, why: str) -> list[Finding]:
    """Keys, values and denotations spelled otherwise than the documents do, reported under `code` because `why`;
    values outside the documented lists."""
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
            counts = {channel_count(vi) for vi in parts.images()}
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
    """Every target: an IMAGE whose channel axis its shape cannot tell, dimension denotations a shape implies,
    Image.* keys no tensor uses (their safe fix: drop them)."""
    values = ms.image_props(model)
    fmt = canonical_value(ms.PIXEL_FORMAT, values[ms.PIXEL_FORMAT][1]) if ms.PIXEL_FORMAT in values else None
    channels = ms.PIXEL_FORMAT_CHANNELS.get(fmt) if fmt is not None else None
    out = []
    images = parts.images()
    for vi in images:
        shape = shape_of(vi)
        if shape is None or len(shape) != 4:
            continue
        dens = [d.upper() for d in vi.dims]
        axes = channel_candidates(shape, channels) or channel_candidates(shape, None)
        if len(axes) == 2:
            out.append(Finding("", f"IMAGE tensor '{vi.name}' has shape {fmt_shape(shape)}: axis 1 and axis 3 "
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
        if fmt in ("Rgba8", "Bgra8") and all(channel_count(vi) == 3 for vi in images):
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


# -- helpers ------------------------------------------------------------------------------------------------------
def channel_count(vi) -> int | None:
    """The channel count: on the DATA_CHANNEL axis, else on the one axis an image shape allows."""
    shape = shape_of(vi)
    dens = [d.upper() for d in vi.dims]
    if shape and ms.DATA_CHANNEL in dens:
        return shape[dens.index(ms.DATA_CHANNEL)]
    axes = channel_candidates(shape, None) if shape and len(shape) == 4 else []
    return shape[axes[0]] if shape and len(axes) == 1 else None


def fmt_shape(shape) -> str:
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
