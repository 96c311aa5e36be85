"""SageMaker inference-toolkit scripts: `code/inference.py` with `model_fn` and hooks."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from modelhost import names
from modelhost.errors import (
    BadRequestBody,
    Forbidden,
    ModelhostError,
    ModelLoadError,
    NotAcceptable,
    PayloadTooLarge,
    UnsupportedMediaType,
)
from modelhost.workers.codecs import (
    JSON,
    decode_rows,
    encode_predictions,
    encode_value,
    media_type,
    negotiate,
)
from modelhost.workers.handlers.base import Handler, InferReply, InferRequest
from modelhost.workers.handlers.mms import MmsContext
from modelhost.workers.handlers.sklearn import predict_rows
from modelhost.workers.handlers.user_code import forget_user_module, import_user_module, user_code

SCRIPT = Path(names.SCRIPT)
PROGRAM_VARIABLE = "SAGEMAKER_PROGRAM"  # in workers' environment (workers/environment.py)
TEXT_TYPES = (JSON, "text/csv")  # handed to the script as str
ANY_ACCEPT = ("", "*/*")  # the toolkit's default: JSON

# arguments before the optional context
ARGUMENTS = {
    "pre_model_fn": 1,
    "model_fn": 1,
    "model_warmup_fn": 2,
    "input_fn": 2,
    "predict_fn": 2,
    "output_fn": 2,
    "transform_fn": 4,
}
LOAD_HOOKS = {"pre_model_fn", "model_fn", "model_warmup_fn"}
Hook = Callable[..., Any]
# statuses of BaseInferenceToolkitError kept
TOOLKIT_STATUSES: dict[object, type[ModelhostError]] = {
    400: BadRequestBody,
    403: Forbidden,
    406: NotAcceptable,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
}


@dataclass(frozen=True)
class Hooks:
    """The script's functions, else the toolkit's defaults."""

    pre_model_fn: Hook | None
    model_fn: Hook
    model_warmup_fn: Hook | None
    input_fn: Hook
    predict_fn: Hook
    output_fn: Hook
    transform_fn: Hook | None
    reads_text: bool
    takes_context: bool


def script_in(folder: Path) -> Path | None:
    """The script the toolkit would import: SAGEMAKER_PROGRAM's in code/, else inference.py."""
    program = Path(os.environ.get(PROGRAM_VARIABLE, "")).name.removesuffix(".py")
    named = [folder / "code" / f"{program}.py"] if program else []
    return next((script for script in (*named, folder / SCRIPT) if script.is_file()), None)


class SageMakerHandler(Handler):
    def __init__(self, model_dir: Path, script: Path) -> None:
        self._context = MmsContext(model_dir, model_dir.name, {})
        with user_code(script.parent):
            self._module: ModuleType | None = import_user_module(script)
            try:
                self._hooks = _hooks(self._module, script.name)
                self._model: Any = self._load(str(model_dir))
            except BaseException:
                forget_user_module(self._module)
                raise

    def _load(self, model_dir: str) -> Any:
        hooks, context = self._hooks, self._context
        if hooks.pre_model_fn is not None:
            hooks.pre_model_fn(model_dir, context)
        model = hooks.model_fn(model_dir, context)
        if hooks.model_warmup_fn is not None:
            hooks.model_warmup_fn(model_dir, model, context)
        return model

    def infer(self, request: InferRequest) -> InferReply:
        """A toolkit error keeps its status where it can."""
        try:
            return self._answer(request)
        except Exception as error:
            status = _toolkit_status(error)
            if status is None:
                raise
            raise status(str(getattr(error, "message", error))) from error

    def _answer(self, request: InferRequest) -> InferReply:
        """`transform_fn`, else input_fn → predict_fn → output_fn."""
        hooks = self._hooks
        accept = JSON if request.accept in ANY_ACCEPT else request.accept
        body = _text(request) if hooks.reads_text else request.body
        context = self._context.for_requests([request]) if hooks.takes_context else None
        if hooks.transform_fn is not None:
            result = hooks.transform_fn(self._model, body, request.content_type, accept, context)
        else:
            data = hooks.input_fn(body, request.content_type, context)
            prediction = hooks.predict_fn(data, self._model, context)
            result = hooks.output_fn(prediction, accept, context)
        return _reply(result, accept)

    def close(self) -> None:
        """Drop the model and the script's module."""
        if self._module is not None:
            forget_user_module(self._module)
        self._module = None
        self._model = None


def _hooks(module: ModuleType, script: str) -> Hooks:
    model_fn = getattr(module, "model_fn", None)
    if not callable(model_fn):
        raise ModelLoadError(
            f"code/{script} defines no model_fn(model_dir); add one that loads and returns "
            "the model from model_dir"
        )
    defaults = {"input_fn": decode_rows, "predict_fn": _predict, "output_fn": _output}
    found = {name: getattr(module, name) for name in ARGUMENTS if hasattr(module, name)}
    context = {name for name, function in found.items() if _takes_context(function, name)}
    hooks = {
        name: function if name in context else _without_context(function)
        for name, function in {**defaults, **found}.items()
    }
    return Hooks(
        pre_model_fn=hooks.get("pre_model_fn"),
        model_fn=hooks["model_fn"],
        model_warmup_fn=hooks.get("model_warmup_fn"),
        input_fn=hooks["input_fn"],
        predict_fn=hooks["predict_fn"],
        output_fn=hooks["output_fn"],
        transform_fn=hooks.get("transform_fn"),
        reads_text="input_fn" in found or "transform_fn" in found,
        takes_context=bool(context - LOAD_HOOKS),
    )


def _takes_context(function: Callable[..., Any], name: str) -> bool:
    try:
        return len(inspect.signature(function).parameters) == ARGUMENTS[name] + 1
    except (TypeError, ValueError):  # no signature
        return False


def _without_context(function: Callable[..., Any]) -> Hook:
    return lambda *args: function(*args[:-1])


def _text(request: InferRequest) -> bytes | str:
    if request.content_type not in TEXT_TYPES:
        return request.body
    try:
        return request.body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequestBody(f"the {request.content_type} body is not UTF-8 ({exc})") from exc


def _toolkit_status(error: Exception) -> type[ModelhostError] | None:
    if not any(cls.__name__ == "BaseInferenceToolkitError" for cls in type(error).__mro__):
        return None
    return TOOLKIT_STATUSES.get(getattr(error, "status_code", None))


def _predict(data: Any, model: Any) -> Any:
    """The toolkit's default predict_fn: `model.predict(data)`."""
    return predict_rows(model, data)


def _output(prediction: Any, accept: str) -> tuple[bytes, str]:
    """The toolkit's default output_fn: JSON is the bare predictions."""
    if negotiate(accept) == JSON:
        return encode_value(prediction)[0], JSON
    return encode_predictions(prediction, accept)


def _reply(result: Any, accept: str) -> InferReply:
    """output_fn's result: (body, content type), or a body."""
    if isinstance(result, tuple) and len(result) == 2:
        body, content_type = result
        return InferReply(encode_value(body)[0], str(content_type))
    body, content_type = encode_value(result)
    first = media_type(accept.split(",")[0])
    if isinstance(result, (bytes, bytearray, memoryview, str)) and first and "*" not in first:
        content_type = first  # the toolkit labels a serialised body with the Accept type
    return InferReply(body, content_type)
