"""The look of the panes (issue 35) as a person sees it: View › Colour scheme switches the panes, the legend and the
docks to the dark palette (pictures exported stay light unless File › Export asks for dark), an attribute search's
row centres its op in both panes, and a label that would read below 7 px at fit zoom is not drawn. Real input only
(tests/gui_harness.py); pixels read from grabs of the widgets."""
from __future__ import annotations

from collections import Counter

import numpy as np

from tests.gui_harness import scenario
from tests.gui_scenarios_find import _both_follow, _click_row, _open, _rows, _search

LONG = "serving.default.images.of.the.model.input.tensor"   # too long for its box at the normal size: elided
CHAIN = 14                              # ops after it: at fit zoom the boxes are small but not quick fills


def _commonest(image) -> str:
    """The most frequent colour of a QImage (a pane's background: the graph covers little of it), as #rrggbb."""
    img = image.convertToFormat(image.Format.Format_RGB32)
    w, h = img.width(), img.height()
    px = np.frombuffer(img.constBits(), np.uint8, img.bytesPerLine() * h).reshape(h, img.bytesPerLine() // 4, 4)
    bgr = px[:, :w, :3].reshape(-1, 3)
    (b, g, r), _ = Counter(map(tuple, bgr[:: max(1, len(bgr) // 20000)].tolist())).most_common(1)[0]
    return f"#{r:02x}{g:02x}{b:02x}"


def _backgrounds(h) -> dict[str, str]:
    from inspector.gui.main_window import ONNX, TFLITE
    h.pump(0.2)
    out = {which: _commonest(h.view(which).viewport().grab().toImage()) for which in (TFLITE, ONNX)}
    out["legend"] = _commonest(h.w.legend.grab().toImage())
    out["details"] = _commonest(h.w.details.grab().toImage())
    return out


def _luminance(name: str) -> float:
    from PySide6.QtGui import QColor

    from inspector.gui.palette import luminance
    return luminance(QColor(name))


def _export(h, name: str) -> str:
    """File › Export › Whole graph as PNG…, the path typed into its dialog; the picture's commonest colour."""
    from PySide6.QtGui import QImage
    out = h.tmp / name
    h.on_dialog(h.file_dialog(str(out)))
    h.menu("File", "Export", "Whole graph as PNG…")
    h.wait_until(out.is_file, f"{name} is written", 30)
    return _commonest(QImage(str(out)))


@scenario
def dark_scheme(h):
    """View › Colour scheme › Dark: the panes' background, the legend and the docks turn dark and the choice is
    remembered; a PNG export stays light, dark once File › Export › Dark palette in pictures is ticked; Light and
    System (a desktop that says nothing: light) turn it back."""
    from inspector.gui.palette import DARK, LIGHT, palette
    w = h.w
    _open(h)
    light, dark = palette(LIGHT).background.name(), palette(DARK).background.name()
    before = _backgrounds(h)
    h.expect(before["tflite"] == before["onnx"] == before["legend"] == light, f"light panes: {before}")
    h.step("View › Colour scheme › Dark")
    h.menu("View", "Colour scheme", "Dark")
    after = _backgrounds(h)
    h.expect(after["tflite"] == after["onnx"] == after["legend"] == dark, f"after Dark: {after}, not {dark}")
    h.expect(_luminance(after["details"]) < 0.1, f"the Details dock stays light: {after['details']}")
    muted = palette(DARK).muted.name()            # the Details text, written in the scheme's colours, follows too
    h.expect(muted in w.details.text.toHtml(), f"the Details text keeps the light scheme's colours, not {muted}")
    h.expect(w.settings.value("view/scheme") == DARK, f"the choice is not remembered: {w.settings.value('view/scheme')}")
    conv = next(it for it in w.scenes["tflite"].nodes if it.category == "Implicit")
    h.expect(conv.fill == palette(DARK).color("Implicit") != palette(LIGHT).color("Implicit"),
             f"an Implicit box is filled {conv.fill.name()} in the dark scheme")
    h.check()
    h.step("export a PNG: light")
    got = _export(h, "light.png")
    h.expect(got == light, f"the exported picture's background is {got}, not the light {light}")
    h.expect(_backgrounds(h)["tflite"] == dark, "the pane did not go back to dark after the export")
    h.step("File › Export › Dark palette in pictures, export again: dark")
    h.menu("File", "Export", "Dark palette in pictures")
    h.expect(w.export_dark.isChecked(), "Dark palette in pictures did not tick")
    got = _export(h, "dark.png")
    h.expect(got == dark, f"the exported picture's background is {got}, not the dark {dark}")
    h.check()
    h.step("View › Colour scheme › Light, then System")
    h.menu("View", "Colour scheme", "Light")
    h.expect(_backgrounds(h)["tflite"] == light, "Light does not turn the pane light")
    h.menu("View", "Colour scheme", "Dark")
    h.menu("View", "Colour scheme", "System (follow the desktop)")
    got = _backgrounds(h)
    h.expect(got["tflite"] == light and _luminance(got["details"]) > 0.5,
             f"System on a desktop with no scheme (light): {got}")
    h.check()


def attributes_model(h) -> str:
    """x [1, 9, 13, 3] -> `down` (CONV_2D, stride 2) -> `flat` (CONV_2D, stride 1); both concatenated on axis 3
    (`cat`), then a MEAN over H, W."""
    from inspector.core.io.tflite_builder import ModelBuilder
    rng = np.random.default_rng(7)
    b = ModelBuilder()
    x = b.input("x", [1, 9, 13, 3])

    def conv(t, name, cin, stride, shape):
        out = b.tensor(name, shape)
        wt = b.const(f"{name}_w", rng.standard_normal((4, 3, 2, cin)).astype(np.float32))
        b.op("CONV_2D", [t, wt, b.const(f"{name}_b", np.zeros(4, np.float32))], [out],
             {"padding": "SAME", "stride_h": stride, "stride_w": stride})
        return out

    down = conv(x, "down", 3, 2, [1, 5, 7, 4])
    flat = conv(down, "flat", 4, 1, [1, 5, 7, 4])
    cat = b.tensor("cat", [1, 5, 7, 8])
    b.op("CONCATENATION", [down, flat], [cat], {"axis": 3})
    y = b.tensor("y", [1, 8])
    b.op("MEAN", [cat, b.const("axes", np.array([1, 2], np.int32))], [y], {"keep_dims": False})
    b.output(y)
    return str(b.save(h.tmp / "attributes.tflite"))


@scenario
def attribute_search(h):
    """`stride=2` lists the strided conv in both panes with the attribute it matched (TFLite's stride_h/stride_w,
    ONNX's strides); a row clicked selects and centres it in both; `axis:3` finds the TFLite concatenation (ONNX's
    Concat is on axis 1); the field says the syntax."""
    from inspector.gui.main_window import ONNX, TFLITE
    w = h.w
    h.step("open the generated model")
    w.open_path(attributes_model(h))
    h.settle()
    h.check()
    h.expect("stride=2" in w.search_field.placeholderText() and "axis:3" in w.search_field.toolTip(),
             f"the field does not say the syntax: {w.search_field.placeholderText()!r}")
    h.step("search stride=2")
    _search(h, "stride=2")
    tree = w.results.tree
    rows = [r + (tree.topLevelItem(i).text(5),) for i, r in enumerate(_rows(h))]
    h.expect(not tree.isColumnHidden(5), "the attribute column is hidden")
    sg = w.doc.graph.main
    down = ("op", next(o.index for o in sg.ops if sg.tensors[o.outputs[0]].name == "down"))
    h.expect(("CONV_2D", "TFLite", "stride_h=2, stride_w=2") in {(r[1], r[4], r[5]) for r in rows},
             f"no TFLite row for the strided conv: {rows}")
    h.expect(("Conv", "ONNX", "strides=[2,2]") in {(r[1], r[4], r[5]) for r in rows},
             f"no ONNX row for the strided Conv: {rows}")
    h.expect(len(rows) == 2, f"rows that do not match stride=2: {rows}")
    h.step("click the TFLite row")
    _click_row(h, next(i for i, r in enumerate(rows) if r[4] == "TFLite"))
    _both_follow(h, TFLITE, down, "row stride=2 (TFLite)")
    h.step("click the ONNX row")
    row = next(i for i, r in enumerate(rows) if r[4] == "ONNX")
    _click_row(h, row)
    _both_follow(h, ONNX, w._matches[row][2], "row stride=2 (ONNX)")
    h.check()
    h.step("search axis:3")
    _search(h, "axis:3")
    rows = [r + (tree.topLevelItem(i).text(5),) for i, r in enumerate(_rows(h))]
    h.expect([(r[1], r[4], r[5]) for r in rows] == [("CONCATENATION", "TFLite", "axis=3")],
             f"axis:3 rows: {rows}")
    _search(h, "axis:1")
    rows = [r + (tree.topLevelItem(i).text(5),) for i, r in enumerate(_rows(h))]
    h.expect(("Concat", "ONNX", "axis=1") in {(r[1], r[4], r[5]) for r in rows}, f"axis:1 rows: {rows}")
    h.step("a name search hides the attribute column")
    _search(h, "flat")
    h.expect(tree.isColumnHidden(5) and bool(_rows(h)), "the attribute column shows for a name search")
    h.check()


def long_input_chain(h) -> str:
    """x [1, 6, 10, 3] named LONG (no underscore: it cannot wrap) -> CHAIN unary ops (ABS, RELU, NEG, ...)."""
    from inspector.core.io.tflite_builder import ModelBuilder
    b = ModelBuilder()
    t = b.input(LONG, [1, 6, 10, 3])
    for i in range(CHAIN):
        nxt = b.tensor(f"u{i}", [1, 6, 10, 3])
        b.op(("ABS", "RELU", "NEG")[i % 3], [t], [nxt])
        t = nxt
    b.output(t)
    return str(b.save(h.tmp / "long_input_chain.tflite"))


def _ink(h, item) -> int:
    """Pixels inside a node's box (its border left out) that are not its fill: its label's."""
    from PySide6.QtGui import QColor
    view = h.view("tflite")
    img = view.viewport().grab().toImage().convertToFormat(view.viewport().grab().toImage().Format.Format_RGB32)
    r = view.mapFromScene(item.mapToScene(item.rect).boundingRect()).boundingRect()
    r = r.adjusted(4, 4, -4, -4)
    fill = item.fill
    ratio = img.width() / max(view.viewport().width(), 1)       # a grab is in device pixels
    count = 0
    for y in range(int(r.top() * ratio), int(r.bottom() * ratio)):
        for x in range(int(r.left() * ratio), int(r.right() * ratio)):
            c = QColor(img.pixel(x, y))
            if abs(c.red() - fill.red()) + abs(c.green() - fill.green()) + abs(c.blue() - fill.blue()) > 60:
                count += 1
    return count


@scenario
def readable_labels(h):
    """At fit zoom (F) the boxes are small: the graph input's box, whose long name would be drawn elided at the
    normal size (7.5 pt) below 7 px, shows no text, while the short op types (grown to fit their boxes) stay
    readable; zoomed in (Ctrl+=) until the normal size reads at 7 px, its name is drawn."""
    from PySide6.QtCore import QPoint

    from inspector.gui.lod import LOD_TEXT, screen_px
    from inspector.gui.main_window import TFLITE
    w = h.w
    h.step("open a graph input with a long name and a chain")
    w.open_path(long_input_chain(h))
    h.settle()
    view = h.view(TFLITE)
    h.step("click the pane, F to fit")
    h.click(view.viewport(), QPoint(5, 5))
    h.key("F", view)
    h.pump(0.3)
    scale = view.transform().m11()
    nodes = w.scenes[TFLITE].nodes
    source = next(it for it in nodes if it.node.kind == "input")
    short = next(it for it in nodes if it.node.title == "ABS")
    h.expect(LOD_TEXT <= scale and screen_px(7.5, scale) < 7 <= screen_px(10, scale),
             f"fit zoom {scale:.2f}: the test's model is the wrong size for it")
    ink = _ink(h, source), _ink(h, short)
    h.expect(ink[0] == 0, f"the input's box draws {ink[0]} px of text at {screen_px(7.5, scale):.1f} px")
    h.expect(ink[1] > 20, f"the ABS box draws no readable title ({ink[1]} px of text) at {scale:.2f}")
    h.step("Ctrl+= until a 7.5 pt name reads at 7 px")
    while screen_px(7.5, view.transform().m11()) < 7.2:
        h.key("Ctrl+=")
        h.pump(0.05)
    _search(h, LONG)                    # Enter: the input selected and centred (at this zoom: not zoomed)
    h.key("Return", w.search_field)
    h.pump(0.2)
    h.expect(_ink(h, source) > 20, f"zoomed to {view.transform().m11():.2f}, the input's name is not drawn")
    h.check()


@scenario
def desktop_scheme(h):
    """On a desktop whose colour scheme switches (tests/desktop_bus.py; run by tests/test_gui_scheme_x.py): System
    (the default) follows it to dark and back; Light chosen in the View menu stays light when the desktop goes dark;
    System chosen again follows the dark desktop at once."""
    from tests.desktop_bus import switch

    from inspector.gui.palette import DARK, LIGHT, palette
    w = h.w
    _open(h)
    light, dark = palette(LIGHT).background.name(), palette(DARK).background.name()
    h.expect(w.scheme.choice == "system" and _backgrounds(h)["tflite"] == light,
             f"a fresh window on a desktop that said nothing: {w.scheme.choice}, {_backgrounds(h)}")
    h.step("the desktop switches to dark")
    switch("dark")
    h.wait_until(lambda: _backgrounds(h)["tflite"] == dark, "the panes follow the desktop to dark", 30)
    got = _backgrounds(h)
    h.expect(got["legend"] == dark and _luminance(got["details"]) < 0.1, f"with a dark desktop: {got}")
    h.step("the desktop switches back to light")
    switch("light")
    h.wait_until(lambda: _backgrounds(h)["tflite"] == light, "the panes follow the desktop to light", 30)
    h.check()
    h.step("View › Colour scheme › Light, then the desktop goes dark: the choice holds")
    h.menu("View", "Colour scheme", "Light")
    switch("dark")
    h.wait_until(lambda: h.app.styleHints().colorScheme().name == "Dark", "Qt hears the desktop", 30)
    got = _backgrounds(h)
    h.expect(got["tflite"] == light and _luminance(got["details"]) > 0.5, f"Light chosen, dark desktop: {got}")
    h.step("View › Colour scheme › System: dark at once")
    h.menu("View", "Colour scheme", "System (follow the desktop)")
    got = _backgrounds(h)
    h.expect(got["tflite"] == dark and _luminance(got["details"]) < 0.1, f"System on a dark desktop: {got}")
    h.check()


desktop_scheme.desktop = True     # needs a desktop bus (tests/desktop_bus.py): not among the offscreen scenarios


@scenario
def copy_names(h):
    """Names shown elided are whole elsewhere: a node's tooltip names it, Ctrl+C in the pane copies the selected op's
    whole name, a click on the pin bar's names copies the tensor's, Ctrl+C on a Search results row its name."""
    from PySide6.QtWidgets import QApplication

    from inspector.gui.main_window import TFLITE
    w = h.w
    h.step("open a model with a long graph input name")
    w.open_path(long_input_chain(h))
    h.settle()
    sc = w.scenes[TFLITE]
    source = next(it for it in sc.nodes if it.node.kind == "input")
    h.expect(LONG in source.toolTip(), f"the input's tooltip does not name it whole: {source.toolTip()!r}")
    op = next(it for it in sc.nodes if it.node.title == "ABS")
    h.expect("u0" in op.toolTip().splitlines()[-1], f"the op's tooltip does not name it: {op.toolTip()!r}")
    h.step("click the input, Ctrl+C")
    clip = QApplication.clipboard()
    clip.setText("")
    h.click_item(TFLITE, source)
    h.key("Ctrl+C", h.view(TFLITE))
    h.expect(clip.text() == LONG, f"Ctrl+C copied {clip.text()!r}")
    h.step("click an edge of the input: the pin bar names it, a click there copies it")
    clip.setText("")
    edge = sc.edges_by_tensor[w.doc.graph.main.inputs[0]][0]
    h.click_item(TFLITE, edge)
    bar = w.editor.pin_bar
    h.wait_until(bar.label.isVisible, "the pin bar shows", 10)
    h.expect(LONG not in bar.label.text() and LONG in bar.label.toolTip(),
             f"the pin bar: {bar.label.text()!r} / {bar.label.toolTip()!r}")
    h.click(bar.label)
    h.expect(clip.text() == LONG, f"a click on the pin bar's name copied {clip.text()!r}")
    h.step("Ctrl+C on a Search results row")
    clip.setText("")
    _search(h, "serving")
    _click_row(h, 0)
    h.key("Ctrl+C", w.results.tree)
    h.expect(clip.text() == LONG, f"Ctrl+C on the row copied {clip.text()!r}")
    h.check()
    h.step("a model with conflicts: Ctrl+C on a Conflicts row copies its tensor, op and Transpose names")
    from tests.gui_scenarios import CONFLICT_MODEL
    w.open_path(h.model(CONFLICT_MODEL))
    h.settle()
    h.dock_tab("Conflicts")
    tree = w.conflicts
    item = tree.topLevelItem(0)
    h.expect(item is not None, "no conflict listed")
    if item is not None:
        clip.setText("")
        h.click(tree.viewport(), tree.visualItemRect(item).center())
        h.key("Ctrl+C", tree)
        c = item.data(0, 0x0100)                 # Qt.UserRole: the Conflict
        tensor = w.doc.graph.main.tensors[c.tensor].name
        h.expect(tensor in clip.text() and (item.data(1, 0x0100) or "") in clip.text(),
                 f"Ctrl+C on the row copied {clip.text()!r}, not {tensor!r} and its Transpose")
    h.check()
