"""The package tree is the architecture: no import cycles anywhere in `inspector` (function-level imports count,
TYPE_CHECKING-only ones do not), and the core's top level holds its stage packages, not loose modules.
The stage order itself is an import-linter `layers` contract (pyproject.toml, run by `make test`)."""
import graphlib
from pathlib import Path

import grimp

import inspector

CORE = Path(inspector.__file__).parent / "core"


def test_no_import_cycles():
    graph = grimp.build_graph("inspector", exclude_type_checking_imports=True, cache_dir=None)
    deps = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    # A module importing its own package (`from . import x` runs the package first) is not a cycle.
    deps = {m: {d for d in ds if not m.startswith(d + ".")} for m, ds in deps.items()}
    try:
        graphlib.TopologicalSorter(deps).prepare()
    except graphlib.CycleError as e:
        raise AssertionError(f"import cycle: {' -> '.join(e.args[1])}") from None


def test_core_is_laid_out_by_stage():
    stages = {"ir", "io", "layout", "emit", "metadata", "proof", "pairing", "session"}
    assert {p.name for p in CORE.iterdir() if (p / "__init__.py").exists()} == stages
    assert sorted(p.name for p in CORE.glob("*.py")) == ["__init__.py"]


def test_the_window_s_models_and_child_process_load_no_qt():
    """The child process re-runs without Qt; the panes' document and graph model are plain data."""
    import subprocess
    import sys
    code = ("import sys, inspector.gui.document, inspector.gui.graph_model, inspector.gui.rerun_child; "
            "print(sorted(m for m in sys.modules if m.startswith(('PySide6', 'shiboken6', 'pyqtgraph'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_widget_of_the_window_is_deleted_at_once():
    """A panel that rebuilt itself inside a signal of one of its own widgets deleted that widget while Qt was still
    in its code: a click on a drop-down's item killed the process (issue 36). Widgets go with deleteLater (once
    control is back in the event loop); QScrollArea.setWidget deletes the one it replaces at once, so a scroll
    area gets its widget once, at construction, and rebuilds swap what is inside it."""
    import ast
    gui = Path(inspector.__file__).parent / "gui"
    found = []
    for path in sorted(gui.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for call in ast.walk(fn):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                    continue
                name, owner = call.func.attr, ast.unparse(call.func.value)
                where = f"{path.relative_to(gui)}:{call.lineno} {owner}.{name}"
                if name == "delete" and owner in ("shiboken6", "sip"):
                    found.append(where)
                elif name == "setWidget" and "scroll" in owner.lower() and fn.name != "__init__":
                    found.append(where)
                elif name == "setParent" and call.args and ast.unparse(call.args[0]) == "None" and \
                        "guard" not in owner:
                    found.append(where)
    assert not found, f"widgets deleted at once (use deleteLater): {found}"


def _gui_trees():
    import ast
    gui = Path(inspector.__file__).parent / "gui"
    for path in sorted(gui.rglob("*.py")):
        yield str(path.relative_to(gui)), ast.parse(path.read_text())


# Private members the window's code may touch on objects that are not its own, each for a reason.
PRIVATE_ALLOWED = {
    ("rerun_child.py", "os._exit"): "the documented way to end a forked child at once",
    ("loader_job.py", "threading._register_atexit"): "the only hook that runs before concurrent.futures' own exit "
                                                     "hook (see loader_job._end_child)",
    ("loader_job.py", "_EXECUTOR._shutdown_lock"): "the pool's state read once at exit, under its own lock",
    ("loader_job.py", "_EXECUTOR._processes"): "(same)",
    ("loader_job.py", "_EXECUTOR._executor_manager_thread"): "(same)",
}


def test_the_window_reaches_no_private_member_of_another_object():
    """A module of the window calls and reads only public names of other objects (an attribute starting with one
    underscore only on self or cls, or in getattr/setattr/hasattr with a literal name): the shell, the panels and
    the scenes say what they offer (issue 36 found the editor calling the window's private helpers)."""
    import ast
    found = []
    for rel, tree in _gui_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                name, owner = node.attr, node.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
                name, owner = node.args[1].value, node.args[0]
            else:
                continue
            if not name.startswith("_") or name.startswith("__"):
                continue
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            expr = f"{ast.unparse(owner)}.{name}"
            if (rel, expr) not in PRIVATE_ALLOWED:
                found.append(f"{rel}:{node.lineno} {expr}")
    assert not found, f"private members of other objects: {found}"


def test_menus_are_the_shell_s_and_never_looked_up():
    """Only the shell (main_window) makes the menu bar's menus; everything else asks it for a menu by key
    (window.menu, window.add_actions). No module finds a menu or an action by its text or position."""
    import ast
    found = []
    for rel, tree in _gui_trees():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name = node.func.attr
            if name == "menuBar" and rel != "main_window.py":
                found.append(f"{rel}:{node.lineno} menuBar()")
            elif name in ("actions", "insertMenu", "menuAction") or (name == "menu" and not node.args) or (
                    name == "findChildren" and node.args and ast.unparse(node.args[0]) in ("QMenu", "QAction")):
                found.append(f"{rel}:{node.lineno} {ast.unparse(node.func)}")
    assert not found, f"menus looked up instead of asked for: {found}"


def test_one_event_path_from_the_session_to_the_views():
    """The Session's publish is the only way an event reaches a view: views subscribe through the window's hub
    (views.py), which hands its one Listeners list to the Session shown; no other listener list exists in the
    window, and no view asks which kind of session it shows (sessions declare capabilities: can_pin, ...)."""
    import ast
    found = []
    for rel, tree in _gui_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name, owner = node.func.attr, ast.unparse(node.func.value)
                if name == "subscribe" and not owner.endswith("views") and rel != "views.py":
                    found.append(f"{rel}:{node.lineno} {owner}.subscribe")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id == "Listeners" and rel != "views.py":
                    found.append(f"{rel}:{node.lineno} a listener list")
                if node.func.id == "isinstance" and len(node.args) == 2 and "Session" in ast.unparse(node.args[1]):
                    found.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
                if (node.func.id in ("hasattr", "getattr") and len(node.args) >= 2
                        and isinstance(node.args[1], ast.Constant)
                        and (ast.unparse(node.args[0]).endswith("session") or ast.unparse(node.args[0]) == "s")):
                    found.append(f"{rel}:{node.lineno} {ast.unparse(node)}: ask a capability")
            if isinstance(node, ast.Name) and node.id in ("is_pair", "is_onnx_alone"):
                found.append(f"{rel}:{node.lineno} {node.id}")
    assert not found, f"a second path, or a session's kind asked: {found}"


def test_a_conversion_result_is_frozen_with_every_field_later_stages_give_it_declared():
    """Later stages (the metadata pass, the checker, the window) derive a new result with dataclasses.replace
    instead of writing attributes onto the one they were given."""
    import dataclasses

    import numpy as np
    import pytest

    from inspector.core.emit.convert import convert
    from inspector.core.emit.result import ConversionResult
    from inspector.core.io.tflite_builder import ModelBuilder
    from inspector.core.io.tflite_reader import read_tflite_bytes
    from inspector.core.session.pipeline import metadata_pass

    assert ConversionResult.__dataclass_params__.frozen
    declared = {f.name for f in dataclasses.fields(ConversionResult)}
    assert {"weights_left_out", "findings", "checking", "metadata_mapping", "state", "quantization"} <= declared
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    y = b.tensor("y", [1, 5, 7, 4])
    w = b.const("w", np.ones((4, 1, 1, 3), np.float32))
    b.op("CONV_2D", [x, w, b.const("bias", np.zeros(4, np.float32))], [y], {"padding": "SAME"})
    b.output(y)
    result = convert(read_tflite_bytes(b.build(), "net.tflite"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.findings = []
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.model = None
    annotated = metadata_pass(result).result
    assert annotated.plan is result.plan and annotated.findings is None and not annotated.weights_left_out


REUSE_PARAMETERS = {"cache", "memo", "since", "at", "infos", "reread", "steps"}
STAGES = {("emit/convert.py", "convert"), ("layout/propagation.py", "plan_layouts"), ("emit/peephole.py", "clean"),
          ("metadata/denotation.py", "annotate"), ("metadata/denotation.py", "annotate_read"),
          ("metadata/lint.py", "lint"), ("session/pipeline.py", "run"), ("session/pipeline.py", "converted"),
          ("session/pipeline.py", "metadata_pass")}


def test_stages_are_functions_of_their_inputs_and_reuse_lives_on_objects():
    """The rule: no module-level function in inspector/core, public or private, takes a parameter named cache,
    memo, since, at, infos, reread or steps (in proof/, `steps` is the count of a streaming model's steps or a
    quantized tensor's steps of error, a word of that domain, and stays allowed there). A stage function (convert,
    plan_layouts, clean, annotate, annotate_read, lint, and the pipeline's run, converted and metadata_pass) has
    one path, from its inputs and options alone; what a re-run reuses after a pin is held by the incremental
    layer's objects (incremental.Reconverter, propagation.Replanner, denotation.Annotator, lint.Linter,
    pipeline.Incremental), whose methods may take such records. And ConversionResult is a frozen dataclass: later
    stages return a new one (dataclasses.replace) instead of writing on it."""
    import ast
    import dataclasses

    from inspector.core.emit.result import ConversionResult
    found, seen = [], set()
    for path in sorted(CORE.rglob("*.py")):
        rel = str(path.relative_to(CORE))
        allowed = {"steps"} if rel.startswith("proof/") else set()
        for fn in ast.parse(path.read_text()).body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = fn.args
            bad = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} & (REUSE_PARAMETERS - allowed)
            if (rel, fn.name) in STAGES:
                seen.add((rel, fn.name))
                if args.vararg is not None or args.kwarg is not None:
                    bad.add("*args or **kwargs")
            if bad:
                found.append(f"{rel}:{fn.lineno} {fn.name}({', '.join(sorted(bad))})")
    assert not found, f"module-level functions taking reuse records (put them on an incremental object): {found}"
    assert seen == STAGES                                            # each stage function is still where it was
    assert dataclasses.is_dataclass(ConversionResult) and ConversionResult.__dataclass_params__.frozen
