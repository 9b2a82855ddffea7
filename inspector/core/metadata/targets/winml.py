"""What Windows ML accepts, on top of the ONNX documents' rules.

Its rules come from ONNX Runtime's descriptor converter (WINML below): it looks the Image.* keys up by exact name and
compares values with strcmp; an IMAGE tensor must be float32 and is read as NCHW; anything it does not support is
bound as a plain tensor without an error.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import schema as ms
from ..edits import MetadataEdits
from ..findings import Finding
from .base import Rule, target
from .onnx import RULES as DOCUMENTS, canonical_value, channel_candidates, channel_count, documents, fmt_shape, shape_of

if TYPE_CHECKING:
    from ..parsed import Parts

WINML = "ONNX Runtime winml/lib/Api.Ort/OnnxruntimeDescriptorConverter.cpp"
WINML_FORMATS = ("Gray8", "Rgb8", "Bgr8")                     # its supported list
WINML_RANGES = ("NominalRange_0_255", "Normalized_0_1", "Normalized_1_1")
WINML_BLOCKED_GAMMA = ("Linear",)                             # a blocked list, unlike the other two
FLOAT32 = 1
SPELLING = ("winml-spelling", "Windows ML compares it exactly, so it will not see it")

RULES: dict[str, Rule] = {
    "winml-spelling": Rule("error", WINML, "keys and values are matched exactly (strcmp)"),
    "winml-pixel-format": Rule("error", WINML, "Image.BitmapPixelFormat must be Gray8, Rgb8 or Bgr8"),
    "winml-pixel-range": Rule("error", WINML, "Image.NominalPixelRange must be NominalRange_0_255, Normalized_0_1 "
                                             "or Normalized_1_1"),
    "winml-gamma": Rule("error", WINML, "Image.ColorSpaceGamma=Linear is blocked"),
    "winml-image-type": Rule("error", WINML, "an IMAGE tensor must be float32"),
    "winml-image-layout": Rule("error", WINML, "an IMAGE tensor is read as NCHW"),
}


@target("winml", label="Windows ML", rules={**DOCUMENTS, **RULES},
        summary="adds Windows ML's own rules (exact spelling, Gray8/Rgb8/Bgr8 only, no NominalRange_16_235, "
                "no Linear gamma, float32 NCHW images)")
def check(model, parts: Parts, shared: list[Finding]) -> list[Finding]:
    return documents(model, parts, shared, SPELLING) + _winml(model, parts)


def _winml(model, parts: Parts) -> list[Finding]:
    values = {k: canonical_value(k, v) or v for k, (_key, v) in ms.image_props(model).items()}
    images = parts.images()
    out: list[Finding] = []
    if not images:
        return out                       # WinML reads the Image.* keys only for IMAGE tensors
    fmt = values.get(ms.PIXEL_FORMAT)
    if fmt is not None and fmt not in WINML_FORMATS and fmt in ms.IMAGE_KEYS[ms.PIXEL_FORMAT]:
        three = fmt[:3] + "8"
        counts = {channel_count(vi) for vi in images}
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
            out.append(Finding("", f"IMAGE tensor '{vi.name}' is {dtype(vi.elem_type)}: Windows ML binds only "
                                   "float32 images, so it is bound as a plain tensor", "image", vi.name,
                               code="winml-image-type", field=f"type:{vi.name}",
                               manual="denote it TENSOR, or convert with float inputs (convert --float-io)"))
        shape = shape_of(vi)
        if shape is None or len(shape) != 4:
            continue
        dens = [d.upper() for d in vi.dims]
        at = dens.index(ms.DATA_CHANNEL) if ms.DATA_CHANNEL in dens else None
        axes = channel_candidates(shape, ms.PIXEL_FORMAT_CHANNELS.get(fmt) if fmt is not None else None)
        if (at is not None and at != 1) or (at is None and axes == [3]):
            out.append(Finding("", f"IMAGE tensor '{vi.name}' {fmt_shape(shape)} has its channels on axis "
                                   f"{at if at is not None else 3}: Windows ML reads axes 2 and 3 as height and "
                                   "width (NCHW)", "image", vi.name, code="winml-image-layout",
                               field=f"dims:{vi.name}",
                               manual="convert with channels-first inputs (the default, without --keep-io-layout), "
                                      "or denote it TENSOR"))
    return out


def dtype(elem_type: int) -> str:
    import onnx
    return onnx.helper.tensor_dtype_to_np_dtype(elem_type).name if elem_type else "of unknown type"
