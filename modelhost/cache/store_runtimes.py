"""The runtimes a fresh cache's first start guesses from a local store's file names.

Before the disk index has recorded any (disk_runtimes.py), a store whose every model names its
runtime by its suffix (a folder of `.mar` archives, say) tells the worker template what to
import. A folder, an archive or a suffix two runtimes share says nothing until it loads.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

MOST_ENTRIES = 1000  # a larger store is not listed at start: the default list stands
RUNTIMES_BY_SUFFIX: dict[str, tuple[str, ...]] = {
    ".mar": ("torch", "torchserve"),
    ".joblib": ("sklearn",),
    ".pkl": ("sklearn",),
    ".pickle": ("sklearn",),
    ".ubj": ("xgboost",),
    ".lgb": ("lightgbm",),
    ".onnx": ("onnxruntime",),
    ".pt": ("torch",),
    ".pt2": ("torch",),
}
ORDER = ("sklearn", "xgboost", "lightgbm", "onnxruntime", "torch", "torchserve")


def store_runtimes(model_store: str, most_entries: int = MOST_ENTRIES) -> tuple[str, ...] | None:
    """The runtimes the store's models need, or None where its names do not tell them all."""
    parsed = urlparse(model_store)
    if parsed.scheme not in ("", "file"):
        return None
    folder = unquote(parsed.path) if parsed.scheme == "file" else model_store
    needed: set[str] = set()
    try:
        with os.scandir(folder) as entries:
            for count, entry in enumerate(e for e in entries if not e.name.startswith(".")):
                runtimes = _runtimes_of(entry)
                if runtimes is None or count >= most_entries:
                    return None
                needed.update(runtimes)
    except OSError:
        return None
    return tuple(name for name in ORDER if name in needed) or None


def _runtimes_of(entry: os.DirEntry[str]) -> tuple[str, ...] | None:
    if not entry.is_file():
        return None
    return RUNTIMES_BY_SUFFIX.get(os.path.splitext(entry.name)[1].lower())
