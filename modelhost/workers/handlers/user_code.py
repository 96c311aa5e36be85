"""Users' handler code, each file under a module name of its own."""

from __future__ import annotations

import importlib.util
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from modelhost.errors import ModelLoadError

USER_MODULE_PREFIX = "modelhost_user_"

# sys.path and sys.modules are process-wide: loads take turns
_USER_CODE_LOCK = threading.RLock()  # user code may load a model itself


@contextmanager
def user_code(search_dir: Path) -> Iterator[None]:
    """Let user code import its siblings while it loads, then forget them.

    Two models that both ship a `utils.py` never see each other's.
    """
    with _USER_CODE_LOCK:
        before = set(sys.modules)
        sys.path.insert(0, str(search_dir))
        try:
            yield
        finally:
            if str(search_dir) in sys.path:  # user code may have removed it
                sys.path.remove(str(search_dir))
            _forget_modules_under(search_dir, set(sys.modules) - before)


def import_user_module(path: Path) -> ModuleType:
    """Import a user's file under a unique module name."""
    name = f"{USER_MODULE_PREFIX}{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelLoadError(f"{path.name} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickle look classes up by module name
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        del sys.modules[name]
        raise ModelLoadError(_missing_module_message(path, exc)) from exc
    except BaseException:
        del sys.modules[name]
        raise
    return module


def forget_user_module(module: ModuleType) -> None:
    """Drop a module `import_user_module` made."""
    sys.modules.pop(module.__name__, None)


def _forget_modules_under(folder: Path, names: set[str]) -> None:
    root = folder.resolve()
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None)
        if name.startswith(USER_MODULE_PREFIX) or not file:
            continue
        if Path(file).resolve().is_relative_to(root):
            del sys.modules[name]


def _missing_module_message(path: Path, exc: ModuleNotFoundError) -> str:
    missing = exc.name or str(exc)
    message = f"{path.name} imports '{missing}', which is not installed on this server"
    if (path.parent / "requirements.txt").exists():
        message += f"; {path.parent.name}/requirements.txt is not installed at load time"
    return message + f": install '{missing}' in the server's image"
