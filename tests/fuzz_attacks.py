"""Attack cases for the fuzz harness: the classes of issue 22 drawn at random and run through the CLI in-process.

A case is a JSON spec (its bytes are what `--repro --save` writes). Classes: WHILE/IF chains and cycles, ONNX
external data naming special targets, special files at every input and output role, hostile session values,
hostile option values, hostile custom ops. The contract, checked after every case: the exit code is 0, 1 or 2; a
failure prints one `error:` line and no traceback; nothing in the case folder that was not a declared output has
changed (a FIFO stays a FIFO, the input model keeps its bytes). The harness adds its watchdog (a hang) and its
address-space limit (an allocation). A violation raises Broken, which the harness reports as a failure.

The batch class (issue 32; not drawn at random: it forks workers, and tests/test_attack_acceptance.py runs it) adds
to the contract: every stderr line is a row's progress line, a `note:` or the one last `error:` line; a usage error
(exit 2) is that line alone with nothing created; exit 1 names a failed row or has its error line; no temporary of
ours is left anywhere.
"""
from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
import stat
import sys
from pathlib import Path

from .fuzz_structural import while_chain

CLASSES = ("while_chain", "external_data", "special_file", "session_value", "option_value", "custom_op",
           "unverified", "onnx_nesting", "desktop")
MEDIAPIPE = ["Convolution2DTransposeBias", "MaxPoolingWithArgmax2D", "MaxUnpooling2D", "TransformLandmarks",
             "TransformTensorBilinear", "Landmarks2TransformMatrix", "FlexAddV2", "", "\x1b[31m", "a" * 300]


class Broken(Exception):
    """The product broke the contract (not an InspectorError: the harness counts it as a failure)."""


# -- specs --------------------------------------------------------------------------------------------------------

def make_attack(rng: random.Random) -> tuple[str, bytes]:
    kind = rng.choice(CLASSES)
    spec = {"class": kind, **globals()[f"_spec_{kind}"](rng)}
    return f"attack {kind} {json.dumps(spec)[:120]}", json.dumps(spec).encode()


def _spec_while_chain(rng):
    return {"depth": rng.choice([1, 2, 3, 5, 6, 9, 10, 12, 25, 30, 200, 1000]), "kind": rng.choice(["WHILE", "IF"]),
            "cycle": rng.random() < 0.2}


def _spec_external_data(rng):
    return {"target": rng.choice(["fifo", "folder", "loop", "dangling", "dev_zero", "outside", "weights",
                                  "past_2gib"]),
            "offset": rng.choice(["0", "4", "-8", "99999999999", "x", ""]),
            "length": rng.choice(["16", "0", "-1", "4096", str(2**62), None]),
            "command": rng.choice(["info", "check", "edit"])}


def _spec_special_file(rng):
    return {"role": rng.choice(["model", "session", "output", "report"]),
            "special": rng.choice(["fifo", "folder", "loop", "long", "dangling_dir", "dev_zero", "device", "input",
                                   "output"])}


def _spec_session_value(rng):
    return {"text": rng.choice(_SESSION_TEXTS)(rng)}


def _spec_option_value(rng):
    argv = []
    for flag, values in _OPTIONS:
        if rng.random() < 0.4:
            argv += [flag, rng.choice(values)]
    return {"argv": argv}


def _spec_custom_op(rng):
    return {"code": rng.choice(MEDIAPIPE), "options": [rng.randrange(256) for _ in range(rng.choice([0, 1, 7, 64]))],
            "inputs": rng.choice([0, 1, 2, 3]), "rank": rng.choice([0, 1, 3, 4]), "allow": rng.random() < 0.6}


def _spec_unverified(rng):
    return {"position": rng.choice(["terminator", "random"]), "seed": rng.randrange(1 << 30)}


def _spec_onnx_nesting(rng):
    return {"depth": rng.choice([1, 30, 31, 32]), "shaped": rng.random() < 0.5,
            "command": rng.choice(["info", "check"])}


def _spec_desktop(rng):
    return {"xdg": rng.choice(["file", "icons_file", "dangling", "ok"]), "uninstall": rng.random() < 0.3}


def _deep(rng):
    n = rng.choice([17, 1000, 100_000])
    return '{"version": 1, "pins": ' + "[" * n + "]" * n + "}"


_SESSION_TEXTS = [
    lambda r: '{"version": 1, "metadata": {"model_version": %s}}' % r.choice(["Infinity", "-Infinity", "NaN",
                                                                              "1e999", "9" * 5000, "1.5"]),
    _deep,
    lambda r: r.choice(["[]", "null", '"x"', "7", "{", "", "\ufeff{}", '{"version": 1}' * 2]),
    lambda r: json.dumps({"version": 1, "pins": {r.choice(["\u00b2", "x", "", "\x00", "0", "99", "y"]):
                                                 r.choice(["NHWC", "keep", "QQQQ", 5, None, [0, 2, 1, 3], "\u00b2"])}}),
    lambda r: json.dumps({"version": 1, "options": {r.choice(["opset", "float_io", "turbo", "keep_io_layout"]):
                                                    r.choice([1, 18, 10**30, "18", True, None, 2.5, -1])}}),
    lambda r: json.dumps({"version": r.choice([1, 2, "1", None, True]), "model_sha256": r.choice([5, "", None]),
                          "metadata": {"props": {"k": r.choice([5, "v", None, "\x1b]0;t\x07"])},
                                       "dims": r.choice([{"x": "DATA_BATCH"}, {"x": [5]}, []])}}),
]

_OPTIONS = [
    ("--opset", ["-1", "0", "1", "17", "18", "21", "22", "1" + "0" * 30, "x", "1e3"]),
    ("--pin", ["x=NHWC", "\u00b2=NHWC", "=", "x=", "x=0,0,0,0", "x=" + "9" * 5000, "x=keep", "nope=NCHW",
               "x=0,3,1,2", "x=NCHW,NCHW"]),
    ("--model-version", ["-1", "1" + "0" * 30, "x", "9" * 5000, "3"]),
    ("--metadata", ["=", "k=", "=v", "\x1b=1", "k=" + "v" * 10000]),
    ("--denote", ["x=IMAGE", "x=", "=IMAGE", "y=AUDIO", "x=\x00"]),
    ("--pixel-format", ["Rgb8", "Gray8", "bogus", ""]),
    ("--dims", ["x=DATA_BATCH", "x=?,?,?,?,?,?", "x=", "x=" + ",".join(["DATA_FEATURE"] * 40)]),
]


# -- running ------------------------------------------------------------------------------------------------------

def run_attack(data: bytes, folder: Path) -> str:
    """Build the case's files in a fresh folder, run its command, check the contract; returns the outcome."""
    spec = json.loads(data)
    case = folder / "attack"
    _clear(case)
    case.mkdir()
    xdg = os.environ.get("XDG_DATA_HOME")
    try:
        argv, outputs = globals()[f"_setup_{spec['class']}"](spec, case)
        before = _snapshot(case, outputs)
        code, out, err = _cli(argv)
        _contract(spec, code, err, before, _snapshot(case, outputs))
        if spec["class"] == "batch":
            _contract_batch(code, out, err, case)
        return f"{spec['class']}:exit{code}"
    finally:
        if xdg is None:
            os.environ.pop("XDG_DATA_HOME", None)
        else:
            os.environ["XDG_DATA_HOME"] = xdg
        _clear(case)


def _clear(case: Path) -> None:
    if case.is_symlink() or case.exists():
        shutil.rmtree(case)


def _relu_model(path: Path) -> Path:
    from inspector.core.io.tflite_builder import ModelBuilder
    b = ModelBuilder()
    x = b.input("x", [1, 3, 5, 7])
    y = b.tensor("y", [1, 3, 5, 7])
    b.op("RELU", [x], [y])
    b.output(y)
    path.write_bytes(b.build())
    return path


def _setup_while_chain(spec, case):
    model = case / "chain.tflite"
    model.write_bytes(while_chain(spec["depth"], spec["kind"], spec["cycle"]))
    out = case / "chain.onnx"
    return ["convert", str(model), "-o", str(out)], {out}


def _special(kind: str, path: Path) -> Path:
    """Make `path` into a special target of `kind`; returns the path to name on the command line."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "dangling":
        path.symlink_to("no-such-file")
    elif kind == "dangling_dir":
        return path.parent / "no-such-folder" / path.name
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "device":              # our own character device (/dev/null's numbers): harmless if replaced
        try:
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        except OSError:                 # not root, or no CAP_MKNOD: a FIFO is the nearest special file
            os.mkfifo(path)
    elif kind == "long":
        return path.with_name("x" * 300 + path.suffix)
    return path


def _setup_external_data(spec, case):
    from .fuzz_cases import _external_model
    (case / "secret.bin").write_bytes(b"S" * 64)
    folder = case / "model"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(bytes(range(64)))
    target = {"weights": "weights.bin", "outside": "../secret.bin"}.get(spec["target"], "w.bin")
    offset = spec["offset"]
    if spec["target"] == "past_2gib":              # sparse: 3 GiB claimed, 16 bytes written past the 2 GiB mark
        offset = str((5 << 29) + int(offset)) if offset.isdigit() else offset
        with open(folder / target, "wb") as f:
            f.truncate(3 << 30)
            f.seek(5 << 29)
            f.write(bytes(range(16)))
    elif spec["target"] not in ("weights", "outside"):
        _special(spec["target"], folder / target)
    m = _external_model(target)
    ext = {e.key: e for e in m.graph.initializer[0].external_data}
    ext["offset"].value = offset
    if spec["length"] is None:
        m.graph.initializer[0].external_data.remove(ext["length"])
    else:
        ext["length"].value = spec["length"]
    model = folder / "model.onnx"
    model.write_bytes(m.SerializeToString())
    out = folder / "edited.onnx"
    argv = {"info": ["info", str(model)], "check": ["check", str(model)],
            "edit": ["edit", str(model), "-o", str(out), "--doc-string", "d"]}[spec["command"]]
    return argv, {out}


def _setup_special_file(spec, case):
    model = _relu_model(case / "m.tflite")
    session = case / "m.inspector.json"
    session.write_text(json.dumps({"version": 1, "pins": {"y": "keep"}}))
    paths = {"model": model, "session": session, "output": case / "m.onnx", "report": case / "r.json"}
    role, special = spec["role"], spec["special"]
    if special == "input":
        paths[role] = model if role != "model" else session
    elif special == "output":
        paths[role] = paths["report" if role != "report" else "output"]
    else:
        if special == "dev_zero" and role in ("output", "report"):
            special = "device"          # never a link to a real device as a target: a regression would replace it
        fresh = case / f"special{paths[role].suffix}"
        paths[role] = _special(special, fresh)
    argv = ["convert", str(paths["model"]), "-o", str(paths["output"]), "--report", str(paths["report"]),
            "--session", str(paths["session"])]
    # What may be written: the usual outputs, and where a dangling link at -o/--report points. A special target
    # (a FIFO, a folder, a link loop, a link to a device) or an input named as an output must stay as it was.
    return argv, {case / "m.onnx", case / "r.json", case / "no-such-file"}


def _setup_session_value(spec, case):
    model = _relu_model(case / "m.tflite")
    session = case / "s.json"
    session.write_bytes(spec["text"].encode("utf-8", "surrogatepass"))
    out = case / "m.onnx"
    return ["convert", str(model), "-o", str(out), "--session", str(session)], {out}


def _setup_option_value(spec, case):
    model = _relu_model(case / "m.tflite")
    out = case / "m.onnx"
    return ["convert", str(model), "-o", str(out), *spec["argv"]], {out}


def _setup_custom_op(spec, case):
    from inspector.core.io.tflite_builder import ModelBuilder
    b = ModelBuilder()
    shape = [1, 3, 5, 7][:spec["rank"]]
    ins = [b.input(f"x{k}", shape) for k in range(spec["inputs"])]
    y = b.tensor("y", shape)
    b.custom_op(spec["code"], ins, [y], bytes(spec["options"]))
    b.output(y)
    model = case / "c.tflite"
    model.write_bytes(b.build())
    out = case / "c.onnx"
    return ["convert", str(model), "-o", str(out)] + (["--allow-custom"] if spec["allow"] else []), {out}


def _setup_unverified(spec, case):
    """A file only a verifier refuses: a string's closing zero overwritten, or one random byte changed."""
    data = bytearray(_relu_model(case / "m.tflite").read_bytes())
    if spec["position"] == "terminator":
        data[data.index(b"y\x00\x00\x00") + 1] = ord("!")
    else:
        rng = random.Random(spec["seed"])
        data[rng.randrange(len(data))] = rng.randrange(256)
    model = case / "m.tflite"
    model.write_bytes(bytes(data))
    out = case / "m.onnx"
    return ["convert", str(model), "-o", str(out)], {out}


def nested_ifs(depth: int, shaped: bool) -> bytes:
    """An ONNX model of `depth` If bodies, each the then-branch of an If in the one above (each else-branch a
    leaf); `shaped`: its values have shapes. Read up to 31 deep, refused from 32."""
    import onnx
    from onnx import TensorProto, helper
    y = (helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]) if shaped else
         helper.make_value_info("y", onnx.TypeProto()))
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "leaf", [], [y])
    g = leaf
    for i in range(depth):
        g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=g, else_branch=leaf)], f"b{i}", [],
                              [y])
    main = helper.make_graph(list(g.node), "main", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                                    helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                             [y])
    return helper.make_model(main).SerializeToString()


def _setup_onnx_nesting(spec, case):
    model = case / "nested.onnx"
    model.write_bytes(nested_ifs(spec["depth"], spec["shaped"]))
    return [spec["command"], str(model)], set()


def _setup_desktop(spec, case):
    """install-desktop (or --uninstall) with XDG_DATA_HOME a file, a link to nowhere, or holding a file named
    icons: all or nothing, one error line."""
    share = case / "share"
    if spec["xdg"] == "file":
        share.write_text("not a folder")
    elif spec["xdg"] == "dangling":
        share.symlink_to("no-such-folder")
    else:
        share.mkdir()
        if spec["xdg"] == "icons_file":
            (share / "icons").write_text("not a folder")
    os.environ["XDG_DATA_HOME"] = str(share)
    outputs = {share} if spec["xdg"] == "ok" else {case / "no-such-folder"}
    return ["install-desktop"] + (["--uninstall"] if spec["uninstall"] else []), outputs


def _cli(argv: list[str]) -> tuple[int, str, str]:
    from inspector.cli import main
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    try:
        code = main(argv)
    except SystemExit as e:                   # argparse's usage errors
        code = e.code if isinstance(e.code, int) else 2
    finally:
        printed, text = sys.stdout.getvalue(), sys.stderr.getvalue()
        sys.stdout, sys.stderr = out, err
    return code, printed, text


def _snapshot(case: Path, outputs: set[Path]) -> dict[str, tuple]:
    """Every entry of the case folder but the declared outputs: its type, and a regular file's bytes."""
    skip = {str(p) for p in outputs}
    snap = {}
    for root, dirs, files in os.walk(case):            # never follows links (a loop, /dev/zero)
        for name in dirs + files:
            p = Path(root) / name
            if str(p) in skip or any(str(p).startswith(s + os.sep) for s in skip):    # (an output folder's files)
                continue
            try:
                st = os.lstat(p)
            except OSError:                            # past PATH_MAX (a batch attack's deep folder)
                snap[str(p)] = ("beyond PATH_MAX", "")
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size > 16 << 20:    # a sparse 3 GiB file: never read whole
                body = f"{st.st_size} bytes, modified {st.st_mtime_ns}"
            else:
                body = p.read_bytes() if stat.S_ISREG(st.st_mode) else (os.readlink(p) if p.is_symlink() else "")
            snap[str(p)] = (stat.S_IFMT(st.st_mode), body)
    return snap


def _contract(spec, code, err, before, after) -> None:
    if code not in (0, 1, 2):
        raise Broken(f"exit code {code}: {err[-2000:]}")
    if "Traceback" in err:
        raise Broken(f"a traceback on stderr: {err[-2000:]}")
    if code == 1 and not err.startswith("error: ") and spec["class"] != "batch":
        raise Broken(f"exit 1 without an error line: {err[:2000]!r}")
    changed = sorted(k for k in before.keys() | after.keys()
                     if before.get(k) != after.get(k) and not Path(k).name.startswith(".layout-inspector."))
    if changed:
        raise Broken(f"files that were not outputs changed: {', '.join(changed)[:2000]}")


# -- batch mode (issue 32) ----------------------------------------------------------------------------------------

BATCH_ATTACKS = ("same_name", "option", "json", "deep", "dangling", "fifo", "out_long", "out_below_file")


def deep_folder(top: Path, chars: int, model: bytes) -> None:
    """Folders nested below `top` until the path is longer than `chars` (made through folder descriptors: a path
    over PATH_MAX cannot be named whole), a model at the bottom."""
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(chars // 200 + 1):
            os.mkdir("d" * 200, dir_fd=fd)
            fd, old = os.open("d" * 200, os.O_RDONLY, dir_fd=fd), fd
            os.close(old)
        out = os.open("deep.tflite", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, model)
        os.close(out)
    finally:
        os.close(fd)


def _setup_batch(spec, case):
    """Two good models in case/models (a/m.tflite and b/m.tflite for `same_name`), the attack beside them, and
    `convert case/models -o case/out/` (`validate`/`check` for `json`)."""
    src = case / "models"
    src.mkdir()
    names = ["a/m.tflite", "b/m.tflite"] if spec["attack"] == "same_name" else ["m.tflite", "n.tflite"]
    for name in names:
        (src / name).parent.mkdir(exist_ok=True)
        _relu_model(src / name)
    out = case / "out"
    outdir = str(out) + "/"
    attack, extra = spec["attack"], list(spec.get("argv", []))
    if attack == "deep":
        (src / "deep").mkdir()
        deep_folder(src / "deep", os.pathconf("/", "PC_PATH_MAX"), (src / "m.tflite").read_bytes())
    elif attack == "dangling":
        _special("dangling", src / "x.tflite")
    elif attack == "fifo":
        _special("fifo", src / "p.tflite")
    elif attack == "out_long":
        outdir = str(case / ("o" * 300)) + "/"
    elif attack == "out_below_file":
        (case / "file").write_text("x")
        outdir = str(case / "file" / "out") + "/"
    elif attack == "json":
        return [spec.get("command", "check"), str(src), str(case), "--json"], {out}
    return ["convert", str(src), "-o", outdir, "--jobs", "2", *extra], {out, case / "s.json"}


def _contract_batch(code: int, out: str, err: str, case: Path) -> None:
    lines = err.splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    stray = [line for line in lines if not line.startswith(("error: ", "note: "))
             and not re.match(r"\[\d+/\d+\] (ok|FAILED) ", line)]
    if stray or len(errors) > 1 or (errors and errors[0] != len(lines) - 1):
        raise Broken(f"stderr is not progress lines and at most one last error line: {err[-2000:]!r}")
    if code == 2 and (len(lines) != 1 or not errors or (case / "out").exists()):
        raise Broken(f"a usage error is one error line with nothing created: {err[-2000:]!r}")
    if code == 1 and not errors and not re.search(r", [1-9]\d* failed$", out, re.M):
        raise Broken(f"exit 1 without an error line or a failed row: {out[-2000:]!r}")
    left = [os.path.join(root, n) for root, dirs, files in os.walk(case) for n in dirs + files
            if n.startswith(".layout-inspector.")]
    if left:
        raise Broken(f"temporaries left behind: {left[:5]}")
