"""Which handler an unpacked artifact calls for, and the one place load failures are worded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from modelhost.errors import ModelLoadError
from modelhost.workers.handlers.base import Handler
from modelhost.workers.handlers.mms import MmsHandler, find_entry
from modelhost.workers.handlers.sagemaker import SCRIPT, SageMakerHandler
from modelhost.workers.handlers.sklearn import SklearnHandler

PICKLE_SUFFIXES = (".joblib", ".pkl", ".pickle")
_SHIPPING_FORMS = (
    "ship one .joblib/.pkl/.pickle file, a folder with handler.py (MMS/TorchServe) "
    "or a folder with code/inference.py (SageMaker)"
)
_LISTED_NAMES = 10


@dataclass(frozen=True)
class Choice:
    """A handler to build, and what to tell the user if building it fails."""

    load: Callable[[], Handler]
    hint: Callable[[], str]


def load_handler(artifact: Path, model_name: str) -> Handler:
    """Build the handler for an unpacked artifact; every failure becomes `ModelLoadError`."""
    choice: Choice | None = None
    try:
        choice = choose(artifact, model_name)
        return choice.load()
    except ModelLoadError as exc:
        raise ModelLoadError(f"could not load model {model_name}: {exc}") from exc
    except (Exception, SystemExit) as exc:  # user code may sys.exit(), e.g. argparse at import
        hint = choice.hint() if choice else "check the artifact"
        raise ModelLoadError(
            f"could not load model {model_name}: {type(exc).__name__}: {exc}; {hint}"
        ) from exc


def choose(artifact: Path, model_name: str) -> Choice:
    """Pick the handler by file extension, or by what a folder contains."""
    if artifact.is_file():
        return _choose_file(artifact)
    if artifact.is_dir():
        return _choose_folder(artifact, model_name, descend=True)
    raise ModelLoadError(f"artifact {artifact} does not exist; fetch it again")


def _choose_file(path: Path) -> Choice:
    if path.name.lower().endswith(PICKLE_SUFFIXES):
        return _sklearn(path)
    kind = f"'{path.suffix}' files" if path.suffix else "files without an extension"
    raise ModelLoadError(
        f"no built-in handler for {kind}; supported: {', '.join(PICKLE_SUFFIXES)}; "
        "or ship a folder with handler.py or code/inference.py"
    )


def _choose_folder(folder: Path, model_name: str, *, descend: bool) -> Choice:
    """User code first, then a single pickle; a lone subfolder (a tar's top folder) is entered."""
    if (folder / SCRIPT).is_file():
        return Choice(lambda: SageMakerHandler(folder), _script_hint)
    entry = find_entry(folder)
    if entry is not None:
        return Choice(lambda: MmsHandler(folder, model_name, entry), _handler_hint)
    pickles = _pickles_in(folder)
    if descend and not pickles:
        subfolders = [path for path in _visible(folder) if path.is_dir()]
        if len(subfolders) == 1:
            return _choose_folder(subfolders[0], model_name, descend=False)
        pickles = [path for subfolder in subfolders for path in _pickles_in(subfolder)]
    if len(pickles) == 1:
        return _sklearn(pickles[0])
    raise ModelLoadError(_nothing_to_load(folder, pickles))


def _sklearn(path: Path) -> Choice:
    return Choice(lambda: SklearnHandler(path), _sklearn_hint)


def _visible(folder: Path) -> list[Path]:
    """Entries, less dotfiles and the `__MACOSX` / `._*` litter macOS adds to archives."""
    return sorted(
        path
        for path in folder.iterdir()
        if not path.name.startswith(".") and path.name != "__MACOSX"
    )


def _pickles_in(folder: Path) -> list[Path]:
    return [
        path
        for path in _visible(folder)
        if path.is_file() and path.name.lower().endswith(PICKLE_SUFFIXES)
    ]


def _nothing_to_load(folder: Path, pickles: list[Path]) -> str:
    if pickles:
        names = ", ".join(str(path.relative_to(folder)) for path in pickles)
        return (
            f"found {len(pickles)} model files in {folder.name}/ ({names}); keep exactly one, "
            "or add a handler.py or code/inference.py that loads the right one"
        )
    entries = [path.name + ("/" if path.is_dir() else "") for path in _visible(folder)]
    found = ", ".join(entries[:_LISTED_NAMES]) or "nothing"
    if len(entries) > _LISTED_NAMES:
        found += f" and {len(entries) - _LISTED_NAMES} more"
    return f"{folder.name}/ holds nothing this server can load (found: {found}); {_SHIPPING_FORMS}"


def _sklearn_hint() -> str:
    return (
        "check that it is a scikit-learn model saved with joblib or pickle by versions this "
        f"server can read (scikit-learn {_version('scikit-learn')}, numpy {_version('numpy')}, "
        f"joblib {_version('joblib')})"
    )


def _script_hint() -> str:
    return "fix code/inference.py: the error came from importing it or from its model_fn"


def _handler_hint() -> str:
    return "fix the handler file: the error came from importing it or from initialize(context)"


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"
