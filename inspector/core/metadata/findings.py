"""A metadata finding: what the checks in denotation.py, the per-op rules in denotation_rules.py and the
metadata targets (targets/) report."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Finding:
    """One problem a metadata check found, with its rule (code, severity, source) and a safe fix if there is one."""
    node: str        # ONNX node name, or "" when the finding is about a tensor or the model
    message: str
    kind: str = ""   # "format" | "mismatch" | "image" | "range" | "metadata"
    tensor: str = ""
    code: str = ""           # stable rule code (its metadata target's rules), with its severity and source
    severity: str = "warning"
    source: str = ""
    field: str = ""          # what the metadata editor shows it beside: "type:T", "dims:T" or an Image.* key
    fix: Any = None          # MetadataEdits that fix it without changing what the model means, or None
    fix_text: str = ""
    manual: str = ""         # the choice left to the user when no fix is safe

    def to_dict(self) -> dict:
        d = {"code": self.code, "severity": self.severity, "node": self.node, "message": self.message}
        for key in ("tensor", "source", "fix_text", "manual"):
            if getattr(self, key):
                d["fix" if key == "fix_text" else key] = getattr(self, key)
        return d


def fmt(dens) -> str:
    return "[" + ", ".join(d or "?" for d in dens) + "]"
