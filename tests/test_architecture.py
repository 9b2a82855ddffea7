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
