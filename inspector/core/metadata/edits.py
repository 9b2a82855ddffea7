"""MetadataEdits: the one Qt-free way to change an ONNX model's denotations and metadata.

The CLI (`edit`, `convert`), the GUI's metadata panel and the Session all build a MetadataEdits and call
`apply(model)`. Applying validates everything first, so an invalid value leaves the model untouched; it edits
value infos and model fields only, never nodes, initializers or the graph's inputs/outputs lists.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from . import schema as ms
from inspector.core.ir.errors import MetadataError
from inspector.core.layout.layout import apply as apply_perm


@dataclass
class MetadataEdits:
    """The user's metadata decisions, applied on top of what the metadata pass wrote."""
    types: dict[str, str] = field(default_factory=dict)          # tensor -> type denotation ("" clears)
    dims: dict[str, list[str]] = field(default_factory=dict)     # tensor -> one denotation per axis ("" = none)
    image: dict[str, str | None] = field(default_factory=dict)   # Image.* key -> value (None removes)
    props: dict[str, str | None] = field(default_factory=dict)   # other metadata_props (None removes)
    doc_string: str | None = None
    producer: str | None = None
    model_version: int | None = None

    # -- construction and serialisation --------------------------------------------------------------------------
    @classmethod
    def from_model(cls, model, values: bool = True) -> "MetadataEdits":
        """The model's current state, as edits that would reproduce it; without `values`, only the model's own
        fields (no pass over every value info, for a panel that shows none of them)."""
        e = cls(doc_string=model.doc_string, producer=model.producer_name, model_version=model.model_version)
        for vi in value_infos(model.graph) if values else ():
            if not vi.type.HasField("tensor_type"):
                continue
            if vi.type.denotation:
                e.types.setdefault(vi.name, vi.type.denotation)
            dims = [d.denotation for d in vi.type.tensor_type.shape.dim]
            if any(dims):
                e.dims.setdefault(vi.name, dims)
        for p in model.metadata_props:
            k = ms.image_key(p.key)
            if k:
                e.image[k] = p.value
            else:
                e.props[p.key] = p.value
        return e

    def to_dict(self) -> dict[str, Any]:
        return {"types": dict(self.types), "dims": {k: list(v) for k, v in self.dims.items()},
                "image": dict(self.image), "props": dict(self.props), "doc_string": self.doc_string,
                "producer": self.producer, "model_version": self.model_version}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MetadataEdits":
        if not isinstance(d, Mapping):
            raise MetadataError(f"metadata edits must be a mapping of fields, got {type(d).__name__}")
        for name in ("types", "dims", "image", "props"):
            if not isinstance(d.get(name) or {}, Mapping):
                raise MetadataError(f"metadata edit field '{name}' must map names to values")
        if any(not isinstance(v, (list, tuple)) for v in (d.get("dims") or {}).values()):
            raise MetadataError("metadata edit field 'dims' must map each tensor to a list of denotations")
        unknown = set(d) - {"types", "dims", "image", "props", "doc_string", "producer", "model_version"}
        if unknown:
            raise MetadataError(f"unknown metadata edit field(s): {', '.join(sorted(unknown))}")
        return cls(types=dict(d.get("types") or {}), dims={k: list(v) for k, v in (d.get("dims") or {}).items()},
                   image=dict(d.get("image") or {}), props=dict(d.get("props") or {}),
                   doc_string=d.get("doc_string"), producer=d.get("producer"), model_version=d.get("model_version"))

    def merged(self, over: "MetadataEdits") -> "MetadataEdits":
        """These edits with `over`'s on top (over wins per tensor, per key and per field)."""
        out = MetadataEdits.from_dict(self.to_dict())
        out.types.update(over.types)
        out.dims.update({k: list(v) for k, v in over.dims.items()})
        for k, v in over.image.items():        # one entry per canonical key, whatever the spelling
            out.image = {ok: ov for ok, ov in out.image.items() if ms.image_key(ok) != ms.image_key(k)}
            out.image[k] = v
        out.props.update(over.props)
        for name in ("doc_string", "producer", "model_version"):
            if getattr(over, name) is not None:
                setattr(out, name, getattr(over, name))
        return out

    def is_empty(self) -> bool:
        return self == MetadataEdits()

    # -- validation and application ---------------------------------------------------------------------------
    def normalized(self) -> tuple["MetadataEdits", list[str]]:
        """Canonical spellings and the notes to show; MetadataError for any invalid value."""
        notes: list[str] = []
        self._check_text()
        out = MetadataEdits(doc_string=self.doc_string, producer=self.producer, model_version=self.model_version)
        out.types = {t: (ms.type_denotation(v) if v else "") for t, v in self.types.items()}
        out.dims = {t: ms.dim_denotations(v) for t, v in self.dims.items()}
        for k, v in self.image.items():
            ck = ms.image_key(k)
            if ck is None:
                raise MetadataError(f"unknown image metadata key '{k}': allowed keys are {', '.join(ms.IMAGE_KEYS)}")
            out.image[ck] = None if v is None else ms.image_value(ck, v)[1]
        for k, v in self.props.items():
            key = ms.image_key(k)
            if key:                             # an Image.* key given as a plain entry: validate it all the same
                ck, cv = ms.image_value(k, v) if v is not None else (key, None)
                out.image[ck] = cv
                continue
            if v is None:
                out.props[k.strip()] = None
                continue
            ck, cv, warning = ms.metadata_entry(k, v)
            out.props[ck] = cv
            if warning:
                notes.append("warning: " + warning)
        set_keys = [k for k, v in out.image.items() if v is not None]
        if set_keys:
            notes.insert(0, ms.image_note(set_keys))
        if self.model_version is not None:
            try:
                out.model_version = int(self.model_version)
            except (TypeError, ValueError):
                raise MetadataError(f"model version '{self.model_version}' is not an integer") from None
            if not -2**63 <= out.model_version < 2**63:
                raise MetadataError(f"model version {out.model_version} does not fit ONNX's 64-bit field")
        return out, notes

    def _check_text(self) -> None:
        """Every name and value must be text protobuf can store (a session file may hold anything JSON can)."""
        def text(v, what: str, optional: bool = False) -> None:
            if v is None and optional:
                return
            if not isinstance(v, str):
                raise MetadataError(f"{what} must be text, got {type(v).__name__} {v!r:.60}")
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise MetadataError(f"{what} {v!r:.60} is not valid Unicode text") from None
        for k, v in self.types.items():
            text(k, "tensor name")
            text(v, f"type denotation of '{k}'", optional=True)
        for k, dims in self.dims.items():
            text(k, "tensor name")
            for d in dims:
                text(d, f"dimension denotation of '{k}'")
        for what, entries in (("image metadata", self.image), ("metadata", self.props)):
            for key, value in entries.items():
                text(key, f"{what} key")
                text(value, f"{what} value of '{key}'", optional=True)
        text(self.doc_string, "doc string", optional=True)
        text(self.producer, "producer", optional=True)

    def apply(self, model) -> list[str]:
        """Validate, then edit `model` (an onnx.ModelProto) in place; returns notes for the user."""
        e, notes = self.normalized()
        infos = _infos_by_name(model.graph, set(e.types) | set(e.dims))
        for name in set(e.types) | set(e.dims):
            if name not in infos:
                raise MetadataError(f"no tensor named '{name}' in the model: inputs are "
                                    f"{_names(model.graph.input)}, outputs are {_names(model.graph.output)}")
            if not infos[name][0].type.HasField("tensor_type"):
                raise MetadataError(f"'{name}' is not a tensor")
        for name, dims in e.dims.items():
            vi = infos[name][0]
            if not vi.type.tensor_type.HasField("shape"):
                raise MetadataError(f"tensor '{name}' has no shape in the model, so its axes cannot be denoted")
            rank = len(vi.type.tensor_type.shape.dim)
            if dims and len(dims) != rank:
                raise MetadataError(f"tensor '{name}' has {rank} axes but {len(dims)} dimension denotations "
                                    f"were given")
        for name, value in e.types.items():
            for vi in infos[name]:
                vi.type.denotation = value
        for name, dims in e.dims.items():
            for vi in infos[name]:
                for d, v in zip(vi.type.tensor_type.shape.dim, dims or [""] * len(vi.type.tensor_type.shape.dim)):
                    d.denotation = v
        _set_props(model, {**e.props, **e.image})
        if e.doc_string is not None:
            model.doc_string = e.doc_string
        if e.producer is not None:
            model.producer_name = e.producer
        if e.model_version is not None:
            model.model_version = e.model_version
        return notes


def value_infos(graph) -> Iterator:
    yield from graph.input
    yield from graph.output
    yield from graph.value_info


def _infos_by_name(graph, names: set[str]) -> dict[str, list]:
    """Every ValueInfoProto of each of `names` (a name may be both an input and an output, or repeated in
    value_info); the others are not kept (a conversion's pass edits 2 of 10,000)."""
    out: dict[str, list] = {}
    if names:
        for vi in value_infos(graph):
            if vi.name in names:
                out.setdefault(vi.name, []).append(vi)
    return out


def _names(values) -> str:
    return ", ".join(v.name for v in values) or "(none)"


def _set_props(model, entries: Mapping[str, str | None]) -> None:
    """Set or remove metadata_props, matching existing keys case-insensitively; other entries are untouched.

    One pass over the model's entries whatever the number of edits (a file may hold thousands of entries)."""
    final: dict[str, tuple[str, str | None]] = {}
    for key, value in entries.items():          # the last spelling of a key wins, as if applied in order
        final.pop(key.lower(), None)
        final[key.lower()] = (key, value)
    kept = [(p.key, p.value) for p in model.metadata_props if p.key.lower() not in final]
    if len(kept) != len(model.metadata_props):
        del model.metadata_props[:]
        for key, value in kept:
            model.metadata_props.add(key=key, value=value)
    for key, value in final.values():
        if value is not None:
            model.metadata_props.add(key=key, value=value)


def layout_dim_denotations(rank: int, perm: Sequence[int] | None) -> list[str] | None:
    """Dimension denotations of a TFLite channels-last tensor seen through `perm` (None when not image-like).

    TFLite's order is [batch, spatial..., channel]. Rank 4 is taken as image-like whatever its perm; ranks 3 and 5
    only when the layout plan moved the channel axis, since a kept [1, 896, 16] is as likely anchors as a signal.
    """
    if perm is not None and len(perm) != rank:
        raise MetadataError(f"layout {tuple(perm)} does not fit a tensor of rank {rank}")
    moved = perm is not None and tuple(perm) != tuple(range(rank))
    if rank != 4 and not (rank in (3, 5) and moved):
        return None
    tflite = [ms.DATA_BATCH] + [ms.DATA_FEATURE] * (rank - 2) + [ms.DATA_CHANNEL]
    return list(apply_perm(tflite, perm))


def layout_edits(model, io_layouts: Mapping[str, Sequence[int] | None]) -> tuple[MetadataEdits, list[str]]:
    """Dimension denotations for graph inputs/outputs from their layouts (perm relative to TFLite order), as
    edits to merge with others before applying them all at once, and notes. perm (0, 3, 1, 2): the ONNX tensor is
    NCHW, [DATA_BATCH, DATA_CHANNEL, DATA_FEATURE, DATA_FEATURE]; identity keeps NHWC."""
    io = {vi.name: vi for vi in list(model.graph.input) + list(model.graph.output)}
    edits, notes = MetadataEdits(), []
    for name, perm in io_layouts.items():
        vi = io.get(name)
        if vi is None or not vi.type.tensor_type.HasField("shape"):
            notes.append(f"no graph input/output '{name}' with a shape: dimension denotations not set")
            continue
        d = layout_dim_denotations(len(vi.type.tensor_type.shape.dim), perm)
        if d is not None:
            edits.dims[name] = d
            notes.append(f"'{name}': dimension denotations [{', '.join(d)}] from its layout")
    return edits, notes
