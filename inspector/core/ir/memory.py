"""Memory a conversion needs, estimated before it allocates, and memory exhaustion said in one line.

A model says how much it needs: its constants' bytes. Converting, serialising, checking and loading the result in
ONNX Runtime hold about PER_WEIGHT_BYTE times that at once (measured: 1.13 GB of address space on top of a 256 MiB
FULLY_CONNECTED model's read, 4.5 GB on a 1 GiB one), plus FIXED (a tiny model's whole conversion, ONNX Runtime's
session included, took 23 MiB). A conversion that cannot fit in
what is left — the address-space limit (RLIMIT_AS, `ulimit -v`), the memory Linux says is available, or what the
process's memory cgroup (a container's limit) still allows — is refused before it starts, instead of dying in C++
with a segmentation fault or a MemoryError half-way, or being killed by the kernel's OOM killer without a word.
"""
from __future__ import annotations

import gc
import os
import re
from contextlib import contextmanager
from typing import Iterator

from .errors import ConversionError
from .graph import Graph

PER_WEIGHT_BYTE = 5
FIXED = 64 << 20


class OutOfMemory(ConversionError):
    """Not enough memory for the conversion; the message says about how much it needs."""

    def __init__(self, what: str, need: int, have: int | None = None):
        left = f" ({_gb(have)} GB available)" if have is not None else ""
        super().__init__(f"not enough memory to convert {what}: needs about {_gb(need)} GB{left}")
        self.what, self.need, self.have = what, need, have

    # from the loader's child process: rebuilt from its fields, not its message
    def __reduce__(self) -> tuple[type[OutOfMemory], tuple[str, int, int | None]]:
        return OutOfMemory, (self.what, self.need, self.have)


def _gb(n: int) -> str:
    return f"{max(n, 0) / 1e9:.1f}"


def weights(graph: Graph, over: int | None = None) -> int:
    """The bytes of the graph's constants (those of at most `over` bytes when bigger ones are left out)."""
    total = 0
    for sg in graph.subgraphs:
        for t in sg.tensors:
            n = getattr(t.data, "nbytes", 0) if t.data is not None else 0
            if over is None or n <= over:
                total += n
    return total


def need(graph: Graph, over: int | None = None) -> int:
    return PER_WEIGHT_BYTE * weights(graph, over) + FIXED


def need_for_file(path: str) -> int:
    """The estimate from a model file's size (its weights are most of it), where the graph is not at hand."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    return PER_WEIGHT_BYTE * size + FIXED


def available() -> int | None:
    """Bytes this process can still allocate: below its address-space limit and within the memory (and swap) the
    system has available; None when neither can be told."""
    bounds = []
    try:
        import resource
        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/statm") as f:
                bounds.append(soft - int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE"))
    except (ImportError, OSError, ValueError):
        pass
    try:
        with open("/proc/meminfo", "rb") as f:
            info = dict(_MEMINFO.findall(f.read()))       # kB
        if b"MemAvailable" in info:
            bounds.append((int(info[b"MemAvailable"]) + int(info.get(b"SwapFree", 0))) << 10)
    except (OSError, ValueError):
        pass
    room = cgroup_room()
    if room is not None:
        bounds.append(room)
    return min(bounds) if bounds else None


# Where the kernel shows this process's cgroups (tests lay out the same files elsewhere)
ROOT = "/"
_UNLIMITED = 1 << 62          # cgroup v1 writes "no limit" as a page-rounded 2**63 - 1


def cgroup_room() -> int | None:
    """Bytes this process's memory cgroup and every cgroup above it can still take before their limits (a
    container's memory limit: /proc/meminfo shows the whole machine's memory there), counting their page cache as
    reclaimable as MemAvailable does; None without a limit, or where the files cannot be read."""
    try:
        with open(os.path.join(ROOT, "proc/self/cgroup")) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    rooms: list[int | None] = []
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if controllers == "":                                    # v2: limits at each level of the path
            top = os.path.normpath(os.path.join(ROOT, "sys/fs/cgroup"))
            folder = os.path.normpath(os.path.join(top, path.lstrip("/")))
            if not folder.startswith(top):     # "/.." shown for a cgroup outside this namespace's root
                folder = top
            while True:
                rooms.append(_room(folder, "memory.max", "memory.current", "file"))
                if folder == top:
                    break
                folder = os.path.dirname(folder)
        elif "memory" in controllers.split(","):                 # v1: memory.stat gives the hierarchy's limit
            mount = os.path.join(ROOT, "sys/fs/cgroup/memory")
            folder = os.path.join(mount, path.lstrip("/"))
            if not os.path.isdir(folder):      # a container's own cgroup mounted there, under the host's name
                folder = mount
            rooms.append(_room(folder, "hierarchical_memory_limit", "memory.usage_in_bytes", "total_cache"))
    known = [r for r in rooms if r is not None]
    return min(known) if known else None


def _room(folder: str, limit: str, usage: str, page_cache: str) -> int | None:
    """limit - usage + page cache in one cgroup folder; None without a limit there or when it cannot be read.
    `limit` is a file (v2) or a memory.stat key (v1)."""
    try:
        with open(os.path.join(folder, "memory.stat")) as f:
            stat = {k: v for k, _, v in (line.partition(" ") for line in f.read().splitlines())}
        if limit in stat:
            text = stat[limit]
        else:
            with open(os.path.join(folder, limit)) as f:
                text = f.read().strip()
        if text == "max" or int(text) >= _UNLIMITED:
            return None
        with open(os.path.join(folder, usage)) as f:
            used = int(f.read())
        return int(text) - used + int(stat.get(page_cache, 0))
    except (OSError, ValueError):
        return None


# The two lines of /proc/meminfo `available` reads (every conversion asks, the smallest too: not all fifty parsed)
_MEMINFO = re.compile(rb"^(MemAvailable|SwapFree):\s*(\d+)", re.M)


def check(graph: Graph, what: str, over: int | None = None) -> None:
    """OutOfMemory when the conversion of `graph` cannot fit in what this process can still allocate."""
    want = need(graph, over)
    if want <= _surely_available():
        return
    have = available()
    if have is not None and want > have:
        raise OutOfMemory(what, want, have)


def _surely_available() -> int:
    """A lower bound of `available` from one system call, 0 when it cannot tell: half the free RAM without an
    address-space limit. MemAvailable is the free RAM less the kernel's reserves (watermarks: a few % of the RAM)
    plus what it can reclaim, so a conversion that fits in half the free RAM needs no reading of /proc/meminfo
    (which the kernel generates on each read: most of a small model's check)."""
    try:
        import resource
        if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY or _limited_cgroup():
            return 0
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ImportError, OSError, ValueError):
        return 0


_CGROUP_LIMITED: list[bool] = []


def _limited_cgroup() -> bool:
    """Whether a cgroup limits this process's memory (the free RAM then says nothing of what it may take); asked
    once per process: a container's limit is set before it starts."""
    if not _CGROUP_LIMITED:
        _CGROUP_LIMITED.append(cgroup_room() is not None)
    return _CGROUP_LIMITED[0]


@contextmanager
def collection_paused() -> Iterator[None]:
    """No automatic cyclic collection inside: a conversion makes objects by the hundred thousand that live to its
    end, and each full collection scanned all made so far (a quarter of a 50,000-op chain's conversion). The state
    before is restored after (the window keeps collection off and runs it itself: gui/gc_guard); cyclic garbage made
    inside goes at the next collection."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
