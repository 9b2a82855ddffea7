"""A metadata consumer is one registration: a target registered here (as a new module in core/metadata/targets/
would be) is a choice of the CLI's --target, with its findings, and an item of the window's "Check for" combo,
chosen there by clicking it in the open popup."""
from __future__ import annotations

import json

import onnx
import pytest

from inspector.cli import build_parser, main as cli
from inspector.core.metadata import targets
from inspector.core.metadata.findings import Finding
from inspector.core.metadata.lint import lint
from inspector.core.metadata.targets.onnx import RULES as DOCUMENTS, documents

from .test_metadata_lint import image_model

LABEL = "Edge camera (test)"


def _edge_camera(model, parts, shared):
    """The ONNX documents' rules, and an IMAGE's width must be a multiple of 4 (what a line-buffered ISP reads)."""
    out = documents(model, parts, shared)
    for vi in parts.images():
        if vi.shape is not None and len(vi.shape) == 4 and vi.shape[3] % 4:
            out.append(Finding("", f"IMAGE tensor '{vi.name}' is {vi.shape[3]} wide: the edge camera reads rows "
                                   "of a multiple of 4 pixels", "image", vi.name, code="edgecam-width",
                               field=f"dims:{vi.name}", manual="resize the input"))
    return out


@pytest.fixture
def edge_camera():
    targets.target("edgecam", label=LABEL, summary="adds the edge camera's row width rule",
                   rules={**DOCUMENTS, "edgecam-width": targets.Rule("error", "test", "rows of 4k pixels")}
                   )(_edge_camera)
    yield "edgecam"
    del targets.REGISTRY["edgecam"]


@pytest.fixture
def wide(tmp_path):
    path = tmp_path / "x_1x3x6x10.onnx"                    # 10 wide: not a multiple of 4
    onnx.save(image_model(), path)
    return str(path)


def test_the_built_in_targets_come_first_the_default_leading():
    assert targets.names()[:2] == ["onnx", "winml"] and targets.DEFAULT == "onnx"
    assert targets.get("winml").label == "Windows ML"
    with pytest.raises(Exception, match="unknown check target 'nope': choose one of onnx, winml"):
        lint(image_model(), "nope")


def test_a_registered_target_is_a_cli_choice_with_its_findings(edge_camera, wide, capsys):
    for command in ("check", "edit"):
        sub = build_parser([command])._subparsers._group_actions[0].choices[command]
        option = next(a for a in sub._actions if "--target" in a.option_strings)
        assert option.choices == ["onnx", "winml", "edgecam"] and "edgecam adds the edge camera's" in option.help
    assert cli(["check", wide, "--target", "edgecam", "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert found["target"] == "edgecam"
    assert [f["code"] for f in found["findings"] if f["severity"] == "error"] == ["edgecam-width"]
    assert cli(["check", wide, "--json"]) == 0               # the default target knows no such rule
    assert "edgecam" not in capsys.readouterr().out


@pytest.mark.gui
def test_a_registered_target_is_chosen_in_the_windows_combo(edge_camera, wide, qtbot, tmp_path):
    from .test_gui_polish import choose
    from .test_onnx_gui_edit import errors, open_onnx, settle
    from .test_gui_edit import make_window
    w = make_window(qtbot, tmp_path)
    open_onnx(qtbot, w, wide)
    w.editor.metadata_dock.show()
    w.editor.metadata_dock.raise_()
    combo = w.editor.metadata.target
    assert [combo.itemText(i) for i in range(combo.count())] == ["ONNX (the documents' rules)", "Windows ML", LABEL]
    assert "edgecam-width" not in errors(w)
    choose(qtbot, combo, LABEL)
    settle(qtbot, w)
    assert w.editor.session.target == "edgecam"
    assert "edgecam-width" in errors(w)
    assert w.editor.metadata.target.currentText() == LABEL              # the rebuilt dock keeps the choice
