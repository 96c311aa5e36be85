"""Built-in handlers, the choice among them, and the loading of users' handler code.

Importing this package imports no runtime: the template imports `RUNTIME_MODULES` before it
forks, so their pages are shared.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from modelhost.workers.handlers.user_code import forget_user_module, import_user_module, user_code

if TYPE_CHECKING:
    from modelhost.workers.handlers.base import Handler
    from modelhost.workers.handlers.select import LoadSpec

RUNTIME_MODULES: tuple[str, ...] = (
    "numpy",
    "joblib",
    "sklearn",
    # those pickled estimators name most often
    "sklearn.linear_model",
    "sklearn.ensemble",
    "sklearn.tree",
    "sklearn.svm",
    "sklearn.neighbors",
    "sklearn.naive_bayes",
    "sklearn.pipeline",
    "sklearn.preprocessing",
    "sklearn.compose",
    "sklearn.impute",
    "sklearn.feature_extraction.text",
    "sklearn.decomposition",
    "sklearn.cluster",
    "modelhost.workers.codecs",
    "modelhost.workers.handlers.select",
    "modelhost.workers.handlers.oip",
)

__all__ = [
    "RUNTIME_MODULES",
    "forget_user_module",
    "import_user_module",
    "load_handler",
    "user_code",
]


def load_handler(artifact: Path, model_name: str, spec: LoadSpec | None = None) -> Handler:
    """Build the handler an unpacked artifact calls for."""
    from modelhost.workers.handlers.oip import SpeaksOip
    from modelhost.workers.handlers.select import DEFAULT_SPEC
    from modelhost.workers.handlers.select import load_handler as select_and_load

    handler = select_and_load(artifact, model_name, spec or DEFAULT_SPEC)
    return SpeaksOip(handler)
