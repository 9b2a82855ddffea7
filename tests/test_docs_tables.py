"""Tables in docs/ that a command generates say what the command says today (docs/operators.md had drifted twice:
an op's ONNX form changed and its row did not)."""
from __future__ import annotations

from pathlib import Path

from inspector.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_the_operator_table_is_what_ops_markdown_prints(capsys):
    assert main(["ops", "--markdown"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    doc = (ROOT / "docs" / "operators.md").read_text().splitlines()
    start = doc.index(printed[0])
    end = next((i for i in range(start, len(doc)) if not doc[i].startswith("|")), len(doc))
    assert doc[start:end] == printed, "docs/operators.md: run `layout-inspector ops --markdown` and paste its table"
