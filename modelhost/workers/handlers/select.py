"""Which handler an unpacked artifact calls for, and how load failures are worded."""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from importlib import metadata
from pathlib import Path

from modelhost.errors import ModelLoadError, Unavailable, UnsafeArtifact
from modelhost.workers.handlers import (
    huggingface,
    lightgbm,
    onnx,
    savedmodel,
    sklearn,
    torch,
    xgboost,
)
from modelhost.workers.handlers.base import Handler
from modelhost.workers.handlers.mms import MmsHandler, find_entry, runtime_modules
from modelhost.workers.handlers.preload import PRELOAD_MODULES
from modelhost.workers.handlers.sagemaker import SageMakerHandler, script_in

PICKLE_SUFFIXES = sklearn.SUFFIXES
_SHIPPING_FORMS = (
    "ship one model file (.joblib/.pkl, .ubj/.json/.bst, .txt/.lgb, .onnx, .pt/.pt2), a folder "
    "with handler.py (MMS/TorchServe), a folder with code/inference.py (SageMaker), a Hugging "
    "Face folder (config.json, model.safetensors, tokenizer files) or a TensorFlow SavedModel "
    "(saved_model.pb, variables/)"
)
_LISTED_NAMES = 10


@dataclass(frozen=True)
class Runtime:
    """A built-in handler: the files it takes and how it builds a handler."""

    name: str
    suffixes: tuple[str, ...]
    build: Callable[[Path, int], Handler]  # (model file, threads)
    hint: Callable[[], str]
    _: KW_ONLY
    sniff: Callable[[Path], bool] | None = None  # for shared suffixes (.json, .txt, .bst)
    modules: tuple[str, ...] = ()  # imported before a load is measured: the worker's, not its
    modules_of: Callable[[Path], tuple[str, ...]] | None = None  # and those a file names
    names: tuple[str, ...] = ()  # whole file names it takes

    def takes(self, path: Path, *, declared: bool = False) -> bool:
        """Whether `path` is this runtime's file (sniffed unless `declared`)."""
        if not path.name.lower().endswith(self.suffixes) and path.name not in self.names:
            return False
        return declared or self.sniff is None or self.sniff(path)


@dataclass(frozen=True)
class LoadSpec:
    """What the manifest tells a worker about a model."""

    handler: str | None = None  # a runtime name, or "file.py[:function]"
    model_file: str | None = None  # relative to `root`
    root: Path | None = None  # the manifest's folder; None: the artifact
    threads: int = 1


DEFAULT_SPEC = LoadSpec()


PROGRAM_RUNTIMES = ("torch", "tensorflow")  # their files are code the runtime runs (security.md)


@dataclass(frozen=True)
class Choice:
    load: Callable[[], Handler]
    hint: Callable[[], str]
    modules: tuple[str, ...] = ()
    program: str = ""  # what kind of program the model is; empty for data


@dataclass(frozen=True)
class Prepared:
    """A handler chosen and its runtime imported: calling it builds the handler."""

    build: Callable[[], Handler]
    modules: tuple[str, ...] = ()  # what it imported first (handlers/preload.py's runtimes_of)

    def __call__(self) -> Handler:
        return self.build()


def prepared_handler(artifact: Path, model_name: str, spec: LoadSpec = DEFAULT_SPEC) -> Prepared:
    """The handler chosen and its runtime imported now, so a measured load is not charged the
    import; the call builds it, or raises why not."""
    try:
        choice = choose(artifact, model_name, spec)
    except Exception as exc:  # noqa: BLE001  (raised, worded, when the handler is wanted)
        failure = exc

        def fail() -> Handler:
            raise failure

        return Prepared(lambda: _worded(model_name, fail, _artifact_hint))
    for module in choice.modules:
        with contextlib.suppress(Exception):  # the build says why a runtime will not import
            importlib.import_module(module)
    return Prepared(lambda: _worded(model_name, choice.load, choice.hint), choice.modules)


def _worded(model_name: str, build: Callable[[], Handler], hint: Callable[[], str]) -> Handler:
    try:
        return build()
    except (UnsafeArtifact, Unavailable):
        raise  # a refused pickle, or the files gone: said as they are
    except ModelLoadError as exc:
        raise ModelLoadError(f"could not load model {model_name}: {exc}") from exc
    except (Exception, SystemExit) as exc:  # user code may sys.exit() at import
        raise ModelLoadError(
            f"could not load model {model_name}: {type(exc).__name__}: {exc}; {hint()}"
        ) from exc


def _artifact_hint() -> str:
    return "check the artifact"


def choose(artifact: Path, model_name: str, spec: LoadSpec = DEFAULT_SPEC) -> Choice:
    """The manifest's handler, else one chosen by the files."""
    if spec.handler or spec.model_file:
        return _declared(artifact, model_name, spec)
    if artifact.is_file():
        return _choose_file(artifact, spec.threads)
    if artifact.is_dir():
        return _choose_folder(artifact, model_name, spec.threads, descend=True)
    raise Unavailable(f"the artifact of model {model_name} left the disk as it loaded; retry")


def _choose_file(path: Path, threads: int) -> Choice:
    runtime = next((r for r in RUNTIMES.values() if r.takes(path)), None)
    if runtime is not None:
        return _built_in(runtime, path, threads)
    kind = f"'{path.suffix}' files" if path.suffix else "files without an extension"
    if path.suffix.lower() in (".json", ".txt"):
        kind = f"{path.name}, which is not an XGBoost (.json) or LightGBM (.txt) model"
    suffixes = (suffix for runtime in RUNTIMES.values() for suffix in runtime.suffixes)
    supported = ", ".join(dict.fromkeys(suffixes))
    raise ModelLoadError(
        f"no built-in handler for {kind}; supported: {supported}; or ship a folder with "
        "handler.py or code/inference.py, or name the handler in modelhost.toml"
    )


def _choose_folder(folder: Path, model_name: str, threads: int, *, descend: bool) -> Choice:
    """User code first, then a single model file; a lone subfolder is entered."""
    script = script_in(folder)
    if script is not None:
        program = str(script.relative_to(folder))
        hint = functools.partial(_script_hint, program)
        return Choice(lambda: SageMakerHandler(folder, script), hint, program=program)
    entry = find_entry(folder)
    if entry is not None:
        modules = runtime_modules(folder, entry)
        return Choice(
            lambda: MmsHandler(folder, model_name, entry), _handler_hint, modules, "a handler"
        )
    if huggingface.is_folder(folder):
        return _built_in(RUNTIMES["huggingface"], folder / "config.json", threads)
    found = _model_files_in(folder)
    if descend and not found:
        subfolders = [path for path in _visible(folder) if path.is_dir()]
        if len(subfolders) == 1:
            return _choose_folder(subfolders[0], model_name, threads, descend=False)
        found = [path for subfolder in subfolders for path in _model_files_in(subfolder)]
        found = savedmodel.latest_version(found) or found
    if len(found) == 1:
        return _choose_file(found[0], threads)
    raise ModelLoadError(_nothing_to_load(folder, found))


def _declared(artifact: Path, model_name: str, spec: LoadSpec) -> Choice:
    """The handler and model file the manifest names."""
    root = spec.root or artifact
    model_file = _inside(root, spec.model_file) if spec.model_file else None
    runtime = RUNTIMES.get(spec.handler or "")
    if spec.handler and runtime is None:
        return _user_entry(root, model_name, spec.handler)
    if runtime is None:  # the model file's extension decides
        assert model_file is not None
        return _choose_file(model_file, spec.threads)
    path = model_file or _only_file_of(runtime, artifact)
    return _built_in(runtime, path, spec.threads)


def _user_entry(root: Path, model_name: str, handler: str) -> Choice:
    file_name, _, function = handler.partition(":")
    if not file_name.endswith(".py"):
        names = ", ".join(RUNTIMES)
        raise ModelLoadError(
            f"the manifest's handler '{handler}' is neither a built-in handler ({names}) nor a "
            "Python file of the artifact (handler.py or handler.py:function)"
        )
    entry = (_inside(root, file_name), function or None)
    modules = runtime_modules(root, entry)
    return Choice(lambda: MmsHandler(root, model_name, entry), _handler_hint, modules, file_name)


def _only_file_of(runtime: Runtime, artifact: Path) -> Path:
    if artifact.is_file():
        return artifact
    folders = [artifact, *(path for path in _visible(artifact) if path.is_dir())]
    found = [
        path
        for folder in folders
        for path in _visible(folder)
        if path.is_file() and runtime.takes(path, declared=True)
    ]
    if len(found) == 1:
        return found[0]
    names = ", ".join(str(path.relative_to(artifact)) for path in found) or "none"
    raise ModelLoadError(
        f"the manifest names the {runtime.name} handler, which needs exactly one "
        f"{'/'.join(runtime.suffixes)} file; found {names}: set model_file in modelhost.toml"
    )


def _inside(root: Path, relative: str) -> Path:
    path = root / relative
    if not path.resolve().is_relative_to(root.resolve()):
        raise ModelLoadError(f"the manifest names {relative}, which is outside the artifact")
    if not path.is_file():
        raise ModelLoadError(f"the manifest names {relative}, which the artifact does not hold")
    return path


def _built_in(runtime: Runtime, path: Path, threads: int) -> Choice:
    program = f"a {runtime.name} program" if runtime.name in PROGRAM_RUNTIMES else ""
    modules = runtime.modules + (runtime.modules_of(path) if runtime.modules_of else ())
    return Choice(lambda: runtime.build(path, threads), runtime.hint, modules, program)


def _visible(folder: Path) -> list[Path]:
    """Entries, less dotfiles and macOS's archive litter."""
    return sorted(
        path
        for path in folder.iterdir()
        if not path.name.startswith(".") and path.name != "__MACOSX"
    )


def _model_files_in(folder: Path) -> list[Path]:
    return [
        path
        for path in _visible(folder)
        if path.is_file() and any(runtime.takes(path) for runtime in RUNTIMES.values())
    ]


def _nothing_to_load(folder: Path, files: list[Path]) -> str:
    if files:
        names = ", ".join(str(path.relative_to(folder)) for path in files)
        return (
            f"found {len(files)} model files in {folder.name}/ ({names}); keep exactly one, "
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


def _script_hint(script: str) -> str:
    return f"fix {script}: the error came from importing it or from its model_fn"


def _handler_hint() -> str:
    return "fix the handler file: the error came from importing it or from initialize(context)"


def _runtime_hint(distribution: str, saved_with: str) -> Callable[[], str]:
    def hint() -> str:
        return (
            f"check that it was saved with {saved_with} by a version this server can read "
            f"({distribution} {_version(distribution)})"
        )

    return hint


def _is_xgboost(path: Path) -> bool:
    """XGBoost's JSON, or a .bst that is not LightGBM's text."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        return xgboost.is_xgboost_json(path)
    return suffix != ".bst" or not lightgbm.is_lightgbm_text(path)


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


RUNTIMES: dict[str, Runtime] = {
    "sklearn": Runtime(
        "sklearn",
        sklearn.SUFFIXES,
        lambda path, _: sklearn.SklearnHandler.load(path),
        _sklearn_hint,
        modules=PRELOAD_MODULES["sklearn"],
    ),
    "xgboost": Runtime(
        "xgboost",
        xgboost.SUFFIXES,
        xgboost.XGBoostHandler,
        _runtime_hint("xgboost", "Booster.save_model"),
        sniff=_is_xgboost,
        modules=PRELOAD_MODULES["xgboost"],
        names=xgboost.NAMES,
    ),
    "lightgbm": Runtime(
        "lightgbm",
        lightgbm.SUFFIXES,
        lightgbm.LightGBMHandler,
        _runtime_hint("lightgbm", "Booster.save_model"),
        sniff=lambda path: path.suffix.lower() == ".lgb" or lightgbm.is_lightgbm_text(path),
        modules=PRELOAD_MODULES["lightgbm"],
    ),
    "onnx": Runtime(
        "onnx",
        onnx.SUFFIXES,
        onnx.OnnxHandler,
        _runtime_hint("onnxruntime", "an ONNX exporter"),
        modules=PRELOAD_MODULES["onnxruntime"],
    ),
    "torch": Runtime(
        "torch",
        torch.SUFFIXES,
        torch.TorchHandler,
        _runtime_hint("torch", "torch.jit.save or torch.export.save"),
        modules=PRELOAD_MODULES["torch"],
    ),
    "tensorflow": Runtime(
        "tensorflow",
        savedmodel.SUFFIXES,
        savedmodel.SavedModelHandler,
        _runtime_hint("tensorflow-cpu", "tf.saved_model.save"),
        sniff=savedmodel.is_saved_model,
        modules=("tensorflow",),
    ),
    **{
        name: Runtime(
            name,
            huggingface.SUFFIXES,
            huggingface.HuggingFaceHandler.build(task),
            _runtime_hint("transformers", "save_pretrained"),
            sniff=huggingface.takes_weights,
            modules=huggingface.MODULES,
            modules_of=huggingface.model_type_modules,
        )
        for name, task in huggingface.TASKS.items()
    },
}
