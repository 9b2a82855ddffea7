"""Layers in the panes (issue 35): a group closed in one pane is closed in the other, opened again by a double-click
on its box, by its + control or by Enter, closed by Backspace; its box counts the conflicts inside it; selecting a
node hidden in a closed group (from a search, the Conflicts dock or the other pane) opens what hides it; a big model
opens collapsed. Real input throughout (QTest on the real widgets)."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtTest import QTest

from inspector.core.io.tflite_builder import ModelBuilder
from inspector.gui.folding import FOLD_OPS, group_key
from inspector.gui.graph_group import GroupItem
from inspector.gui.main_window import ONNX, TFLITE
from inspector.gui.palette import CONFLICT, palette

from .test_gui_edit import open_model, settle, window  # noqa: F401  (fixture)
from .test_layers import _named_model

pytestmark = pytest.mark.gui
STEM, HEAD = group_key("m/stem"), group_key("m/head")


def boxes(w, which: str) -> set:
    return {it.node.key for it in w.scenes[which].nodes if isinstance(it, GroupItem)}


def onnx_nodes_of(w, layer_id: str) -> set:
    return set(w.layers.tree.layers[layer_id].nodes)


def shown(w, which: str) -> set:
    return {it.node.key for it in w.scenes[which].nodes}


def item(w, which: str, key):
    w.scenes[which].finish()
    return w.scenes[which].node_by_key[key]


def at(w, which: str, it, point=None):
    """The view of a pane centred on an item at a readable scale, and where (a point of) the item is on screen."""
    view = w.panes[which].main_view
    view.reveal(it.sceneBoundingRect())
    return view, view.mapFromScene(it.mapToScene(point) if point is not None else it.sceneBoundingRect().center())


def click(w, which: str, key, double: bool = False, point=None):
    view, pos = at(w, which, item(w, which, key), point)
    (QTest.mouseDClick if double else QTest.mouseClick)(view.viewport(), Qt.LeftButton, Qt.NoModifier, pos)
    return view


def key(view, k) -> None:
    QTest.keyClick(view.viewport(), k)


def in_step(w, closed: set) -> None:
    """Both panes show the same closed groups, and nothing of what is inside them."""
    assert boxes(w, TFLITE) == boxes(w, ONNX) == closed
    for g in closed:
        assert not shown(w, TFLITE) & {("op", op) for op in w.layers.tree.layers[g[1]].ops}
        assert not shown(w, ONNX) & onnx_nodes_of(w, g[1])


def test_a_group_closed_in_one_pane_is_closed_in_both_and_opens_by_double_click_enter_and_plus(qtbot, window,  # noqa: F811
                                                                                                tmp_path):
    w = window
    s = open_model(qtbot, w, _named_model(tmp_path / "m.tflite"))
    n_ops, n_nodes = len(s.graph.main.ops), len(s.result.model.graph.node)
    in_step(w, set())                                           # a small model opens as before: every op shown
    assert len([k for k in shown(w, TFLITE) if k[0] == "op"]) == n_ops
    # Backspace on a stem op (TFLite pane): the stem closes in both panes, its box selected in both
    view = click(w, TFLITE, ("op", 1))
    key(view, Qt.Key_Backspace)
    settle(qtbot, w)
    in_step(w, {STEM})
    assert w.scenes[TFLITE].selected_keys()[0] == [STEM] and w.scenes[ONNX].selected_keys()[0] == [STEM]
    assert item(w, ONNX, STEM).node.lines[0] == "2 ops"
    assert "m/stem" in w.details.html() and "Implicit" in w.details.html()     # Details: what the box holds
    # edges to the box: the stem's output into the head's reshape (one edge, drawn to the box)
    tfl = w.scenes[TFLITE]
    out_of_box = [e for e in tfl.edges if tfl.vg.nodes[e.edge.src].key == STEM]
    assert len(out_of_box) == 1 and tfl.vg.nodes[out_of_box[0].edge.dst].key == ("op", 2)
    # a double-click on the box in the ONNX pane opens it in both
    click(w, ONNX, STEM, double=True)
    settle(qtbot, w)
    in_step(w, set())
    assert len([k for k in shown(w, ONNX) if not isinstance(k, tuple)]) == n_nodes
    # Backspace on an ONNX node of the head, then Enter on its box (selected by the close): open again
    node = next(n for n in onnx_nodes_of(w, "m/head") if w.layers.tree.node_layer[n] == "m/head")   # not in its conv
    view = click(w, ONNX, node)
    key(view, Qt.Key_Backspace)
    settle(qtbot, w)
    in_step(w, {HEAD})
    key(view, Qt.Key_Return)
    settle(qtbot, w)
    in_step(w, set())
    # closed again from the TFLite pane, opened by its + control
    view = click(w, TFLITE, ("op", 0))
    key(view, Qt.Key_Backspace)
    settle(qtbot, w)
    in_step(w, {STEM})
    click(w, TFLITE, STEM, point=item(w, TFLITE, STEM).control().center())
    settle(qtbot, w)
    in_step(w, set())


def frames(w, which: str) -> dict:
    return {f.layer.id: f for f in w.scenes[which].group_frames}


def test_an_open_group_has_a_frame_whose_minus_closes_it_in_both_panes(qtbot, window, tmp_path):  # noqa: F811
    """Each open group is framed around its nodes in both panes; a click on its frame's tab (− and its label) closes
    it in both; opened again (its box's +), it is framed again."""
    w = window
    open_model(qtbot, w, _named_model(tmp_path / "m.tflite"))
    qtbot.waitUntil(lambda: frames(w, TFLITE).keys() == frames(w, ONNX).keys() == {"m/stem", "m/head", "m/head/conv"})
    for which in (TFLITE, ONNX):
        stem = frames(w, which)["m/stem"]
        inside = [it for it in w.scenes[which].nodes if it.node.key in (
            {("op", op) for op in w.layers.tree.layers["m/stem"].ops} | onnx_nodes_of(w, "m/stem"))]
        assert inside and all(stem.rect.contains(it.sceneBoundingRect().center()) for it in inside)
        assert not frames(w, which)["m/head"].rect.intersects(inside[0].sceneBoundingRect())
    view = w.panes[ONNX].main_view
    tab = frames(w, ONNX)["m/stem"]
    view.reveal(tab.tab)
    QTest.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, view.mapFromScene(tab.control().center()))
    settle(qtbot, w)
    in_step(w, {STEM})
    qtbot.waitUntil(lambda: "m/stem" not in frames(w, TFLITE) and "m/stem" not in frames(w, ONNX))
    click(w, TFLITE, STEM, point=item(w, TFLITE, STEM).control().center())
    settle(qtbot, w)
    in_step(w, set())
    qtbot.waitUntil(lambda: "m/stem" in frames(w, TFLITE) and "m/stem" in frames(w, ONNX))


def test_a_closed_group_s_box_shows_the_conflicts_inside_it(qtbot, window, tmp_path):  # noqa: F811
    w = window
    s = open_model(qtbot, w, _named_model(tmp_path / "m.tflite"))
    conflicts = len(s.result.plan.conflicts)
    assert conflicts >= 1
    view = click(w, TFLITE, ("op", 2))                          # the head's reshape (its conv is a group inside)
    key(view, Qt.Key_Backspace)
    settle(qtbot, w)
    view = click(w, TFLITE, ("op", 0))
    key(view, Qt.Key_Backspace)
    settle(qtbot, w)
    in_step(w, {STEM, HEAD})
    for which in (TFLITE, ONNX):
        head, stem = item(w, which, HEAD), item(w, which, STEM)
        assert head.conflicted() and not stem.conflicted()
        assert f"{conflicts} conflict" in head.node.lines[1] and len(stem.node.lines) == 1
        # the badge is painted: the conflict colour on the head's box and none on the stem's
        view = w.panes[which].main_view
        assert _painted(view, head, palette().color(CONFLICT)) > 20
        assert _painted(view, stem, palette().color(CONFLICT)) == 0


def _painted(view, it, colour: QColor) -> int:
    """Pixels of this colour where the item is drawn in the view."""
    view.resetTransform()
    view.centerOn(it)
    rect = view.mapFromScene(it.sceneBoundingRect()).boundingRect().adjusted(-4, -4, 4, 4)
    img = QImage(view.viewport().size(), QImage.Format_RGB32)
    p = QPainter(img)
    view.render(p, img.rect(), view.viewport().rect())
    p.end()
    return sum(1 for x in range(max(rect.left(), 0), min(rect.right(), img.width()))
               for y in range(max(rect.top(), 0), min(rect.bottom(), img.height()))
               if QColor(img.pixel(QPoint(x, y))) == colour)


def test_selecting_a_node_hidden_in_a_closed_group_opens_it(qtbot, window, tmp_path):  # noqa: F811
    w = window
    s = open_model(qtbot, w, _named_model(tmp_path / "m.tflite"))
    for op in (2, 0):
        view = click(w, TFLITE, ("op", op))
        key(view, Qt.Key_Backspace)
        settle(qtbot, w)
    in_step(w, {STEM, HEAD})
    # from the Conflicts dock: the conflict's op is in the head
    tree = w.conflicts
    row = tree.topLevelItem(0)
    QTest.mouseClick(tree.viewport(), Qt.LeftButton, Qt.NoModifier, tree.visualItemRect(row).center())
    settle(qtbot, w)
    c = s.result.plan.conflicts[0]
    assert STEM in boxes(w, TFLITE) and HEAD not in boxes(w, TFLITE) and boxes(w, TFLITE) == boxes(w, ONNX)
    assert ("op", c.op) in shown(w, TFLITE) and ("op", c.op) in w.scenes[TFLITE].selected_keys()[0]
    # from a search: the stem's second conv
    QTest.mouseClick(w.search_field, Qt.LeftButton)
    QTest.keyClicks(w.search_field, "m/stem/conv2")
    QTest.keyClick(w.search_field, Qt.Key_Return)
    settle(qtbot, w)
    assert STEM not in boxes(w, TFLITE) and boxes(w, TFLITE) == boxes(w, ONNX)
    assert ("op", 1) in w.scenes[TFLITE].selected_keys()[0] or set(s.result.trace.op_nodes[1]) & set(
        w.scenes[ONNX].selected_keys()[0])


def _big_scoped(path, blocks: int, per: int):
    """A chain of `blocks` blocks of `per` ops each (net/block_i/op_j names), non-square."""
    b = ModelBuilder()
    t = b.input("x", [1, 3, 5, 7])
    for i in range(blocks):
        for j in range(per):
            out = b.tensor(f"net/block_{i}/op_{j}/Relu" if j % 2 else f"net/block_{i}/op_{j}/Abs", [1, 3, 5, 7])
            b.op("RELU" if j % 2 else "ABS", [t], [out])
            t = out
    b.output(t)
    return b.save(path)


def test_a_big_model_opens_collapsed_in_both_panes_and_a_search_opens_the_way_to_its_match(qtbot, window,  # noqa: F811
                                                                                           tmp_path):
    w = window
    blocks, per = 45, 50
    assert blocks * per >= FOLD_OPS
    s = open_model(qtbot, w, _big_scoped(tmp_path / "big.tflite", blocks, per))
    closed = boxes(w, TFLITE)
    assert closed and closed == boxes(w, ONNX)
    assert len(w.scenes[TFLITE].nodes) <= 60 < len(s.graph.main.ops)         # boxes, not ops
    # every op is in exactly one box shown, or shown itself
    tree = w.layers.tree
    inside = [op for g in closed for op in tree.layers[g[1]].ops]
    plain = [k[1] for k in shown(w, TFLITE) if k[0] == "op"]
    assert sorted(inside + plain) == list(range(len(s.graph.main.ops)))
    # a search for an op deep inside opens the groups around it, in both panes
    QTest.mouseClick(w.search_field, Qt.LeftButton)
    QTest.keyClicks(w.search_field, "net/block_30/op_7/")
    QTest.keyClick(w.search_field, Qt.Key_Return)
    settle(qtbot, w)
    op = next(o.index for o in s.graph.main.ops if s.graph.main.tensors[o.outputs[0]].name.startswith(
        "net/block_30/op_7/"))
    assert ("op", op) in shown(w, TFLITE) and ("op", op) in w.scenes[TFLITE].selected_keys()[0]
    assert set(s.result.trace.op_nodes[op]) <= shown(w, ONNX)
    assert boxes(w, TFLITE) == boxes(w, ONNX)


def _pin_from_menu(w, qtbot, tensor: int, choice: str) -> None:
    """Right-click the TFLite pane's edge of a tensor, then click `choice` in its pin menu."""
    from .test_gui_polish import click_menu_item, right_click
    edge = w.scenes[TFLITE].edges_by_tensor[tensor][0]
    view, pos = at(w, TFLITE, edge, edge.path().pointAtPercent(0.5))
    right_click(view.viewport(), pos)
    qtbot.waitUntil(lambda: w.editor.last_menu is not None and w.editor.last_menu.isVisible())
    click_menu_item(w.editor.last_menu, choice)


def test_a_pin_s_transposes_are_counted_on_the_closed_group_s_box_in_both_panes(qtbot, window, tmp_path):  # noqa: F811
    """The stem closed, its input's edge (drawn into the box) pinned from the pane's context menu: the Transpose the
    pin inserts is counted on the stem's box in both panes; the pin cleared from the same menu, it goes."""
    w = window
    s = open_model(qtbot, w, _named_model(tmp_path / "m.tflite"))
    view = click(w, TFLITE, ("op", 0))
    key(view, Qt.Key_Backspace)
    settle(qtbot, w)
    in_step(w, {STEM})
    assert len(item(w, TFLITE, STEM).node.lines) == 1           # no conflict in the stem yet
    x = s.graph.main.inputs[0]
    _pin_from_menu(w, qtbot, x, "keep as is")                   # TFLite's order into the stem's first conv
    settle(qtbot, w)
    assert s.pins == {w.editor.pin_name(x): "keep"}
    in_step(w, {STEM})
    inside = w.layers.tree.layers["m/stem"]
    assert inside.transposes >= 1
    for which in (TFLITE, ONNX):
        box = item(w, which, STEM)
        assert box.conflicted() and f"{inside.transposes} Transpose" in box.node.lines[1]
    _pin_from_menu(w, qtbot, x, "Clear this pin")
    settle(qtbot, w)
    assert not s.pins
    assert not item(w, TFLITE, STEM).conflicted() and not item(w, ONNX, STEM).conflicted()


def _menu_click(w, qtbot, text: str, key: str = "view") -> None:
    """Click a menu's item (the View menu's unless `key` names another) in the open menu (as a person does)."""
    menu = w.menu(key)
    menu.popup(w.mapToGlobal(w.rect().center()))
    qtbot.waitUntil(menu.isVisible)
    action = next(a for a in menu.actions() if a.text().replace("&", "") == text)
    QTest.mouseClick(menu, Qt.LeftButton, Qt.NoModifier, menu.actionGeometry(action).center())


def test_expand_all_groups_of_a_big_model_lays_it_out_in_a_worker_and_collapse_comes_back(qtbot, window, tmp_path,  # noqa: F811
                                                                                          monkeypatch):
    from inspector.gui import layers_job
    w = window
    s = open_model(qtbot, w, _big_scoped(tmp_path / "big.tflite", 45, 50))
    monkeypatch.setattr(layers_job, "BIG", 1000)              # this model's 2,250 ops: laid out by the worker
    scenes = dict(w.scenes)
    closed = boxes(w, TFLITE)
    started = []
    monkeypatch.setattr(layers_job.LayOut, "run", lambda job, run=layers_job.LayOut.run: (started.append(job),
                                                                                          run(job)))
    _menu_click(w, qtbot, "Expand All Groups")
    settle(qtbot, w)
    assert started                                            # the worker laid it out
    assert w.scenes == scenes                                 # the same scenes, made afresh
    assert boxes(w, TFLITE) == boxes(w, ONNX) == set()
    assert len([k for k in shown(w, TFLITE) if k[0] == "op"]) == len(s.graph.main.ops)
    assert {n.name for n in s.result.model.graph.node} <= shown(w, ONNX)
    _menu_click(w, qtbot, "Collapse Groups")
    settle(qtbot, w)
    assert boxes(w, TFLITE) == boxes(w, ONNX) == closed


def test_a_group_closed_by_backspace_while_the_worker_lays_it_out_is_selected_once_shown(qtbot, window, tmp_path,  # noqa: F811
                                                                                          monkeypatch):
    """When the folded graph is big enough for the worker, what follows the fold (selecting the closed box) waits for
    its layout instead of being lost, the status line's "Laying out…" goes, and two closes in a row lay out each
    folded graph once (an older job's end laid the newer fold out a second time)."""
    from inspector.gui import layers_job
    w = window
    open_model(qtbot, w, _big_scoped(tmp_path / "big.tflite", 45, 50))
    monkeypatch.setattr(layers_job, "BIG", 500)
    _menu_click(w, qtbot, "Expand All Groups")
    settle(qtbot, w)
    sizes = []
    monkeypatch.setattr(layers_job.LayOut, "run", lambda job, run=layers_job.LayOut.run: (
        sizes.append(tuple(len(g.nodes) for g in job.graphs)), run(job)))
    key(click(w, TFLITE, ("op", 5)), Qt.Key_Backspace)
    settle(qtbot, w)
    (group,) = boxes(w, TFLITE)
    assert sizes and group in w.scenes[TFLITE].selected_keys()[0]          # the closed group's box, selected
    assert group in w.scenes[ONNX].selected_keys()[0]                       # and in the other pane too
    assert w.statusBar().currentMessage() != "Laying out…"
    sizes.clear()
    key(click(w, TFLITE, ("op", 1505)), Qt.Key_Backspace)
    key(click(w, TFLITE, ("op", 1005)), Qt.Key_Backspace)
    settle(qtbot, w)
    assert len(boxes(w, TFLITE)) == 3 and boxes(w, TFLITE) == boxes(w, ONNX)
    assert len(sizes) == len(set(sizes))                                    # no folded graph laid out twice


def test_an_edge_between_closed_boxes_counts_each_tensor_once_and_a_box_copies_as_its_scope(tmp_path):
    """Group m/a makes two tensors, each read by two ops of group m/b: the one edge between the closed boxes stands
    for 2 tensors (it said 3: each further read of a tensor counted again). A box's name, what Ctrl+C copies, is its
    scope path, not its short label."""
    from inspector.core.io.loader import load_model
    from inspector.core.session.layers import graph_layers
    from inspector.gui import graph_model
    from inspector.gui.folding import fold
    b = ModelBuilder()
    s = [1, 3, 5, 7]
    x = b.input("x", s)
    a1, a2 = b.tensor("m/a/p/Abs", s), b.tensor("m/a/q/Relu", s)
    b.op("ABS", [x], [a1])
    b.op("RELU", [x], [a2])
    b1, b2, o = b.tensor("m/b/r/Add", s), b.tensor("m/b/s/Mul", s), b.tensor("m/b/t/Add", s)
    b.op("ADD", [a1, a2], [b1])
    b.op("MUL", [a1, a2], [b2])
    b.op("ADD", [b1, b2], [o])
    b.output(o)
    g = load_model(str(b.save(tmp_path / "two.tflite")))
    tree = graph_layers(g.main)
    shown = fold(graph_model.from_tflite(g), tree, set()).shown
    (between,) = [e for e in shown.edges if shown.nodes[e.src].layer is not None
                  and shown.nodes[e.dst].layer is not None]
    assert between.label == "2 tensors"
    groups = [n for n in shown.nodes if n.layer is not None]
    assert {n.name for n in groups} == {"m/a", "m/b"} and {n.title for n in groups} == {"a", "b"}


def _held(monkeypatch, cls, release):
    """`cls`'s run (a worker's) waits until `release` is set: what the user does meanwhile comes first."""
    run = cls.run
    monkeypatch.setattr(cls, "run", lambda job: (release.wait(60), run(job)))


def _laid_out_here(monkeypatch, at_least: int) -> list:
    """Sizes of the graphs of `at_least` nodes laid out in this process (the worker's go to the loader's child)."""
    from inspector.gui import graph_layout
    monkeypatch.setattr(graph_layout, "_CACHE", type(graph_layout._CACHE)())     # none laid out by earlier tests
    here, compute = [], graph_layout._compute
    monkeypatch.setattr(graph_layout, "_compute", lambda vg: (here.append(len(vg.nodes)) if len(vg.nodes) >= at_least
                                                              else None, compute(vg))[1])
    return here


def test_expand_all_during_a_pin_s_re_run_lays_the_new_onnx_graph_out_in_a_worker_and_keeps_the_scene(
        qtbot, window, tmp_path, monkeypatch):  # noqa: F811
    """A pin from the TFLite pane's context menu on a model opened collapsed (its re-run lays nothing out), then
    Expand All Groups before the re-run ends: the new ONNX graph, whole, was laid out on the GUI thread and its
    scene made anew (a stall of the whole graph's layout); now a worker lays it out and the same scene shows it.
    Meanwhile the window keeps the conversion it shows (Details, Conflicts) and shows the new one after."""
    import threading

    from inspector.gui import editing, layers_job
    w = window
    s = open_model(qtbot, w, _big_scoped(tmp_path / "big.tflite", 45, 50))
    monkeypatch.setattr(layers_job, "BIG", 500)
    here = _laid_out_here(monkeypatch, 500)
    release = threading.Event()
    _held(monkeypatch, editing.RerunJob, release)
    onnx_scene, before = w.scenes[ONNX], w.doc.result
    _pin_from_menu(w, qtbot, s.graph.main.inputs[0], "channels-first")   # a Transpose more: another layout
    _menu_click(w, qtbot, "Expand All Groups")
    qtbot.waitUntil(lambda: w._layout_job is None, timeout=60_000)       # the expanded panes shown, the re-run held
    assert w.doc.result is before and boxes(w, ONNX) == set()
    release.set()
    settle(qtbot, w)
    assert s.pins and w.doc.result is s.result and w.doc.result is not before
    assert here == []                                                    # nothing big laid out here
    assert w.scenes[ONNX] is onnx_scene and boxes(w, ONNX) == set()      # the same scene, the new graph whole
    assert {n.name for n in s.result.model.graph.node} == {k for k in shown(w, ONNX) if not isinstance(k, tuple)}


def test_a_closed_window_shows_nothing_of_a_layout_still_running(qtbot, window, tmp_path, monkeypatch):  # noqa: F811
    """Expand All Groups, then Quit before the worker has laid the panes out: its end shows nothing (the scenes of the
    closed window keep their boxes) and raises nothing."""
    import threading

    from inspector.gui import layers_job
    w = window
    open_model(qtbot, w, _big_scoped(tmp_path / "big.tflite", 45, 50))
    monkeypatch.setattr(layers_job, "BIG", 500)
    _laid_out_here(monkeypatch, 500)
    release, ended = threading.Event(), []
    run = layers_job.LayOut.run
    monkeypatch.setattr(layers_job.LayOut, "run", lambda job: (release.wait(60), run(job), ended.append(job)))
    closed = boxes(w, TFLITE)
    _menu_click(w, qtbot, "Expand All Groups")
    assert w._layout_job is not None
    _menu_click(w, qtbot, "Quit", "file")
    qtbot.waitUntil(lambda: not w.isVisible())
    release.set()
    qtbot.waitUntil(lambda: bool(ended), timeout=60_000)
    qtbot.wait(50)                                                       # its done signal delivered
    assert boxes(w, TFLITE) == boxes(w, ONNX) == closed and w.idle


def test_collapse_groups_after_expand_all_removes_the_old_items_in_slices_unseen(qtbot, window, tmp_path):  # noqa: F811
    """Collapse Groups on a model shown whole: its thousands of items went in one event-loop turn (a stall on 10,000
    ops); now the boxes show at once, the old items paint nothing and are removed from the event loop."""
    w = window
    open_model(qtbot, w, _big_scoped(tmp_path / "big.tflite", 45, 50))
    closed = boxes(w, TFLITE)
    _menu_click(w, qtbot, "Expand All Groups")
    settle(qtbot, w)
    scene = w.scenes[TFLITE]
    whole = len(scene.items())
    assert whole > 4000 and boxes(w, TFLITE) == set()
    _menu_click(w, qtbot, "Collapse Groups")
    assert len(scene.items()) > whole - 100                             # in the scene yet, waiting for the slices
    assert boxes(w, TFLITE) == closed                                   # the boxes are shown at once
    view = w.panes[TFLITE].main_view
    now = view.viewport().grab().toImage()
    settle(qtbot, w)
    assert len(scene.items()) == len(scene.nodes) + len(scene.edges) + len(scene.group_frames) < 200
    assert view.viewport().grab().toImage() == now                      # nothing of the old items was seen


def test_a_pin_while_a_re_run_s_graph_waits_for_its_layout_shows_the_latest_and_the_window_stays_usable(
        qtbot, window, tmp_path, monkeypatch):  # noqa: F811
    """One group closed on an expanded big model (the folded graph is the worker's to lay out): a pin's re-run waits
    for that layout; meanwhile a click on the ONNX pane shows Details of the conversion shown, and a second pin's
    re-run replaces the first. Both shown at last: the latest conversion, in the same scene."""
    import threading

    from inspector.gui import layers_job
    w = window
    s = open_model(qtbot, w, _big_scoped(tmp_path / "big.tflite", 45, 50))
    monkeypatch.setattr(layers_job, "BIG", 500)
    here = _laid_out_here(monkeypatch, 500)
    _menu_click(w, qtbot, "Expand All Groups")
    settle(qtbot, w)
    key(click(w, TFLITE, ("op", 1505)), Qt.Key_Backspace)
    settle(qtbot, w)
    (closed,) = boxes(w, ONNX)
    release = threading.Event()
    _held(monkeypatch, layers_job.LayOut, release)
    onnx_scene, before = w.scenes[ONNX], w.doc.result
    sg = s.graph.main
    _pin_from_menu(w, qtbot, sg.ops[3].outputs[0], "channels-first")
    qtbot.waitUntil(lambda: w._plan_job is not None, timeout=60_000)      # the re-run is done, its layout held
    assert w.doc.result is before and s.result is not before
    node = next(n.name for n in before.model.graph.node if n.name in w.scenes[ONNX].node_by_key)
    click(w, ONNX, node)
    assert node in w.details.html()
    _pin_from_menu(w, qtbot, sg.ops[7].outputs[0], "channels-first")
    qtbot.waitUntil(lambda: len(s.pins) == 2 and w.editor.drawn and w._plan_job is not None, timeout=60_000)
    release.set()
    settle(qtbot, w)
    assert here == [] and w.doc.result is s.result and w.scenes[ONNX] is onnx_scene
    assert boxes(w, ONNX) == boxes(w, TFLITE) == {closed}
    inside = onnx_nodes_of(w, closed[1])
    assert {n.name for n in s.result.model.graph.node if n.name not in inside} <= shown(w, ONNX)


def test_nested_open_groups_that_start_at_one_node_have_tabs_apart_and_each_minus_closes_its_own(
        qtbot, window, tmp_path):  # noqa: F811
    """Expand All on a model whose groups nest (a part holds blocks, a block starts where its part does): each
    frame's tab is clear of every other one (they were drawn on one another, and the − seen on top was the
    outermost group's), and a click on a block's − closes that block, not the part around it."""
    w = window
    open_model(qtbot, w, _big_scoped(tmp_path / "big.tflite", 45, 50))
    _menu_click(w, qtbot, "Expand All Groups")
    settle(qtbot, w)
    qtbot.waitUntil(lambda: "net/block_0" in frames(w, TFLITE) and "net/block_0" in frames(w, ONNX))
    for which in (TFLITE, ONNX):
        fr = list(frames(w, which).values())
        parents = {f.layer.id: f.layer.parent for f in fr}
        assert any(parents.get(p) in parents for p in parents.values()), "no group nested two deep: no test"
        clash = [(a.layer.id, b.layer.id) for i, a in enumerate(fr) for b in fr[i + 1:] if a.tab.intersects(b.tab)]
        assert not clash, clash[:3]
    view = w.panes[TFLITE].main_view
    block = frames(w, TFLITE)["net/block_0"]
    view.reveal(block.tab)
    QTest.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, view.mapFromScene(block.control().center()))
    settle(qtbot, w)
    qtbot.waitUntil(lambda: ("group", "net/block_0") in boxes(w, TFLITE))
    assert boxes(w, TFLITE) == {("group", "net/block_0")} == boxes(w, ONNX)
