"""Optional runtimes, imported when a model needs one."""

from __future__ import annotations

import importlib
from types import ModuleType

from modelhost.errors import ModelLoadError


def require(module: str, extra: str, artifact: str) -> ModuleType:
    """Import `module`, or say which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ModelLoadError(
            f"{artifact} needs {module}, which is not installed on this server: "
            f"pip install 'modelhost[{extra}]'"
        ) from exc
    except OSError as exc:  # a shared library it links is missing (libgomp)
        raise ModelLoadError(
            f"{artifact} needs {module}, which is installed but cannot be imported ({exc}); "
            "install the system library it names"
        ) from exc
