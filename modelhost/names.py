"""What a model name may be, checked wherever a name enters, and which names are models.

Names become store keys, disk folders and frame fields, so nothing may escape a folder or frame.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Collection
from pathlib import PurePosixPath

from modelhost.errors import InvalidModelName

MAX_NAME_BYTES = 256
MAX_PART_BYTES = 255  # most file systems' limit
MAX_ECHO_CHARS = 200  # of a refused value, in an error message
ARCHIVE_SUFFIXES = (".mar", ".tar.gz", ".tgz", ".tar", ".zip")
CHECKED_NAMES = 4096  # bounded, so a scan of new names cannot grow the frontend
OIP_VERSION = "1"  # what OIP answers as the version of a model registered without versions

VALID = (
    f"a valid name is a relative path such as tenants/t007.joblib, at most {MAX_NAME_BYTES} "
    "bytes of UTF-8, with no empty, '.' or '..' parts, no leading '/', no backslash and no "
    "control characters"
)


def model_name(name: str) -> str:
    """`name` if valid, else InvalidModelName saying what a valid one is."""
    problem = _problem(name)
    if problem:
        raise InvalidModelName(f"invalid model name {echo(name)}: {problem}; {VALID}")
    return name


@functools.lru_cache(maxsize=CHECKED_NAMES)  # a hot name is checked on every request
def _problem(name: str) -> str:
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid UTF-8"
    if size > MAX_NAME_BYTES:
        return f"it is {size} bytes long"
    if not (name.isascii() and name.isprintable()) and any(
        unicodedata.category(char) == "Cc" for char in name
    ):
        return "it holds a control character"
    if "\\" in name:
        return "it holds a backslash"
    for part in name.split("/"):
        if part in ("", ".", ".."):
            return "it has an empty, '.' or '..' part (or a leading or trailing '/')"
        if len(part.encode("utf-8")) > MAX_PART_BYTES:
            return f"a part of it is over {MAX_PART_BYTES} bytes long"
    return ""


def echo(value: str) -> str:
    """`value` quoted and cut for an error message."""
    if len(value) <= MAX_ECHO_CHARS:
        return repr(value)
    return f"{value[:MAX_ECHO_CHARS]!r}... ({len(value)} characters)"


def name_from_url(url: str) -> str:
    """TorchServe's default model name: the archive's file name without its extension."""
    base = PurePosixPath(url.partition("?")[0].rstrip("/")).name  # drop a presigned query
    for suffix in ARCHIVE_SUFFIXES:
        if base.lower().endswith(suffix):
            return base[: -len(suffix)] or base
    return base.rsplit(".", 1)[0] or base


# what the loader takes; the store listings read it too
RUNTIME_SUFFIXES = {
    "sklearn": (".joblib", ".pkl", ".pickle"),
    "xgboost": (".ubj", ".json", ".bst"),
    "lightgbm": (".txt", ".lgb", ".bst"),
    "onnx": (".onnx",),
    "torch": (".pt", ".pt2"),
    "tensorflow": (".pb",),
    "huggingface": (".safetensors",),
}
XGBOOST_NAMES = ("xgboost-model",)  # AWS's XGBoost container's
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
ZIP_SUFFIXES = (".zip", ".mar")
SHARED_SUFFIXES = (".json", ".txt")  # not only models': reading tells
FOLDER_RUNTIMES = ("tensorflow", "huggingface")  # whose files need their folder

HANDLER_FILE = "handler.py"
SCRIPT = "code/inference.py"
MAR_MANIFEST = "MAR-INF/MANIFEST.json"
MANIFEST_NAME = "modelhost.toml"
SAVED_MODEL = "saved_model.pb"
HF_CONFIG = "config.json"
FOLDER_MARKERS = (HANDLER_FILE, SCRIPT, MAR_MANIFEST, MANIFEST_NAME, SAVED_MODEL)
HF_WEIGHTS = RUNTIME_SUFFIXES["huggingface"]  # beside config.json

_LOADED_ALONE = tuple(
    dict.fromkeys(
        suffix
        for runtime, suffixes in RUNTIME_SUFFIXES.items()
        if runtime not in FOLDER_RUNTIMES
        for suffix in suffixes
        if suffix not in SHARED_SUFFIXES
    )
)
MODEL_FILE_SUFFIXES = _LOADED_ALONE + TAR_SUFFIXES + ZIP_SUFFIXES


def is_model_file(name: str) -> bool:
    """A file the loader takes alone, judged by its name."""
    return name.lower().endswith(MODEL_FILE_SUFFIXES) or name in XGBOOST_NAMES


def is_model_folder(files: Collection[str]) -> bool:
    """Whether a folder holding `files` (paths inside it) is one model."""
    if any(marker in files for marker in FOLDER_MARKERS):
        return True
    return HF_CONFIG in files and any("/" not in f and f.endswith(HF_WEIGHTS) for f in files)
