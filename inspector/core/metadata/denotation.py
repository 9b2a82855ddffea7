"""Denotation checking: image metadata consistency, and dimension denotations propagated and verified.

Propagation follows the ONNX Dimension Denotation proposal: the graph inputs' denotations flow through each node
(Transpose permutes them, Conv and pools keep batch and channel, Reshape ends them). Format ops such as Conv and
the pools also *produce* [DATA_BATCH, DATA_CHANNEL, DATA_FEATURE...], so a converted model without any declared
denotation is still checked after its first convolution. Only contradictions are findings; an unknown axis never is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onnx import TensorProto

from inspector.core.io.onnx_bytes import copy_fields

from . import schema as ms
from .findings import Finding, fmt
from .edits import MetadataEdits
from .parsed import Memo, Parts

FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16}
INT8_TYPES = {TensorProto.UINT8, TensorProto.INT8}


# -- image metadata consistency -------------------------------------------------------------------------------------

def consistency_findings(model, parts: Parts | None = None) -> list[Finding]:
    """IMAGE tensors vs their shape, their dimension denotations and the model's Image.* metadata (`parts`: the
    model's, read anew when None)."""
    image = {k: v for k, (_, v) in ms.image_props(model).items() if v}
    fmt_value = _canonical(ms.PIXEL_FORMAT, image.get(ms.PIXEL_FORMAT))
    rng = _canonical(ms.PIXEL_RANGE, image.get(ms.PIXEL_RANGE))
    out: list[Finding] = []
    images = (parts or Memo().parts(model)).images()
    for vi in images:
        def add(kind, msg, code, name=vi.name, field=""):
            out.append(Finding("", f"IMAGE tensor '{name}': {msg}", kind, name, code=code,
                               field=field or f"dims:{name}"))

        dims = vi.shape
        if dims is None or len(dims) != 4:
            add("image", "an image needs a 4-D tensor, this one has "
                + ("no known shape" if dims is None else f"{len(dims)} axes"), "image-rank", field=f"type:{vi.name}")
        else:
            dens = [d.upper() for d in vi.dims]
            if ms.DATA_CHANNEL not in dens:
                add("image", f"dimension denotations {fmt(dens)} do not say which axis holds the channels "
                             "(expected one DATA_CHANNEL)", "image-channel-axis")
            elif fmt_value:
                want = ms.PIXEL_FORMAT_CHANNELS.get(fmt_value)
                c = dims[dens.index(ms.DATA_CHANNEL)]
                if want and c is not None and c != want:
                    add("image", f"{ms.PIXEL_FORMAT}={fmt_value} means {want} channel(s), "
                                 f"but its DATA_CHANNEL axis has {c}", "pixel-format-channels",
                        field=ms.PIXEL_FORMAT)
        if rng in ms.EIGHT_BIT_RANGES and vi.elem_type in FLOAT_TYPES:
            lo, hi = rng.split("_")[1:3]
            add("range", f"{ms.PIXEL_RANGE}={rng} on a float input: consumers will feed unnormalised values "
                         f"{lo}..{hi}; if the model expects normalised pixels, use Normalized_0_1 or Normalized_1_1",
                "range-unnormalised-float", field=ms.PIXEL_RANGE)
        elif rng and rng.startswith("Normalized") and vi.elem_type in INT8_TYPES:
            add("range", f"{ms.PIXEL_RANGE}={rng} on an 8-bit integer tensor, which cannot hold normalised values",
                "range-normalised-int", field=ms.PIXEL_RANGE)
        if not image:
            add("metadata", "no Image.* metadata (pixel format, gamma, range): consumers cannot prepare its pixels",
                "image-no-metadata", field=ms.PIXEL_FORMAT)
    if image and not images:
        out.append(Finding("", f"Image.* metadata ({', '.join(image)}) is set but no tensor is denoted IMAGE",
                           "metadata", code="image-metadata-unused", field=next(iter(image))))
    return out


def _canonical(key: str, value: str | None) -> str | None:
    """The documented spelling of an Image.* value (the ONNX documents match case-insensitively), else as is."""
    if value is None:
        return None
    return next((a for a in ms.IMAGE_KEYS[key] if a.lower() == value.strip().lower()), value)


# -- dimension denotation propagation and verification -----------------------------------------------------------

def propagate(model) -> tuple[dict[str, tuple[str, ...]], list[Finding]]:
    """Dimension denotations of every value reachable from the graph inputs and format ops, and the findings
    (a Linter propagates from the records of the models it read before: denotation_rules.Propagator).

    Returns value name -> one denotation per axis ("" where unknown); values whose rank or meaning is lost (after a
    Reshape, MatMul, Gemm ...) are absent.
    """
    from .denotation_rules import Propagator
    return Propagator(shape_view(model)).run()


LARGE_CONSTANT = 1024      # elements; the propagator's rules read only small constants (axes, scales, sizes)


def shape_view(model):
    """The model as the denotation propagator reads it: every node, value info and small initializer, and large
    initializers (weights) as their name, type and dims only. ONNX shape inference needs no more of them, and given
    the weights it serialised them and parsed them back, most of the metadata pass on a large model."""
    import math
    g = model.graph
    if all(math.prod(t.dims) <= LARGE_CONSTANT for t in g.initializer):
        return model
    light = type(model)()
    _copy_fields(light, model, skip="graph")
    _copy_fields(light.graph, g, skip="initializer")
    for t in g.initializer:
        if math.prod(t.dims) <= LARGE_CONSTANT:
            light.graph.initializer.append(t)
        else:
            light.graph.initializer.add(name=t.name, data_type=t.data_type, dims=t.dims)
    return light


def _copy_fields(dst, src, skip: str) -> None:
    copy_fields(dst, src, lambda f: f.name != skip)


# -- the metadata pass of a conversion ------------------------------------------------------------------------------

def io_layouts(result) -> dict[str, tuple[int, ...]]:
    """Graph input/output name -> its layout (perm of the TFLite axes) in a ConversionResult's ONNX model.

    Read from the shapes, so a Transpose the converter kept at the boundary (keep_io_layout) is seen as it is; the
    plan's perm decides when the shape cannot (H == W == C, or size-1 axes).
    """
    return {name: perm for name, perm in _io_map(result).values() if perm is not None}


def _io_map(result) -> dict[str, tuple[str, tuple[int, ...] | None]]:
    """TFLite I/O tensor name -> (ONNX graph input/output name, layout perm or None when the shape fits none)."""
    from inspector.core.layout import layout
    sg, g = result.graph.main, result.model.graph
    out = {}
    for indices, values in ((sg.inputs, g.input), (sg.outputs, g.output)):
        by_name = {v.name: v for v in values}
        for pos, t in enumerate(i for i in indices if i >= 0):
            tensor = sg.tensors[t]
            names = [n for n in (result.trace.tensor_values.get(t) or []) + [tensor.name] if n in by_name]
            vi = by_name[names[0]] if names else (values[pos] if pos < len(values) else None)
            if vi is None:
                continue
            rank = len(tensor.shape)
            shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim)
            fits = [p for p in (tuple(result.plan.perm(t, rank)), layout.identity(rank), layout.channels_first(rank))
                    if len(shape) == rank and all(s in (-1, d) for s, d in zip(shape, layout.apply(tensor.shape, p)))]
            out[tensor.name] = (vi.name, fits[0] if fits else None)
    return out


@dataclass(frozen=True)
class Reading:
    """What the metadata pass read of `model` before editing it, for the checker that follows on the same model
    (Linter.lint_read): its Propagator (parts, shapes, outcomes) and the names of the value infos its edits changed."""
    model: Any
    propagator: Any
    edited: frozenset


def annotate(result, edits: MetadataEdits | None = None) -> list[str]:
    """The metadata pass (see annotate_read); returns notes for the user."""
    return annotate_read(result, edits)[0]


def annotate_read(result, edits: MetadataEdits | None = None) -> tuple[list[str], Reading, list[dict] | None]:
    """The metadata pass of a conversion, in place on result.model (the result itself is frozen: its metadata
    mapping is returned, None without TFLite metadata); returns notes for the user.

    1. dimension denotations of the graph inputs from their layouts (a 4-D input read as TFLite's NHWC), kept only
       where propagation through the graph does not contradict them, then the outputs' from that propagation,
    2. the TFLite metadata hints (IMAGE, Image.* keys, doc string) as a pre-fill,
    3. the user's `edits` on top (they win), validated: MetadataError when invalid, and the model is untouched.
    Also returns its Reading of the model. (An Annotator gives the same after a pin, reading again only what
    the pin changed.)
    """
    return Annotator().annotate_read(result, edits)


class Annotator:
    """The metadata pass for models annotated one after another (the window's re-runs after a pin): `memo`, the
    records of the models read before (parsed.Memo; shared with a Linter for the checker that follows), makes
    only what a pin changed be read again. The same notes, edits and Reading as annotate_read."""

    def __init__(self, memo: Memo | None = None):
        self.memo = memo if memo is not None else Memo()

    def annotate(self, result, edits: MetadataEdits | None = None) -> list[str]:
        return self.annotate_read(result, edits)[0]

    def annotate_read(self, result, edits: MetadataEdits | None = None
                      ) -> tuple[list[str], Reading, list[dict] | None]:
        """annotate_read (see there)."""
        io = _io_map(result)
        inputs = {vi.name for vi in result.model.graph.input}
        dims, notes, prop = self._io_dims(result.model,
                                          {n: p for n, p in io.values() if p is not None and n in inputs})
        meta, prefill, mapping = None, MetadataEdits(), None
        if "TFLITE_METADATA" in result.graph.metadata:     # its reader (and flatbuffers) only when there is some
            from .tflite import edits_from_metadata, read_tflite_metadata
            meta = read_tflite_metadata(result.graph)
            prefill = edits_from_metadata(meta)
        if meta is not None:
            import json

            from .tflite import field_mapping
            prefill.types = {io[t][0]: v for t, v in prefill.types.items() if t in io}
            kept = {io[t][0]: v for t, v in meta.normalization.items() if t in io}
            if kept:
                prefill.props[ms.NORMALIZATION_KEY] = json.dumps(kept)
            mapping = [_renamed(m, io) for m in field_mapping(meta)]
            notes += [f"type denotation of '{io[t][0]}' = {v}, from {meta.sources.get(t, 'TFLite metadata')}"
                      for t, v in meta.types.items() if t in io]
            notes += [f"{k} = {v}, from {meta.sources.get(k, 'TFLite metadata')}" for k, v in meta.image.items()]
            notes += meta.notes + meta.warnings
        final = dims.merged(prefill).merged(edits or MetadataEdits())
        notes += final.apply(result.model)
        return notes, Reading(result.model, prop, frozenset(final.types) | frozenset(final.dims)), mapping

    def _io_dims(self, model, input_layouts) -> tuple[MetadataEdits, list[str], Any]:
        """Input denotations from layouts that the graph does not contradict, and the outputs' propagated ones."""
        from .denotation_rules import Propagator
        from .edits import layout_edits
        guessed, notes = layout_edits(model, input_layouts)
        prop = Propagator(shape_view(model), self.memo)
        accepted: dict[str, list[str]] = {}
        dens, found = prop.run(accepted)            # the propagation from what is accepted so far (runs are pure)
        before = {f.message for f in found}
        for name, d in guessed.dims.items():
            first: list[str] = []           # what the first candidate's run found wrong
            for cand in (d, _channels_first_reading(d)):
                if cand is None:
                    continue
                tried, after = prop.run({**accepted, name: cand})
                new = [f.message for f in after if f.message not in before]
                first = first or new
                if not new:
                    accepted[name], before, dens = cand, {f.message for f in after}, tried
                    if cand is not d:          # e.g. a PyTorch-origin input, [1, 3, H, W] in TFLite already
                        notes = [n for n in notes if not n.startswith(f"'{name}':")]
                        notes.append(f"'{name}': dimension denotations {fmt(cand)}: the graph reads it channels-first "
                                     "(its TFLite shape already is)")
                    break
            else:
                notes = [n for n in notes if not n.startswith(f"'{name}':")]
                notes.append(f"'{name}': its layout suggests {fmt(d)}, but the graph contradicts it ({first[0]}); "
                             "dimension denotations not set")
        out = MetadataEdits(dims=dict(accepted))
        for vi in model.graph.output:
            d = dens.get(vi.name)
            if d and any(d) and len(d) == len(vi.type.tensor_type.shape.dim) and vi.name not in out.dims:
                out.dims[vi.name] = list(d)
                notes.append(f"'{vi.name}': dimension denotations {fmt(d)} propagated from the inputs")
        return out, notes, prop


def _renamed(entry: dict, io) -> dict:
    """A field mapping entry with the TFLite tensor names it quotes replaced by their ONNX graph names."""
    onnx_field = entry["onnx"]
    for t, (name, _perm) in io.items():
        onnx_field = onnx_field.replace(f"'{t}'", f"'{name}'")
    return {**entry, "onnx": onnx_field}


def _channels_first_reading(d: list[str]) -> list[str] | None:
    """[batch, spatial..., channel] read the other way round: [batch, channel, spatial...]; None otherwise."""
    from .schema import DATA_CHANNEL
    if len(d) >= 3 and d[-1] == DATA_CHANNEL and DATA_CHANNEL not in d[:-1]:
        return [d[0], DATA_CHANNEL] + d[1:-1]
    return None
