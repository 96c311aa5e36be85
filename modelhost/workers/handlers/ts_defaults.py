"""TorchServe's built-in handlers a `.mar` names, resolved as TorchServe resolves them.

They come from the `torchserve` package itself (docs/decisions.md, "TorchServe handlers run on
TorchServe's own `ts` package").
"""

from __future__ import annotations

import ast
import importlib
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from modelhost.errors import ModelLoadError
from modelhost.workers.handlers.ts_context import EXTRA, VISION_EXTRA, is_torchserve_archive

DEFAULT_HANDLERS = ("image_classifier", "image_segmenter", "object_detector", "text_classifier")
# archives whose TorchScript file chooses the handler name it
BY_MODEL_FILE = ("base_handler",)
DISTRIBUTIONS = {"PIL": "pillow", "yaml": "pyyaml", "cv2": "opencv-python-headless"}
# what the built-in handlers import beyond `ts`, and the extra that brings it (cli/extras.py)
HANDLER_EXTRAS = {"captum": EXTRA, "torchvision": VISION_EXTRA}


def default_named(model_dir: Path, manifest: dict[str, Any]) -> str | None:
    """The built-in handler a TorchServe manifest names; None for a file or nothing."""
    model = manifest.get("model")
    handler = model.get("handler") if isinstance(model, dict) else None
    if not isinstance(handler, str) or not is_torchserve_archive(manifest):
        return None
    module_name = handler.partition(":")[0].removesuffix(".py")
    if not module_name or (model_dir / f"{module_name}.py").is_file():
        return None
    if module_name in DEFAULT_HANDLERS:
        return module_name
    if module_name in BY_MODEL_FILE:
        return None
    raise ModelLoadError(
        f"the archive names handler '{handler}', which is neither a file of the archive nor a "
        f"TorchServe built-in handler ({', '.join(DEFAULT_HANDLERS)}); rebuild it with "
        "torch-model-archiver --handler naming one of them or your handler file"
    )


def handler_modules(entry: tuple[Path, str | None] | str) -> tuple[str, ...]:
    """The `ts` modules a handler imports: a built-in's own (the vision ones import torchvision
    and captum), or those a handler file names, read without running it."""
    if isinstance(entry, str):
        return (f"ts.torch_handler.{entry}",)
    try:
        tree = ast.parse(entry[0].read_bytes())
    except (OSError, SyntaxError, ValueError):
        return ()  # its import says why
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return tuple(dict.fromkeys(name for name in names if name.startswith("ts.")))


def import_default(name: str) -> ModuleType:
    """TorchServe's module of the handler `name`, or what to install."""
    try:
        return importlib.import_module(f"ts.torch_handler.{name}")
    except ModuleNotFoundError as exc:
        raise ModelLoadError(missing_message(f"TorchServe's {name} handler", exc)) from exc


def missing_message(who: str, exc: ModuleNotFoundError) -> str:
    """What to install when `who` imports a module this server lacks."""
    missing = exc.name or str(exc)
    if missing == "ts":
        return (
            f"{who} imports 'ts', TorchServe's handler package, which is not installed on this "
            f"server: pip install 'modelhost[{EXTRA}]'"
        )
    if missing.startswith("ts."):
        return (
            f"{who} imports '{missing}', which torchserve {_version()} does not provide; "
            f"import what that version has (ts.torch_handler.base_handler, "
            f"{', '.join(f'ts.torch_handler.{d}' for d in DEFAULT_HANDLERS)}), or install "
            "the torchserve release the handler was written for"
        )
    top = missing.partition(".")[0]
    if top in HANDLER_EXTRAS:
        return f"{who} imports '{missing}', which is not installed on this server: " + (
            f"pip install 'modelhost[{HANDLER_EXTRAS[top]}]'{_pairing(top)}"
        )
    distribution = DISTRIBUTIONS.get(top, top)
    return (
        f"{who} imports '{missing}', which is not installed on this server: "
        f"pip install {distribution}"
    )


def _pairing(module: str) -> str:
    """torchvision's builds each match one torch build, which pip cannot see."""
    if module != "torchvision":
        return ""
    return (
        f", with the --index-url torch was installed from, so that torchvision's build matches "
        f"torch {_version('torch')}"
    )


def _version(distribution: str = "torchserve") -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "(not installed)"
