"""The modules the worker template imports before it forks, so every worker shares them."""

from __future__ import annotations

# what every worker imports before any model: the template's, shared by all
CORE_MODULES: tuple[str, ...] = (
    "numpy",
    "modelhost.workers.codecs",
    "modelhost.workers.handlers.select",
    "modelhost.workers.handlers.oip",
)
SKLEARN_MODULES: tuple[str, ...] = (
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
)
# the modules of each runtime `preload_runtimes` may name (modelhost.config.PRELOADABLE_RUNTIMES)
PRELOAD_MODULES: dict[str, tuple[str, ...]] = {
    "sklearn": SKLEARN_MODULES,
    "xgboost": ("xgboost",),
    "lightgbm": ("lightgbm",),
    "onnxruntime": ("onnxruntime",),
    "torch": ("torch",),
    "torchserve": ("torch", "ts.torch_handler.base_handler"),
}
# the package whose import says a handler needs the runtime
RUNTIME_PACKAGES: dict[str, str] = {
    "sklearn": "sklearn",
    "xgboost": "xgboost",
    "lightgbm": "lightgbm",
    "onnxruntime": "onnxruntime",
    "torch": "torch",
    "torchserve": "ts",
}


def runtimes_of(modules: tuple[str, ...]) -> tuple[str, ...]:
    """The preloadable runtimes among the modules a handler imports first."""
    packages = {module.partition(".")[0] for module in modules}
    return tuple(name for name, package in RUNTIME_PACKAGES.items() if package in packages)
