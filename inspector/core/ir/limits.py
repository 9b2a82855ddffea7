"""Size limits for arrays the converter builds from shapes rather than from the file's bytes.

A tensor's shape is a few bytes in the file, so a 500-byte model can claim a [1, 4096, 4096, 16] update: an
emitter that bakes index grids, state zeros or window kernels from such a shape would allocate gigabytes the file
cannot justify. Each such emitter asks `check_built` first; constants read from the file are bounded by the
readers (their bytes are there).
"""
from __future__ import annotations

from math import prod
from typing import Iterable

from .errors import ConversionError
from .graph import Graph, Op

MAX_BUILT_BYTES = 128 << 20     # 128 MiB: far above any index grid or state a real model needs


def check_built(shape: Iterable[int], itemsize: int, what: str) -> None:
    """ConversionError when an array of `shape` x `itemsize` bytes would exceed MAX_BUILT_BYTES (or is negative)."""
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ConversionError(f"{what}: negative dimension in {dims}")
    size = prod(dims) * itemsize
    if size > MAX_BUILT_BYTES:
        raise ConversionError(f"{what}: would build a {_human(size)} constant from shape {dims} "
                              f"(the limit is {_human(MAX_BUILT_BYTES)}; the file's shapes are implausible)")


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"


# Control flow: a WHILE's cond is emitted twice (before its Loop and inside the body), its body once, each IF branch
# and CALL_ONCE init once, so a subgraph used by several ops is emitted once per use, and a chain of WHILEs whose
# cond and body are the next subgraph grows 3x per level: a 2 KB file would emit millions of nodes. The call graph
# is measured first, in linear time, and refused beyond these limits (ONNX's protobuf parser refuses messages
# nested 100 deep, about 3 levels per Loop body).
MAX_NESTING = 24                # subgraphs inside subgraphs
MAX_EXPANDED_OPS = 20_000       # ops emitted, counting each subgraph once per use (or twice the file's ops if more)


def _uses(op: Op) -> list[tuple[int, int]]:
    """(subgraph index, times emitted) for each subgraph an op runs."""
    return [(v, 2 if k == "cond_subgraph_index" else 1) for k, v in op.options.items()
            if k.endswith("subgraph_index") and isinstance(v, int) and not isinstance(v, bool)]


def check_control_flow(graph: Graph) -> None:
    """ConversionError for a subgraph that runs itself (a cycle), nesting over MAX_NESTING, or more ops emitted
    than MAX_EXPANDED_OPS. One iterative pass from the main graph: a hostile chain cannot exhaust the stack."""
    subs = graph.subgraphs
    if len(subs) < 2:
        return
    limit = max(MAX_EXPANDED_OPS, 2 * sum(len(s.ops) for s in subs))
    size, depth, state = [0] * len(subs), [0] * len(subs), [0] * len(subs)    # state: 0 new, 1 open, 2 done
    stack = [(0, [u for op in subs[0].ops for u in _uses(op)])]
    state[0] = 1
    while stack:
        k, todo = stack[-1]
        while todo and not 0 <= todo[-1][0] < len(subs):     # a missing subgraph: the emitter names it
            todo.pop()
        if todo and state[todo[-1][0]] != 2:
            c = todo[-1][0]
            if state[c] == 1:
                raise ConversionError(f"subgraph {c} ({subs[c].name}) runs itself through WHILE/IF/CALL_ONCE "
                                      "(a cycle); control flow must be a tree of subgraphs")
            state[c] = 1
            stack.append((c, [u for op in subs[c].ops for u in _uses(op)]))
            continue
        if todo:
            c, times = todo.pop()
            size[k] = min(size[k] + times * size[c], limit + 1)
            depth[k] = max(depth[k], depth[c] + 1)
            if depth[k] > MAX_NESTING:
                raise ConversionError(f"control flow nested more than {MAX_NESTING} subgraphs deep "
                                      f"(subgraph {k}, {subs[k].name}); refused")
            continue
        size[k] = min(size[k] + len(subs[k].ops), limit + 1)
        state[k] = 2
        stack.pop()
    if size[0] > limit:
        raise ConversionError(f"control flow would emit over {limit:,} ops (each WHILE cond twice, each body and "
                              "branch once per use: subgraphs shared by many uses multiply); refused")
