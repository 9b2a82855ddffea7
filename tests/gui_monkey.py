"""A seeded GUI monkey: random sequences of the real-input actions of tests/gui_scenarios.py (open by dialog, drop or
recent; click nodes and edges in either pane; pin through the right-click menu or the pin bar; undo and redo; every
Metadata drop-down; save; validate; quit or open with unsaved decisions; a conflict's Fix; Export for Model
Explorer) over a few corpus models. After every step: the process is alive, no Python exception or Qt warning came,
the views equal the document, whenever decisions are unsaved quitting and opening asked first, and a pin chosen in
a menu gave the Transposes its what-if count said.

    python -m tests.gui_monkey --seed 7 --steps 300 --corpus ../shared/corpus     # one run, in this process
    python -m tests.gui_monkey --seeds 1-20 --steps 300 --corpus ../shared/corpus # many, each in a child process

A failing run prints its seed and step; the same seed replays the same actions exactly.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.gui_harness import ROOT, Harness

MODELS = ("ops/conv-reshape-multiple-conv.float32.tflite", "torch/ssd_tiny_fpn.tflite",
          "torch/superres_x2_pixelshuffle.tflite")


class Monkey:
    def __init__(self, h: Harness, seed: int):
        self.h, self.rng = h, random.Random(seed)
        self.predicted = None           # the what-if count of the pin being chosen
        self.exports = 0
        self.models = []
        for rel in MODELS:              # copies: a session file can be saved beside them
            dest = h.tmp / Path(rel).name
            shutil.copyfile(h.model(rel), dest)
            self.models.append(str(dest))

    # ---- actions -------------------------------------------------------------------------------------------
    def actions(self):
        w = self.h.w
        opened = w.editor.session is not None
        out = [(3, self.open_model)]
        if opened:
            out += [(6, self.click_node), (4, self.pin_by_menu), (2, self.pin_by_bar), (3, self.undo_redo),
                    (6, self.metadata_combo), (1, self.save), (1, self.quit_with_changes), (1, self.validate),
                    (2, self.fix_conflict), (1, self.export_model_explorer),
                    (3, self.move_key), (2, self.search_row)]
        return out

    def pick(self):
        acts = self.actions()
        total = sum(weight for weight, _ in acts)
        r = self.rng.uniform(0, total)
        for weight, act in acts:
            r -= weight
            if r <= 0:
                return act
        return acts[-1][1]

    def _answer_question(self):
        """The unsaved-decisions question, expected when there are unsaved decisions: Discard or Cancel."""
        from PySide6.QtWidgets import QMessageBox
        choice = self.rng.choice(["Discard", "Cancel"])
        came: list = []

        def reply(d):
            came.append(d.text())
            self.h.press_button(d, choice)
        return self.h.on_dialog(reply, timeout=20, only=QMessageBox), choice

    def open_model(self):
        h, w = self.h, self.h.w
        path = self.rng.choice(self.models)
        how = self.rng.choice(["dialog", "drop"] + (["recent"] if w.recent() else []))
        if how == "recent":
            path = self.rng.choice([p for p in w.recent() if Path(p).is_file()] or self.models)
        unsaved = h.unsaved()
        h.step(f"open {Path(path).name} by {how} (unsaved: {unsaved})")
        asked, choice = self._answer_question() if unsaved else ([], None)
        before = w.editor.session
        if how == "dialog":
            def choose(d):
                h.file_dialog(path)(d)
            h.on_dialog(choose, only=_file_dialog())
            h.key("Ctrl+O")
        elif how == "drop":
            h.drop(path)
        else:
            h.menu("File", "Open Recent", path)
        h.settle()
        if unsaved:
            h.expect(bool(asked), "opening with unsaved decisions asked nothing")
            if choice == "Cancel":
                h.expect(w.editor.session is before, "Cancel did not keep the open model")
                for timer in h.timers:      # the file dialog's answer is not wanted any more
                    timer.stop()
        else:
            h.expect(not asked, "a question with nothing unsaved")

    def click_node(self):
        from inspector.gui.main_window import ONNX, TFLITE
        h, w = self.h, self.h.w
        which = self.rng.choice([p for p in (TFLITE, ONNX) if p in w.scenes])
        scene = w.scenes[which]
        items = [it for it in scene.nodes if it.node.kind == "op"]
        if not items:
            return
        item = self.rng.choice(items)
        h.step(f"click {which} node {item.node.title}")
        h.click_item(which, item)
        h.expect(item.node.key in scene.selected_keys()[0], "the clicked node is not selected")

    def move_key(self):
        """Alt+arrows along the edges, or Esc (in the pane clicked last)."""
        h, w = self.h, self.h.w
        key = self.rng.choice(["Alt+Up", "Alt+Down", "Alt+Left", "Alt+Right", "Escape"])
        scene = w.scenes.get(w.active)
        before = scene.selected_keys()[0] if scene is not None else []
        h.step(f"key {key} (selected: {before[:1]})")
        h.key(key)
        after = scene.selected_keys()[0] if scene is not None else []
        if key != "Escape":                     # a move never loses the selection (no neighbour: it stays)
            h.expect(bool(after) or not before, f"{key} from {before[:1]} lost the selection")

    def search_row(self):
        """Type an op type of the model in the search field and click a row of the Search results dock."""
        from inspector.gui.main_window import TFLITE
        h, w = self.h, self.h.w
        scene = w.scenes.get(TFLITE) or next(iter(w.scenes.values()), None)
        if scene is None:
            return
        text = self.rng.choice(sorted({n.title for n in scene.vg.nodes if n.kind == "op"}) or ["x"])
        h.step(f"search {text!r}, click a row")
        h.key("Ctrl+F")
        w.search_field.selectAll()
        h.type(text, w.search_field)
        h.wait_until(lambda: not w._list_later.isActive(), "the results list follows the typing", 10)
        tree = w.results.tree
        if not tree.topLevelItemCount():
            return
        row = self.rng.randrange(min(tree.topLevelItemCount(), 50))
        item = tree.topLevelItem(row)
        tree.scrollToItem(item)
        h.pump(0.05)
        h.click(tree.viewport(), tree.visualItemRect(item).center())
        which, kind, key = w._matches[row]
        got = w.scenes[which].selected_keys()[0 if kind == "node" else 1]
        h.expect(key in got, f"row {row} ({key}) clicked, {got} selected")

    def _edge(self):
        from inspector.gui.main_window import TFLITE
        w = self.h.w
        scene = w.scenes.get(TFLITE)
        if scene is None or w.editor.session is None or w.editor.session.graph is None:
            return None, None
        tensors = sorted(t for t in scene.edges_by_tensor if isinstance(t, int))
        if not tensors:
            return None, None
        t = self.rng.choice(tensors)
        return t, scene.edges_by_tensor[t][0]

    def _pin_choice(self, menu, right_click: bool = True):
        from PySide6.QtWidgets import QMenu
        choices = [a for a in menu.actions() if a.isEnabled() and not a.isSeparator() and a.menu() is None
                   and a.text().split("  —  ")[0] in ("Auto", "keep as is", "channels-first (NHWC → NCHW)")]
        self.predicted = None
        if not choices or self.rng.random() < 0.1:
            self.h.dismiss(menu, right_click)
            return None
        a = self.rng.choice(choices)
        self.predicted = a.data()           # the what-if: Transposes the graph has under this choice
        self.h.pick_in_menu(menu, a.text().split("  —  ")[0])
        del QMenu
        return a

    def _as_predicted(self) -> None:
        """The pin menu's what-if count of the choice made equals the Transposes shown once it applied."""
        w = self.h.w
        if self.predicted is not None and w.doc is not None and w.doc.result is not None:
            self.h.expect(w.doc.result.transposes == self.predicted,
                          f"{w.doc.result.transposes} Transposes after the pin, the menu said {self.predicted}")
        self.predicted = None

    def pin_by_menu(self):
        from inspector.gui.main_window import TFLITE
        h, w = self.h, self.h.w
        t, edge = self._edge()
        if edge is None:
            return
        h.step(f"right-click tensor {t} › a pin")
        w.editor.last_menu = None
        h.click_item(TFLITE, edge, button=_right())
        if w.editor.last_menu is None:        # a pair has no pins; a model's tensor always offers them
            h.expect(not w.editor.session.can_pin, f"right-click on tensor {t} opened no pin menu")
            return
        self._pin_choice(w.editor.last_menu)
        h.settle()
        self._as_predicted()

    def pin_by_bar(self):
        from inspector.gui.main_window import TFLITE
        h, w = self.h, self.h.w
        t, edge = self._edge()
        if edge is None:
            return
        h.step(f"select tensor {t}, pin bar › a pin")
        h.dock_tab("Details")                   # the bar is on top of Details
        h.click_item(TFLITE, edge)
        bar = w.editor.pin_bar
        if not (bar.isVisible() and bar.button.isEnabled()):
            return
        self.predicted = None
        h.on_dialog(lambda menu: self._pin_choice(menu, right_click=False), popup=True)
        h.click(bar.button)
        h.settle()
        self._as_predicted()

    def fix_conflict(self):
        """Right-click a row of the Conflicts dock: its menu stays inside the window; a Fix offered (taken or not)
        lowers the Transposes to the count it names and removes that conflict."""
        from PySide6.QtCore import Qt
        h, w = self.h, self.h.w
        panel = w.conflicts
        if not panel.isVisible() or panel.topLevelItemCount() == 0:
            return
        row = self.rng.randrange(panel.topLevelItemCount())
        item = panel.topLevelItem(row)
        c = item.data(0, Qt.UserRole)
        h.step(f"right-click conflict {row}")
        h.dock_tab("Conflicts")                 # (a search may have put its results' tab on top)
        h.pump(0.1)                             # (its rows laid out in the size it has now)
        panel.scrollToItem(item)
        h.pump(0.05)
        w.editor.last_menu = None
        # a tall row (a wrapped reason) is clicked where it shows, as a person does
        h.click(panel.viewport(), panel.visualItemRect(item).intersected(panel.viewport().rect()).center(),
                button=_right())
        menu = w.editor.last_menu
        if not h.wait_until(lambda: menu is not None and menu.isVisible(), "the conflict's menu opens", 10):
            return
        h.expect(w.frameGeometry().contains(menu.geometry()),
                 f"the menu {menu.geometry()} runs off the window {w.frameGeometry()}")
        first = menu.actions()[0]
        if not (first.isEnabled() and first.text().startswith("Fix:")) or self.rng.random() < 0.2:
            h.dismiss(menu)
            return
        predicted, before = int(first.text().split("  —  ")[1].split()[0]), w.doc.result.transposes
        h.step(first.text())
        h.pick_in_menu(menu, first.text().split("  —  ")[0])
        h.settle()
        h.expect(predicted < before and w.doc.result.transposes == predicted,
                 f"{before} → {w.doc.result.transposes} Transposes, the Fix said {predicted}")
        h.expect(not any(d.tensor == c.tensor and d.op == c.op for d in w.doc.conflicts()), "the conflict stays")

    def export_model_explorer(self):
        """File › Export for Model Explorer into a new folder: the files are written, the TFLite categories the
        document's."""
        import json
        h, w = self.h, self.h.w
        if not w.editor.model_explorer_action.isEnabled():
            return
        self.exports += 1
        folder = h.tmp / f"explorer-{self.exports}"
        folder.mkdir()
        h.step(f"File › Export for Model Explorer › {folder.name}")
        h.on_dialog(h.file_dialog(str(folder)), only=_file_dialog())
        h.menu("File", "Export for Model Explorer…")
        h.settle()
        written = folder / "categories.json"
        h.expect(written.is_file(), "Export for Model Explorer wrote nothing")
        if written.is_file() and w.doc is not None and w.doc.result is not None:
            from inspector.core.session.model_explorer import tflite_graph_id
            sg, cats = w.doc.graph.main, w.doc.result.categories
            data = json.loads(written.read_text()).get(tflite_graph_id(w.doc.graph), {}).get("results", {})
            got = {k: v["value"] for k, v in data.items()}
            h.expect(got == {sg.tensors[op.outputs[0]].name: cats[op.index].value for op in sg.ops if op.outputs},
                     "the exported categories are not the document's")

    def undo_redo(self):
        from inspector.gui.main_window import ONNX
        h = self.h
        key = self.rng.choice(["Ctrl+Z", "Ctrl+Shift+Z"])
        h.step(key)
        if h.view(ONNX) is not None:
            h.click(h.view(ONNX).viewport(), h.view(ONNX).viewport().rect().topLeft() + _point(3, 3))
        h.key(key)
        h.settle()

    def metadata_combo(self):
        from inspector.core.metadata import targets
        h, w = self.h, self.h.w
        h.dock_tab("Metadata")
        h.pump(0.05)
        ed = w.editor.metadata
        if ed.pending:
            h.settle()
        combos = [("Check for", ed.target)] if ed.target is not None else []
        combos += [(f"type of {n}", c) for n, c in sorted(ed.types.items())]
        combos += [(f"axis {i} of {n}", c) for n, cs in sorted(ed.dims.items()) for i, c in enumerate(cs)]
        combos += [(k, c) for k, c in sorted(ed.image.items())]
        combos = [(name, c) for name, c in combos if _alive(c) and c.isVisible() and c.isEnabled()]
        if not combos:
            return
        name, combo = self.rng.choice(combos)
        if combo is ed.target:
            value = targets.get(self.rng.choice(targets.names())).label
        else:
            value = self.rng.choice(combo.allowed)
        h.step(f"metadata: {name} → {value}")
        h.choose(combo, value)
        h.settle()

    def save(self):
        h, w = self.h, self.h.w
        if not w.editor.save_action.isEnabled():
            return
        h.step("Ctrl+S")
        h.click(h.w.legend)                   # the keyboard leaves any text field
        h.key("Ctrl+S")
        h.settle()
        h.expect(not h.unsaved(), "Ctrl+S left decisions unsaved")

    def quit_with_changes(self):
        h = self.h
        if not h.unsaved():
            return
        h.step("Ctrl+Q with unsaved decisions › Cancel")
        from PySide6.QtWidgets import QMessageBox
        asked = h.on_dialog(lambda d: h.press_button(d, "Cancel"), timeout=20, only=QMessageBox)
        h.click(h.w.legend)
        h.key("Ctrl+Q")
        h.settle()
        h.expect(bool(asked), "quitting with unsaved decisions asked nothing")
        h.expect(h.w.isVisible(), "Cancel did not keep the window")

    def validate(self):
        h, w = self.h, self.h.w
        if not w.editor.validate_action.isEnabled():
            return
        h.step("Ctrl+R")
        h.click(h.w.legend)
        h.key("Ctrl+R")
        h.settle()
        v = w.editor.session.validation if w.editor.session is not None else None
        h.expect(w.editor.validation.validation is v, "the Validation dock shows another validation")

    # ---- the run -------------------------------------------------------------------------------------------
    def run(self, steps: int) -> int:
        h = self.h
        for i in range(steps):
            act = self.pick()
            print(f"[{i}] ", end="", flush=True)
            act()
            h.check()
            if h.problems:
                print(f"FAILED at step {i}", flush=True)
                return 1
        return 0


def _alive(widget) -> bool:
    import shiboken6
    return shiboken6.isValid(widget)


def _file_dialog():
    from PySide6.QtWidgets import QFileDialog
    return QFileDialog


def _right():
    from PySide6.QtCore import Qt
    return Qt.RightButton


def _point(x: int, y: int):
    from PySide6.QtCore import QPoint
    return QPoint(x, y)


def one(seed: int, steps: int, corpus: Path, tmp: Path) -> int:
    h = Harness(tmp, corpus)
    code = Monkey(h, seed).run(steps)
    code = h.finish() or code
    print(f"seed {seed}: {'FAILED' if code else 'passed'} ({steps} steps); replay: python -m tests.gui_monkey "
          f"--seed {seed} --steps {steps}", flush=True)
    return code


def many(seeds: range, steps: int, corpus: Path) -> int:
    """Each seed in a child process: a crash is that seed's failure, the others run on."""
    failed = []
    for seed in seeds:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen", HOME=tmp,
                       XDG_CONFIG_HOME=f"{tmp}/config", XDG_DATA_HOME=f"{tmp}/data", XDG_CACHE_HOME=f"{tmp}/cache")
            run = subprocess.run([sys.executable, "-m", "tests.gui_monkey", "--seed", str(seed), "--steps",
                                  str(steps), "--corpus", str(corpus), "--tmp", tmp], env=env, cwd=str(ROOT),
                                 capture_output=True, text=True, check=False)
        if run.returncode != 0:
            failed.append(seed)
            print(run.stdout[-4000:], run.stderr[-3000:], sep="\n")
            print(f"seed {seed} FAILED (exit {run.returncode})", flush=True)
        else:
            print(f"seed {seed} passed", flush=True)
    print(f"{len(seeds)} seeds × {steps} steps: {len(failed)} failed {failed}")
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="seeded random real input on the window")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--seeds", default=None, help="a range such as 1-20: each in a child process")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--tmp", default=None)
    args = ap.parse_args(argv)
    corpus = Path(args.corpus)
    if args.seeds:
        lo, _, hi = args.seeds.partition("-")
        return many(range(int(lo), int(hi or lo) + 1), args.steps, corpus)
    code = one(args.seed if args.seed is not None else 1, args.steps, corpus, Path(args.tmp or tempfile.mkdtemp()))
    sys.stdout.flush()
    os._exit(code)                  # not the window's close: the run decided what closing does


if __name__ == "__main__":
    sys.exit(main())
