"""LiteRT's C++ logs "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." straight to file descriptor 2 when an
interpreter with the default delegates allocates: noise in every `validate`. Python cannot filter a C++ write, so
fd 2 points at a temporary file meanwhile, and all it caught but that line is written back (real errors stay)."""
from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from contextlib import contextmanager

_NOISE = re.compile(rb"^INFO: Created TensorFlow Lite XNNPACK delegate for CPU\.\r?\n", re.M)
_LOCK = threading.Lock()            # fd 2 is one per process: two threads must not swap it at once


@contextmanager
def quiet_litert():
    with _LOCK:
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError, AttributeError):     # no fd 2 (a windowed app): nothing to silence
            yield
            return
        with tempfile.TemporaryFile() as caught:
            os.dup2(caught.fileno(), 2)
            try:
                yield
            finally:
                try:
                    sys.stderr.flush()
                except (OSError, ValueError, AttributeError):
                    pass
                os.dup2(saved, 2)
                os.close(saved)
                caught.seek(0)
                rest = _NOISE.sub(b"", caught.read())
                if rest:
                    os.write(2, rest)
