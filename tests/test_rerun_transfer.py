"""What crosses from the re-run child to the window after a pin: the ONNX view and the conversion result as their
changes from what the window has, made whole again there to what a full conversion gives; and the two races of
several windows sharing one child (pieces of a result replaced, views received from two threads)."""
from __future__ import annotations

import copy
import dataclasses
import pickle
import sys
import threading
from concurrent.futures import Future

import numpy as np
import pytest

from inspector.core.io.loader import load_model
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.session.pipeline import ConvertOptions, run
from inspector.gui import chunked, loader_job, rerun_child
from inspector.gui.graph_model import ViewGraph, from_onnx


class Pool:
    """The child's executor run in this process, every call's answer through pickle as across the process
    boundary; `between` runs before the first `piece` asked for (another window's send coming in between)."""

    def __init__(self, between=None):
        self.calls, self.between = [], between

    def submit(self, fn, *args):
        self.calls.append(fn.__name__)
        if fn is rerun_child.piece and self.between is not None:
            self.between, between = None, self.between
            between()
        f = Future()
        try:
            f.set_result(pickle.loads(pickle.dumps(fn(*args))))
        except Exception as e:      # as the executor hands it back
            f.set_exception(pickle.loads(pickle.dumps(e)))
        return f


class OneWorker(Pool):
    """Pool as the child runs calls: one at a time, whichever thread submits them; past `limit` re-runs it fails
    (a livelock ends the test rather than hanging it)."""

    def __init__(self, limit: int):
        super().__init__()
        self.lock, self.limit = threading.Lock(), limit

    def submit(self, fn, *args):
        with self.lock:
            if self.calls.count("rerun") >= self.limit:
                raise RuntimeError(f"{self.limit} re-runs: the windows keep replacing each other's results")
            return super().submit(fn, *args)


@pytest.fixture
def pool(monkeypatch):
    return child_pool(monkeypatch, Pool())


def child_pool(monkeypatch, p):
    monkeypatch.setattr(loader_job, "executor", lambda: p)
    monkeypatch.setattr(chunked, "CHUNK", 16)      # small models' lists and dicts in pieces and as changes too
    monkeypatch.setattr(rerun_child, "CHILD", rerun_child.Child())      # a fresh child and window
    monkeypatch.setattr(rerun_child, "WINDOW", rerun_child.Window())
    return p


def branches(path, n: int = 24):
    """Non-square [1, 5, 7, 3] convs in a chain with skip ADDs and a RESHAPE that needs TFLite's order: pins on
    its conv outputs add and remove Transposes."""
    rng = np.random.default_rng(5)
    b = ModelBuilder()
    w = b.const("w", rng.standard_normal((3, 3, 3, 3)).astype(np.float32))
    made = [b.input("x", [1, 5, 7, 3])]
    for i in range(n):
        y = b.tensor(f"t{i}", [1, 5, 7, 3])
        if i % 3 == 2:
            b.op("ADD", [made[-1], made[-3]], [y])
        else:
            b.op("CONV_2D", [made[-1], w], [y], {"padding": "SAME"})
        made.append(y)
    r = b.tensor("r", [1, 7, 3, 5])
    b.op("RESHAPE", [made[-1]], [r], {"new_shape": [1, 7, 3, 5]})
    b.output(r)
    return b.save(path)


def window_reruns(path, pins: dict):
    """A pin's three steps as RerunJob takes them: (view, result, notes, (edges that crossed as references, the
    result's skeleton)); the result as the window has it once its metadata pass came (Session.checked)."""
    options = ConvertOptions().to_dict()
    sent = rerun_child.rerun(str(path), pins, options, {}, rerun_child.last_view())
    view = sent[1]
    edges = view.small.get("edges") or [e for i in view.big["edges"][1] for e in rerun_child.CHILD.pieces[i]]
    (vg,) = loader_job.received(pickle.loads(pickle.dumps(sent)))
    assert rerun_child.view_in(vg)
    packed = rerun_child.result_of(sent[0], rerun_child.last_result())
    res = packed[1]
    (result,) = loader_job.received(pickle.loads(pickle.dumps(packed)))
    model, notes, mapping, findings = pickle.loads(pickle.dumps(rerun_child.annotated(sent[0])))
    result, received = dataclasses.replace(result, model=model, metadata_mapping=mapping), result
    rerun_child.derived(received, result)   # as the window keeps it (Session.checked)
    rerun_child.finish()                    # the re-run's last call: the child indexes the view it sent
    assert rerun_child.CHILD.indexed is next(iter(rerun_child.CHILD.sent.values()))
    return vg, result, notes, (sum(type(e) is int for e in edges), res)


def shown_by(job, pool) -> tuple:
    """(result, notes, view) of the job's exchange with the child, its metadata pass applied as Session.checked
    does."""
    from inspector.gui.editing import _annotated
    result, vg, _, _, annotating = job._in_child(pool)
    a = _annotated(annotating.result(), result, job.session.metadata)
    result, received = dataclasses.replace(result, model=a.model, metadata_mapping=a.mapping), result
    rerun_child.derived(received, result)
    return result, a.notes, vg


def same_as_full(path, pins, vg, result, notes):
    full = run(load_model(path), pins, check=False)
    assert vg == from_onnx(full.result.model)
    timeless = lambda plan: {k: v for k, v in vars(plan).items() if k != "optimality"}    # noqa: E731 (its ms)
    assert timeless(result.plan) == timeless(full.result.plan)
    assert (result.trace, result.categories) == (full.result.trace, full.result.categories)
    assert [n.SerializeToString() for n in result.model.graph.node] == \
        [n.SerializeToString() for n in full.result.model.graph.node]
    assert notes == full.notes
    return full


def pinned_sequence(path, graph):
    """Opened, two pins on conv outputs, then back to none (an undo): each as a full conversion gives it."""
    sg = graph.main
    convs = [op.outputs[0] for op in sg.ops if op.opcode in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    pick = [sg.tensors[convs[len(convs) // 3]].name, sg.tensors[convs[2 * len(convs) // 3]].name]
    return [{}, {pick[0]: "keep"}, {pick[0]: "keep", pick[1]: "keep"}, {}]


def check_sequence(path, pool):
    transposes, diffed_views, diffed_results = [], 0, 0
    for i, pins in enumerate(pinned_sequence(path, load_model(path))):
        vg, result, notes, (refs, res) = window_reruns(path, pins)
        full = same_as_full(path, pins, vg, result, notes)
        transposes.append(full.result.transposes)
        if i:                               # against the last: references and changes, not the whole lists
            diffed_views += refs > len(vg.edges) // 2
            diffed_results += bool(res.changed) and res.diffed()
            assert not res.big.get("categories")
    assert diffed_views == diffed_results == 3
    assert len(set(transposes)) > 1 and transposes[0] == transposes[-1]     # the pins changed the graph
    return pool


def test_a_pin_crosses_as_changes_and_is_made_whole_as_a_full_conversion(tmp_path, pool):
    check_sequence(branches(tmp_path / "b.tflite"), pool)
    assert "piece" in pool.calls


def test_nasnet_pins_cross_as_changes_and_are_made_whole_as_a_full_conversion(corpus, pool):
    check_sequence(corpus / "keras/nasnetmobile_fp32.tflite", pool)


def test_results_kept_as_bases_do_not_outlive_the_window_that_showed_them(tmp_path, pool):
    """The window keeps the last results received as bases for the next one's changes: by weak reference, so a
    result (with its TFLite graph, attached after it came) is freed with the window that showed it, and the next
    re-run, with no base left, comes whole and is right."""
    import gc
    import weakref
    path = branches(tmp_path / "b.tflite")
    pins = pinned_sequence(path, load_model(path))
    vg, result, notes, _ = window_reruns(path, pins[0])
    result, received = dataclasses.replace(result, graph=load_model(path)), result
    rerun_child.derived(received, result)
    del received
    gone = weakref.ref(result.graph)
    del vg, result, notes
    gc.collect()
    assert gone() is None and rerun_child.last_result() is None
    vg, result, notes, (refs, res) = window_reruns(path, pins[1])
    assert not res.diffed()
    same_as_full(path, pins[1], vg, result, notes)


def test_a_result_replaced_before_its_pieces_came_is_asked_for_again(tmp_path, pool):
    """Another window's send between a re-run and its pieces: `piece` answers Replaced, and the re-run job asks
    again instead of failing with a traceback."""
    from inspector.core.session.session import Session
    from inspector.gui.editing import RerunJob
    path = branches(tmp_path / "b.tflite")
    s = Session.open(str(path))
    s.pins = {pinned_sequence(path, s.graph)[1].popitem()[0]: "keep"}
    pool.between = lambda: rerun_child.send(ViewGraph("onnx", list(range(100)), []))   # another window's
    result, notes, vg = shown_by(RerunJob(s), pool)
    assert pool.calls.count("rerun") == 2 and pool.between is None
    same_as_full(path, s.pins, vg, result, notes)
    with pytest.raises(rerun_child.Replaced):                           # what the first attempt met
        rerun_child.piece(rerun_child.CHILD.number - 1, 0)


def interleaved(target, n: int, interval: float) -> None:
    """target(0..n-1) in n threads at once, switching between them every `interval` s (the switch interval this
    process had is restored)."""
    was = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        threads = [threading.Thread(target=target, args=(k,)) for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(was)


def test_two_windows_pinning_at_once_take_turns_with_the_child(tmp_path, monkeypatch):
    """Two windows re-running through the one child at once: each exchange (rerun, its pieces, annotated, its
    pieces) ends before the other's starts (loader_job.CHILD_TURN). Interleaved, each window's send replaced the
    other's result, and both asked again without end (a review's experiment: 17,000 re-runs for 8 pins)."""
    from inspector.core.session.session import Session
    from inspector.gui.editing import RerunJob
    p = child_pool(monkeypatch, OneWorker(limit=40))
    paths = [branches(tmp_path / f"b{n}.tflite", n) for n in (24, 33)]
    start, errors, done = threading.Barrier(2), [], [0, 0]

    def window(k: int):
        try:
            s = Session.open(str(paths[k]))
            for pins in pinned_sequence(paths[k], s.graph)[1:3]:
                s.pins = dict(pins)
                start.wait(timeout=60)
                result, notes, vg = shown_by(RerunJob(s), p)
                same_as_full(paths[k], s.pins, vg, result, notes)
                s.result = result           # as a window shows it (the next result's base, kept while shown)
                done[k] += 1
        except Exception as e:      # noqa: BLE001 - reported below
            start.abort()
            errors.append(e)
    interleaved(window, 2, 1e-5)
    assert errors == [] and done == [2, 2]
    # one per pin, and at most one more each when the result a window diffed against was let go in between (the
    # other window showed its next); interleaved without turns, the limit of 40 was reached
    assert 4 <= p.calls.count("rerun") <= 6


def test_a_rerun_failing_in_the_window_still_ends_the_childs_rerun(qtbot, tmp_path, pool, monkeypatch):
    """The child's collection is off from a re-run's start to its `finish`, which the window queues with the
    findings; a failure in the window between the steps (here the layout) shows its message, and queues `finish`
    all the same (it was left off for good)."""
    from inspector.core.session.session import Session
    from inspector.gui.editing import RerunJob
    path = branches(tmp_path / "b.tflite")
    s = Session.open(str(path))
    s.pins = {pinned_sequence(path, s.graph)[1].popitem()[0]: "keep"}
    monkeypatch.setattr(loader_job.LoadJob, "PROCESS_OPS", 0)      # any model takes the child-process path
    job, failed = RerunJob(s), []
    job.signals.failed.connect(lambda message, details: failed.append(message))
    monkeypatch.setattr(RerunJob, "_lay_out", lambda self, vg: 1 / 0)
    job.run()
    assert failed and "ZeroDivisionError" in failed[0]
    assert pool.calls[:2] == ["rerun", "piece"] and pool.calls[-1] == "finish"


def test_views_received_from_several_threads_at_once_keep_the_last_four(monkeypatch):
    """The loader's and two windows' re-run threads receive views at the same time: none fails, and the last four
    are kept (unlocked, two threads trimming at once deleted the same key twice)."""
    monkeypatch.setattr(rerun_child, "WINDOW", rerun_child.Window())
    errors = []

    def receive(t: int):
        try:
            for i in range(300):
                vg = ViewGraph("onnx", [], [])
                vg.view, vg.against = (t, i), None
                rerun_child.view_in(vg)
        except Exception as e:
            errors.append(e)
    interleaved(receive, 6, 1e-6)
    assert errors == [] and len(rerun_child.WINDOW.got) == 4
    assert rerun_child.last_view() in rerun_child.WINDOW.got


def scene_state(scene):
    """What a scene shows and looks things up by, in index order (a new scene lists its items top-down)."""
    scene.finish()
    nodes, edges = (sorted(items, key=lambda it: it.index) for items in (scene.nodes, scene.edges))
    return {"nodes": [(it.index, it.node, it.pos().toTuple(), it.category) for it in nodes],
            "edges": [(it.index, it.edge, it.points, it.conflict) for it in edges],
            "by_key": {k: it.index for k, it in scene.node_by_key.items()},
            "by_tensor": {t: [it.index for it in its] for t, its in scene.edges_by_tensor.items()},
            "items": len(scene.items())}


@pytest.mark.parametrize("which", ["generated", "nasnet"])
def test_pins_applied_to_the_shown_scene_equal_a_scene_built_afresh(qtbot, tmp_path, pool, request, which):
    """The window's live path after each pin (the view made whole from what crossed, kept positions, the diff, the
    scene updated in place) ends with the scene a new GraphScene of the same graph and layout has, on a
    non-square generated model and on NASNet; undo brings back the positions from before."""
    from inspector.gui.graph_layout import compute
    from inspector.gui.graph_view import GraphScene
    from inspector.gui.live_layout import Placement, diff
    path = branches(tmp_path / "b.tflite", 60) if which == "generated" else \
        request.getfixturevalue("corpus") / "keras/nasnetmobile_fp32.tflite"

    def colours(vg):
        return {n.key: "conflict" if n.title == "Transpose" else "Implicit" for n in vg.nodes}
    sequence = pinned_sequence(path, load_model(path))
    vg, *_ = window_reruns(path, sequence[0])
    layout = compute(vg)
    scene = GraphScene(vg, layout)
    scene.colour(colours(vg), {}, {})
    before = scene_state(scene)
    placement = Placement(vg, layout)
    for pins in sequence[1:]:
        vg, *_ = window_reruns(path, pins)
        assert any(n is o for n, o in zip(vg.nodes, scene.vg.nodes))      # the shown objects, kept
        laid = placement.layout(vg)
        changes = diff(scene.vg, scene.layout, vg, laid)
        assert vg.__dict__["_was"][0]() is scene.vg          # what crossed says what it was in the shown view
        by_keys = copy.copy(vg)                 # the same graph without that: diffed key by key
        del by_keys.__dict__["_was"]
        assert vars(changes) == {**vars(diff(scene.vg, scene.layout, by_keys, laid)), "old": scene.vg}
        assert changes.nodes.count(-1) < 8 and changes.edges.count(-1) < 16     # what the pin changed
        scene.apply(vg, laid, changes)
        scene.colour(colours(vg), {}, {})
        fresh = GraphScene(vg, laid)
        fresh.colour(colours(vg), {}, {})
        assert scene_state(scene) == scene_state(fresh)
    assert scene_state(scene) == before                     # back to no pins: every position as it was
