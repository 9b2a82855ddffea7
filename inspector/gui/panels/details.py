"""Details of the selected op, node or tensor: shapes before/after the layout change, why, quantization, links.

Links are "tfl-op:3", "tfl-tensor:5", "onnx-node:<name>", "onnx-value:<name>" (names URL-quoted); the window
follows them. Constants get a histogram of their values.
"""
from __future__ import annotations

import html
from urllib.parse import quote

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QTextBrowser, QVBoxLayout, QWidget

from inspector.core.ir.names import elide
from inspector.core.layout import layout as L

from ..graph_model import shape_text
from ..palette import css, palette

MAX_LINKS = 12
SAMPLE = 1 << 18          # values a histogram reads at most: bigger tensors are sampled evenly (no UI freeze)


def sampled(data) -> tuple[np.ndarray, int]:
    """(at most SAMPLE evenly spaced values as float64, the tensor's size), without copying the tensor."""
    a = np.asarray(data)
    flat = a.reshape(-1) if a.flags.c_contiguous else a.ravel()
    step = max(1, -(-flat.size // SAMPLE))
    return flat[::step].astype(np.float64), flat.size


def link(kind: str, key, text: str) -> str:
    return f'<a href="{kind}:{quote(str(key), safe="")}">{html.escape(text)}</a>'


def _rows(rows) -> str:
    return "<table cellspacing=2>" + "".join(
        f"<tr><td valign=top><b>{html.escape(k)}</b></td><td>{v}</td></tr>" for k, v in rows) + "</table>"


def _links(items: list[str]) -> str:
    more = f" … +{len(items) - MAX_LINKS}" if len(items) > MAX_LINKS else ""
    return ", ".join(items[:MAX_LINKS]) + more if items else "—"


def _quant(q) -> str:
    if q is None:
        return "—"
    s, z = np.asarray(q.scales), np.asarray(q.zero_points)
    if s.size == 0:
        return "—"
    if s.size == 1:
        return f"scale {float(s[0]):.6g}, zero point {int(z[0]) if z.size else 0}"
    return (f"per-channel on axis {q.axis}: {s.size} scales in [{float(s.min()):.4g}, {float(s.max()):.4g}], "
            f"zero points in [{int(z.min())}, {int(z.max())}]")


def initializer_values(doc, init):
    """An ONNX initializer's values. A large one converted from a TFLite constant of the same size is read from
    that tensor (the same values, maybe permuted: the same histogram) rather than copied out of the protobuf."""
    from onnx import numpy_helper
    size = int(np.prod(init.dims)) if init.dims else 1
    left_out = size > 1 and not init.HasField("raw_data")
    t = doc.trace.value_tensor.get(init.name) if doc.trace is not None and (size > SAMPLE or left_out) else None
    if t is not None and doc.graph is not None:
        data = doc.graph.main.tensors[t].data
        if data is not None and np.size(data) == size:
            return data
    if size > 1 and not init.HasField("raw_data") and not any(
            len(getattr(init, f)) for f in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data")):
        return None               # left out of the window's copy (converted in the child process)
    return numpy_helper.to_array(init)


class DetailsPanel(QWidget):
    linkActivated = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.text = QTextBrowser(openLinks=False, openExternalLinks=False)
        self.text.anchorClicked.connect(lambda url: self.linkActivated.emit(url.toString()))
        self.plot = pg.PlotWidget()
        self.plot.setMinimumHeight(90)              # a short dock (the Validation dock open) keeps the text readable
        self.plot.setMaximumHeight(220)
        self.plot.hide()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.text, 3)
        lay.addWidget(self.plot, 2)
        self.restyle()
        self.clear()

    def add_header(self, widget) -> None:
        """A bar above the details (the pin bar)."""
        self.layout().insertWidget(0, widget)

    def clear(self) -> None:
        self.text.setHtml(f"<p style='color:{css('muted')}'>Select an op, node or tensor (edge) to see its details.</p>")
        self.plot.hide()

    def restyle(self) -> None:
        """The histogram's background, axes and title in the colour scheme in use."""
        pal = palette()
        self.plot.setBackground(pal.background)
        for side in ("left", "bottom"):
            self.plot.getAxis(side).setPen(pal.ink)
            self.plot.getAxis(side).setTextPen(pal.ink)

    def html(self) -> str:
        return self.text.toPlainText()

    # ---- histogram -----------------------------------------------------------------------------------------
    def histogram(self, data, title: str) -> None:
        if data is None or np.size(data) < 2 or not np.issubdtype(np.asarray(data).dtype, np.number):
            self.plot.hide()
            return
        values, total = sampled(data)
        values = values[np.isfinite(values)]
        if values.size < 2:
            self.plot.hide()
            return
        counts, edges = np.histogram(values, bins=min(64, max(8, int(np.sqrt(values.size)))))
        self.plot.clear()
        self.restyle()
        self.plot.plot(edges, counts, stepMode="center", fillLevel=0, brush=(0, 114, 178, 150),
                       pen=pg.mkPen(palette().ink, width=1))
        note = f" (histogram of {values.size} evenly spaced)" if values.size < total else ""
        self.plot.setTitle(html.escape(f"{title}: {total} values{note}"), size="8pt", color=palette().ink)
        self.plot.show()

    # ---- TFLite --------------------------------------------------------------------------------------------
    def _tensor_row(self, doc, sg, t: int) -> str:
        tensor = sg.tensors[t]
        perm = doc.result.plan.perm(t, tensor.rank) if doc.result is not None else None
        after = shape_text(L.apply(tensor.shape, perm)) if perm is not None else "?"
        const = " (constant)" if tensor.is_constant else ""
        return (f"{link('tfl-tensor', t, elide(tensor.name or f'tensor {t}', 48))}{const}<br>"
                f"&nbsp;&nbsp;{shape_text(tensor.shape)} → {after}, {tensor.dtype}")

    def show_tflite_op(self, doc, index: int, subgraph: int = 0) -> None:
        sg = doc.graph.subgraphs[subgraph]
        op = sg.ops[index]
        producers, consumers = sg.producers(), sg.consumers()
        cat = doc.result.categories.get(index) if doc.result is not None and subgraph == 0 else None
        rows = [("type", html.escape(op.opcode + (" (custom)" if op.custom else ""))),
                ("index", f"{index}" + (f" in subgraph {subgraph}" if subgraph else "")),
                ("category", html.escape(getattr(cat, "value", "—") if cat else "—"))]
        rows.append(("inputs", "<br>".join(self._tensor_row(doc, sg, t) for t in op.inputs if t >= 0) or "—"))
        rows.append(("outputs", "<br>".join(self._tensor_row(doc, sg, t) for t in op.outputs if t >= 0)))
        rows.append(("producers", _links([link("tfl-op", producers[t], f"{sg.ops[producers[t]].opcode}#{producers[t]}")
                                          for t in op.inputs if t in producers])))
        rows.append(("consumers", _links([link("tfl-op", c, f"{sg.ops[c].opcode}#{c}")
                                          for t in op.outputs for c in consumers.get(t, [])])))
        attrs = [html.escape(f"{k} = {v}") for k, v in op.options.items()]
        rows.append(("attributes", "<br>".join(attrs) or "—"))
        if doc.trace is not None and subgraph == 0:
            rows.append(("ONNX nodes", _links([link("onnx-node", n, n) for n in doc.trace.op_nodes.get(index, [])])))
        for c in doc.conflicts():
            if c.op == index and c.subgraph == subgraph:
                rows.append(("conflict", html.escape(f"{c.kind}: {c.reason}")))
        self.text.setHtml(f"<h3>{html.escape(op.opcode)} #{index}</h3>" + _rows(rows))
        weights = [sg.tensors[t] for t in op.inputs if t >= 0 and sg.tensors[t].is_constant]
        weights.sort(key=lambda x: -x.data.size)
        self.histogram(weights[0].data if weights else None, weights[0].name[-40:] if weights else "")

    def show_tflite_tensor(self, doc, t: int, subgraph: int = 0) -> None:
        sg = doc.graph.subgraphs[subgraph]
        tensor = sg.tensors[t]
        producers, consumers = sg.producers(), sg.consumers()
        plan = doc.result.plan if doc.result is not None and subgraph == 0 else None
        perm = plan.perm(t, tensor.rank) if plan is not None else None
        rows = [("name", html.escape(tensor.name)), ("index", str(t)),
                ("shape (TFLite)", shape_text(tensor.shape)),
                ("shape (ONNX)", shape_text(L.apply(tensor.shape, perm)) if perm is not None else "not converted"),
                ("dtype", tensor.dtype),
                ("layout", html.escape(L.name(perm, tensor.rank)) if perm is not None else "—"),
                ("why", html.escape(plan.why.get(t, "—")) if plan is not None else "—"),
                ("quantization", html.escape(_quant(tensor.quantization)))]
        if plan is not None and t in plan.pins:
            rows.append(("pinned", html.escape(L.name(plan.pins[t], tensor.rank))))
        if t in producers:
            p = producers[t]
            rows.append(("producer", link("tfl-op", p, f"{sg.ops[p].opcode}#{p}")))
        else:
            rows.append(("producer", "graph input" if t in sg.inputs else ("constant" if tensor.is_constant else "—")))
        rows.append(("consumers", _links([link("tfl-op", c, f"{sg.ops[c].opcode}#{c}")
                                          for c in consumers.get(t, [])])))
        if doc.trace is not None and subgraph == 0:
            rows.append(("ONNX values", _links([link("onnx-value", v, v)
                                                for v in doc.trace.tensor_values.get(t, [])])))
        for c in doc.conflicts():
            if c.tensor == t and c.subgraph == subgraph:
                rows.append(("conflict", html.escape(f"{c.kind}: {c.reason}")))
        self.text.setHtml(f"<h3>Tensor {t}</h3>" + _rows(rows))
        self.histogram(tensor.data, "values")

    # ---- layers --------------------------------------------------------------------------------------------
    def show_group(self, layer) -> None:
        """A closed group's box: what it holds (core.session.layers.Layer)."""
        mix = ", ".join(f"{n} {html.escape(c)}" for c, n in layer.categories.items())
        rows = [("group", html.escape(elide(layer.id, 60))), ("ops", str(len(layer.ops))),
                ("ONNX nodes", str(len(layer.nodes)) if layer.nodes else "not converted"),
                ("groups inside", str(len(layer.children)))]
        if mix:
            rows.append(("categories", mix))
        rows += [("conflicts", str(layer.conflicts)), ("Transposes", str(layer.transposes))]
        muted = css("muted")
        self.text.setHtml(f"<h3>{html.escape(layer.label)}</h3>" + _rows(rows) +
                          f"<p style='color:{muted}'>Double-click, Enter or + opens it; Backspace on what is inside "
                          "closes it again.</p>")
        self.plot.hide()

    # ---- ONNX ----------------------------------------------------------------------------------------------
    def show_onnx_node(self, doc, name: str) -> None:
        from onnx import helper
        node = doc.onnx_nodes().get(name)
        if node is None:
            self.clear()
            return
        shapes, inits = doc.onnx_shapes, doc.onnx_initializers()
        rows = [("type", html.escape(node.op_type)), ("name", html.escape(name))]
        if node.domain:
            rows.append(("domain", html.escape(node.domain)))

        def value_row(v):
            kind = " (initializer)" if v in inits else ""
            return f"{link('onnx-value', v, elide(v, 48))}{kind}: {(shape_text(shapes.get(v)) or '?')}"
        rows.append(("inputs", "<br>".join(value_row(v) for v in node.input if v) or "—"))
        rows.append(("outputs", "<br>".join(value_row(v) for v in node.output if v)))
        producer, consumers = doc.onnx_links()
        rows.append(("producers", _links([link("onnx-node", producer[v], producer[v])
                                          for v in node.input if v in producer])))
        rows.append(("consumers", _links([link("onnx-node", c, c) for v in node.output for c in consumers.get(v, [])])))
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute
                 if a.type not in (a.GRAPH, a.GRAPHS, a.TENSOR)}
        rows.append(("attributes", "<br>".join(html.escape(f"{k} = {v}") for k, v in attrs.items()) or "—"))
        if doc.trace is not None and name in doc.trace.node_op:
            op = doc.trace.node_op[name]
            rows.append(("from TFLite op", link("tfl-op", op, f"{doc.graph.main.ops[op].opcode}#{op}")))
        c = doc.inserted().get(name)
        if c is not None:
            rows.append(("inserted for", html.escape(f"conflict ({c.kind}): {c.reason}")))
        self.text.setHtml(f"<h3>{html.escape(node.op_type)}</h3>" + _rows(rows))
        consts = [inits[v] for v in node.input if v in inits]
        consts.sort(key=lambda t: -int(np.prod(t.dims)) if t.dims else 0)
        self.histogram(initializer_values(doc, consts[0]) if consts else None, consts[0].name[-40:] if consts else "")

    def show_onnx_value(self, doc, value: str) -> None:
        shapes, inits = doc.onnx_shapes, doc.onnx_initializers()
        producer, consumers = doc.onnx_links()
        rows = [("name", html.escape(value)), ("shape", shape_text(shapes.get(value)) or "unknown")]
        if value in inits:
            rows.append(("initializer", "yes"))
        if value in producer:
            rows.append(("producer", link("onnx-node", producer[value], producer[value])))
        rows.append(("consumers", _links([link("onnx-node", c, c) for c in consumers.get(value, [])])))
        if doc.trace is not None and value in doc.trace.value_tensor:
            t = doc.trace.value_tensor[value]
            rows.append(("TFLite tensor", link("tfl-tensor", t, elide(doc.graph.main.tensors[t].name, 48))))
        self.text.setHtml("<h3>Value</h3>" + _rows(rows))
        self.histogram(initializer_values(doc, inits[value]) if value in inits else None, "values")

