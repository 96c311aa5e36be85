"""Pickled artifacts, for `--refuse-pickle`: a pickle can run anything as it is read.

Judged by file name. A user's handler is code too and is not refused here (docs/security.md).
"""

from __future__ import annotations

from pathlib import Path

from modelhost.errors import UnsafeArtifact

PICKLE_SUFFIXES = (".joblib", ".pkl", ".pickle")


def pickled_files(path: Path) -> list[Path]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return [p for p in files if p.name.lower().endswith(PICKLE_SUFFIXES)]


def refuse_pickles(name: str, path: Path, why: str) -> None:
    """Refuse an untrusted model's pickles; `why` it is untrusted."""
    found = pickled_files(path)
    if found:
        shown = ", ".join(
            p.name if p == path else p.relative_to(path).as_posix() for p in found[:3]
        )
        raise UnsafeArtifact(
            f"model {name} holds pickle-based files ({shown}), which this server refuses for "
            f"untrusted models ({why}): a pickle runs code as it loads; ship ONNX, XGBoost "
            "JSON/UBJ or LightGBM text instead, or ask the operator to trust it"
        )
