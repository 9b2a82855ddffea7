"""Finding one's way (issue 35) as a person does it: the Search results dock (a row clicked) and Alt+arrows along the
edges, on a generated non-square model with a branch and a long chain. Real input only (tests/gui_harness.py)."""
from __future__ import annotations

import numpy as np

from tests.gui_harness import scenario

CHAIN = 24          # convolutions after the branch: the graph is taller than the panes at a readable zoom


def branch_and_chain(h) -> str:
    """x [1, 5, 7, 3] -> conv0 (4 channels) read by RELU, LOGISTIC and ABS (a branch of three siblings), added
    back together, then CHAIN convolutions c0.. c23 and a MEAN over H, W."""
    from inspector.core.io.tflite_builder import ModelBuilder
    rng = np.random.default_rng(35)
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])

    def conv(t, name, cin):
        out = b.tensor(name, [1, 5, 7, 4])
        w = b.const(f"{name}_w", rng.standard_normal((4, 3, 2, cin)).astype(np.float32))
        b.op("CONV_2D", [t, w, b.const(f"{name}_b", np.zeros(4, np.float32))], [out], {"padding": "SAME"})
        return out

    t0 = conv(x, "stem", 3)
    arms = []
    for opcode, name in (("RELU", "arm_relu"), ("LOGISTIC", "arm_sigmoid"), ("ABS", "arm_abs")):
        arms.append(b.tensor(name, [1, 5, 7, 4]))
        b.op(opcode, [t0], [arms[-1]])
    s = b.tensor("sum_a", [1, 5, 7, 4])
    b.op("ADD", arms[:2], [s])
    t = b.tensor("sum_b", [1, 5, 7, 4])
    b.op("ADD", [s, arms[2]], [t])
    for i in range(CHAIN):
        t = conv(t, f"c{i}", 4)
    y = b.tensor("y", [1, 4])
    b.op("MEAN", [t, b.const("axes", np.array([1, 2], np.int32))], [y], {"keep_dims": False})
    b.output(y)
    return str(b.save(h.tmp / "branch_chain.tflite"))


def _open(h) -> None:
    h.step("open the generated branch-and-chain model")
    h.w.open_path(branch_and_chain(h))
    h.settle()
    h.check()


def _op(h, output: str) -> tuple:
    sg = h.w.doc.graph.main
    return ("op", next(o.index for o in sg.ops if sg.tensors[o.outputs[0]].name == output))


def _centred(h, which: str, rect, what: str) -> None:
    """The view's centre is on `rect` (a scene rect), up to what the scene's edge allows."""
    view = h.view(which)
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    h.expect(shown.contains(rect.center()), f"{what} is not in view in the {which} pane")
    scene = view.scene().sceneRect()
    half_w, half_h = shown.width() / 2, shown.height() / 2
    # where the centre can be: the scene rect shrunk by half the view
    want_x = min(max(rect.center().x(), scene.left() + half_w), scene.right() - half_w)
    want_y = min(max(rect.center().y(), scene.top() + half_h), scene.bottom() - half_h)
    got = shown.center()
    h.expect(abs(got.x() - want_x) < 4 / view.transform().m11() + 2 and
             abs(got.y() - want_y) < 4 / view.transform().m11() + 2,
             f"{what}: the {which} view is centred at {got.x():.0f},{got.y():.0f}, not on it "
             f"({want_x:.0f},{want_y:.0f})")


def _selected_rect(h, which: str):
    from PySide6.QtCore import QRectF
    rect = QRectF()
    for it in h.w.scenes[which].selectedItems():
        rect = rect.united(it.sceneBoundingRect())
    return rect


def _both_follow(h, which: str, key, what: str, centred: bool = True) -> None:
    """`key` is what is selected in `which`, the other pane shows what the conversion made of it, both centred."""
    from inspector.gui.main_window import ONNX, TFLITE
    w = h.w
    other = ONNX if which == TFLITE else TFLITE
    h.expect(w.scenes[which].selected_keys()[0] == [key],
             f"{what}: {w.scenes[which].selected_keys()[0]} selected in the {which} pane, not {key}")
    mapped = w.doc.to_onnx([key], []) if which == TFLITE else w.doc.to_tflite([key], [])
    h.expect(bool(mapped[0]) and set(w.scenes[other].selected_keys()[0]) == set(mapped[0]),
             f"{what}: the {other} pane shows {w.scenes[other].selected_keys()[0]}, not {mapped[0]}")
    if centred:
        _centred(h, which, w.scenes[which].node_by_key[key].sceneBoundingRect(), what)
        _centred(h, other, _selected_rect(h, other), what)


def _rows(h) -> list[tuple[str, ...]]:
    tree = h.w.results.tree
    return [tuple(tree.topLevelItem(i).text(c) for c in range(5)) for i in range(tree.topLevelItemCount())]


def _click_row(h, row: int) -> None:
    tree = h.w.results.tree
    item = tree.topLevelItem(row)
    tree.scrollToItem(item)
    h.pump(0.05)
    h.click(tree.viewport(), tree.visualItemRect(item).center())


def _search(h, text: str) -> None:
    h.key("Ctrl+F")
    h.expect(h.w.search_field.hasFocus(), "Ctrl+F does not put the keyboard in the search field")
    h.w.search_field.selectAll()
    h.type(text, h.w.search_field)
    h.wait_until(lambda: not h.w._list_later.isActive(), "the results list follows the typing", 10)
    h.pump(0.1)


@scenario
def search_results_dock(h):
    """Matches listed with name, op type, category and shape; a row clicked selects and centres the node in both
    panes; a regular expression (ticked in the dock) and a bad one (said in the dock); a new model clears it."""
    from inspector.gui.main_window import ONNX, TFLITE
    w = h.w
    _open(h)
    h.step("type a name: every match listed")
    _search(h, "c17")
    rows = _rows(h)
    h.expect(h.w.results_dock.isVisible(), "the Search results dock is not shown after a search")
    h.expect(("c17", "CONV_2D", "Implicit", "1×5×7×4", "TFLite") in rows, f"no row for the TFLite op: {rows}")
    h.expect(any(r[4] == "ONNX" and r[1] == "Conv" for r in rows), f"no row for the ONNX Conv: {rows}")
    h.expect(("c17", "tensor of CONV_2D", "Implicit", "1×5×7×4", "TFLite") in rows, f"no row for the tensor: {rows}")
    h.expect(("c17", "tensor of Conv", "Implicit", "1×4×5×7", "ONNX") in rows, f"no row for the ONNX value: {rows}")
    h.expect(len(rows) == 4, f"rows that do not match: {rows}")
    h.step("click the TFLite op's row")
    _click_row(h, rows.index(("c17", "CONV_2D", "Implicit", "1×5×7×4", "TFLite")))
    _both_follow(h, TFLITE, _op(h, "c17"), "row c17 (TFLite)")
    h.expect(w.search_status.text().strip().endswith(f"of {len(rows)}"), "the toolbar does not count the row")
    h.check()
    h.step("click the ONNX Conv's row")
    row = next(i for i, r in enumerate(rows) if r[4] == "ONNX" and r[1] == "Conv")
    _click_row(h, row)
    key = w._matches[row][2]
    _both_follow(h, ONNX, key, "row of the ONNX Conv")
    h.check()
    h.step("tick Regular expression, type one")
    h.dock_tab("Search results")
    h.click(w.results.regex)
    h.expect(w.results.regex.isChecked(), "the Regular expression box did not tick")
    _search(h, "^(RELU|Sigmoid)$")
    types = sorted((r[1], r[4]) for r in _rows(h))
    h.expect(types == [("RELU", "TFLite"), ("Relu", "ONNX"), ("Sigmoid", "ONNX")],     # case-insensitive
             f"regular expression rows: {types}")
    h.step("a bad regular expression: said in the dock")
    _search(h, "c1[")
    h.expect("Not a regular expression" in w.results.status.text() and not _rows(h),
             f"the dock says {w.results.status.text()!r} with {len(_rows(h))} rows")
    h.key("Return", w.search_field)          # Enter on it: no exception, nothing selected
    h.expect("bad regular expression" in w.search_status.text(), "the toolbar does not say the expression is bad")
    h.step("a new model clears the search")
    _search(h, "stem")
    h.expect(bool(_rows(h)), "no rows for 'stem'")
    w.open_path(h.model("sample"))
    h.settle()
    h.pump(0.3)
    h.expect(w.search_field.text() == "" and not _rows(h), f"the last model's matches stay: {_rows(h)}")
    h.check()


@scenario
def keyboard_moves(h):
    """Alt+Up/Down to the producer / first consumer, Alt+Left/Right among the consumers of one producer, in
    either pane, the other following and both centred; Esc clears both panes."""
    from inspector.gui.main_window import ONNX, TFLITE
    w = h.w
    _open(h)
    sc = w.scenes[TFLITE]
    h.step("click the stem conv, Alt+Down to its first consumer")
    h.click_item(TFLITE, sc.node_by_key[_op(h, "stem")])
    _both_follow(h, TFLITE, _op(h, "stem"), "clicked stem", centred=False)
    walk = [("Alt+Down", "arm_relu"), ("Alt+Right", "arm_sigmoid"), ("Alt+Right", "arm_abs"),
            ("Alt+Right", "arm_abs"),                 # the last sibling: it stays
            ("Alt+Left", "arm_sigmoid"), ("Alt+Down", "sum_a"), ("Alt+Up", "arm_relu"), ("Alt+Up", "stem")]
    for key, output in walk:
        h.step(f"{key} to {output}")
        h.key(key)
        _both_follow(h, TFLITE, _op(h, output), f"{key} to {output}", centred=False)
    h.step("Alt+Up from the stem: the graph input")
    h.key("Alt+Up")
    x = w.doc.graph.main.inputs[0]
    h.expect(sc.selected_keys()[0] == [("in", x)], f"Alt+Up from the stem selects {sc.selected_keys()}")
    h.step("down the chain to its middle: both panes centred on each")
    h.click_item(TFLITE, sc.node_by_key[_op(h, "sum_b")])
    for i in range(CHAIN // 2):
        h.key("Alt+Down")
        _both_follow(h, TFLITE, _op(h, f"c{i}"), f"Alt+Down to c{i}", centred=i >= 4)
    h.step("Esc clears the selection in both panes")
    h.key("Escape")
    h.expect(sc.selected_keys() == ([], []) and w.scenes[ONNX].selected_keys() == ([], []),
             f"Esc leaves {sc.selected_keys()} / {w.scenes[ONNX].selected_keys()} selected")
    h.check()
    h.step("the ONNX pane: click Sigmoid, Alt+Left, Alt+Up")
    onnx = w.scenes[ONNX]
    sigmoid = next(it for it in onnx.nodes if it.node.title == "Sigmoid")
    h.click_item(ONNX, sigmoid)
    h.key("Alt+Left")
    relu = [it.node.key for it in onnx.nodes if it.node.title == "Relu"]
    _both_follow(h, ONNX, relu[0], "Alt+Left from Sigmoid", centred=False)
    h.key("Alt+Up")
    conv = onnx.selected_keys()[0]
    h.expect(len(conv) == 1 and onnx.node_by_key[conv[0]].node.title == "Conv", f"Alt+Up from Relu: {conv}")
    _both_follow(h, ONNX, conv[0], "Alt+Up from Relu", centred=False)
    h.check()
