"""Issue 18's stalls: after a pin the GUI thread touches only what changed, the minimap is drawn off it, and what
the opening needs (the model's hash, a full garbage collection) is not done on it. Behaviour, not timings."""
from __future__ import annotations

import gc
import threading

import pytest
from PySide6.QtWidgets import QLabel, QWidget

from inspector.gui import graph_view
from inspector.gui.graph_model import Edge, Node, ViewGraph
from inspector.gui.graph_items import NodeItem
from inspector.gui.graph_view import GraphScene
from inspector.gui.live_layout import Placement, diff
from inspector.gui.main_window import ONNX, TFLITE

from .test_gui_debugger import mid_conv_output, picture
from .test_gui_edit import open_model, settle, window  # noqa: F401  (fixture)
from .test_session import model  # noqa: F401  (conv -> reshape -> conv, input x [1, 5, 7, 3])

pytestmark = pytest.mark.gui
MODEL = "torch/mobilenet_v2_w050.tflite"


def test_a_pin_recolours_and_relabels_only_the_items_that_changed(qtbot, window, corpus, monkeypatch):
    w = window
    s = open_model(qtbot, w, corpus / MODEL)
    onnx0, tfl0 = picture(w), picture(w, TFLITE)
    items0 = {it.node.key: it for it in w.scenes[ONNX].nodes}
    painted: list = []
    real = GraphScene._colour_node
    monkeypatch.setattr(GraphScene, "_colour_node",
                        staticmethod(lambda item, c, m: (painted.append(item.node.key), real(item, c, m))))
    assert w.editor.pin(w.editor.pin_name(mid_conv_output(s.graph.main)), "keep")
    settle(qtbot, w)
    onnx1, tfl1 = picture(w), picture(w, TFLITE)
    changed = {k for k in onnx1[2] if onnx0[2].get(k) != onnx1[2][k]}
    changed |= {k for k in tfl1[2] if tfl0[2].get(k) != tfl1[2][k]}
    assert changed and set(painted) == changed                 # every change painted, nothing else
    assert len(painted) < len(onnx1[0]) // 10
    kept = [it for it in w.scenes[ONNX].nodes if it.node.key in items0]
    assert all(items0[it.node.key] is it for it in kept)       # the same items, re-indexed
    assert [it.index for it in w.scenes[ONNX].nodes] == list(range(len(w.scenes[ONNX].vg.nodes)))
    assert all(it.edge is e for it, e in zip(w.scenes[ONNX].edges, w.scenes[ONNX].vg.edges))
    minimap = w.panes[ONNX].main_view.minimap
    qtbot.waitUntil(lambda: minimap.image is not None, timeout=10_000)
    painted.clear()
    w.colour(ONNX)                                            # the same colours again: nothing to do,
    assert painted == [] and minimap.image is not None         # not even the minimap's picture


def test_the_validation_overlay_is_repainted_by_the_next_recolour(qtbot, window, corpus):
    from inspector.gui.panels.validation import overlay
    w = window
    open_model(qtbot, w, corpus / MODEL)
    scene = w.scenes[ONNX]
    before = picture(w)[2]
    overlay(scene, {})
    assert all(it.category == "error" for it in scene.nodes if it.node.kind == "op")
    w.colour(ONNX)
    assert picture(w)[2] == before


def test_the_minimap_is_drawn_in_a_worker_thread(qtbot, window, corpus, monkeypatch):
    threads = []
    real = graph_view.draw
    monkeypatch.setattr(graph_view, "draw", lambda *a: (threads.append(threading.current_thread()), real(*a))[1])
    w = window
    open_model(qtbot, w, corpus / MODEL)
    minimap = w.panes[ONNX].main_view.minimap
    minimap.invalidate()
    assert minimap.image is None
    qtbot.waitUntil(lambda: minimap.image is not None, timeout=10_000)
    assert threads and threading.main_thread() not in threads
    assert minimap.image.size() == minimap.size()


def test_a_late_minimap_picture_of_older_colours_is_dropped(qtbot, window, corpus):
    w = window
    open_model(qtbot, w, corpus / MODEL)
    minimap = w.panes[ONNX].main_view.minimap
    qtbot.waitUntil(lambda: minimap.image is not None, timeout=10_000)
    stale, fresh = minimap._want, minimap.image.copy()
    minimap._rendered(stale, fresh)
    assert minimap.image is fresh                       # the picture awaited is taken
    w.panes[ONNX].main_view.scene().version += 1        # new colours, as a recolour bumps it
    minimap.invalidate()
    qtbot.waitUntil(lambda: minimap.image is not None, timeout=10_000)
    newest = minimap.image
    minimap._rendered(stale, fresh.copy())              # the older colours' picture arrives late
    assert minimap.image is newest and minimap._want != stale


def test_diff_keeps_each_edge_of_a_tensor_read_twice():
    """Mul(x, x): two edges share (producer, consumer, tensor); each keeps its own item."""
    from inspector.gui.graph_layout import compute
    a, m = Node("a", "op", "Relu"), Node("m", "op", "Mul")
    old = ViewGraph("onnx", [a, m], [Edge(0, 1, "x", "1×3"), Edge(0, 1, "x", "1×3", first=False)])
    lay = compute(old)
    t = Node("t", "op", "Transpose")
    new = ViewGraph("onnx", [a, m, t], [Edge(0, 1, "x", "1×3"), Edge(0, 1, "x", "1×3", first=False),
                                       Edge(1, 2, "y", "1×3")])
    new_lay = Placement(old, lay).layout(new)
    d = diff(old, lay, new, new_lay)
    assert d.nodes == [0, 1, -1] and sorted(d.edges[:2]) == [0, 1] and d.edges[2] == -1
    assert not d.moved and not d.relabelled


def test_opening_hashes_the_model_before_the_window_gets_it(qtbot, window, corpus, monkeypatch):
    """The autosave check hashes the model when the conversion arrives; the loader has hashed it by then."""
    from inspector.core.session import session
    calls = []
    monkeypatch.setattr(session, "_sha256_of", _counting(session._sha256_of, calls))
    open_model(qtbot, window, corpus / MODEL)
    assert calls[:1] == ["worker"]                              # computed first in the loader's thread


def _counting(cached, calls):
    def wrapper(*a):
        calls.append("main" if threading.current_thread() is threading.main_thread() else "worker")
        return cached(*a)
    return wrapper


def test_what_an_opened_model_needs_is_frozen_not_rescanned(qtbot, window, corpus):
    """Full collections skip the model's objects from the open on (gc_guard.settle), not only after the first
    full collection, which scanned them all once (a stall)."""
    w = window
    gc.unfreeze()
    s = open_model(qtbot, w, corpus / MODEL)
    result = s.result
    assert not any(o is result for o in gc.get_objects())      # in the permanent generation
    assert gc.get_freeze_count() > 0


def test_scene_items_made_after_the_open_are_frozen_once_the_scene_is_built(qtbot, window, corpus, monkeypatch):
    """A big scene makes most of its items from the event loop after the model was frozen (~85,000 objects on 10k
    ops): they are frozen when it is built, not left to a young collection once the guard's wait runs out."""
    from PySide6.QtWidgets import QApplication

    from inspector.gui import gc_guard
    monkeypatch.setattr(GraphScene, "FIRST_CHUNK", 20)
    guard = QApplication.instance().findChild(gc_guard.MainThreadGC)
    guard.timer.stop()                                          # no collection of its own freezes them meanwhile
    try:
        gc.unfreeze()
        open_model(qtbot, window, corpus / MODEL)
        scene = window.scenes[ONNX]
        assert scene.complete and len(scene.nodes) + len(scene.edges) > 20
        late = vars(scene.nodes[-1])                            # made by a slice, after the open's settle()
        assert gc.is_tracked(late) and not any(o is late for o in gc.get_objects())
    finally:
        guard.timer.start()


def test_a_big_scene_makes_only_its_top_before_the_first_paint_and_the_opening_view_shows_no_gap(qtbot):
    """The first items are those of the top FIRST_SPAN px (not 600: ~100 ms as the 10k model's ONNX pane first
    showed at load 5): every node the opening view shows, in a tall pane, is among them."""
    from PySide6.QtCore import QRectF

    from inspector.gui.graph_layout import compute
    from inspector.gui.graph_view import GraphView
    n = 1500
    nodes = [Node(("op", i), "op", f"OP{i}", ["k"] * (i % 3)) for i in range(n)]       # three heights
    edges = [Edge(i, i + 1, i, "1×5×7×3") for i in range(n - 1)] + [Edge(i, i + 3, -i, "") for i in range(0, n - 3, 7)]
    vg = ViewGraph("onnx", nodes, edges)
    scene = GraphScene(vg, compute(vg))
    made = len(scene.nodes) + len(scene.edges)
    assert 0 < made < GraphScene.FIRST_CHUNK and not scene.built
    top = min(it.pos().y() - it.node.height / 2 for it in scene.nodes)
    assert max(it.pos().y() - it.node.height / 2 for it in scene.nodes) < top + GraphScene.FIRST_SPAN
    view = GraphView(scene)
    qtbot.addWidget(view)
    view.resize(700, 2400)
    view.show()
    view.initial()
    seen = view.mapToScene(view.viewport().rect()).boundingRect()
    shown = [i for i, (x, y) in enumerate(scene.layout.pos)
             if seen.intersects(QRectF(x - nodes[i].width / 2, y - nodes[i].height / 2, nodes[i].width, nodes[i].height))]
    assert shown and all(("op", i) in scene.node_by_key for i in shown)
    small = ViewGraph("onnx", nodes[:200], [e for e in edges if e.dst < 200])      # all of it, as it may open fitted
    small_scene = GraphScene(small, compute(small))
    assert len(small_scene.nodes) == 200 and small_scene.built


def test_the_metadata_dock_is_rebuilt_after_the_graph_and_greyed_until_then(qtbot, window, corpus):
    """Its rebuild (30-40 ms on 10k ops) no longer adds to the stall of showing a conversion: it follows from the
    event loop; meanwhile its old content cannot be used, and the editor is not idle."""
    from inspector.core.session.events import PlanChanged
    w = window
    s = open_model(qtbot, w, corpus / MODEL)
    panel = w.editor.metadata
    seen = []
    s.subscribe(lambda e: seen.append((panel.pending, panel.body.isEnabled(), w.editor.idle)), PlanChanged)
    built = panel.body
    s.show(s.result, list(s.notes) + ["one more note"])         # a conversion shown again, with another note
    assert seen == [(True, False, False)] and panel.body is built
    qtbot.waitUntil(lambda: w.editor.idle, timeout=10_000)
    assert panel.body is not built and panel.body.isEnabled()
    assert "one more note" in "".join(lb.text() for lb in panel.findChildren(QLabel))


def denoted(model) -> bool:
    return any(vi.type.denotation or any(d.denotation for d in vi.type.tensor_type.shape.dim)
               for vi in model.graph.input)


def test_a_pin_shows_the_graph_before_its_findings_and_never_stale_ones(qtbot, window, corpus):
    """The metadata pass and checker run after the re-run's graph is shown; until their model and findings arrive
    the Metadata dock cannot be used, and those of a result no longer shown are dropped."""
    from inspector.core.session.events import FindingsChecked, PlanChanged
    w = window
    s = open_model(qtbot, w, corpus / MODEL)
    panel = w.editor.metadata
    assert panel.body.isEnabled() and s.result.findings is not None
    seen = []

    def heard(e):
        body = panel.body
        # usable: enabled, or rebuilt from the event loop's next turn (with the findings, if they came first)
        usable = body.isEnabled() or (panel.pending and s.result.findings is not None)
        seen.append((type(e), s.result.findings is None, usable, w.editor.drawn, bool(w.editor._running),
                     denoted(s.result.model), w.doc.model is s.result.model))
    s.subscribe(heard, PlanChanged, FindingsChecked)
    assert denoted(s.result.model)
    assert w.editor.pin(w.editor.pin_name(mid_conv_output(s.graph.main)), "keep")
    settle(qtbot, w)
    # graph shown, dock greyed, the model without its metadata pass; then the pass's model and the findings
    assert seen == [(PlanChanged, True, False, True, True, False, True),
                    (FindingsChecked, False, True, True, False, True, True)]
    assert panel.body.isEnabled()
    assert [repr(f) for f in s.result.findings] == [repr(f) for f in panel.found]
    old = s.result
    w.editor.stack.undo()
    settle(qtbot, w)
    kept = s.result.findings
    assert not s.checked(old, ["stale"]) and s.result.findings is kept and old is not s.result


def test_a_recolour_of_many_items_is_painted_in_slices_from_the_event_loop(qtbot, window, corpus, monkeypatch):
    """A first conversion recolours every TFLite op (10,000 on the big model): past PAINT_NOW items the scene
    paints them from the event loop, with the latest colours, and is not complete until it has."""
    w = window
    open_model(qtbot, w, corpus / MODEL)
    scene = w.scenes[TFLITE]
    monkeypatch.setattr(scene, "PAINT_NOW", 10)
    cats, markers, conflicts = scene._colours
    other = {k: "Terminate" for k in cats}
    assert scene.colour(other, markers, conflicts)
    ops = [it for it in scene.nodes if it.node.key in other]
    assert not scene.complete and any(it.category != "Terminate" for it in ops)      # not all at once
    assert scene.built                                          # the overview picture stays meanwhile
    newer = {k: "Attribute" for k in cats}
    scene.colour(newer, markers, conflicts)                     # changed again before the slices ran
    version = scene.version
    qtbot.waitUntil(lambda: scene.complete, timeout=10_000)
    assert all(it.category == "Attribute" for it in ops)
    assert w.idle and not scene._repaint
    assert scene.version > version                              # pictures of the half-painted colours redraw


def _chain(n: int, after=()) -> ViewGraph:
    """n Relus in a chain, a Transpose inserted after each index in `after` (as a pin inserts them)."""
    nodes, edges, prev, tensor = [], [], None, None
    for i in range(n):
        nodes.append(Node(f"n{i}", "op", "Relu"))
        if prev is not None:
            edges.append(Edge(prev, len(nodes) - 1, tensor, "1×3×5"))
        prev, tensor = len(nodes) - 1, f"t{i}"
        if i in after:
            nodes.append(Node(f"tr{i}", "op", "Transpose"))
            edges.append(Edge(prev, len(nodes) - 1, tensor, "1×3×5"))
            prev, tensor = len(nodes) - 1, f"t{i}_T"
    return ViewGraph("onnx", nodes, edges)


def _categories(vg: ViewGraph) -> dict:
    return {n.key: "conflict" if n.title == "Transpose" else "Transparent" for n in vg.nodes}


def _pins(monkeypatch, n: int = 300):
    """A shown chain and two re-converted ones laid out as a pin's re-run lays them out, with every slice of a
    scene ending at its first look at the clock (the re-indexing takes many)."""
    from inspector.gui.graph_layout import compute
    monkeypatch.setattr(GraphScene, "SLICE_S", 0.0)
    a = _chain(n)
    lay_a = compute(a)
    placement = Placement(a, lay_a)
    b, c = _chain(n, {n // 2}), _chain(n, {n // 7})
    return (a, lay_a), (b, placement.layout(b)), (c, placement.layout(c))


def test_a_scene_update_interrupted_by_another_ends_as_the_last_graph(qtbot, monkeypatch):
    """apply() changes what is seen at once and re-indexes the kept items in slices; colours asked for meanwhile,
    and another re-run's result arriving before the slices ran, end with the scene exactly the last graph's."""
    (a, lay_a), (b, lay_b), (c, lay_c) = _pins(monkeypatch)
    scene = GraphScene(a, lay_a)
    scene.colour(_categories(a), {}, {})
    scene.finish()
    first = scene.node_by_key["n0"]
    scene.select(["n3"], ["t150"])                              # t150's edge is split by b's Transpose
    scene.apply(b, lay_b, diff(a, lay_a, b, lay_b))
    assert not scene.complete and scene._update is not None
    assert scene.selects(["n3"], ["t150"])                      # the edge's replacement is selected in its place
    assert [it.edge.dst for it in scene.selectedItems() if it in scene._fresh] == [b.index()["tr150"]]
    assert {it.node.key for it in scene.items() if isinstance(it, NodeItem)} == {n.key for n in b.nodes}
    assert "tr150" not in scene.node_by_key                     # the lookups wait for the re-indexing
    n5 = scene.node_by_key["n5"]
    scene.colour({**_categories(b), "n5": "Terminate"}, {}, {})  # new items painted now, the rest when it ends
    tr = next(it for it in scene.items() if isinstance(it, NodeItem) and it.node.key == "tr150")
    assert tr.category == "conflict" and n5.category == "Transparent"
    scene.apply(c, lay_c, diff(b, lay_b, c, lay_c))             # the next result, before the slices ran
    assert tr.scene() is None and scene._update is not None     # b's Transpose gone at once
    scene.colour(_categories(c), {"n9": "pinned"}, {("t9", "n10"): "a conflict"})
    qtbot.waitUntil(lambda: scene.complete, timeout=10_000)
    assert scene.vg is c and scene.layout is lay_c
    assert [it.index for it in scene.nodes] == list(range(len(c.nodes)))
    assert all(it.node is n for it, n in zip(scene.nodes, c.nodes)) and len(scene.nodes) == len(c.nodes)
    assert all(it.edge is e for it, e in zip(scene.edges, c.edges)) and len(scene.edges) == len(c.edges)
    assert scene.node_by_key == {n.key: it for n, it in zip(c.nodes, scene.nodes)}
    tensors: dict = {}
    for e, it in zip(c.edges, scene.edges):
        tensors.setdefault(e.tensor, []).append(it)
    assert scene.edges_by_tensor == tensors
    assert set(scene.items()) == set(scene.nodes) | set(scene.edges)         # nothing left over, nothing missing
    assert [(it.pos().x(), it.pos().y()) for it in scene.nodes] == [tuple(p) for p in lay_c.pos]
    assert [it.points for it in scene.edges] == lay_c.routes
    assert scene.node_by_key["n0"] is first                     # kept through both
    cats = _categories(c)
    assert {it.node.key: it.category for it in scene.nodes} == cats and cats["tr42"] == "conflict"
    assert [it.node.key for it in scene.nodes if it.marker] == ["n9"]
    assert [it.edge.tensor for it in scene.edges if it.conflict] == ["t9"]


def test_a_small_graph_is_updated_and_recoloured_at_once(qtbot):
    """Fewer than 64 items of a kind never look at the clock: NASNet-sized updates end inside apply(), so no frame
    shows the new graph with the old colours."""
    from inspector.gui.graph_layout import compute
    a, b = _chain(30), _chain(30, {15})
    lay_a = compute(a)
    lay_b = Placement(a, lay_a).layout(b)
    scene = GraphScene(a, lay_a)
    scene.colour(_categories(a), {}, {})
    scene.finish()
    scene.apply(b, lay_b, diff(a, lay_a, b, lay_b))
    assert scene.complete and scene.vg is b and "tr15" in scene.node_by_key
    scene.colour(_categories(b), {}, {})
    assert scene.node_by_key["tr15"].category == "conflict" and scene.complete


def test_the_overview_keeps_its_picture_while_a_scene_update_runs_and_redraws_after(qtbot, monkeypatch):
    """Zoomed far out, a paint during apply()'s slices shows the picture of before (the lookups it reads are not
    ready) rather than finishing them on the GUI thread; once they are, the picture is drawn again. A view that
    moved meanwhile has no such picture: it finishes the update first."""
    from inspector.gui.graph_view import GraphView
    (a, lay_a), (b, lay_b), (c, lay_c) = _pins(monkeypatch)
    scene = GraphScene(a, lay_a)
    scene.finish()
    view = GraphView(scene)
    qtbot.addWidget(view)
    monkeypatch.setattr(view, "OVERVIEW_ITEMS", 10)
    view.resize(300, 500)
    view.show()
    qtbot.waitExposed(view)
    view.scale(0.05, 0.05)
    assert view.overview()
    view.viewport().grab()
    before = view._overview_key
    assert before is not None
    scene.apply(b, lay_b, diff(a, lay_a, b, lay_b))
    view.viewport().grab()
    assert scene._update is not None and view._overview_key == before       # not finished by the paint
    qtbot.waitUntil(lambda: scene.complete, timeout=10_000)
    view.viewport().grab()
    assert view._overview_key[:-1] == before[:-1] and view._overview_key[-1] > before[-1]
    scene.apply(c, lay_c, diff(b, lay_b, c, lay_c))
    view.scale(0.9, 0.9)                                        # the picture of before would not fit
    view.viewport().grab()
    assert scene.complete and view._overview_key == view._key()


def test_transposes_inserted_by_a_pin_sit_on_the_edge_they_split():
    """A Transpose pair inserted between a producer and a consumer (the value renamed x -> x_NCHW) is placed on
    the old edge's route, in order and on no other node; not beyond the rows it crosses (six ops wide here)."""
    from inspector.gui.graph_layout import compute
    k = 6
    a, c = Node("a", "op", "A"), Node("c", "op", "C")
    mids = [Node(f"{n}{i}", "op", n.upper()) for i in range(k) for n in ("b", "m")]
    nodes = [a, c, *mids]
    chains = [e for i in range(k) for e in (Edge(0, 2 + 2 * i, f"x{i}", ""), Edge(2 + 2 * i, 3 + 2 * i, f"y{i}", ""),
                                            Edge(3 + 2 * i, 1, f"w{i}", ""))]
    old = ViewGraph("onnx", nodes, chains + [Edge(0, 1, "x", "")])
    lay = compute(old)
    route = lay.routes[-1]                                      # a -> c, across the rows of the b's and m's
    t1, t2 = Node("t1", "op", "Transpose", ["perm [0,2,3,1]"]), Node("t2", "op", "Transpose", ["perm [0,3,1,2]"])
    n = len(nodes)
    new = ViewGraph("onnx", nodes + [t1, t2], chains + [Edge(0, n, "x_NCHW", ""), Edge(n, n + 1, "x_t", ""),
                                                       Edge(n + 1, 1, "x_NCHW_2", "")])
    placed = Placement(old, lay).layout(new)
    (x1, y1), (x2, y2) = placed.pos[n], placed.pos[n + 1]
    xs, ys = [p[0] for p in route], [p[1] for p in route]
    for x, y in ((x1, y1), (x2, y2)):
        assert min(xs) <= x <= max(xs) and min(ys) <= y <= max(ys)     # on the route, not beside the graph
    assert y1 <= y2                                             # in the order of the edge
    boxes = list(zip(placed.pos, new.nodes))
    for i, ((x, y), p) in enumerate(boxes):
        for (ox, oy), o in boxes[i + 1:]:
            assert abs(x - ox) >= (p.width + o.width) / 2 or abs(y - oy) >= (p.height + o.height) / 2, (p, o)
    assert placed.pos[:n] == lay.pos                            # the others did not move


def test_a_route_drawn_again_is_the_one_later_placements_follow():
    """A node grown taller (more labels) gets its edge's route drawn again; the routes by their ends, which place
    later inserted Transposes, give the new one (they were cached by the number of routes, which did not change)."""
    from inspector.gui.graph_layout import compute
    a, c = Node("a", "op", "A"), Node("c", "op", "C")
    old = ViewGraph("onnx", [a, c], [Edge(0, 1, "x", "")])
    p = Placement(old, compute(old))
    before = p._joins()[("a", "c")]["x"]
    taller = Node("c", "op", "C", ["kernel_shape [3,3]", "pads [1,1,1,1]", "strides [2,2]"])
    p.layout(ViewGraph("onnx", [a, taller], [Edge(0, 1, "x", "")]))
    after = p.routes[("a", "c", "x")]
    assert after != before and p._joins()[("a", "c")]["x"] is after


def test_onnx_boxes_come_from_the_cache_only_for_the_same_node_and_initializers(model):  # noqa: F811
    """from_onnx keeps the box of each ONNX node it drew (a pin re-emits few); a node whose bytes or initializer
    types and dims changed gets a new box."""
    import onnx

    from inspector.core.io.loader import load_model
    from inspector.core.session.pipeline import run
    from inspector.gui import graph_model
    m = run(load_model(model), check=False).result.model
    graph_model._NODES.clear()
    first = graph_model.from_onnx(m)
    again = graph_model.from_onnx(m)
    assert again == first and all(a is b for a, b in zip(again.nodes, first.nodes) if a.kind == "op")
    conv = next(i for i, n in enumerate(m.graph.node) if n.op_type == "Conv")
    w = next(t for t in m.graph.initializer if t.name == m.graph.node[conv].input[1])
    changed = onnx.ModelProto()
    changed.CopyFrom(m)
    t = next(t for t in changed.graph.initializer if t.name == w.name)
    t.data_type = onnx.TensorProto.FLOAT16                      # same node, another weight type
    key = graph_model.onnx_node_name(m.graph.node[conv], conv)
    line = lambda vg: next(n for n in vg.nodes if n.key == key).lines                  # noqa: E731
    assert any("float16" in x for x in line(graph_model.from_onnx(changed)))
    assert not any("float16" in x for x in line(graph_model.from_onnx(m)))


def test_autosaves_are_written_off_the_gui_thread_in_order(qtbot, window, model, monkeypatch):  # noqa: F811
    import json

    from inspector.gui.autosave import Autosave
    w = window
    s = open_model(qtbot, w, model)
    threads = []
    real = Autosave.store
    monkeypatch.setattr(Autosave, "store", lambda self, *a: (threads.append(threading.current_thread()),
                                                             real(self, *a))[1])
    w.editor.pin("y", "keep")
    w.editor.pin("y", "NCHW")                 # two edits before the first write is done: the last one stays
    settle(qtbot, w)
    side = w.editor.autosave.path_for(s.path)
    assert len(threads) == 2 and threading.main_thread() not in threads
    assert json.loads(side.read_text())["pins"] == s.pins == {"y": "NCHW"}
    w.editor.save_session()                   # saved: the side file goes, after any write still queued
    assert not side.exists()


def test_a_burst_of_new_objects_is_left_to_settle_for_a_while_then_collected(qtbot, window, monkeypatch):
    """A model's result arriving makes ~10^5 objects between two ticks: the guard does not scan them (settle()
    freezes them when the result is shown), unless that takes longer than WAIT_S."""
    from PySide6.QtWidgets import QApplication

    from inspector.gui import gc_guard
    guard = QApplication.instance().findChild(gc_guard.MainThreadGC)
    guard.timer.stop()
    collected = []
    gc.callbacks.append(lambda phase, info: phase == "start" and collected.append(info["generation"]))
    try:
        t0 = guard.threshold[0]
        monkeypatch.setattr(gc, "get_count", lambda: (gc_guard.BURST * t0 + 1, 0, 0))
        now = [100.0]
        monkeypatch.setattr(gc_guard.time, "monotonic", lambda: now[0])
        guard.check()
        now[0] += gc_guard.WAIT_S / 2
        guard.check()
        assert collected == []                                  # left for settle()
        now[0] += gc_guard.WAIT_S
        guard.check()
        assert collected == [0]                                 # no settle came: collected after all
    finally:
        gc.callbacks.pop()
        guard.timer.start()


def test_weights_over_64_kib_stay_in_the_child_and_their_histogram_comes_from_tflite(qtbot, window, tmp_path,
                                                                                     monkeypatch):
    """A 2,000-op transformer's 0.1-0.6 MB weights came back from the child whole (parsing 88 MB held the GIL):
    from 64 KiB on they are left out, and Details reads such a weight's values from its TFLite constant."""
    import numpy as np

    from inspector.core.io.tflite_builder import ModelBuilder
    from inspector.gui import loader_job
    monkeypatch.setattr(loader_job, "PROCESS_BYTES", 0)          # converted in the child
    b = ModelBuilder()
    x, y = b.input("x", [1, 96]), b.tensor("y", [1, 300])
    weights = np.random.default_rng(3).standard_normal((300, 96)).astype(np.float32)       # 112 KiB
    b.op("FULLY_CONNECTED", [x, b.const("fc/weights", weights), b.const("fc/bias", np.ones(300, np.float32))], [y])
    b.output(y)
    w = window
    open_model(qtbot, w, b.save(tmp_path / "fc.tflite"))
    doc = w.doc
    init = max(doc.model.graph.initializer, key=lambda t: int(np.prod(t.dims)))
    assert not init.HasField("raw_data") and doc.result.weights_left_out
    from inspector.gui.panels.details import initializer_values
    values = initializer_values(doc, init)
    assert values is not None and sorted(np.ravel(values)) == sorted(np.ravel(weights))


def test_the_scenes_take_turns_one_slice_per_timer_call(qtbot, monkeypatch):
    """Both panes building at once (a big model opening): each call of the one timer runs one scene's slice, the
    scenes in turn, so an event-loop pass never holds two slices; both end with every item made."""
    from inspector.gui.graph_layout import compute
    monkeypatch.setattr(GraphScene, "SLICE_S", 0.0)
    a, b = _chain(900), _chain(700, {300})
    sa, sb = GraphScene(a, compute(a)), GraphScene(b, compute(b))
    assert not sa.built and not sb.built
    ran: list = []
    real = GraphScene.populate
    monkeypatch.setattr(GraphScene, "populate", lambda self, *a, **k: (ran.append(self), real(self, *a, **k)))
    calls = []
    while graph_view.TURNS.queue:
        ran.clear()
        graph_view.TURNS.step()
        calls.append(list(ran))
    assert all(len(c) == 1 for c in calls)                      # one scene's slice per call
    order = [c[0] for c in calls]
    both = order[:min(len(order) - order[::-1].index(s) for s in (sa, sb))]        # while both had work left
    assert len(both) > 4 and all(x is not y for x, y in zip(both, both[1:]))       # in turn
    assert sa.complete and sb.complete and not graph_view.TURNS.timer.isActive()
    assert len(sa.nodes) == len(a.nodes) and len(sb.edges) == len(b.edges)


def _dock_rows(panel) -> list:
    """What the Metadata dock shows, widget by widget in order: texts, values, enabled states."""
    from PySide6.QtWidgets import QComboBox, QGroupBox, QLineEdit, QListWidget, QPushButton, QTableWidget
    out = []
    for wd in panel.body.findChildren(QWidget):
        if isinstance(wd, (QLabel, QPushButton)):
            out.append((type(wd).__name__, wd.text(), wd.isEnabled()))
        elif isinstance(wd, QComboBox):
            out.append(("combo", wd.currentText(), wd.count(), wd.isEnabled()))
        elif isinstance(wd, QLineEdit) and not isinstance(wd.parent(), QComboBox):
            out.append(("line", wd.text()))
        elif isinstance(wd, QGroupBox):
            out.append(("group", wd.title()))
        elif isinstance(wd, QListWidget):
            out.append(("list", [wd.item(i).text() for i in range(wd.count())]))
        elif isinstance(wd, QTableWidget):
            out.append(("table", [(wd.item(r, 0).text(), wd.item(r, 1).text()) for r in range(wd.rowCount())]))
    return out


def test_the_metadata_dock_rebuilt_a_group_per_turn_shows_what_a_whole_rebuild_shows(qtbot, window, corpus):
    """After a conversion is shown the dock is rebuilt from the event loop in pieces (each input and output, then
    each group of fields), the old fields greyed until the new replace them all at once: the same fields as a
    rebuild in one go."""
    w = window
    s = open_model(qtbot, w, corpus / MODEL)
    panel = w.editor.metadata
    name = s.result.model.graph.input[0].name
    s.metadata.types[name] = "IMAGE"                            # an edit: its field's source now says "edited"
    old = panel.body
    panel.refresh_soon()
    steps = 0
    while True:
        panel._soon.stop()                                      # driven by hand: one piece per call
        panel._step()
        steps += 1
        if not panel.pending:
            break
        assert panel.body is old and not old.isEnabled()     # the old fields, greyed, until the end
    pieces = _dock_rows(panel)
    assert ("QLabel", "edited", True) in pieces
    assert steps >= 5 and panel.body is not old
    panel.refresh(force=True)
    assert _dock_rows(panel) == pieces and len(pieces) > 20


def test_a_model_opening_counts_its_transposes_once(qtbot, window, model, monkeypatch):  # noqa: F811
    """Counting walks every ONNX node (~5 ms on 10,000 ops, ~30 on 50,000): the loader counts once, off the GUI
    thread, and the Session's Change, the status line and the export's baseline take that count, not three walks
    of their own as the result is shown."""
    import threading

    from inspector.core.emit.result import ConversionResult
    walks: list = []
    real = ConversionResult.transposes

    def counting(r):
        if r.counted is None:
            walks.append((r, threading.current_thread() is threading.main_thread()))
        return real.fget(r)
    monkeypatch.setattr(ConversionResult, "transposes", property(counting))
    w = window
    s = open_model(qtbot, w, model)                             # conv -> reshape -> conv, input 1x5x7x3
    assert walks == [(s.result, False)]
    n = real.fget(s.result)
    assert n == 2 and w.editor.baseline == n
    assert f"{n} Transposes" in w.statusBar().currentMessage()

def test_a_placement_made_later_reads_the_graph_when_first_used_and_places_alike():
    """The editor makes a scene's Placement on the GUI thread with `later` (the re-run's worker reads the graph):
    nothing is read until then, and it then places a new graph exactly as one made at once."""
    from inspector.gui.graph_layout import compute
    a, b, c = Node("a", "op", "A"), Node("b", "op", "B"), Node("c", "op", "C")
    old = ViewGraph("onnx", [a, b, c], [Edge(0, 1, "x", ""), Edge(1, 2, "y", "")])
    lay = compute(old)
    t = Node("t", "op", "Transpose", ["perm [0,2,3,1]"])
    new = ViewGraph("onnx", [a, b, t, c], [Edge(0, 1, "x", ""), Edge(1, 2, "y", ""), Edge(2, 3, "y_t", "")])
    late = Placement(old, lay, later=True)
    assert "pos" not in vars(late) and "routes" not in vars(late)
    assert late.new_share(new) == Placement(old, lay).new_share(new) == 0.25 and "pos" in vars(late)
    now, later = Placement(old, lay).layout(new), Placement(old, lay, later=True).layout(new)
    assert (later.pos, later.routes, later.width, later.height) == (now.pos, now.routes, now.width, now.height)
    assert later.pos[:2] == lay.pos[:2] and later.pos[3] == lay.pos[2]       # the kept nodes did not move


def test_a_metadata_pass_failing_after_the_graph_is_shown_is_said_and_blocks_export(qtbot, window, corpus,
                                                                                    monkeypatch, tmp_path):
    """The re-run's graph is shown before its metadata pass; when the pass then fails, the window says so and the
    result shown (without metadata) is not exported; the next re-run that passes clears it."""
    from inspector.core.ir.errors import InspectorError, MetadataError
    from inspector.core.session import pipeline
    w = window
    s = open_model(qtbot, w, corpus / MODEL)
    real = pipeline.Incremental.metadata_pass

    def failing(self, result, metadata, **options):
        raise MetadataError("made to fail")
    monkeypatch.setattr(pipeline.Incremental, "metadata_pass", failing)
    name = w.editor.pin_name(mid_conv_output(s.graph.main))
    assert w.editor.pin(name, "keep")
    settle(qtbot, w)
    assert "made to fail" in w.last_error and s.error and not denoted(s.result.model)
    assert s.notes == list(s.result.warnings)       # the converter's warnings stay (the pass's never came)
    assert s.result.findings == [] and not (tmp_path / "m.onnx").exists()
    with pytest.raises(InspectorError, match="metadata pass failed"):
        s.export(str(tmp_path / "m.onnx"))
    monkeypatch.setattr(pipeline.Incremental, "metadata_pass", real)
    w.editor.stack.undo()
    settle(qtbot, w)
    assert not s.error and denoted(s.result.model)
    s.export(str(tmp_path / "m.onnx"))
    assert (tmp_path / "m.onnx").stat().st_size > 0


def test_blocking_on_a_rerun_lets_its_worker_go_on_without_a_paint(qtbot, window, corpus, monkeypatch):
    """Export, validation and closing block the GUI thread on the re-run pool (Editor.wait, close): the worker,
    which waits for its result's paint before the metadata pass, is let go first. Without that it waited its
    whole SHOW_WAIT (10 s: a review measured 9.6 s for an export right after a pin)."""
    from inspector.gui import editing
    monkeypatch.setattr(editing, "SHOW_WAIT", 30.0)
    w = window
    s = open_model(qtbot, w, corpus / MODEL)
    before = s.result.transposes
    assert w.editor.pin(w.editor.pin_name(mid_conv_output(s.graph.main)), "keep")
    job = w.editor._job
    w.editor.wait()
    assert job is not None and not job.waited_out
    assert s.result.transposes != before and denoted(s.result.model) and s.result.findings is not None
    assert w.editor.pin(w.editor.pin_name(mid_conv_output(s.graph.main)), None)
    job = w.editor._job
    w.editor.close()
    assert not job.waited_out


def test_a_big_scene_is_built_a_bounded_number_of_items_per_turn_into_an_index_never_rebuilt(qtbot, monkeypatch):
    """Each timer call makes at most SLICE_ITEMS items, however much time its slice has; the BSP index's depth is set
    for the whole graph before the first item (Qt's automatic depth grows with the items and rebuilds the index of all
    of them each time: stalls of 0.6 s on 20,000 ops, 2.7 s on 50,000)."""
    import math

    from inspector.gui.graph_layout import compute
    monkeypatch.setattr(GraphScene, "SLICE_S", 60.0)            # only the count bounds a slice
    vg = _chain(2500, {700, 1900})
    total = len(vg.nodes) + len(vg.edges)
    scene = GraphScene(vg, compute(vg))
    depth = scene.bspTreeDepth()
    assert depth >= math.log2(total) and not scene.built
    made = []
    while graph_view.TURNS.queue:
        before = len(scene.nodes) + len(scene.edges)
        graph_view.TURNS.step()
        made.append(len(scene.nodes) + len(scene.edges) - before)
    assert len(made) > 5 and max(made) == GraphScene.SLICE_ITEMS
    assert scene.built and len(scene.nodes) + len(scene.edges) == total and scene.bspTreeDepth() == depth
    assert set(scene.items()) == set(scene.nodes) | set(scene.edges)    # every item indexed and found


def test_no_full_collection_runs_while_a_scene_is_being_built(qtbot, window, monkeypatch):
    """The items a scene makes are frozen when it completes; a full collection while it is being built scanned them
    all (0.3 s on 50,000 ops), and so did a generation-1 one (0.4 s, again every tenth check): the guard collects
    the youngest generation only until then (the items wait in generation 1, unscanned)."""
    from PySide6.QtWidgets import QApplication

    from inspector.gui import gc_guard
    from inspector.gui.graph_layout import compute
    guard = QApplication.instance().findChild(gc_guard.MainThreadGC)
    guard.timer.stop()
    collected = []
    gc.callbacks.append(lambda phase, info: phase == "start" and collected.append(info["generation"]))
    try:
        t0, t1, t2 = guard.threshold
        monkeypatch.setattr(gc, "get_count", lambda: (t0 + 1, t1 + 1, t2 + 1))
        vg = _chain(1500)
        scene = GraphScene(vg, compute(vg))
        assert not scene.complete and graph_view.TURNS.queue
        guard.check()
        monkeypatch.setattr(gc, "get_count", lambda: (t0 + 1, t1 + 1, 0))      # generation 1 due
        guard.check()
        assert collected == [0, 0]
        scene.finish()
        graph_view.TURNS.drop(scene)
        assert not graph_view.TURNS.queue
        guard.check()
        monkeypatch.setattr(gc, "get_count", lambda: (t0 + 1, t1 + 1, t2 + 1))
        guard.check()
        assert collected == [0, 0, 1, 2]
    finally:
        gc.callbacks.pop()
        guard.timer.start()
