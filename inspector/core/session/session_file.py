"""Session files and autosaves, read and validated whole before anything is applied.

A session file is user-editable JSON beside the model, an autosave a file in the application's folder: both are
untrusted input. `read_decisions` reads one through the guarded opener (regular files only, SESSION_LIMIT bytes),
refuses nesting beyond MAX_DEPTH and non-finite numbers before json builds anything, then checks every entry against
the model: types, pins naming existing tensors with valid layouts, opsets the converter supports, boolean flags,
metadata values. Every problem is listed in one SessionError; the caller applies nothing unless all are fine.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from inspector.core.ir.errors import InspectorError
from inspector.core.io.inputs import SESSION_LIMIT, read_input
from inspector.core.metadata.edits import MetadataEdits
from .pipeline import FLAGS

SESSION_VERSION = 2
# Version 1 files spelled "convert to channels-first" as the TFLite letters ("NHWC"); since version 2 letters name
# the ONNX axes, so "NHWC" keeps TFLite's order. A version 1 file is read with its old meaning, never the new one.
V1_CHANNELS_FIRST = ("nhwc", "nwc", "ndhwc", "channels-last", "to-nchw", "nchw-convert")
V1_KEEP = ("none",)
OPTIONS = ("keep_io_layout", "opset") + FLAGS
MAX_DEPTH = 16                    # a session is 4 levels deep; json's own parser recurses per level
MAX_PROBLEMS = 20                 # listed in full up to here, then counted
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_DEPTH = {"[": 1, "{": 1, "]": -1, "}": -1}


class SessionError(InspectorError):
    """A session file or autosave refused whole: every problem found, one per line after the first."""

    def __init__(self, path: str, problems: list[str]):
        shown = problems[:MAX_PROBLEMS] + ([f"... and {len(problems) - MAX_PROBLEMS} more"]
                                           if len(problems) > MAX_PROBLEMS else [])
        head = f"{path}: not applied, " + (shown[0] if len(shown) == 1 else f"{len(problems)} problems")
        super().__init__(head + "".join(f"\n  {p}" for p in shown if len(shown) > 1))
        self.path = path
        self.problems = problems


@dataclass
class Decisions:
    """A session file's content, checked: what Session applies."""
    pins: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    metadata: MetadataEdits = field(default_factory=MetadataEdits)
    model: str = ""
    model_sha256: str | None = None


def parse(path: str) -> dict:
    """The file's JSON object; SessionError for a special file, an oversized, over-deep or non-JSON file."""
    def refuse(p: str, reason: str) -> SessionError:
        return SessionError(p, [reason])
    raw = read_input(path, what="session file", limit=SESSION_LIMIT, refuse=refuse)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SessionError(path, [f"not UTF-8 text ({e.reason} at byte {e.start})"]) from None
    brackets = _STRINGS.sub("", text)
    depth = max(accumulate(_DEPTH.get(c, 0) for c in brackets if c in _DEPTH), default=0)
    if depth > MAX_DEPTH:
        raise SessionError(path, [f"nested {depth} levels deep (a session file has at most {MAX_DEPTH})"])

    def constant(name: str):
        raise ValueError(f"{name} is not a number a session file can hold")

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"{text[:40]} is out of range")
        return value
    try:
        data = json.loads(text, parse_constant=constant, parse_float=number)
    except (ValueError, RecursionError) as e:          # JSONDecodeError, over-long integers, the two above
        raise SessionError(path, [f"not a readable session file ({e})"]) from None
    if not isinstance(data, dict):
        raise SessionError(path, [f"not a session file (a JSON {type(data).__name__}, not an object)"])
    return data


def check(data: dict, graph, path: str) -> Decisions:
    """Every entry of a parsed session checked against `graph`; SessionError listing all problems."""
    from inspector.core.emit.convert import MAX_OPSET, MIN_OPSET
    from inspector.core.layout.pins import resolve_pins
    problems: list[str] = []
    version = data.get("version")
    if version not in (1, SESSION_VERSION) or isinstance(version, bool):
        raise SessionError(path, [f"not a session file of version 1 or {SESSION_VERSION} "
                                  f"(version {version!r:.40})"])
    out = Decisions()
    for key in ("model", "model_sha256", "model_path"):
        if data.get(key) is not None and not isinstance(data[key], str):
            problems.append(f"'{key}' must be text, not {type(data[key]).__name__}")
    model = data.get("model")
    out.model = model if isinstance(model, str) else ""
    out.model_sha256 = data.get("model_sha256") if isinstance(data.get("model_sha256"), str) else None
    sections = {}
    for what in ("pins", "options", "metadata"):
        value = data.get(what) or {}
        if not isinstance(value, dict):
            problems.append(f"'{what}' must be a mapping, not {type(value).__name__}")
            value = {}
        sections[what] = value
    for name, layout in sections["pins"].items():
        if not isinstance(layout, str):
            problems.append(f"pin {name!r:.60}: the layout must be text, not {type(layout).__name__}")
            continue
        if version == 1:
            layout = v1_pin(layout)
        try:
            resolve_pins(graph.main, {name: layout})
            out.pins[name] = layout
        except (InspectorError, ValueError) as e:
            problems.append(str(e))
    for key, value in sections["options"].items():
        if key not in OPTIONS:
            problems.append(f"unknown option {key!r:.60} (known: {', '.join(OPTIONS)})")
        elif key == "opset":
            if isinstance(value, bool) or not isinstance(value, int):
                problems.append(f"opset must be a whole number, not {value!r:.40}")
            elif not MIN_OPSET <= value <= MAX_OPSET:
                problems.append(f"opset {value} is not supported (use {MIN_OPSET}..{MAX_OPSET})")
            else:
                out.options[key] = value
        elif not isinstance(value, bool):
            problems.append(f"option '{key}' must be true or false, not {value!r:.40}")
        else:
            out.options[key] = value
    try:
        out.metadata = MetadataEdits.from_dict(sections["metadata"])
        out.metadata.normalized()
    except InspectorError as e:
        problems.append(str(e))
    except (TypeError, ValueError, AttributeError, OverflowError) as e:
        problems.append(f"metadata: {e}")
    if problems:
        raise SessionError(path, problems)
    return out


def read_decisions(path: str, graph) -> Decisions:
    return check(parse(path), graph, path)


def v1_pin(text: str) -> str:
    """A version 1 pin in today's words (see SESSION_VERSION)."""
    low = text.strip().lower()
    return "channels-first" if low in V1_CHANNELS_FIRST else "keep" if low in V1_KEEP else text
