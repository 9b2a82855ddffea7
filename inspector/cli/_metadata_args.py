"""Metadata flags shared by `convert` and `edit`, and the ONNX file helpers of `edit` and `check`."""
from __future__ import annotations

from inspector.core.metadata import schema as ms
from inspector.core.ir.errors import InspectorError, MetadataError, ModelLoadError


def add_target_argument(parser) -> None:
    """--target: the metadata consumers registered in core/metadata/targets/, the default first."""
    from inspector.core.metadata import targets
    parser.add_argument("--target", choices=targets.names(), default=targets.DEFAULT,
                        help="the consumer whose rules apply: "
                             + "; ".join(f"{t.name} {t.summary}" for t in targets.REGISTRY.values()))


def add_metadata_arguments(parser) -> None:
    g = parser.add_argument_group(
        "ONNX metadata", "Values are matched case-insensitively and written in canonical spelling; each flag "
        "except the Image ones can be repeated. An invalid value exits 1 with the allowed list.")
    g.add_argument("--denote", action="append", default=[], metavar="TENSOR=TYPE",
                   help=f"type denotation of a tensor: {', '.join(ms.TYPE_DENOTATIONS)}")
    g.add_argument("--dims", action="append", default=[], metavar="TENSOR=D,D,...",
                   help="dimension denotation per axis, e.g. x=DATA_BATCH,DATA_CHANNEL,DATA_FEATURE,DATA_FEATURE "
                        f"(one of {', '.join(ms.DIM_DENOTATIONS)}; '?' leaves an axis blank)")
    g.add_argument("--pixel-format", metavar="F",
                   help=f"{ms.PIXEL_FORMAT}: {', '.join(ms.IMAGE_KEYS[ms.PIXEL_FORMAT])} (applies to every IMAGE)")
    g.add_argument("--gamma", metavar="G", help=f"{ms.GAMMA}: {', '.join(ms.IMAGE_KEYS[ms.GAMMA])}")
    g.add_argument("--pixel-range", metavar="R",
                   help=f"{ms.PIXEL_RANGE}: {', '.join(ms.IMAGE_KEYS[ms.PIXEL_RANGE])}")
    g.add_argument("--metadata", action="append", default=[], metavar="KEY=VALUE",
                   help="a metadata_props entry (existing entries are kept; an empty VALUE removes KEY)")
    g.add_argument("--doc-string", metavar="TEXT", help="the model's doc_string")
    g.add_argument("--model-version", metavar="N", help="the model's model_version (an integer)")


def _pair(text: str, flag: str, shape: str, last: bool) -> tuple[str, str]:
    sep = text.rfind("=") if last else text.find("=")
    if sep <= 0:
        raise MetadataError(f"{flag} expects {shape}, got '{text}'")
    return text[:sep].strip(), text[sep + 1:].strip()


def edits_from_args(args):
    """The MetadataEdits the flags ask for, validated (MetadataError lists the allowed values)."""
    from inspector.core.metadata.edits import MetadataEdits
    e = MetadataEdits()
    for text in args.denote:
        tensor, value = _pair(text, "--denote", "TENSOR=TYPE", last=True)
        e.types[tensor] = ms.type_denotation(value)
    for text in args.dims:
        tensor, value = _pair(text, "--dims", "TENSOR=D,D,...", last=True)
        e.dims[tensor] = ms.dim_denotations(value.split(",")) if value else []
    for key, value in ((ms.PIXEL_FORMAT, args.pixel_format), (ms.GAMMA, args.gamma),
                       (ms.PIXEL_RANGE, args.pixel_range)):
        if value is not None:
            e.image[key] = ms.image_value(key, value)[1]
    for text in args.metadata:
        key, value = _pair(text, "--metadata", "KEY=VALUE", last=False)
        e.props[key] = value if value else None
    e.doc_string = args.doc_string
    e.model_version = args.model_version
    e.normalized()
    return e


def load_onnx(path: str):
    """An onnx.ModelProto, or ModelLoadError with a readable reason."""
    from inspector.core.io.loader import sniff
    from inspector.core.io.onnx_reader import load_proto, read_onnx
    if sniff(path) != "onnx":
        raise ModelLoadError(path, "this is a TFLite model; convert it to ONNX first (layout-inspector convert)")
    read_onnx(path)          # refuses hostile files first: external data outside the folder, sizes, depth
    return load_proto(path)  # read through the same guards (onnx.load would block on a FIFO)


def check_and_save(model, path: str, out) -> None:
    """onnx.checker, then an atomic write through `out` (an atomic.OutputSet holding `path`): nothing is written
    when either fails."""
    import onnx
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        raise InspectorError(f"the edited model fails the ONNX checker, nothing written: {e}") from None
    with out:
        out.write(path, model.SerializeToString())
