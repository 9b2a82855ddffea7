"""Counts in the window's sentences: "1 Transpose, 2 conflicts", never "1 Transposes"."""
from __future__ import annotations


def counted(n: int, noun: str, plural: str = "") -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
