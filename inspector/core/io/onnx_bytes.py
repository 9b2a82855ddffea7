"""A ModelProto's serialised bytes in pieces: exactly SerializeToString()'s bytes, without holding them all.

SerializeToString() of a model with large weights holds its bytes twice at once (protobuf encodes into a buffer of
its own, then copies that into the bytes object) on top of the model itself, which holds every weight already: a
1 GB model needed 3 GB beyond its reader's copy. Here each large initializer's raw_data is written on its own, so
at most one weight is copied at a time.

The bytes are protobuf's: fields in field-number order, each embedded message as its tag, its length and its own
fields. The model is cut around graph (field 7), the graph around its initializers (field 5) and each large tensor
around raw_data (field 9); every other part is serialised by protobuf itself, so only those three cuts are written
by hand (tests/test_onnx_bytes.py compares the result with SerializeToString() byte for byte).
"""
from __future__ import annotations

from typing import Any, Iterator

# Fixed-size element types (TensorProto.DataType -> bytes per element): their raw_data length follows from dims.
ITEM_BYTES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8}
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_RAW_DATA = 7, 5, 9
_EXTERNAL = 1           # TensorProto.DataLocation.EXTERNAL
_VALUES_READ = {6, 7}   # int32, int64: what shapes, axes, pads and counts are given in
BIG = 1 << 16           # raw_data of this many bytes or more is written on its own (smaller: with what is around
                        # it): a weight's bytes copied out are faster than protobuf's encoder, which grows its buffer


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, length: int) -> bytes:
    """The tag and length of a length-delimited field."""
    return _varint(number << 3 | 2) + _varint(length)


def copy_fields(dst, src, keep) -> None:
    """Set in `dst` every field of `src` whose descriptor `keep` accepts (repeated and message fields copied). A field
    `keep` refuses is never read: ListFields would copy each present bytes field out (a weight's raw_data) first."""
    for fd in src.DESCRIPTOR.fields:
        if not keep(fd):
            continue
        if fd.is_repeated:
            items = getattr(src, fd.name)
            if len(items):
                getattr(dst, fd.name).extend(items)
        elif src.HasField(fd.name):
            if fd.message_type is not None:
                getattr(dst, fd.name).CopyFrom(getattr(src, fd.name))
            else:
                setattr(dst, fd.name, getattr(src, fd.name))


_TENSOR = ("name", "dims", "data_type", "raw_data")
_OTHER_FIELDS: list = []            # TensorProto's other fields (found at the first call: ONNX is not imported here)


def add_tensor(into, tensor) -> None:
    """into.append(tensor) (`into`: a repeated TensorProto field), a big one (BIG bytes of raw_data or more) from its
    fields: append (a MergeFrom) of a 4 MB weight took ten times a copy's time, and most of a big model's way into
    its graph. A tensor of a name, a type, dims and raw_data alone (what the converter makes) is set in one call."""
    if raw_length(tensor) < BIG:
        into.append(tensor)
        return
    if not _OTHER_FIELDS:
        _OTHER_FIELDS.extend(f for f in tensor.DESCRIPTOR.fields if f.name not in _TENSOR)
    has = tensor.HasField
    if has("name") and has("data_type") and \
            not any(len(getattr(tensor, f.name)) if f.is_repeated else has(f.name) for f in _OTHER_FIELDS):
        into.add(name=tensor.name, dims=tensor.dims, data_type=tensor.data_type, raw_data=tensor.raw_data)
    else:
        copy_fields(into.add(), tensor, lambda fd: True)


def _part(msg, keep) -> bytes:
    """`msg`'s fields whose numbers `keep` accepts, serialised (a new message: no field is shared)."""
    part = type(msg)()
    copy_fields(part, msg, lambda fd: keep(fd.number))
    return part.SerializeToString()


def raw_length(tensor) -> int:
    """len(tensor.raw_data) without reading it where its type has whole bytes per element (reading copies it;
    ByteSize serialises it): its dims times its element size, which is what the converter
    writes. Other types (strings, 4-bit) are read."""
    if not tensor.HasField("raw_data"):
        return 0
    size = ITEM_BYTES.get(tensor.data_type)
    if size is None:
        return len(tensor.raw_data)
    for d in tensor.dims:
        size *= d
    return size


def _cut(tensor, big: int) -> int | None:
    """The raw_data length of a tensor written on its own: of a fixed-size type, `big` bytes or more (as its type
    and shape say), else None."""
    if tensor.data_type not in ITEM_BYTES or not tensor.HasField("raw_data") or tensor.data_location:
        return None
    n = raw_length(tensor)
    return n if n >= big else None


def _big(tensor, big: int) -> list | None:
    """[head bytes, raw_data length, tail bytes] of a tensor written on its own (_cut), else None."""
    n = _cut(tensor, big)
    if n is None:
        return None
    return [_part(tensor, lambda k: k < _TENSOR_RAW_DATA), n, _part(tensor, lambda k: k > _TENSOR_RAW_DATA)]


def _inner(cut: list | None, data: bytes | None) -> int:
    """The bytes of an initializer's message: its serialisation (`data`), or a cut one's head, raw_data and tail."""
    if cut is None:
        return len(data or b"")
    return len(cut[0]) + len(_field(_TENSOR_RAW_DATA, cut[1])) + cut[1] + len(cut[2])


def pieces(model, big: int | None = None) -> tuple[int, Iterator[bytes]]:
    """(length, pieces): the pieces joined are model.SerializeToString(). One piece when no initializer of the main
    graph holds `big` (default BIG) bytes or more of raw_data. ValueError while the pieces are made when a large
    tensor's raw_data is not the size its type and shape say (the ONNX checker's rule)."""
    big = BIG if big is None else big
    graph = model.graph
    cuts = [_big(t, big) for t in graph.initializer] if model.HasField("graph") else []
    if not any(cuts):
        data = model.SerializeToString()
        return len(data), iter((data,))
    small = [None if cut else t.SerializeToString() for t, cut in zip(graph.initializer, cuts)]
    inner = [_inner(cut, data) for cut, data in zip(cuts, small)]
    graph_head = _part(graph, lambda k: k < _GRAPH_INITIALIZER)
    graph_tail = _part(graph, lambda k: k > _GRAPH_INITIALIZER)
    graph_size = len(graph_head) + sum(len(_field(_GRAPH_INITIALIZER, n)) + n for n in inner) + len(graph_tail)
    model_head = _part(model, lambda k: k < _MODEL_GRAPH) + _field(_MODEL_GRAPH, graph_size)
    model_tail = _part(model, lambda k: k > _MODEL_GRAPH)

    def each() -> Iterator[bytes]:
        yield model_head + graph_head
        for tensor, cut, data, n_inner in zip(graph.initializer, cuts, small, inner):
            if cut is None:
                yield _field(_GRAPH_INITIALIZER, n_inner) + (data or b"")     # (data: its serialisation)
                continue
            head, n, tail = cut
            raw = tensor.raw_data
            if len(raw) != n:
                raise ValueError(f"initializer {tensor.name!r}: {len(raw)} bytes of raw_data where its type and "
                                 f"shape say {n}")
            yield _field(_GRAPH_INITIALIZER, n_inner) + head + _field(_TENSOR_RAW_DATA, n)
            yield raw
            del raw
            yield tail
        yield graph_tail + model_tail

    return len(model_head) + graph_size + len(model_tail), each()


def light(model, location: str, big: int | None = None) -> tuple[Any, list]:
    """(a copy of `model`, the tensors left out of it; `model` itself and [] when none is): the main graph's
    initializers that `pieces` writes on their own (a fixed-size type, `big` bytes of raw_data or more) become
    external-data references to the file `location`, their name, type, dims and every other field kept; the rest of
    the model is copied as it is. What the ONNX checker reads of a big model: its structure without the weights'
    bytes, which are never read here. Integer tensors of the types shape inference reads the values of (a
    Reshape's shape, a Slice's starts) stay whole: it cannot read a reference."""
    big = BIG if big is None else big
    graph = model.graph
    out_of = lambda t: t.data_type not in _VALUES_READ and _cut(t, big) is not None      # noqa: E731
    if not model.HasField("graph") or not any(out_of(t) for t in graph.initializer):
        return model, []
    out = type(model)()
    copy_fields(out, model, lambda fd: fd.number != _MODEL_GRAPH)
    copy_fields(out.graph, graph, lambda fd: fd.number != _GRAPH_INITIALIZER)
    left: list = []
    for tensor in graph.initializer:
        if not out_of(tensor):
            add_tensor(out.graph.initializer, tensor)
            continue
        ref = out.graph.initializer.add()
        copy_fields(ref, tensor, lambda fd: fd.number != _TENSOR_RAW_DATA)
        ref.data_location = _EXTERNAL
        ref.external_data.add(key="location", value=location)
        left.append(tensor)
    return out, left
