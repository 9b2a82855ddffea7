"""TFLite Support metadata (the TFLITE_METADATA buffer, file identifier "M001") -> denotation hints.

Read with the plain `flatbuffers` runtime and hand-written table readers for the few fields we use, because the
`tflite-support` package pins protobuf<4. Field slots follow tflite-support's metadata_schema.fbs (a union field
takes two slots: its type byte, then the table). Every offset is bounds-checked: a malformed buffer yields a
warning, never an exception.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from flatbuffers import number_types as N
from flatbuffers.table import Table

from . import schema as ms
from .edits import MetadataEdits

FILE_IDENTIFIER = b"M001"
COLOR_SPACES = {0: "UNKNOWN", 1: "RGB", 2: "GRAYSCALE"}
CONTENTS = {1: "feature", 2: "image", 3: "bounding_box"}     # ContentProperties union
NORMALIZATION = 1                                            # ProcessUnitOptions union: NormalizationOptions
# (mean, std) -> the range the tensor then holds, for 8-bit pixels 0..255.
RANGES = {(0.0, 1.0): "NominalRange_0_255", (0.0, 255.0): "Normalized_0_1", (127.5, 127.5): "Normalized_1_1"}


class _Malformed(Exception):
    pass


class _T(Table):
    """A flatbuffers Table whose every read is checked against the buffer."""

    def Get(self, flags, off):
        if not 0 <= off <= len(self.Bytes) - flags.bytewidth:
            raise _Malformed(f"offset {off} outside the {len(self.Bytes)}-byte buffer")
        return super().Get(flags, off)

    def _field(self, slot: int) -> int:
        o = self.Offset(4 + 2 * slot)
        return self.Pos + o if o else 0

    def _deref(self, pos: int) -> int:
        return pos + self.Get(N.UOffsetTFlags, pos)

    def table(self, slot: int) -> "_T | None":
        pos = self._field(slot)
        return _T(self.Bytes, self._deref(pos)) if pos else None

    def _vector(self, slot: int, width: int) -> tuple[int, int]:
        pos = self._field(slot)
        if not pos:
            return 0, 0
        v = self._deref(pos)
        n = self.Get(N.UOffsetTFlags, v)
        if v + 4 + n * width > len(self.Bytes):
            raise _Malformed(f"vector of {n} items runs past the end of the buffer")
        return v + 4, n

    def string(self, slot: int) -> str:
        pos = self._field(slot)
        return _string_at(self, self._deref(pos)) if pos else ""

    def tables(self, slot: int) -> list["_T"]:
        start, n = self._vector(slot, 4)
        return [_T(self.Bytes, self._deref(start + 4 * i)) for i in range(n)]

    def strings(self, slot: int) -> list[str]:
        start, n = self._vector(slot, 4)
        return [_string_at(self, self._deref(start + 4 * i)) for i in range(n)]

    def floats(self, slot: int) -> list[float]:
        start, n = self._vector(slot, 4)
        return [round(float(self.Get(N.Float32Flags, start + 4 * i)), 6) for i in range(n)]

    def byte(self, slot: int, default: int = 0) -> int:
        pos = self._field(slot)
        return self.Get(N.Uint8Flags, pos) if pos else default


def _string_at(t: _T, pos: int) -> str:
    n = t.Get(N.UOffsetTFlags, pos)
    if pos + 4 + n > len(t.Bytes):
        raise _Malformed(f"string of {n} bytes runs past the end of the buffer")
    return bytes(t.Bytes[pos + 4:pos + 4 + n]).decode("utf-8", "replace")


@dataclass
class TensorInfo:
    """One input/output's TensorMetadata, tied to the model tensor at the same position."""
    tensor: str                     # the model's tensor name ("" when the metadata lists more tensors)
    name: str = ""                  # the name given in the metadata
    description: str = ""
    content: str = ""               # "image" | "feature" | "bounding_box" | ""
    color_space: str = ""           # "RGB" | "GRAYSCALE" | "UNKNOWN" for image content
    mean: list[float] = field(default_factory=list)
    std: list[float] = field(default_factory=list)
    min: list[float] = field(default_factory=list)    # stats
    max: list[float] = field(default_factory=list)
    files: list[str] = field(default_factory=list)    # associated file names
    dimension_names: list[str] = field(default_factory=list)


@dataclass
class TfliteMetadata:
    name: str = ""
    description: str = ""
    version: str = ""
    author: str = ""
    license: str = ""
    files: list[str] = field(default_factory=list)
    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)     # tensor -> type denotation hint (IMAGE)
    image: dict[str, str] = field(default_factory=dict)     # Image.* key -> value hint
    sources: dict[str, str] = field(default_factory=dict)   # tensor or Image.* key -> where the hint came from
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # tensor -> {"mean": [...], "std": [...]} where no Image.NominalPixelRange describes them (NORMALIZATION_KEY)
    normalization: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    # what each TFLite metadata field became: {"tflite": field, "onnx": field or "", "value": ..., "why": ...}
    mapping: list[dict] = field(default_factory=list)


def read_tflite_metadata(graph) -> TfliteMetadata | None:
    """The hints from a Graph's TFLITE_METADATA buffer; None when the model has none."""
    buf = graph.metadata.get("TFLITE_METADATA")
    if buf is None:
        return None
    sg = graph.main
    return parse_metadata(bytes(buf), [(sg.tensors[i].name, sg.tensors[i].dtype) for i in sg.inputs if i >= 0],
                          [(sg.tensors[i].name, sg.tensors[i].dtype) for i in sg.outputs if i >= 0])


def parse_metadata(buf: bytes, inputs: Sequence[tuple[str, str]] = (),
                   outputs: Sequence[tuple[str, str]] = ()) -> TfliteMetadata:
    """Parse a metadata flatbuffer; `inputs`/`outputs` are the subgraph's (tensor name, dtype) in order."""
    meta = TfliteMetadata()
    if len(buf) < 8 or buf[4:8] != FILE_IDENTIFIER:
        meta.warnings.append("TFLite metadata ignored: not a TFLite Support metadata buffer (no 'M001' identifier)")
        return meta
    try:
        root = _T(buf, _T(buf, 0).Get(N.UOffsetTFlags, 0))
        meta.name, meta.description, meta.version = root.string(0), root.string(1), root.string(2)
        meta.author, meta.license = root.string(4), root.string(5)
        meta.files = [f.string(0) for f in root.tables(6)]
        subgraphs = root.tables(3)
        if subgraphs:
            meta.inputs = _tensors(subgraphs[0].tables(2), inputs, "input", meta)
            meta.outputs = _tensors(subgraphs[0].tables(3), outputs, "output", meta)
    except Exception as e:  # noqa: BLE001 - _Malformed, struct.error, bad UTF-8 ...: never break loading
        meta.warnings.append(f"TFLite metadata is malformed, read as far as possible: {e}")
    dtypes = dict(inputs)
    for t in meta.inputs:
        _hints(meta, t, dtypes.get(t.tensor, ""))
    for t in meta.outputs:
        if t.content == "image" and t.tensor:
            # Image.* keys are model-wide: denoting an output IMAGE would claim the input's pixel format for it.
            meta.notes.append(f"TFLite metadata: output '{t.tensor}' is described as an image "
                              f"({t.color_space or 'no colour space'}); not denoted IMAGE because the Image.* keys would then apply to it too")
    return meta


def _tensors(tables, model_tensors, kind, meta) -> list[TensorInfo]:
    if model_tensors and len(tables) != len(model_tensors):
        meta.warnings.append(f"TFLite metadata describes {len(tables)} {kind}(s), the model has "
                             f"{len(model_tensors)}; matched by position")
    out = []
    for i, t in enumerate(tables):
        info = TensorInfo(tensor=model_tensors[i][0] if i < len(model_tensors) else "",
                          name=t.string(0), description=t.string(1), dimension_names=t.strings(2))
        content = t.table(3)
        if content is not None:
            kind_id = content.byte(0)
            info.content = CONTENTS.get(kind_id, "")
            props = content.table(1)
            if kind_id == 2 and props is not None:
                info.color_space = COLOR_SPACES.get(props.byte(0), "UNKNOWN")
        for unit in t.tables(4):
            options = unit.table(1)
            if unit.byte(0) == NORMALIZATION and options is not None:
                info.mean, info.std = options.floats(0), options.floats(1)
        stats = t.table(5)
        if stats is not None:
            info.max, info.min = stats.floats(0), stats.floats(1)
        info.files = [f.string(0) for f in t.tables(6)]
        out.append(info)
    return out


def _hints(meta: TfliteMetadata, t: TensorInfo, dtype: str) -> None:
    """Map one input's metadata to IMAGE, pixel format and pixel range hints."""
    if t.content != "image" or not t.tensor:
        return
    where = f"TFLite metadata: input '{t.tensor}'"
    meta.types[t.tensor] = "IMAGE"
    meta.sources[t.tensor] = f"{where} has image content"
    meta.mapping.append({"tflite": f"input '{t.tensor}' content ImageProperties",
                         "onnx": f"type denotation of '{t.tensor}'", "value": "IMAGE"})
    fmt = {"RGB": "Rgb8", "GRAYSCALE": "Gray8"}.get(t.color_space)
    if fmt is None:
        meta.notes.append(f"{where}: colour space {t.color_space or 'not given'}, so no {ms.PIXEL_FORMAT}")
    else:
        _set(meta, ms.PIXEL_FORMAT, fmt, f"{where} colour space {t.color_space}")
    if not t.mean or not t.std:
        return
    norm = f"normalization mean={_num(t.mean)} std={_num(t.std)}"
    if dtype == "uint8":
        _set(meta, ms.PIXEL_RANGE, "NominalRange_0_255",
             f"{where} is uint8 (its {norm} is folded into the quantization)")
        return
    if len(set(t.mean)) != 1 or len(set(t.std)) != 1:
        meta.notes.append(f"{where}: per-channel {norm} has no {ms.PIXEL_RANGE} equivalent; the values are kept "
                          f"in metadata_props '{ms.NORMALIZATION_KEY}'")
        _keep_normalization(meta, t, norm)
        return
    m, s = t.mean[0], t.std[0]
    rng = next((r for (rm, rs), r in RANGES.items() if abs(m - rm) < 1e-3 and abs(s - rs) < 1e-3), None)
    if rng is None or dtype not in ("", "float32", "float16"):
        lo, hi = (0 - m) / s if s else 0, (255 - m) / s if s else 0
        meta.notes.append(f"{where}: {norm} maps pixels 0..255 to {lo:g}..{hi:g}, which no "
                          f"{ms.PIXEL_RANGE} value describes; the values are kept in metadata_props "
                          f"'{ms.NORMALIZATION_KEY}'")
        _keep_normalization(meta, t, norm)
        return
    _set(meta, ms.PIXEL_RANGE, rng, f"{where} {norm}")


def _keep_normalization(meta: TfliteMetadata, t: TensorInfo, norm: str) -> None:
    meta.normalization[t.tensor] = {"mean": list(t.mean), "std": list(t.std)}
    meta.mapping.append({"tflite": f"input '{t.tensor}' NormalizationOptions", "onnx": ms.NORMALIZATION_KEY,
                         "value": norm, "why": f"no {ms.PIXEL_RANGE} value describes it"})


def _set(meta: TfliteMetadata, key: str, value: str, source: str) -> None:
    old = meta.image.get(key)
    if old is not None and old != value:
        meta.notes.append(f"{key}: {source} says {value}, an earlier input said {old}; keeping {old} "
                          "(the key is model-wide)")
        return
    meta.image.setdefault(key, value)
    meta.sources.setdefault(key, source)
    meta.mapping.append({"tflite": source.removeprefix("TFLite metadata: "), "onnx": key, "value": value})


def _num(values: list[float]) -> str:
    v = values[0] if len(set(values)) == 1 else values
    return f"{v:g}" if isinstance(v, float) else "[" + ", ".join(f"{x:g}" for x in v) + "]"


def edits_from_metadata(meta: TfliteMetadata | None) -> MetadataEdits:
    """The MetadataEdits pre-fill for a converted model: IMAGE denotations, Image.* keys, doc string, author."""
    e = MetadataEdits()
    if meta is None:
        return e
    e.types = dict(meta.types)
    e.image = dict(meta.image)
    doc = " - ".join(x for x in (meta.name, meta.description) if x)
    if doc:
        e.doc_string = doc
    if meta.author:
        e.props["model_author"] = meta.author
    if meta.license:
        e.props["model_license"] = meta.license
    return e


def field_mapping(meta: TfliteMetadata) -> list[dict]:
    """Which TFLite metadata field became which ONNX metadata (and which became none, with why)."""
    out = [{"tflite": "name, description", "onnx": "doc_string",
            "value": " - ".join(x for x in (meta.name, meta.description) if x)}] if meta.name or meta.description else []
    out += [{"tflite": f, "onnx": k, "value": v} for f, k, v in (("author", "metadata_props model_author", meta.author),
                                                                ("license", "metadata_props model_license",
                                                                 meta.license)) if v]
    out += meta.mapping
    if meta.version:
        out.append({"tflite": "version", "onnx": "", "value": meta.version,
                    "why": "ONNX model_version is an integer; not guessed from text"})
    for t in meta.inputs + meta.outputs:
        if t.files or t.min or t.max:
            out.append({"tflite": f"tensor '{t.tensor or t.name}' associated files / stats", "onnx": "",
                        "value": ", ".join(t.files) or f"min {t.min} max {t.max}", "why": "no ONNX field holds them"})
    return out
