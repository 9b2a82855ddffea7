"""A scripted walk through the window on a real X server: open, select, pin, undo, type metadata (xdotool),
validate, export, open the next model. After each step each graph pane's pixels, read back from the X server, must
not be blank, and the views must agree with the document. Prints one line per problem; exit 1 if any.

    DISPLAY=:99 QT_QPA_PLATFORM=xcb python tools/gui_walk.py --corpus ../shared/corpus --out /tmp/walk

(tests/test_gui_walk.py starts Xvfb and runs this.)
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MODELS = ("keras/nasnetmobile_fp32.tflite", "torch/superres_x2_pixelshuffle.tflite", "keras/mobilenetv2_fp16.tflite")
TYPED = "FMfm metadata"


class Walk:
    def __init__(self, app, window, out: Path):
        self.app, self.w, self.out = app, window, out
        self.problems: list[str] = []

    def pump(self, seconds: float = 0.3) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.app.processEvents()
            time.sleep(0.01)

    def settle(self, timeout: float = 180.0) -> None:
        w, end = self.w, time.monotonic() + timeout
        while time.monotonic() < end and not (w.idle and w.editor.idle and not w.editor.exporting
                                              and not w.editor.validation.running):
            self.pump(0.05)
        self.pump(0.4)                               # repaints, the minimap and the re-placement timers

    def blank(self, which: str, step: str) -> bool:
        """The pane as the X server shows it: blank when nearly every pixel has the background colour."""
        view = self.w.panes[which].main_view
        vp = view.viewport()
        top_left = vp.mapToGlobal(vp.rect().topLeft())
        pixmap = vp.screen().grabWindow(0, top_left.x(), top_left.y(), vp.width(), vp.height())
        pixmap.save(str(self.out / f"{self.name}-{step}-{which}.png"))
        img = pixmap.toImage().convertToFormat(pixmap.toImage().Format.Format_RGB32)
        a = np.frombuffer(img.constBits(), np.uint8)[: img.sizeInBytes()].reshape(img.height(), -1)
        a = a[:, : img.width() * 4].reshape(img.height(), img.width(), 4)[:, :, :3].reshape(-1, 3)
        background = np.median(a, axis=0)
        return (np.abs(a.astype(int) - background).sum(axis=1) > 30).mean() < 0.005

    def check(self, step: str) -> None:
        from PySide6.QtCore import Qt

        from inspector.gui.main_window import ONNX, TFLITE
        w, doc = self.w, self.w.doc
        bad = lambda text: self.problems.append(f"{self.name} after {step}: {text}")   # noqa: E731
        for which in (TFLITE, ONNX):
            if w.panes[which].main_view is None:
                bad(f"no {which} graph")
            elif self.blank(which, step):
                bad(f"the {which} pane is blank on screen")
        scene = w.scenes[TFLITE]
        ops = [it for it in scene.nodes if it.node.kind == "op"]
        if len(ops) + len(scene.vg.folded) != len(doc.graph.main.ops):      # DEQUANTIZEd weights: in their consumer
            bad(f"TFLite pane has {len(ops)} ops (+{len(scene.vg.folded)} folded), the model {len(doc.graph.main.ops)}")
        nodes = [it for it in w.scenes[ONNX].nodes if it.node.kind == "op"]
        if len(nodes) != len(doc.model.graph.node):
            bad(f"ONNX pane has {len(nodes)} nodes, the model {len(doc.model.graph.node)}")
        s = w.editor.session
        if s is None or s.result is not doc.result:
            bad("the window's document is not the session's latest result")
        if Path(doc.path).name not in w.windowTitle():
            bad(f"title {w.windowTitle()!r} does not name the model")
        if w.conflicts.topLevelItemCount() < len(doc.conflicts()):
            bad(f"{w.conflicts.topLevelItemCount()} conflict rows for {len(doc.conflicts())} conflicts")
        if s is not None and w.editor.metadata.doc_string.text() != (s.metadata.doc_string or
                                                                      w.editor.metadata.state.doc_string or ""):
            bad("the metadata editor's doc string is not the session's")
        if {it.node.key for it in w.scenes[ONNX].nodes if it.node.kind == "op"} != set(doc.onnx_nodes()):
            bad("the ONNX pane's nodes are not the document's model")
        shown = [w.conflicts.topLevelItem(i).data(0, Qt.UserRole) for i in range(w.conflicts.topLevelItemCount())]
        if any(not any(c is d for d in doc.conflicts()) and c not in doc.inserted().values() for c in shown):
            bad("a conflict row is not of the current plan")
        panel = w.editor.validation
        v = s.validation if s is not None else None
        if panel.validation is not v:
            bad("the validation dock shows another validation than the session's")
        if len(panel.scatter.points()) != (len(v.outputs) + len(v.intermediates) if v is not None else 0):
            bad(f"the validation plot has {len(panel.scatter.points())} points for the session's validation")
        nodes, tensors = scene.selected_keys()
        op = next((k[1] for k in nodes if k[0] == "op"), None)
        html = w.details.html()
        if op is not None and f"{doc.graph.main.ops[op].opcode} #{op}" not in html:
            bad("Details does not show the selected op")
        if not (nodes or tensors) and w.active == TFLITE and not html.startswith("Select an op"):
            bad("Details shows something while nothing is selected")
        bar = w.editor.pin_bar
        if s is not None and bar.tensors and (any(w.editor.pin_name(t) in s.pins for t in bar.tensors[:3])
                                              != ("pinned" in bar.label.text())):
            bad("the pin bar disagrees with the session's pins")
        if step == "open" and (w._matches or w.search_status.text().strip()):
            bad("search results of the previous model are still listed")

    def model(self, path: Path, export_to: Path) -> None:
        from inspector.gui.export_onnx import export_dialog
        from inspector.gui.main_window import TFLITE
        w = self.w
        self.name = path.stem
        w.open_path(str(path))
        self.settle()
        self.check("open")
        sg = w.doc.graph.main
        op = next(i for i, o in enumerate(sg.ops) if o.opcode in ("CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "MUL"))
        w.select(TFLITE, nodes=[("op", op)])
        self.pump()
        if f"{sg.ops[op].opcode} #{op}" not in w.details.html():
            self.problems.append(f"{self.name}: Details does not show the selected op")
        self.check("select")
        tensor = next(t for t in sg.ops[op].outputs if t >= 0)
        w.select(TFLITE, tensors=[tensor])
        w.editor.pin(w.editor.pin_name(tensor), "keep")
        self.settle()
        if "pinned by the user" not in w.details.html():
            self.problems.append(f"{self.name}: Details does not show the pin")
        self.check("pin")
        w.editor.stack.undo()
        self.settle()
        if w.editor.session.pins or "pinned" in w.details.html():
            self.problems.append(f"{self.name}: the undone pin is still shown")
        self.check("undo")
        ed = w.editor.metadata
        w.editor.metadata_dock.raise_()
        w.activateWindow()
        ed.doc_string.setFocus()
        ed.doc_string.selectAll()
        self.pump()
        subprocess.run(["xdotool", "type", "--delay", "20", TYPED], check=True)
        self.pump(0.3)
        subprocess.run(["xdotool", "key", "Return"], check=True)
        self.settle()
        if w.editor.session.metadata.doc_string != TYPED:
            self.problems.append(f"{self.name}: typed doc string arrived as {w.editor.session.metadata.doc_string!r}")
        self.check("metadata")
        w.search_field.setFocus()
        w.search_field.clear()
        minimap = w.show_minimap.isChecked()
        self.pump()
        subprocess.run(["xdotool", "type", "--delay", "20", TYPED], check=True)
        subprocess.run(["xdotool", "key", "Return"], check=True)
        self.pump(0.3)
        if w.search_field.text() != TYPED or w.show_minimap.isChecked() != minimap:
            self.problems.append(f"{self.name}: typed search arrived as {w.search_field.text()!r}")
        w.search_field.clear()
        self.check("search")
        w.editor.validate()
        self.settle()
        v = w.editor.validation.validation
        if v is None or not w.editor.validation.status.text():
            self.problems.append(f"{self.name}: no validation result shown")
        self.check("validate")
        export_dialog(w.editor, str(export_to))
        self.settle()
        if not export_to.is_file():
            self.problems.append(f"{self.name}: export wrote nothing ({getattr(w, 'last_error', '')})")
        self.check("export")
        if w.editor.last_message is not None:        # the user reads the summary and closes it
            w.editor.last_message.done(0)
            self.pump()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--out", default=tempfile.mkdtemp())
    args = ap.parse_args(argv)
    from PySide6.QtCore import QSettings

    from inspector.gui.app import application
    from inspector.gui.main_window import MainWindow
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    app = application()
    w = MainWindow(QSettings(str(out / "settings.ini"), QSettings.IniFormat))
    w.resize(1280, 800)
    w.show()
    walk = Walk(app, w, out)
    walk.pump(0.5)
    for rel in MODELS:
        walk.model(Path(args.corpus) / rel, out / (Path(rel).stem + ".onnx"))
    w.interactive = False               # the walk's decisions go: nobody is there to answer "Save session?"
    w.close()
    for p in walk.problems:
        print(p)
    print(f"walked {len(MODELS)} models: {len(walk.problems)} problem(s); screenshots in {out}")
    return 1 if walk.problems else 0


if __name__ == "__main__":
    sys.exit(main())
