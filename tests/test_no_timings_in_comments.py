"""Comments say why, not how fast: a measured time in a comment goes stale with the next change (issue 34);
figures live in bench/LATEST.md, written by `make bench`. Settings the code configures (a wait, an interval) are
not measurements and may be named."""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "inspector"
TIMING = re.compile(r"\b\d+(\.\d+)?\s?(ms|µs|us|s)\b(?!\w)")
SETTINGS = ("the minimap waits", "switch interval")


def test_no_comment_in_the_package_carries_a_timing():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type == tokenize.COMMENT and TIMING.search(tok.string) \
                    and not any(s in tok.string for s in SETTINGS):
                found.append(f"{path.relative_to(PACKAGE)}:{tok.start[0]}: {tok.string.strip()}")
    assert not found, "timings in comments (keep the reason, drop the figure):\n" + "\n".join(found)
