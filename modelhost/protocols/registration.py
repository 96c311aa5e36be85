"""TorchServe's registration parameters: each applied or refused, never ignored."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from modelhost.documents import json_object
from modelhost.errors import BadRequestBody
from modelhost.manifest import manifest_root
from modelhost.names import echo
from modelhost.protocols.params import is_whole_number
from modelhost.units import MOST_COUNT

PYTHON_RUNTIMES = ("python", "python3")
# workers.handlers.select.RUNTIMES' names, copied so the frontend imports no runtime
BUILT_IN_HANDLERS = (
    "sklearn",
    "xgboost",
    "lightgbm",
    "onnx",
    "torch",
    "tensorflow",
    "huggingface",
    "huggingface-classification",
    "huggingface-embeddings",
)
# workers.handlers.ts_defaults.DEFAULT_HANDLERS' names
TORCHSERVE_HANDLERS = ("image_classifier", "image_segmenter", "object_detector", "text_classifier")
# TorchServe's per-model timeouts (seconds, as here) and the manifest's names
TIMEOUTS = {"response_timeout": "response_timeout_s", "startup_timeout": "load_timeout_s"}


def check_registration(query: Mapping[str, str]) -> None:
    """Refuse what is not applied here, saying where it is set."""
    runtime = query.get("runtime")
    if runtime and runtime not in PYTHON_RUNTIMES:
        raise BadRequestBody(
            f"unknown runtime {echo(runtime)}: workers here run Python handlers; give "
            f"{' or '.join(PYTHON_RUNTIMES)}, or leave runtime out"
        )
    check_handler(query.get("handler") or "")
    check_signed_download(query)


def check_handler(handler: str) -> None:
    if handler in TORCHSERVE_HANDLERS:
        raise BadRequestBody(
            f"handler {echo(handler)} is TorchServe's built-in handler, run here as the "
            f"archive's own: build the archive with torch-model-archiver --handler {handler}, "
            "and register it without handler"
        )
    if handler and not is_handler_name(handler_file(handler)):
        raise BadRequestBody(
            f"unknown handler {echo(handler)}: give a built-in handler "
            f"({', '.join(BUILT_IN_HANDLERS)}) or a Python file of the archive "
            "(handler.py, handler.py:function or TorchServe's handler:function)"
        )


def check_signed_download(query: Mapping[str, str]) -> None:
    """TorchServe signs an http(s) download under `s3_sse_kms=true`."""
    signed = boolean(query.get("s3_sse_kms"), "s3_sse_kms", default=False)
    if signed and query.get("url", "").lower().startswith(("http://", "https://")):
        raise BadRequestBody(
            "s3_sse_kms=true asks for an https download signed with AWS credentials, which is "
            "not made here: give the archive's s3:// URL (allowed by --allowed-urls), which the "
            "S3 store fetches signed, SSE-KMS objects included"
        )


def registration_settings(query: Mapping[str, str]) -> dict[str, Any]:
    """What a registration sets for the model, as manifest fields over its archive's."""
    settings: dict[str, Any] = {}
    if query.get("batch_size"):
        settings["batch_size"] = count(query["batch_size"], "batch_size", minimum=1)
    if query.get("max_batch_delay"):  # milliseconds, as here
        settings["max_batch_delay_ms"] = count(query["max_batch_delay"], "max_batch_delay")
    if query.get("handler"):  # check_registration checked its name
        settings["handler"] = handler_file(query["handler"])
    for param, field in TIMEOUTS.items():
        if query.get(param):
            settings[field] = count(query[param], param, minimum=1)
    if query.get("idle_unload_s"):  # modelhost's own, as the manifest names it; 0: never
        settings["idle_unload_s"] = count(query["idle_unload_s"], "idle_unload_s")
    return settings


def missing_handler(handler: str | None, artifact: Path) -> str | None:
    file_name = (handler or "").partition(":")[0]
    if not file_name.endswith(".py"):
        return None
    root = manifest_root(artifact).resolve()
    path = (root / file_name).resolve()
    return None if path.is_relative_to(root) and path.is_file() else file_name


def handler_file(handler: str) -> str:
    """TorchServe's `module_name:method_name` as the archive's `module_name.py:method_name`."""
    module, colon, method = handler.partition(":")
    return f"{module}.py:{method}" if colon and module.isidentifier() else handler


def is_handler_name(handler: str) -> bool:
    """A built-in handler, or `file.py[:function]`."""
    return handler in BUILT_IN_HANDLERS or handler.partition(":")[0].endswith(".py")


def boolean(text: str | None, name: str, default: bool) -> bool:
    if not text:
        return default
    if text.lower() not in ("true", "false"):
        raise BadRequestBody(f"invalid {name} {echo(text)}: give true or false")
    return text.lower() == "true"


def count(text: str | None, name: str, minimum: int = 0) -> int:
    if text is None or text == "":
        return 0
    if not is_whole_number(text) or not minimum <= int(text) <= MOST_COUNT:
        raise BadRequestBody(
            f"invalid {name} {echo(text)}: give a whole number, {minimum} to {MOST_COUNT}"
        )
    return int(text)


def json_params(body: bytes) -> dict[str, str]:
    """A JSON body's fields as the query's, which TorchServe reads in its place."""
    fields = json_object(body, expected="the registration as a JSON object of the query's names")
    params = {}
    for name, value in fields.items():
        if isinstance(value, (dict, list)):
            raise BadRequestBody(f"{echo(name)} is a JSON object or array; give one value")
        if value is not None:
            params[name] = json.dumps(value) if isinstance(value, bool) else str(value)
    return params
