"""What a command needs of batch mode to parse its line and to tell one model from many: its options and the
tests. The batch itself (workers, progress, summary) is batch.py, imported only when a command runs one."""
from __future__ import annotations

import glob
import os


def add_arguments(p, validate: bool = False) -> None:
    """The options every batch command shares (convert, validate, check)."""
    b = p.add_argument_group("batch mode (several models, a folder or a glob)")
    b.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes (default: the CPU count)")
    if validate:
        b.add_argument("--validate", action="store_true", help="validate each conversion against LiteRT")
    b.add_argument("--summary", metavar="FILE.csv|.json", help="write the summary table to a file")
    b.add_argument("--timeout", type=float, default=600, metavar="S",
                   help="give up on a model after S seconds (default 600)")


def is_batch(args) -> bool:
    """`convert MODELS… -o OUTDIR/`."""
    out = args.output or ""
    return bool(args.more) or os.path.isdir(args.model) or (glob.has_magic(args.model)
                                                             and not os.path.exists(args.model)) \
        or out.endswith(("/", os.sep)) or os.path.isdir(out)      # (os.path: an over-long name is no folder)


def _many(items: list[str]) -> bool:
    return len(items) > 1 or any(os.path.isdir(i) or (glob.has_magic(i) and not os.path.exists(i)) for i in items)


def is_validate_batch(args) -> bool:
    """`validate MODELS… OUTDIR/`."""
    return _many([args.tflite]) or os.path.isdir(args.onnx)


def is_check_batch(args) -> bool:
    """`check MODELS…`."""
    return _many(args.model)
