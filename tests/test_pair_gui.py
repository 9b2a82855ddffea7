"""File › Open Pair: the TFLite model beside an ONNX model made elsewhere, selection synced through the mapping."""
from __future__ import annotations

import pytest

from PySide6.QtCore import QSettings  # noqa: E402

from inspector.core.io.tflite_reader import read_tflite  # noqa: E402
from inspector.gui.main_window import ONNX, TFLITE, MainWindow  # noqa: E402
from inspector.gui.palette import CONFLICT  # noqa: E402

from .test_pair import hand_onnx, tflite_model  # noqa: E402

pytestmark = pytest.mark.gui


@pytest.fixture
def paired(qtbot, tmp_path):
    tfl = tflite_model(tmp_path / "m.tflite")
    other = tmp_path / "other.onnx"
    hand_onnx(read_tflite(tfl), other, softmax_axis=2)
    w = MainWindow(QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    w.open_path(str(tfl), str(other))
    qtbot.waitUntil(lambda: w.idle and TFLITE in w.scenes and ONNX in w.scenes, timeout=60_000)
    return w


def test_pair_shows_their_model_and_syncs_through_the_mapping(paired):
    w = paired
    doc = w.doc
    assert doc.model.producer_name == "hand"                       # their model, not a conversion of ours
    names = {it.node.key for it in w.scenes[ONNX].nodes if it.node.kind == "op"}
    assert {"extra_t1", "extra_t2", "softmax", "debug_mean"} <= names
    w.select(TFLITE, nodes=[("op", 2)])                             # the 1x1 CONV_2D
    assert set(w.scenes[ONNX].selected_keys()[0]) == {"extra_t1", "extra_t2", "conv2"}
    w.select(ONNX, nodes=["softmax"])
    assert w.scenes[TFLITE].selected_keys()[0] == [("op", 4)]
    p = doc.graph.main.tensor_by_name("p").index
    w.select(TFLITE, tensors=[p])
    assert set(w.scenes[ONNX].selected_keys()[1]) == {"v7", "extra_a", "extra_b"}
    w.select(ONNX, nodes=["debug_mean"])                            # unmatched: nothing on the other side
    assert w.scenes[TFLITE].selected_keys() == ([], [])


def test_pair_marks_their_needless_transposes(paired):
    w = paired
    onx = w.scenes[ONNX]
    for name in ("extra_t1", "extra_t2", "tr_in", "tr_out"):
        assert onx.node_by_key[name].category == CONFLICT
    assert "cancel" in onx.node_by_key["extra_t1"].marker
    assert onx.node_by_key["conv2"].category != CONFLICT
    assert w.conflicts.topLevelItemCount() == 3                     # the pair, and the I/O Transposes


def test_gui_command_takes_a_pair(tmp_path, capsys):
    from inspector.cli import build_parser, main
    args = build_parser().parse_args(["gui", "m.tflite", "other.onnx"])
    assert (args.model, args.other) == ("m.tflite", "other.onnx")
    tfl = tflite_model(tmp_path / "m.tflite")
    assert main(["gui", str(tfl), str(tmp_path / "missing.onnx")]) == 1      # refused before any window opens
    assert "missing.onnx: no such file" in capsys.readouterr().err
