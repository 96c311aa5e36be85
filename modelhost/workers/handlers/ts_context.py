"""What a TorchServe handler finds in its context and its `data`, as TorchServe gives them."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

from modelhost.errors import ModelLoadError

SERVER_NAME = "MMS"  # TorchServe's own value; handlers may compare
EXTRA = "torchserve-handlers"
VISION_EXTRA = "torchserve-vision"  # torchvision, for the image handlers


def is_torchserve_archive(manifest: dict[str, Any]) -> bool:
    """Whether torch-model-archiver wrote the manifest, so bodies come decoded."""
    return "archiverVersion" in manifest


def system_properties(model_dir: Path, batch_size: int) -> dict[str, Any]:
    """TorchServe's system properties of a model on the CPU."""
    return {
        "model_dir": str(model_dir),
        "gpu_id": None,
        "batch_size": batch_size,
        "server_name": SERVER_NAME,
        "server_version": _server_version(),
        "limit_max_image_pixels": True,
    }


def model_yaml_config(model_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """The archive's model-config.yaml, parsed; `{}` without one."""
    model = manifest.get("model")
    name = model.get("configFile") if isinstance(model, dict) else None
    if not isinstance(name, str) or not name:
        return {}
    path = model_dir / name
    if not path.resolve().is_relative_to(model_dir.resolve()) or not path.is_file():
        raise ModelLoadError(f"the manifest names configFile {name}, which the archive lacks")
    try:
        import yaml
    except ImportError as exc:
        raise ModelLoadError(
            f"the archive's {name} needs PyYAML, which is not installed on this server: "
            f"pip install 'modelhost[{EXTRA}]'"
        ) from exc
    try:
        parsed = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, ValueError) as error:  # ValueError: not UTF-8
        raise ModelLoadError(
            f"the archive's {name} is not valid YAML: {_yaml_problem(error)}; fix it and rebuild "
            "the .mar (torch-model-archiver --config-file)"
        ) from None
    return parsed if isinstance(parsed, dict) else {}


def _yaml_problem(error: Exception) -> str:
    """PyYAML's complaint on one line: what, and where."""
    problem, mark = getattr(error, "problem", None), getattr(error, "problem_mark", None)
    if problem is None or mark is None:
        return str(error)
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"


def decoded_body(body: bytes, content_type: str) -> Any:
    """The body as TorchServe hands it: JSON parsed, text decoded, else bytes."""
    media_type = content_type.partition(";")[0].strip().lower()
    try:
        if media_type == "application/json":
            return json.loads(body)
        if media_type.startswith("text"):
            return body.decode("utf-8")
    except ValueError:  # JSON and Unicode decode errors both
        return body
    return body


def _server_version() -> str:
    try:
        return metadata.version("torchserve")
    except metadata.PackageNotFoundError:
        return metadata.version("modelhost")
