"""The metadata consumers: one module per Target in this package, each registering itself with @target. Importing
the package imports every module in it, so adding a consumer is adding a module (keep its top-level imports light:
the CLI reads the registry to build its parser)."""
from __future__ import annotations

import importlib
import pkgutil

from .base import DEFAULT, REGISTRY, Rule, Target, all_rules, get, names, target

__all__ = ["DEFAULT", "REGISTRY", "Rule", "Target", "all_rules", "get", "names", "target"]

for _m in sorted(pkgutil.iter_modules(__path__), key=lambda m: (m.name != DEFAULT, m.name)):
    if _m.name != "base":
        importlib.import_module(f"{__name__}.{_m.name}")
