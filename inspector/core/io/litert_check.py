"""LiteRT's read check of a TFLite file (tflite_reader makes it on every read). The standard library and LiteRT
only, no NumPy: the CLI's child process (proof/ort_ahead) makes it while the parent is still starting."""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from inspector.core.ir.errors import ModelLoadError

FLATBUFFER_MAX = 2**31 - 1        # flatbuffers' verifier stops here; beyond it our own checks stand alone
_OP_RESOLUTION = re.compile(r"find op|unresolved|custom op|Registration", re.I)


def litert_verify(buf: bytes, path: str) -> None:
    """LiteRT's own flatbuffer verifier and model checks (building an interpreter resolves no kernels and
    allocates no tensors: tens of microseconds), when LiteRT is installed. A file it refuses is refused here with
    its reason; before, `convert` wrote an ONNX file and `validate` then failed with a traceback. Bytes LiteRT
    accepted elsewhere (litert_vouched) are not checked again."""
    if len(buf) > FLATBUFFER_MAX or (_VOUCHED and _VOUCHED[-1](buf)):
        return
    build = _LITERT[0] if _LITERT else _litert_builder()
    if build is None:
        return
    try:
        build(buf)
    except (ValueError, RuntimeError) as e:
        reason = (str(e).strip().splitlines() or ["no reason given"])[0]
        if not _OP_RESOLUTION.search(reason):     # a kernel this LiteRT build lacks is no fault of the file
            raise ModelLoadError(path, f"LiteRT refuses this file: {reason}") from None


_LITERT: list = []
_VOUCHED: list = []


@contextmanager
def litert_vouched(passed: Callable[[bytes], bool]) -> Iterator[None]:
    """Within: the check skips the bytes `passed` says LiteRT accepted already (the CLI's child process checks the
    input file while this one converts: proof/ort_ahead); any other bytes are checked here as always."""
    _VOUCHED.append(passed)
    try:
        yield
    finally:
        _VOUCHED.remove(passed)


def _litert_builder():
    """What builds an interpreter from bytes, looked up once: the wrapper the public Interpreter calls, without the
    Interpreter's own work around it (signature list, usage metrics: ~15 % of the check) nor its module's imports
    (ctypes, metrics: part of every cold start); the public class when this LiteRT's wrapper is elsewhere or takes
    other arguments. None without LiteRT."""
    try:
        from ai_edge_litert import _pywrap_litert_interpreter_wrapper as wrapper
        create = wrapper.CreateWrapperFromBuffer
    except (ImportError, AttributeError):
        create = None

    def public(buf):
        from ai_edge_litert import interpreter as lite
        lite.Interpreter(model_content=buf,
                         experimental_op_resolver_type=lite.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)

    if create is None:
        try:
            import ai_edge_litert.interpreter  # noqa: F401
        except ImportError:
            _LITERT.append(None)
            return None
        _LITERT.append(public)
        return public

    def build(buf):
        try:
            # The arguments Interpreter(model_content=buf) passes: LiteRT's op resolver without default delegates
            # (its id in interpreter_wrapper.cc, as interpreter._get_op_resolver_id gives it), no custom ops, no
            # preserved tensors, delegate clustering on, 1 thread, default delegate features, no zero-point
            # compression, fusion, profiling.
            create(buf, _RESOLVER_WITHOUT_DEFAULT_DELEGATES, [], [], False, False, 1, False, False, False, False)
        except TypeError:                    # this LiteRT's wrapper takes other arguments: the public class
            _LITERT[0] = public
            public(buf)

    _LITERT.append(build)
    return build


_RESOLVER_WITHOUT_DEFAULT_DELEGATES = 3
