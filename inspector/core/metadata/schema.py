"""The ONNX denotation and image-metadata vocabulary (TypeDenotation, DimensionDenotation, MetadataProps documents).

Pure data and validators. Keys and values are matched case-insensitively (the MetadataProps document says so) and
always written back in their canonical spelling; anything invalid is refused with a MetadataError that lists the
allowed values.
"""
from __future__ import annotations

from typing import Iterable

from inspector.core.ir.errors import MetadataError

TYPE_DENOTATIONS = ("TENSOR", "IMAGE", "AUDIO", "TEXT")

DATA_BATCH, DATA_CHANNEL, DATA_TIME, DATA_FEATURE = "DATA_BATCH", "DATA_CHANNEL", "DATA_TIME", "DATA_FEATURE"
DIM_DENOTATIONS = (DATA_BATCH, DATA_CHANNEL, DATA_TIME, DATA_FEATURE,
                   "FILTER_IN_CHANNEL", "FILTER_OUT_CHANNEL", "FILTER_SPATIAL")
SPATIAL = (DATA_FEATURE, DATA_TIME)     # what a conv or pool may slide over

PIXEL_FORMAT = "Image.BitmapPixelFormat"
GAMMA = "Image.ColorSpaceGamma"
PIXEL_RANGE = "Image.NominalPixelRange"
IMAGE_KEYS: dict[str, tuple[str, ...]] = {
    PIXEL_FORMAT: ("Gray8", "Rgb8", "Bgr8", "Rgba8", "Bgra8"),
    GAMMA: ("Linear", "SRGB"),
    PIXEL_RANGE: ("NominalRange_0_255", "Normalized_0_1", "Normalized_1_1", "NominalRange_16_235"),
}
PIXEL_FORMAT_CHANNELS = {"Gray8": 1, "Rgb8": 3, "Bgr8": 3, "Rgba8": 4, "Bgra8": 4}
EIGHT_BIT_RANGES = ("NominalRange_0_255", "NominalRange_16_235")

# Where TFLite NormalizationOptions that no Image.NominalPixelRange describes are kept, as JSON
# {"<input name>": {"mean": [...], "std": [...]}} (per channel when the TFLite metadata gives one value per channel).
NORMALIZATION_KEY = "layout_inspector.normalization"
# Free-form keys the ONNX IR document recommends, and ours; kept without a warning.
KNOWN_KEYS = ("model_author", "model_license", NORMALIZATION_KEY)

# Spellings accepted for "no denotation on this axis" in a --dims list.
NO_DENOTATION = ("", "?", "-", "none")


def canonical(value: str, allowed: Iterable[str], what: str) -> str:
    """`value` in its canonical spelling from `allowed`, matched case-insensitively."""
    allowed = tuple(allowed)
    low = str(value).strip().lower()
    for a in allowed:
        if a.lower() == low:
            return a
    raise MetadataError(f"invalid {what} '{value}': allowed values are {', '.join(allowed)}")


def type_denotation(value: str) -> str:
    return canonical(value, TYPE_DENOTATIONS, "type denotation")


def dim_denotation(value: str) -> str:
    """One axis' denotation; '' for none ('?', '-' and 'none' are accepted too)."""
    if str(value).strip().lower() in NO_DENOTATION:
        return ""
    return canonical(value, DIM_DENOTATIONS, "dimension denotation")


def dim_denotations(values: Iterable[str]) -> list[str]:
    return [dim_denotation(v) for v in values]


def image_key(key: str) -> str | None:
    """The canonical Image.* key, or None when `key` is not one."""
    low = key.strip().lower()
    return next((k for k in IMAGE_KEYS if k.lower() == low), None)


def image_props(model) -> dict[str, tuple[str, str]]:
    """A model's Image.* entries: canonical key -> (key as written, value as written), the last of a key winning."""
    return {k: (p.key, p.value) for p in model.metadata_props if (k := image_key(p.key))}


def image_value(key: str, value: str) -> tuple[str, str]:
    """(canonical key, canonical value) for an Image.* entry; MetadataError for an unknown key or value."""
    k = image_key(key)
    if k is None:
        raise MetadataError(f"unknown image metadata key '{key}': allowed keys are {', '.join(IMAGE_KEYS)}")
    return k, canonical(value, IMAGE_KEYS[k], k)


def metadata_entry(key: str, value: str) -> tuple[str, str, str | None]:
    """(key, value, warning) for any metadata_props entry.

    Image.* keys are validated and canonicalised. Unknown keys are kept as given, never dropped, with a warning:
    a stronger one under the Image. prefix, where an unknown key is most likely a typo.
    """
    key = key.strip()
    if not key:
        raise MetadataError("metadata key is empty: use KEY=VALUE")
    if image_key(key):
        k, v = image_value(key, value)
        return k, v, None
    if key in KNOWN_KEYS:
        return key, value, None
    if key.lower().startswith("image."):
        return key, value, (f"metadata key '{key}' is not one of the ONNX image keys "
                            f"({', '.join(IMAGE_KEYS)}); kept as given, but no consumer will read it")
    return key, value, f"metadata key '{key}' is not in the ONNX metadata schema; kept as a free-form entry"


def image_note(keys: list[str]) -> str:
    """Image.* keys are model-wide: say so whenever the user sets one."""
    they = "it applies" if len(keys) == 1 else "they apply"
    return f"{', '.join(keys)} {'is' if len(keys) == 1 else 'are'} model-wide: {they} to every tensor denoted IMAGE"
