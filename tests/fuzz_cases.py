"""Fuzz cases: seed models, case generation from a seed, and the pipeline one case runs through.

A case is a pure function of its seed number and the seed models: the same number rebuilds the same bytes, so a
failure is reproduced with `python -m tests.fuzz --repro SEED`. Seeds are the small corpus TFLite files, ONNX
models converted from some of them, and ONNX models made here with control flow and external data.
"""
from __future__ import annotations

import random
import zlib
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from inspector.core.ir.errors import InspectorError
from inspector.core.ir.graph import Graph

from .fuzz_mutators import CONTROL_NAMES, O_STRUCTURAL, STRUCTURAL, mutate_bytes, rebuild, s_metadata

SEED_LIMIT = 3_000_000        # bytes: larger corpus files make a case slow without reaching new code
SECRET = b"FUZZ-SECRET-OUTSIDE-THE-MODEL-FOLDER"


# -- seeds ---------------------------------------------------------------------------------------------------------

def corpus_seeds(corpus: Path) -> list[tuple[str, bytes]]:
    files = sorted(p for p in corpus.glob("*/*.tflite") if p.stat().st_size <= SEED_LIMIT)
    return [(str(p.relative_to(corpus)), p.read_bytes()) for p in files]


def onnx_seeds(tflite: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """Converted corpus models (a spread of sizes) plus hand-made models with control flow."""
    from inspector.core.emit.convert import convert
    from inspector.core.io.tflite_reader import read_tflite_bytes
    out = []
    for name, data in tflite[::4]:
        try:
            out.append((name.replace(".tflite", ".onnx"), convert(read_tflite_bytes(data, name)).model
                        .SerializeToString()))
        except Exception:       # noqa: BLE001 - a seed that does not convert is simply not a seed
            continue
    out.append(("made/if_loop.onnx", _control_flow_model().SerializeToString()))
    out.append(("made/external.onnx", _external_model("weights.bin").SerializeToString()))
    return out


def _control_flow_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 5, 7])
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 3, 5, 7])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 3, 5, 7])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="branch")
    g = helper.make_graph([node], "cf", [x, c], [y])
    g.input[0].type.denotation = "IMAGE"
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _external_model(location: str, offset: int = 0, length: int = 16) -> onnx.ModelProto:
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], [0.0] * 4)
    w.ClearField("float_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = w.external_data.add()
        e.key, e.value = k, v
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "ext", [x], [y], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def prepare_folder(folder: Path) -> Path:
    """model/ beside a secret file: external data reaching the secret has escaped the model's folder."""
    model_dir = folder / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    (folder / "secret.bin").write_bytes(SECRET * 4)
    (model_dir / "weights.bin").write_bytes(np.arange(64, dtype=np.float32).tobytes())
    link = model_dir / "link.bin"
    if not link.is_symlink():
        link.symlink_to(folder / "secret.bin")
    return model_dir


# -- cases ---------------------------------------------------------------------------------------------------------

ATTACK_EVERY = 10             # every tenth case is an attack of tests/fuzz_attacks.py (special files, chains...)


def make_case(seed: int, tfl: list, onx: list, folder: Path) -> tuple[str, str, bytes]:
    """(format, description, bytes) of case `seed`; a mutation the builder cannot write is drawn again."""
    if seed % ATTACK_EVERY == ATTACK_EVERY - 1:
        from .fuzz_attacks import make_attack
        what, data = make_attack(random.Random(seed))
        return "attack", what, data
    for attempt in range(8):
        try:
            return _make_case(random.Random(seed if attempt == 0 else f"{seed}/{attempt}"), tfl, onx, folder)
        except Exception:              # noqa: BLE001 - the generator's own limits, not the product's
            continue
    return _make_case(random.Random(f"{seed}/bytes"), tfl, onx, folder, roll=0.0)


def _make_case(rng, tfl: list, onx: list, folder: Path, roll: float | None = None) -> tuple[str, str, bytes]:
    roll = rng.random() if roll is None else roll
    if roll < 0.40:
        name, data = rng.choice(tfl)
        return "tflite", f"bytes of {name}", mutate_bytes(rng, data)
    if roll < 0.70:
        from inspector.core.io.tflite_reader import read_tflite_bytes
        with_meta = [x for x in tfl if b"TFLITE_METADATA" in x[1]]
        name, data = rng.choice(with_meta) if with_meta and rng.random() < 0.1 else rng.choice(tfl)
        g = read_tflite_bytes(data, name)
        muts = [s_metadata] if "TFLITE_METADATA" in g.metadata and rng.random() < 0.5 else \
            rng.sample(STRUCTURAL, rng.choice([1, 1, 2]))
        for fn in muts:
            fn(rng, g)
        out = rebuild(g)
        if rng.random() < 0.15:
            out = mutate_bytes(rng, out)
        return "tflite", f"{'+'.join(f.__name__ for f in muts)} of {name}", out
    if roll < 0.85:
        name, data = rng.choice(onx)
        return "onnx", f"bytes of {name}", mutate_bytes(rng, data, onnx_format=True)
    name, data = rng.choice(onx)
    m = onnx.ModelProto.FromString(data)
    muts = rng.sample(O_STRUCTURAL, rng.choice([1, 1, 2]))
    tail = b"".join(fn(rng, m) or b"" for fn in muts)
    out = m.SerializeToString().replace(b"{abs}", str(folder.parent).encode()) + tail
    return "onnx", f"{'+'.join(f.__name__ for f in muts)} of {name}", out


def random_edits(rng, names: list[str]):
    """MetadataEdits a user could ask for: valid ones half the time, else hostile names and values."""
    from inspector.core.metadata.edits import MetadataEdits
    if names and rng.random() < 0.5:
        name = rng.choice(names)
        return MetadataEdits(types={name: rng.choice(["IMAGE", "tensor", ""])},
                             image={"Image.BitmapPixelFormat": rng.choice(["Rgb8", "bgr8"]),
                                    "image.nominalpixelrange": "Normalized_0_1"},
                             props={rng.choice(CONTROL_NAMES[1:]): rng.choice(CONTROL_NAMES)},
                             doc_string=rng.choice(CONTROL_NAMES), model_version=rng.choice([None, 3]))
    pick = lambda: rng.choice(names + CONTROL_NAMES[:4]) if names else rng.choice(CONTROL_NAMES)  # noqa: E731
    dims = ["DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE", "data_time", "?", "", "BOGUS", "\x00"]
    return MetadataEdits(
        types={pick(): rng.choice(["IMAGE", "tensor", "", "AUDIO", "NOPE\n"]) for _ in range(rng.randint(0, 2))},
        dims={pick(): [rng.choice(dims) for _ in range(rng.randint(0, 5))] for _ in range(rng.randint(0, 2))},
        image={rng.choice(["Image.BitmapPixelFormat", "image.nominalpixelrange", "Image.Bogus",
                           "Image.ColorSpaceGamma"]): rng.choice(["Rgb8", "bgr8", "Normalized_0_1", "SRGB", None,
                                                                 "\x1b[2J"]) for _ in range(rng.randint(0, 2))},
        props={rng.choice(CONTROL_NAMES): rng.choice(CONTROL_NAMES + [None]) for _ in range(rng.randint(0, 2))},
        doc_string=rng.choice([None, "", "doc\x00"]), model_version=rng.choice([None, 3, "x", 2**70]),
    )


def hostile_dict(rng) -> dict:
    """What a damaged or hand-edited session file may hold where MetadataEdits.to_dict() wrote its fields."""
    junk = [None, 5, 2**70, -1.5, [], {}, ["DATA_BATCH"], "IMAGE", "\udc80", {"x": 1}, True]
    d = {}
    for key in rng.sample(["types", "dims", "image", "props", "doc_string", "producer", "model_version",
                           "bogus"], rng.randint(1, 4)):
        d[key] = rng.choice(junk + [{rng.choice(CONTROL_NAMES): rng.choice(junk)}])
    return d


def edits_for(rng, names: list[str]):
    from inspector.core.metadata.edits import MetadataEdits
    if rng.random() < 0.25:
        return MetadataEdits.from_dict(hostile_dict(rng))
    return random_edits(rng, names)


def random_pins(rng, g: Graph) -> dict | None:
    """Layout pins as a user or a session file could give them, by name or index, sane or not."""
    if rng.random() < 0.7 or not g.main.tensors:
        return None
    pins = {}
    for _ in range(rng.randint(1, 3)):
        t = rng.choice(g.main.tensors)
        key = rng.choice([t.name, t.index, str(t.index), "no such tensor", -3, 10**9])
        perm = list(range(t.rank))
        rng.shuffle(perm)
        pins[key] = rng.choice([perm, "NCHW", "NHWC", "nchw", "bogus", [0, 0], [], list(range(t.rank + 1)), 7])
    return pins


def _session(rng, g: Graph, data: bytes, folder: Path, stage: str) -> str:
    """A saved session file, damaged or hand-edited, loaded onto the model and converted again."""
    import json

    from inspector.core.session.session import Session
    from inspector.core.session.session_file import SESSION_VERSION
    model = folder / "session_model.tflite"
    model.write_bytes(data)
    junk = [None, 5, "x", [], {}, True, 2**70, -1, "NCHW", [0, 3, 1, 2], {"a": "b"}]
    names = [t.name for t in g.main.tensors] or ["x"]
    doc = {"version": rng.choice([SESSION_VERSION] * 4 + [3, "1", None]),
           "model": rng.choice(CONTROL_NAMES), "model_sha256": rng.choice(junk),
           "pins": rng.choice([{rng.choice(names): rng.choice(junk)}, rng.choice(junk), {}]),
           "options": rng.choice([{rng.choice(["opset", "keep_io_layout", "float_io", "bogus"]): rng.choice(junk)},
                                  rng.choice(junk)]),
           "metadata": rng.choice([hostile_dict(rng), rng.choice(junk), {}])}
    path = folder / "model.inspector.json"
    path.write_text(json.dumps(doc))
    session = Session(path=str(model), graph=g)
    session.load_decisions(str(path))
    session.convert(check=False)
    return "session-" + stage


def run_case(fmt: str, data: bytes, seed: int, folder: Path) -> str:
    """The pipeline a user's file goes through; returns how far it got. Only InspectorError may escape."""
    rng = random.Random(seed ^ 0x5EED)
    if fmt == "attack":
        from .fuzz_attacks import run_attack
        return run_attack(data, folder)
    if fmt == "tflite":
        from inspector.core.emit.convert import convert
        from inspector.core.metadata.denotation import annotate
        from inspector.core.metadata.lint import lint
        from inspector.core.io.onnx_reader import read_onnx_bytes
        from inspector.core.io.tflite_reader import read_tflite_bytes
        g = read_tflite_bytes(data, "fuzz.tflite")
        stage = "read"
        result = convert(g, pins=random_pins(rng, g), keep_io_layout=rng.random() < 0.2)
        stage = "converted"
        names = [vi.name for vi in list(result.model.graph.input) + list(result.model.graph.output)]
        try:
            annotate(result, edits_for(rng, names))
            stage = "edited"
        except InspectorError:
            stage = "edit-refused"
        lint(result.model)
        read_onnx_bytes(result.model.SerializeToString(), "converted.onnx")
        if rng.random() < 0.2:
            stage = _session(rng, g, data, folder, stage)
        return stage
    from inspector.core.metadata.lint import lint
    from inspector.core.io.onnx_reader import read_onnx
    path = folder / "model.onnx"
    path.write_bytes(data)
    g = read_onnx(path)
    _no_escape(g)
    from inspector.cli._metadata_args import load_onnx
    model = load_onnx(str(path))                     # what `edit` and `check` open it with
    names = [t.name for sg in g.subgraphs[:1] for t in sg.tensors]
    try:
        edits_for(rng, names).apply(model)
        stage = "edited"
    except InspectorError:
        stage = "edit-refused"
    lint(model)
    return stage


class Escaped(Exception):
    """External data was read from outside the model's folder."""


def _no_escape(g: Graph) -> None:
    for sg in g.subgraphs:
        for t in sg.tensors:
            if t.data is not None and SECRET[:16] in np.ascontiguousarray(t.data).tobytes():
                raise Escaped(f"tensor '{t.name}' holds bytes of a file outside the model's folder")


def fingerprint(data: bytes) -> str:
    return f"{len(data)}b/{zlib.crc32(data):08x}"
