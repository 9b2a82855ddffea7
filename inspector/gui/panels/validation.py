"""The Validation dock: TFLite (LiteRT reference kernels) against ONNX Runtime on the same seeded inputs, in a
worker with progress and cancel.

Results colour the ONNX graph by each node's largest relative error (a colour scale shown above the graphs), plot
the error of every compared tensor in topological (TFLite op) order, and histogram the output differences.
Clicking a point selects its op in both graphs.
"""
from __future__ import annotations

import math
import threading
import traceback

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QRectF, QRunnable, QSize, Qt, QThreadPool, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QLinearGradient, QPainter, QPen
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QLineEdit, QProgressBar, QPushButton, QSplitter, QVBoxLayout,
                               QWidget)

from inspector.core.ir.errors import InspectorError
from inspector.core.proof.input_shapes import parse, split
from inspector.core.proof.validate import headline
from inspector.core.session.events import (MetadataChanged, ModelOpened, OptionsChanged, PinsChanged, PlanChanged,
                                           ValidationDone)

from ..palette import palette

# log10 of the relative error, from "agrees to float precision" to "wrong"; YlOrRd-like ramp: light = good,
# so node titles stay readable in dark text.
LO, HI = -8.0, -1.0
RAMP = ["#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#bd0026"]
NOT_COMPARED = QColor("#e0e0e0")
PLOTS_HEIGHT = 260                  # px: the dock with a result's plots (at most a third of the window)


def colour_for(max_rel: float) -> QColor:
    if not math.isfinite(max_rel):
        return QColor(RAMP[-1])
    x = (math.log10(max(max_rel, 10 ** LO)) - LO) / (HI - LO)
    x = min(max(x, 0.0), 1.0) * (len(RAMP) - 1)
    i = min(int(x), len(RAMP) - 2)
    a, b, f = QColor(RAMP[i]), QColor(RAMP[i + 1]), x - i
    return QColor.fromRgbF(a.redF() + (b.redF() - a.redF()) * f, a.greenF() + (b.greenF() - a.greenF()) * f,
                           a.blueF() + (b.blueF() - a.blueF()) * f)


def overlay(scene, errors: dict[str, float]) -> int:
    """Paint op nodes by error (nodes not compared in grey); returns how many were coloured by a measurement.
    The category colours come back with the window's next recolour (or a re-run)."""
    scene.finish()
    n = 0
    for it in scene.nodes:
        if it.node.kind != "op":
            continue
        err = errors.get(it.node.key)
        c = colour_for(err) if err is not None else NOT_COMPARED
        n += err is not None
        it.category = "error"
        it.fill = it.quick_fill = c
        it.setToolTip(f"{it.node.title}: max relative error {err:.3g}" if err is not None
                      else f"{it.node.title}: not compared (no TFLite tensor maps to it)")
        it.update()
    scene.repainted()
    return n


PER_OP_TEXT = ("Error per op", "TFLite op (topological order)", "log10 relative error")    # title, x, y
HIST_TEXT = ("Output differences", "onnx − tflite (outputs)", "count")


class ErrorScale(QWidget):
    """The colour key of the error overlay: the ramp with decades marked, the tolerance, and 'not compared'."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rtol: float | None = None
        self.font_ = QFont()
        self.font_.setPointSizeF(8.5)
        self.setToolTip("ONNX nodes coloured by the largest relative error |onnx - tflite| / max|tflite| of their "
                        "TFLite op's tensors")

    def sizeHint(self) -> QSize:
        return QSize(620, QFontMetrics(self.font_).height() * 2 + 14)

    def paintEvent(self, event):
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing)
        pal = palette()                         # the scheme's background and ink (the ramp is the same in both)
        p.fillRect(self.rect(), pal.background)
        p.setFont(self.font_)
        fm = QFontMetrics(self.font_)
        h = self.height()
        label = "relative error:"
        x0 = 10 + fm.horizontalAdvance(label) + 8
        p.setPen(pal.ink)
        p.drawText(QRectF(10, 0, x0, h / 2 + 4), Qt.AlignVCenter, label)
        w = max(200, min(420, self.width() - x0 - 200))
        bar = QRectF(x0, 5, w, h / 2 - 4)
        g = QLinearGradient(bar.topLeft(), bar.topRight())
        for i, c in enumerate(RAMP):
            g.setColorAt(i / (len(RAMP) - 1), QColor(c))
        p.setPen(QPen(pal.ink, 0.8))
        p.setBrush(g)
        p.drawRect(bar)
        for d in range(int(LO), int(HI) + 1):
            x = bar.left() + (d - LO) / (HI - LO) * w
            p.drawLine(x, bar.bottom(), x, bar.bottom() + 3)
            p.drawText(QRectF(x - 20, bar.bottom() + 2, 40, h / 2), Qt.AlignHCenter | Qt.AlignTop, f"1e{d}")
        if self.rtol:
            x = bar.left() + (math.log10(self.rtol) - LO) / (HI - LO) * w
            p.setPen(QPen(QColor("#0072B2"), 2.5))
            p.drawLine(x, bar.top() - 3, x, bar.bottom() + 3)
            p.drawText(QRectF(bar.right() + 10, 0, 150, h / 2 + 4), Qt.AlignVCenter,
                       f"| tolerance {self.rtol:g}")
        box = QRectF(bar.right() + 10, h / 2 + 2, 12, 12)
        p.setPen(QPen(pal.ink, 0.8))
        p.setBrush(NOT_COMPARED)
        p.drawRect(box)
        p.setPen(pal.ink)
        p.drawText(QRectF(box.right() + 5, h / 2, 150, h / 2), Qt.AlignVCenter, "not compared")
        p.end()


def _dynamic_inputs(session) -> str:
    """The field's hint: each TFLite input with a dynamic dimension as NAME=D1,N,... (empty: none)."""
    graph = session.graph if session is not None else None
    if graph is None or getattr(graph, "format", "tflite") != "tflite":
        return ""
    sg = graph.main
    return "; ".join(f"{sg.tensors[t].name}=" + ",".join("N" if d < 0 else str(d) for d in sg.tensors[t].dims)
                     for t in sg.inputs if sg.tensors[t].dynamic)


class JobSignals(QObject):
    progress = Signal(str, float)
    done = Signal(object)
    failed = Signal(str, str)


class ValidateJob(QRunnable):
    def __init__(self, session, input_shapes=None):
        super().__init__()
        self.session = session
        self.input_shapes = input_shapes
        self.cancel = threading.Event()
        self.signals = JobSignals()
        self.setAutoDelete(False)

    def run(self) -> None:
        try:
            progress = lambda msg, frac: self.signals.progress.emit(msg, frac)   # noqa: E731
            s = self.session
            if getattr(s.result, "weights_left_out", False):   # converted in the child: again, with the weights
                from inspector.core.proof.validate import validate
                from inspector.core.session.pipeline import run
                progress("converting with the weights…", 0.0)
                v = validate(run(s.graph, s.pins, s.options, s.metadata, check=False).result, cancel=self.cancel,
                             progress=progress, input_shapes=self.input_shapes)
            else:                                                # the Session takes it on the GUI thread (_done)
                shapes = {"input_shapes": self.input_shapes} if self.input_shapes else {}
                v = s.measure(cancel=self.cancel, progress=progress, **shapes)
            self.signals.done.emit(v)
        except InspectorError as e:
            self.signals.failed.emit(str(e), "")
        except Exception as e:  # a bug, or a runtime's own error type: shown with details, the window keeps going
            self.signals.failed.emit(f"{type(e).__name__}: {e}", traceback.format_exc())


class ValidationPanel(QWidget):
    def __init__(self, editor, parent=None):
        super().__init__(parent)
        self.editor = editor
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(1)
        self.job: ValidateJob | None = None
        self.validation = None
        self.points: list[tuple[int | None, str]] = []
        self.run_button = QPushButton("Validate", clicked=self.run)
        self.cancel_button = QPushButton("Cancel", clicked=self.cancel)
        self.clear_button = QPushButton("Category colours", clicked=self.clear_overlay)
        self.clear_button.setToolTip("Back to the layout category colours in the ONNX graph")
        self.progress = QProgressBar(maximumWidth=220)
        self.progress.setRange(0, 100)
        self.status = QLabel(wordWrap=True)
        # Sizes for dynamic input dimensions (validate --input-shape): NAME=D1,D2,... separated by ';' or spaces
        self.shapes_label = QLabel("Input shapes:")
        self.shapes = QLineEdit(maximumWidth=260)
        self.shapes.setToolTip("Sizes to feed inputs with dynamic dimensions at: NAME=D1,D2,... (several: separated "
                               "by ';'), as validate --input-shape does")
        self.shapes.returnPressed.connect(self.run)
        self.shapes_label.setBuddy(self.shapes)
        top = QHBoxLayout()
        for wdg in (self.run_button, self.cancel_button, self.shapes_label, self.shapes, self.progress,
                    self.clear_button):
            top.addWidget(wdg)
        top.addWidget(self.status, 1)

        pg.setConfigOptions(antialias=True)
        self.per_op = pg.PlotWidget()
        self.scatter = pg.ScatterPlotItem(size=8, hoverable=True, tip=None)
        self.scatter.sigClicked.connect(self._clicked)
        self.per_op.addItem(self.scatter)
        self.mark = pg.ScatterPlotItem(size=18, symbol="o", pen=pg.mkPen("#0072B2", width=2.5), brush=None)
        self.per_op.addItem(self.mark)
        self.tol_line = pg.InfiniteLine(angle=0, pen=pg.mkPen("#0072B2", width=2, style=Qt.DashLine))
        self.per_op.addItem(self.tol_line)
        self.hist = pg.PlotWidget()
        self.restyle()
        split = self.plots = QSplitter(Qt.Horizontal)
        split.addWidget(self.per_op)
        split.addWidget(self.hist)
        split.setSizes([600, 300])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(top)
        lay.addWidget(split, 1)
        lay.addStretch(0)

        self.scale = ErrorScale()
        self.scale.hide()
        editor.window.workspace.layout().insertWidget(2, self.scale)     # above the graphs, under the legend
        self.reset()
        # another model, or another plan, decision or conversion: the shown errors (or the running job) are not of it
        editor.window.views.subscribe(lambda _e: self.reset(), ModelOpened, PinsChanged, MetadataChanged,
                                      OptionsChanged, PlanChanged)
        editor.window.views.subscribe(lambda e: self.show_validation(e.validation), ValidationDone)
        editor.window.views.subscribe(lambda _e: self.shapes.clear(), ModelOpened)     # sizes of another model

    # ---- running -------------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.job is not None

    def run(self) -> None:
        s = self.editor.session
        if s is None or self.job is not None or not s.can_validate:
            return
        try:
            shapes = parse(split(self.shapes.text())) or None
        except InspectorError as e:
            self.status.setText(str(e))
            self.status.setStyleSheet("color:#b00")
            return
        self.reset()
        job = self.job = ValidateJob(s, shapes)
        job.signals.progress.connect(lambda msg, f: job is self.job and self._progress(msg, f))
        job.signals.done.connect(lambda v: self._done(job, v))
        job.signals.failed.connect(lambda msg, det: self._failed(job, msg, det))
        self._busy(True)
        self.status.setText("starting…")
        self.pool.start(job)

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel.set()
            self.job = None
            self._busy(False)
            self.status.setText("cancelled")

    def _busy(self, on: bool) -> None:
        s = self.editor.session
        able = s is not None and s.can_validate             # (an ONNX model alone: nothing to run it against)
        self.run_button.setEnabled(not on and able)
        self.run_button.setToolTip(s.why_not.get("validate", "") if s is not None else "")
        self.cancel_button.setEnabled(on)
        self.progress.setVisible(on)

    def _progress(self, msg: str, frac: float) -> None:
        self.progress.setValue(int(frac * 100))
        self.status.setText(msg)

    def _failed(self, job, message: str, details: str) -> None:
        if job is not self.job:
            return
        self.job = None
        self._busy(False)
        self.status.setText(f"failed: {message.splitlines()[0]}")
        if "cancelled" not in message:
            self.editor.window.error("Validation failed", message, details)

    def _done(self, job, v) -> None:
        if job is not self.job:
            return
        self.job = None
        self._busy(False)
        job.session.validated(v)            # ValidationDone: shown by show_validation

    # ---- showing -------------------------------------------------------------------------------------------
    def restyle(self) -> None:
        """The plots' background, axes, titles and the histogram's line in the colour scheme in use (pyqtgraph's
        own are white and black), and the colour key's."""
        pal = palette()
        ink = pal.ink.name()
        for plot, (title, bottom, left) in ((self.per_op, PER_OP_TEXT), (self.hist, HIST_TEXT)):
            plot.setBackground(pal.background)
            for side, text in (("bottom", bottom), ("left", left)):
                plot.getAxis(side).setPen(pal.ink)
                plot.getAxis(side).setTextPen(pal.ink)
                plot.setLabel(side, text, color=ink)
            plot.setTitle(title, size="9pt", color=ink)
        for curve in self.hist.listDataItems():
            curve.setPen(pg.mkPen(pal.ink, width=1))
        if getattr(self, "scale", None) is not None:
            self.scale.update()

    def reset(self) -> None:
        self.cancel()
        self.validation = None
        self.points = []
        self.scatter.clear()
        self.mark.clear()
        self.hist.clear()
        self.tol_line.hide()                        # nothing of the previous result: its tolerance, axes, colour
        for plot, x, y in ((self.per_op, (0, 1), (LO, 0)), (self.hist, (-1, 1), (0, 1))):
            plot.getPlotItem().setRange(xRange=x, yRange=y, padding=0)
            plot.getPlotItem().enableAutoRange()    # the next result is scaled to its own data
        self.status.setStyleSheet("")
        self.scale.hide()
        self.clear_button.setEnabled(False)         # no error colours to take back
        s = self.editor.session
        self.status.setText("Open a TFLite model to validate it." if s is None or s.graph is None else
                            "Run the TFLite model and its ONNX conversion on the same inputs (Ctrl+R).")
        self.shapes.setPlaceholderText(_dynamic_inputs(s))
        self._busy(False)
        self.plots.hide()                           # empty plots took a 1280x720 window's graphs down to 250 px
        self.fit_dock()

    def fit_dock(self) -> None:
        """The dock as tall as what it shows: one line while there is no result, the plots (a third of the window
        at most) once there is."""
        dock, w = getattr(self.editor, "validation_dock", None), self.editor.window
        if dock is None or dock.isHidden():
            return
        if self.plots.isVisible():
            height = min(PLOTS_HEIGHT, w.height() // 3)
        else:       # the plots just hidden: measured once the layout has taken that in (no turn may be between)
            self.layout().activate()
            height = self.minimumSizeHint().height() + dock.sizeHint().height() - self.sizeHint().height()
        w.resizeDocks([dock], [max(height, 1)], Qt.Vertical)

    def show_validation(self, v) -> None:
        from ..graph_model import ONNX
        self.validation = v
        self.plots.show()
        self.fit_dock()
        # Outputs computed after an op LiteRT cannot run were not compared: no point (it would sit at the top, red).
        cut = getattr(v, "cut", None) is not None
        errs = [e for e in v.outputs + v.intermediates if not (cut and e.is_output and not e.compared)]
        errs.sort(key=lambda e: (e.op if e.op is not None else 1 << 30))
        spots, self.points = [], []
        for i, e in enumerate(errs):
            y = math.log10(max(e.max_rel, 1e-12)) if math.isfinite(e.max_rel) else 1.0
            x = e.op if e.op is not None else (errs[-1].op or 0) + 1
            spots.append({"pos": (x, y), "data": i, "brush": pg.mkBrush(colour_for(e.max_rel)),
                          "pen": pg.mkPen("#000" if e.ok else "#b00", width=1 if e.ok else 2),
                          "symbol": "o" if not e.is_output else "s"})
            self.points.append((e.op, e.name))
        self.scatter.setData(spots)
        self.tol_line.setValue(math.log10(v.rtol) if v.rtol > 0 else LO)
        self.tol_line.show()
        self.hist.clear()
        diffs = np.concatenate(v.output_diffs) if v.output_diffs else np.zeros(0)
        diffs = diffs[np.isfinite(diffs)]
        if diffs.size:
            counts, edges = np.histogram(diffs, bins=min(80, max(10, int(np.sqrt(diffs.size)))))
            self.hist.plot(edges, counts, stepMode="center", fillLevel=0, brush=(0, 114, 178, 150),
                           pen=pg.mkPen(palette().ink, width=1))
        bad = v.first_bad()
        w = self.editor.window
        doc, scene = w.doc, w.scenes.get(ONNX)
        op = (f" {doc.graph.main.ops[bad.op].label}" if bad and bad.op is not None and doc is not None
              and doc.graph is not None else "")
        # The headline states the verdict and the measure that decided it (error vs tolerance and floor, or steps).
        self.status.setText(headline(v) + f"; {len(v.intermediates)} intermediate tensors"
                            + (f"; first bad: {bad.name} (op {bad.op}{op})" if bad else "")
                            + "".join(f"; {n}" for n in getattr(v, "notes", [])))
        self.status.setStyleSheet("" if v.ok else "color:#b00")
        if doc is not None and doc.trace is not None and scene is not None:      # (a pair's: through its mapping)
            overlay(scene, self.editor.session.node_errors(v))
            view = w.panes[ONNX].main_view
            if view is not None:
                view.minimap.invalidate()
            self.scale.rtol = v.rtol or None
            self.scale.show()
            self.clear_button.setEnabled(True)
        if self.editor.session.other and bad is not None:     # where the other converter first went wrong
            at = [i for i, (op, name) in enumerate(self.points) if op == bad.op]
            if at:
                self.select_point(next((i for i in at if self.points[i][1] == bad.name), at[0]))

    def clear_overlay(self) -> None:
        from ..graph_model import ONNX
        self.scale.hide()
        self.clear_button.setEnabled(False)
        self.editor.window.colour(ONNX)

    def _clicked(self, _item, points, *_):
        from ..graph_model import TFLITE
        if not len(points):
            return
        op, _name = self.points[points[0].data()]
        self.mark.setData([{"pos": (points[0].pos().x(), points[0].pos().y())}])
        if op is not None:
            self.editor.window.select(TFLITE, nodes=[("op", op)])

    def select_point(self, i: int) -> None:
        """What a click on point i does (tests drive it without synthesising a mouse event on the plot)."""
        self._clicked(self.scatter, [self.scatter.points()[i]])
