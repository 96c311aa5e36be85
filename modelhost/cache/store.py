"""Model stores: where artifacts live. The embedded default is a local folder, read in place."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from modelhost.errors import Forbidden, InvalidModelName, ModelNotFound

MAX_NAME_LENGTH = 1024
ARTIFACT_SUFFIXES = (".joblib", ".pkl", ".pickle", ".tar.gz", ".tgz", ".tar", ".zip")
HANDLER_FILES = ("handler.py", "code/inference.py")


def validate_name(name: str) -> str:
    """A model name is a relative POSIX path with no way out of the store."""
    if not name or len(name) > MAX_NAME_LENGTH or "\x00" in name or "\\" in name:
        raise InvalidModelName(
            f"invalid model name {name!r}: use a relative path such as "
            "tenants/t007.joblib (at most 1024 characters)"
        )
    if any(part in ("", ".", "..") for part in name.split("/")):
        raise InvalidModelName(
            f"invalid model name {name!r}: names are paths relative to the "
            "model store, with no '.', '..' or empty parts and no leading '/'"
        )
    return name


class LocalStore:
    """A folder of artifacts; a model's name is its path relative to the folder."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.uri = self.root.as_uri()

    def resolve(self, name: str) -> Path:
        path = (self.root / validate_name(name)).resolve()
        if not path.is_relative_to(self.root):
            raise InvalidModelName(f"model {name!r} resolves outside the model store {self.root}")
        if not path.exists():
            raise ModelNotFound(
                f"model {name} is not in the model store {self.root}; "
                "check the name (it is the artifact's path relative to the store)"
            )
        return path

    def relative_name(self, url: str) -> str:
        """The store-relative name of a URL or path given to POST /models, if it is inside."""
        parsed = urlparse(url)
        raw = unquote(parsed.path) if parsed.scheme == "file" else url
        path = Path(raw) if Path(raw).is_absolute() else self.root / raw
        resolved = path.resolve()
        if not resolved.is_relative_to(self.root):
            raise Forbidden(
                f"url {url!r} is outside the model store {self.root}; "
                "models may only be loaded from the configured store"
            )
        if not resolved.exists():
            raise ModelNotFound(f"url {url!r} does not exist in the model store {self.root}")
        return resolved.relative_to(self.root).as_posix()

    def all_models(self) -> list[str]:
        """Every artifact in the store: files of known kinds and folders with their own handler."""
        names = []
        for path in sorted(self.root.rglob("*")):
            is_file_model = path.is_file() and path.name.endswith(ARTIFACT_SUFFIXES)
            is_folder_model = path.is_dir() and any((path / f).is_file() for f in HANDLER_FILES)
            inside_folder_model = any(
                (p / f).is_file() for p in path.parents for f in HANDLER_FILES
            )
            if (is_file_model or is_folder_model) and not inside_folder_model:
                names.append(path.relative_to(self.root).as_posix())
        return names
