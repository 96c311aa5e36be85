"""Built-in handlers, the choice among them, and the loading of users' handler code.

Importing this package imports no runtime: the template imports the modules `preload.py` names
before it forks, so their pages are shared.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from modelhost.workers.handlers.user_code import forget_user_module, import_user_module, user_code

if TYPE_CHECKING:
    from modelhost.workers.handlers.base import Handler
    from modelhost.workers.handlers.select import LoadSpec, Prepared

__all__ = [
    "forget_user_module",
    "import_user_module",
    "load_handler",
    "prepared_handler",
    "user_code",
]


def load_handler(artifact: Path, model_name: str, spec: LoadSpec | None = None) -> Handler:
    """Build the handler an unpacked artifact calls for; a failure is a worded `ModelLoadError`."""
    return prepared_handler(artifact, model_name, spec)()


def prepared_handler(artifact: Path, model_name: str, spec: LoadSpec | None = None) -> Prepared:
    """Choose the handler and import its runtime now; build it when called (select.py)."""
    from modelhost.workers.handlers.oip import SpeaksOip
    from modelhost.workers.handlers.select import DEFAULT_SPEC, Prepared
    from modelhost.workers.handlers.select import prepared_handler as prepare

    build = prepare(artifact, model_name, spec or DEFAULT_SPEC)
    return Prepared(lambda: SpeaksOip(build()), build.modules)
