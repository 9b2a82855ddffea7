"""Shared test fixtures: the corpus path option and Qt offscreen.

Corpus tests skip with a reason when ../shared/corpus is absent, except under CI=true, where that is a failure.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption("--corpus", default=str(ROOT.parent / "shared" / "corpus"),
                     help="folder of the TFLite model corpus (default ../shared/corpus)")


def corpus_dir(config) -> Path | None:
    path = Path(config.getoption("--corpus")).resolve()
    return path if (path / "MANIFEST.tsv").is_file() else None


@pytest.fixture(scope="session")
def corpus(pytestconfig) -> Path:
    path = corpus_dir(pytestconfig)
    if path is None:
        where = pytestconfig.getoption("--corpus")
        if os.environ.get("CI") == "true":
            pytest.fail(f"corpus not found at {where}: CI must have it")
        pytest.skip(f"corpus not found at {where} (pass --corpus)")
    return path


def corpus_files(pattern: str = "*/*.tflite") -> list[str]:
    """Corpus model paths relative to the corpus folder, for parametrising (collected at import time)."""
    base = ROOT.parent / "shared" / "corpus"
    for arg in os.sys.argv:
        if arg.startswith("--corpus="):
            base = Path(arg.split("=", 1)[1])
    if "--corpus" in os.sys.argv:
        i = os.sys.argv.index("--corpus")
        if i + 1 < len(os.sys.argv):
            base = Path(os.sys.argv[i + 1])
    files = sorted(str(p.relative_to(base)) for p in base.glob(pattern))
    if not files:
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"corpus not found at {base}: CI must have it")
        return ["<corpus missing>"]
    return files


def pytest_collection_modifyitems(config, items):
    from tests import known_failures
    known_failures.mark(items, pytest)


def pytest_configure(config):
    # A skip in CI hides a missing dependency: fail instead (registered before collection, so module-level
    # skips are caught too).
    if os.environ.get("CI") == "true":
        config.pluginmanager.register(_NoSkipInCI(), "no-skip-in-ci")


class _NoSkipInCI:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector):
        # A module skipped while collecting (importorskip, a module-level skip) hides every test in it.
        outcome = yield
        rep = outcome.get_result()
        if rep.skipped:
            rep.outcome = "failed"
            rep.longrepr = f"skipped while collecting, in CI (not allowed): {rep.longrepr}"

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        if rep.skipped and not hasattr(rep, "wasxfail"):
            rep.outcome = "failed"
            rep.longrepr = f"skipped in CI (not allowed): {rep.longrepr}"


@pytest.fixture(scope="session")
def xserver():
    """A private Xvfb display for the whole run (tests/xserver.py); `xserver.env()` runs a child on it."""
    from tests import xserver as xs
    _need(xs.missing_tools(), "real-desktop tests")
    server = xs.start()
    yield server
    server.stop()


@pytest.fixture
def desktop_bus():
    """A private session bus standing for the desktop's settings (tests/desktop_bus.py): `.env()` for the window's
    process, desktop_bus.switch() to change the desktop's colour scheme."""
    from tests import desktop_bus as db
    _need(db.missing_tools(), "the desktop's colour scheme tests")
    with db.Bus() as bus:
        yield bus


def _need(missing: list[str], what: str) -> None:
    """Fail under CI (a skip would hide the test), skip elsewhere, when tools the tests need are missing."""
    if missing:
        msg = f"{what} need {', '.join(missing)} (make debs installs them)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture(autouse=True)
def _automatic_gc_between_tests():
    """A window turns Python's automatic collector off for its lifetime (inspector/gui/gc_guard.py); the tests
    after a GUI test must not run without it."""
    yield
    import sys
    if "inspector.gui.gc_guard" in sys.modules:
        sys.modules["inspector.gui.gc_guard"].uninstall()
