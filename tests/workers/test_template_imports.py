"""What the worker template imports before it forks: its core, then the runtimes it preloads,
and the scikit-learn rehearsal only where scikit-learn is one of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.missing import require_module

from modelhost.config import PRELOADABLE_RUNTIMES
from modelhost.workers.handlers.preload import PRELOAD_MODULES, RUNTIME_PACKAGES, runtimes_of


def template_imports(preload: list[str], folder: Path) -> tuple[set[str], int]:
    """The modules a fresh template holds after its imports, and how many rehearsal models."""
    code = (
        "import json, sys; from pathlib import Path; "
        "from modelhost.workers.template import import_runtimes, write_rehearsal_models; "
        f"import_runtimes({preload!r}); rehearsal = write_rehearsal_models(Path({str(folder)!r})); "
        "print(json.dumps([sorted(sys.modules), len(rehearsal)]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules, rehearsal = json.loads(done.stdout)
    return set(modules), rehearsal


def test_every_runtime_preload_runtimes_accepts_names_its_modules() -> None:
    assert set(PRELOAD_MODULES) == set(PRELOADABLE_RUNTIMES)


def test_a_handlers_first_imports_name_the_runtimes_a_restart_preloads() -> None:
    """What the disk index keeps of a load: a TorchServe archive needs torch and its base
    handler, a pickle scikit-learn, a handler of plain Python none."""
    assert set(RUNTIME_PACKAGES) == set(PRELOADABLE_RUNTIMES)
    archive = (*PRELOAD_MODULES["torchserve"], "ts.torch_handler.image_classifier")
    assert runtimes_of(archive) == ("torch", "torchserve")
    assert runtimes_of(PRELOAD_MODULES["sklearn"]) == ("sklearn",)
    assert runtimes_of(("json", "transformers")) == ()


def test_the_default_preloads_scikit_learn_and_rehearses_it(tmp_path: Path) -> None:
    modules, rehearsal = template_imports(["sklearn"], tmp_path)
    assert {"numpy", "joblib", "sklearn.ensemble", "modelhost.workers.worker"} <= modules
    assert rehearsal == 2


def test_torchserve_preloads_torch_and_its_base_handler_without_scikit_learn(
    tmp_path: Path,
) -> None:
    """A server of TorchServe archives forks its workers without scikit-learn's 0.9 s import."""
    require_module("ts")
    modules, rehearsal = template_imports(["torchserve"], tmp_path)
    assert {"torch", "ts.torch_handler.base_handler", "modelhost.workers.worker"} <= modules
    assert "sklearn" not in modules
    assert rehearsal == 0  # a worker must not import scikit-learn to rehearse
