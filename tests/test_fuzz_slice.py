"""The CI slice of the fuzz harness: a fixed seed, 1,000 cases from corpus seeds, zero failures.

`make fuzz` runs the long version (10,000 cases). A failure prints the seed and the command that reproduces it.
The harness's own watchdogs are tested too, with deliberately injected faults.
"""
from __future__ import annotations

import os

import pytest

from . import fuzz

SLICE_SEED = 20261122
SLICE_CASES = 1000


@pytest.fixture(scope="module")
def slice_summary(corpus):
    return fuzz.run(SLICE_CASES, corpus, seed=SLICE_SEED, workers=2, timeout=5.0)


def test_fuzz_slice_has_no_failures(slice_summary, corpus):
    s = slice_summary
    assert s.cases == SLICE_CASES
    assert s.failures == [], s.text(str(corpus), SLICE_SEED)


@pytest.mark.parametrize("outcome", [
    "tflite:refused:ModelLoadError",      # byte mutations caught by the reader
    "tflite:refused:ConversionError",     # structural mutations the reader accepts, refused by the converter
    "tflite:edited",                      # converted, metadata pass and edits applied, round-tripped
    "tflite:edit-refused",                # hostile edits refused with MetadataError
    "onnx:refused:ModelLoadError",
    "onnx:edited",
])
def test_fuzz_slice_reaches_every_stage(slice_summary, outcome):
    """A slice that only ever hit the first check would pass while testing nothing."""
    assert slice_summary.outcomes[outcome] >= 5, dict(slice_summary.outcomes)


@pytest.mark.parametrize("kind", ["while_chain", "external_data", "special_file", "session_value",
                                  "option_value", "custom_op", "unverified"])
def test_fuzz_slice_runs_every_attack_class(slice_summary, kind):
    """Every tenth case is an attack (tests/fuzz_attacks.py): each class ran, under the same watchdogs."""
    ran = sum(n for k, n in slice_summary.outcomes.items() if k.startswith(f"attack:{kind}:"))
    assert ran >= 5, dict(slice_summary.outcomes)


def test_the_harness_reports_hangs_allocations_crashes_and_stray_exceptions(corpus, monkeypatch):
    monkeypatch.setenv("INSPECTOR_FUZZ_INJECT", "1:hang,2:alloc,3:crash,4:keyerror")
    s = fuzz.run(6, corpus, seed=0, workers=2, timeout=2.0)
    kinds = {f["seed"]: f["failure"] for f in s.failures}
    assert kinds == {1: "hang", 2: "memory", 3: "crash", 4: "KeyError"}
    assert s.cases == 6
    assert "--repro 1" in s.text(str(corpus), 0)


def test_repro_runs_one_case_in_process(corpus, capsys, tmp_path):
    saved = tmp_path / "case.bin"
    # The slice's first case: regenerated from its seed alone, its bytes saved for a bug report.
    seed = fuzz.case_seed(SLICE_SEED, 0)
    try:
        fuzz.repro(corpus, seed, str(saved))
    except Exception as e:                    # noqa: BLE001 - a typed refusal is a normal outcome here
        from inspector.core.ir.errors import InspectorError
        assert isinstance(e, InspectorError), e
    out = capsys.readouterr().out
    assert out.startswith(f"case {seed}: ") and saved.stat().st_size > 0
    assert f"{saved.stat().st_size}b/" in out
    assert os.environ.get("INSPECTOR_FUZZ_INJECT") is None
