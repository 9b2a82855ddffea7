"""Render the real inspector window offscreen into screenshots/*.png (`make screenshots`).

    QT_QPA_PLATFORM=offscreen python tools/screenshots.py --corpus ../shared/corpus
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QSettings  # noqa: E402

from inspector.gui.app import application  # noqa: E402
from inspector.gui.main_window import ONNX, TFLITE, MainWindow  # noqa: E402

SIZE = (1600, 1000)


def wait(app, window, timeout=120.0) -> None:
    end = time.monotonic() + timeout
    while not window.idle and time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)
    for _ in range(5):                 # let the minimap timer and repaints run
        app.processEvents()
        time.sleep(0.04)


def shot(app, window, path: Path) -> None:
    wait(app, window)
    window.grab().save(str(path))
    print(f"wrote {path}")


def fitted(window) -> None:
    """Both panes (those shown) fitted to the window."""
    for which in (TFLITE, ONNX):
        if window.panes[which].main_view is not None:
            window.panes[which].main_view.fit()


def window_for(app, model: Path, scheme: str | None = None) -> MainWindow:
    """The window on `model`; `scheme` ("dark", "light"): as chosen in View › Colour scheme earlier."""
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "s.ini"), QSettings.IniFormat)
    if scheme:
        settings.setValue("view/scheme", scheme)
    w = MainWindow(settings)
    w.resize(*SIZE)
    w.show()
    w.open_path(str(model))
    wait(app, w)
    return w


def setup(argv, doc: str):
    """(corpus, out folder, QApplication) from the command line both screenshot scripts take."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--out", default=str(ROOT / "screenshots"))
    ap.add_argument("--only", nargs="*", default=None, help="these groups of shots only (default: every one)")
    args = ap.parse_args(argv)
    corpus, out = Path(args.corpus), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    setup.only = set(args.only) if args.only else None
    return corpus, out, application()


def wanted(group: str) -> bool:
    """Whether --only asked for this group of shots (or for all)."""
    return getattr(setup, "only", None) is None or group in setup.only


def layers(app, corpus: Path, out: Path) -> None:
    """Layers (issue 35): NASNet collapsed to its overview, then with its biggest group opened; a PyTorch model
    collapsed (View › Collapse Groups; toggle_group is what a double-click on a box does)."""
    nasnet = corpus / "keras" / "nasnetmobile_fp32.tflite"
    if nasnet.is_file():
        w = window_for(app, nasnet)
        w.fold_all(False)
        shot(app, w, out / "nasnet-collapsed.png")
        tree = w.layers.tree
        biggest = max(tree.root.children, key=lambda g: len(tree.layers[g].ops))
        w.toggle_group(biggest)
        wait(app, w)
        fitted(w)
        shot(app, w, out / "nasnet-expanded.png")
        for which in (TFLITE, ONNX):            # the opened group's frame at a readable zoom: its tab's − closes it
            frame = next(f for f in w.scenes[which].group_frames if f.layer.id == biggest)
            view = w.panes[which].main_view
            view.resetTransform()
            view.centerOn(frame.tab.center().x() + view.viewport().width() / 2 - 40,
                          frame.tab.center().y() + view.viewport().height() / 2 - 40)
        shot(app, w, out / "nasnet-group-frame.png")
        w.close()
    torch = corpus / "torch" / "mobilenet_v2_w050.tflite"
    if torch.is_file():
        w = window_for(app, torch)
        w.fold_all(False)
        shot(app, w, out / "torch-collapsed.png")
        w.close()


def main(argv=None) -> int:
    corpus, out, app = setup(argv, __doc__)

    sample = ROOT / "inspector" / "resources" / "sample.tflite"
    if wanted("dark"):
        dark(app, corpus, out)
    if not wanted("light"):
        return 0
    if not sample.is_file():
        sample = corpus / "keras" / "custom_unet_small_fp32.tflite"
    w = window_for(app, sample)
    conv = next((op.index for op in w.doc.graph.main.ops if op.opcode == "CONV_2D"), 0)
    w.select(TFLITE, nodes=[("op", conv)])
    fitted(w)
    shot(app, w, out / "sample.png")
    w.close()

    nasnet = corpus / "keras" / "nasnetmobile_fp32.tflite"
    if nasnet.is_file():
        w = overview_and_detail(app, nasnet, out, "nasnet")
        w.results.regex.setChecked(True)          # the Search results dock: every pool of both graphs
        w.search_field.setText("pool_2d$|^(MaxPool|AveragePool)$")
        w.search_step(+1)
        w.search_step(+1)
        shot(app, w, out / "search.png")
        w.close()

    layers(app, corpus, out)

    conflicted = corpus / "realworld" / "face_detection_front.tflite"
    if conflicted.is_file():
        w = window_for(app, conflicted)
        if w.doc.conflicts():
            w.jump_to_conflict(w.doc.conflicts()[0])
        shot(app, w, out / "conflicts.png")
        w.close()
    return 0


def overview_and_detail(app, model: Path, out: Path, stem: str, scheme: str | None = None) -> MainWindow:
    """`stem`-overview.png (both panes fitted) and `stem`-detail.png (an ADD past the start selected, both panes
    centred on it at a readable zoom); the window stays open."""
    w = window_for(app, model, scheme)
    fitted(w)
    shot(app, w, out / f"{stem}-overview.png")
    add = next(op.index for op in w.doc.graph.main.ops[120:] if op.opcode == "ADD")
    w.select(TFLITE, nodes=[("op", add)])
    shot(app, w, out / f"{stem}-detail.png")
    return w


def dark(app, corpus: Path, out: Path) -> None:
    """Dark mode (View › Colour scheme › Dark, remembered): NASNet fitted, with an ADD selected at a readable zoom
    and collapsed into its groups, and a PyTorch model with an attribute search's results."""
    nasnet = corpus / "keras" / "nasnetmobile_fp32.tflite"
    if nasnet.is_file():
        w = overview_and_detail(app, nasnet, out, "nasnet-dark", "dark")
        w.fold_all(False)                         # the groups' boxes (View › Collapse Groups)
        shot(app, w, out / "nasnet-dark-collapsed.png")
        w.close()
    torch = corpus / "torch" / "mobilenet_v2_w050.tflite"
    if torch.is_file():
        w = window_for(app, torch, "dark")
        w.search_field.setText("stride=2")
        w.search_step(+1)
        w.search_step(+1)
        shot(app, w, out / "torch-dark-search.png")
        w.close()


if __name__ == "__main__":
    sys.exit(main())
