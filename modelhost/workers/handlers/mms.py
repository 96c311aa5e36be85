"""Users' MMS / TorchServe handlers: `handle(data, context)` as a module function or a class."""

from __future__ import annotations

import copy
import inspect
import json
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn, cast

from modelhost.errors import HandlerError, ModelLoadError
from modelhost.names import HANDLER_FILE, MAR_MANIFEST
from modelhost.workers.codecs import encode_value
from modelhost.workers.handlers import ts_devices
from modelhost.workers.handlers.base import BatchHandler, InferReply, InferRequest
from modelhost.workers.handlers.preload import PRELOAD_MODULES
from modelhost.workers.handlers.ts_context import (
    decoded_body,
    is_torchserve_archive,
    model_yaml_config,
    system_properties,
)
from modelhost.workers.handlers.ts_defaults import (
    default_named,
    handler_modules,
    import_default,
    missing_message,
)
from modelhost.workers.handlers.ts_metrics import HandlerMetrics
from modelhost.workers.handlers.user_code import forget_user_module, import_user_module, user_code
from modelhost.workers.messages import Custom

MANIFEST = Path(MAR_MANIFEST)

Entry = Callable[[list[dict[str, Any]], "MmsContext"], Any]
NOT_STREAMED = (
    "TorchServe's streaming responses (send_intermediate_predict_response) are not served: "
    "return the whole answer from handle (docs/migrating-torchserve.md#6-what-does-not-carry-over)"
)


class RequestProcessor:
    """One request's headers in, response headers out."""

    def __init__(self, request_header: dict[str, str]) -> None:
        self._request_header = request_header
        self._response_header: dict[str, str] = {}
        self._status: tuple[int, str | None] = (200, None)

    def get_request_property(self, key: str) -> str | None:
        """As sent; HTTP headers arrive lowercased, so `X-Trace` finds `x-trace`."""
        found = self._request_header.get(key)
        return self._request_header.get(key.lower()) if found is None else found

    def get_request_properties(self) -> dict[str, str]:
        return self._request_header

    def add_response_property(self, key: str, value: str) -> None:
        self._response_header[key] = value

    def get_response_header(self, key: str) -> str | None:
        return self._response_header.get(key)

    def get_response_headers(self) -> dict[str, str]:
        return self._response_header

    def report_status(self, code: int, reason_phrase: str | None = None) -> None:
        self._status = (code, reason_phrase)

    def get_response_status_code(self) -> int:
        return self._status[0]

    def get_response_status_phrase(self) -> str | None:
        return self._status[1]


class MmsContext:
    """The `context` MMS and TorchServe handlers receive."""

    def __init__(self, model_dir: Path, model_name: str, manifest: dict[str, Any]) -> None:
        self.model_name = model_name
        self.manifest = manifest
        self.system_properties = system_properties(model_dir, 1)
        self.model_yaml_config = model_yaml_config(model_dir, manifest)
        self.request_processor = [RequestProcessor({})]
        self.request_ids: dict[int, str] | None = None
        self.metrics = HandlerMetrics(model_name)

    def for_requests(self, requests: Sequence[InferRequest]) -> MmsContext:
        """A copy for one call, so concurrent calls never share response headers."""
        context = copy.copy(self)
        context.request_processor = [
            RequestProcessor(
                {
                    **(request.headers or {}),
                    **request.params,
                    "Content-Type": request.content_type,
                    "Accept": request.accept,
                }
            )
            for request in requests
        ]
        context.system_properties = {**self.system_properties, "batch_size": len(requests)}
        context.request_ids = {
            index: request.request_id or str(uuid.uuid4()) for index, request in enumerate(requests)
        }
        return context

    @property
    def cl_socket(self) -> NoReturn:
        """TorchServe's worker socket: only its streaming responses write to it."""
        raise AttributeError(NOT_STREAMED)  # hasattr stays False

    def get_request_id(self, idx: int = 0) -> str | None:
        return None if self.request_ids is None else self.request_ids.get(idx)

    def get_request_header(self, idx: int, key: str) -> str | None:
        return self.request_processor[idx].get_request_property(key)

    def get_all_request_header(self, idx: int) -> dict[str, str]:
        return self.request_processor[idx].get_request_properties()

    def set_response_header(self, idx: int, key: str, value: str) -> None:
        self.request_processor[idx].add_response_property(key, value)

    def get_response_headers(self, idx: int) -> dict[str, str]:
        return self.request_processor[idx].get_response_headers()

    def set_response_content_type(self, idx: int, value: str) -> None:
        self.request_processor[idx].add_response_property("Content-Type", value)

    def get_response_content_type(self, idx: int) -> str | None:
        """MMS's key, else TorchServe's lower-case one."""
        headers = self.request_processor[idx].get_response_headers()
        return headers.get("Content-Type") or headers.get("content-type")

    def set_response_status(self, code: int = 200, phrase: str = "", idx: int = 0) -> None:
        self.request_processor[idx].report_status(code, phrase)

    def get_response_status(self, idx: int) -> tuple[int, str | None]:
        processor = self.request_processor[idx]
        return processor.get_response_status_code(), processor.get_response_status_phrase()


class MmsHandler(BatchHandler):
    """A user's handler file, or a TorchServe built-in handler a `.mar` names."""

    def __init__(
        self, model_dir: Path, model_name: str, entry: tuple[Path, str | None] | str
    ) -> None:
        manifest = read_manifest(model_dir)
        self._context = MmsContext(model_dir, model_name, manifest)
        self._decodes = is_torchserve_archive(manifest)  # bodies as TorchServe hands them
        self._module: ModuleType | None = None
        if isinstance(entry, str):
            self._label = entry
            with user_code(model_dir):  # initialize imports the archive's model file
                self._entry = _entry_point(import_default(entry), self._context, None)
            return
        self._file, function_name = entry
        self._label = self._file.name
        with user_code(self._file.parent):
            self._module = _import_handler(self._file)
            try:
                self._entry = _entry_point(
                    self._module, self._context, function_name, initialize=self._decodes
                )
            except BaseException:
                forget_user_module(self._module)
                raise

    @property
    def manifest(self) -> dict[str, Any]:
        return self._context.manifest

    @property
    def device_capable(self) -> bool:  # type: ignore[override]
        return ts_devices.torch_service(self._entry) is not None

    def to_device(self, device: str) -> None:
        service = ts_devices.torch_service(self._entry)
        ts_devices.move(service, self._context.system_properties, device)

    def tensor_bytes(self) -> int:
        return ts_devices.weights_bytes(ts_devices.torch_service(self._entry))

    def call(self, data: list[Any], request: InferRequest) -> Any:
        """The entry point's result for `data` as given, for one request."""
        return self._entry(data, self._context.for_requests([request]))

    def infer_batch(self, requests: Sequence[InferRequest]) -> list[InferReply | Exception]:
        """One call with the whole batch, as MMS makes; an error answers every request."""
        context = self._context.for_requests(requests)
        data = [self._item(request) for request in requests]
        try:
            items = self._items(self._entry(data, context), len(requests))
        except Exception as error:  # noqa: BLE001  (the whole batch's answer)
            return [error] * len(requests)
        return [_reply(item, context, index) for index, item in enumerate(items)]

    def close(self) -> None:
        if self._module is not None:
            forget_user_module(self._module)
        self._module = None
        self._entry = _closed

    def _item(self, request: InferRequest) -> dict[str, Any]:
        body = decoded_body(request.body, request.content_type) if self._decodes else request.body
        return {
            **request.params,  # query parameters and form fields, as TorchServe hands them
            "body": body,
            "data": body,  # MMS handlers read either key
            "content_type": request.content_type,
            "accept": request.accept,
        }

    def _items(self, result: Any, count: int) -> list[Any]:
        if isinstance(result, list) and len(result) == count:
            return result
        got = f"a list of {len(result)}" if isinstance(result, list) else type(result).__name__
        raise HandlerError(
            f"{self._label}: handle(data, context) returned {got}; it must return a list "
            f"with one item per request in data ({count} here)"
        )


def _reply(item: Any, context: MmsContext, index: int) -> InferReply | Exception:
    try:
        body, content_type = encode_value(item)
    except Exception as error:  # noqa: BLE001  (only its request fails)
        return error
    status = context.get_response_status(index)[0]
    if not isinstance(status, int):
        return HandlerError(f"context.set_response_status takes a number, not {status!r}")
    headers = context.get_response_headers(index).items()
    own = tuple((str(k), str(v)) for k, v in headers if str(k).lower() != "content-type")
    content_type = context.get_response_content_type(index) or content_type
    custom = Custom(status, own) if status != 200 or own else None
    return InferReply(body, content_type, custom=custom)


def runtime_modules(model_dir: Path, entry: tuple[Path, str | None] | str) -> tuple[str, ...]:
    """What a handler imports first, so its load is not charged them: a TorchServe archive's
    torch and base handler, and the `ts` modules of its handler."""
    torchserve = is_torchserve_archive(read_manifest(model_dir))
    return (PRELOAD_MODULES["torchserve"] if torchserve else ()) + handler_modules(entry)


def find_entry(model_dir: Path) -> tuple[Path, str | None] | str | None:
    """The handler the MAR manifest names; else `handler.py`, else None."""
    manifest = read_manifest(model_dir)
    built_in = default_named(model_dir, manifest)
    if built_in is not None:
        return built_in
    model = manifest.get("model")
    handler = model.get("handler") if isinstance(model, dict) else None
    module_name, _, function_name = (handler if isinstance(handler, str) else "").partition(":")
    if module_name:
        named = model_dir / (module_name if module_name.endswith(".py") else module_name + ".py")
        inside = named.resolve().is_relative_to(model_dir.resolve())
        if inside and named.is_file():
            return named, function_name or None
    default = model_dir / HANDLER_FILE
    return (default, None) if default.is_file() else None


def _import_handler(file: Path) -> ModuleType:
    """The user's handler module, or what to install for a missing `ts` module."""
    try:
        return import_user_module(file)
    except ModelLoadError as exc:
        cause = exc.__cause__
        if isinstance(cause, ModuleNotFoundError) and (cause.name or "").split(".")[0] == "ts":
            raise ModelLoadError(missing_message(file.name, cause)) from cause
        raise


def read_manifest(model_dir: Path) -> dict[str, Any]:
    """The MAR manifest, or `{}`."""
    path = model_dir / MANIFEST
    if not path.is_file():
        return {}
    manifest = json.loads(path.read_text())
    return manifest if isinstance(manifest, dict) else {}


def _entry_point(
    module: ModuleType, context: MmsContext, function_name: str | None, *, initialize: bool = False
) -> Entry:
    """TorchServe's rule: a named or module-level `handle` function, else the service class."""
    handle = getattr(module, function_name or "handle", None)
    if callable(handle) and not inspect.isclass(handle):
        if initialize:
            handle(None, context)
        return cast(Entry, handle)
    if function_name:
        file = Path(module.__file__ or "the handler").name
        raise ModelLoadError(
            f"the handler is {file}:{function_name}, but {file} has no function "
            f"{function_name}: name one of its functions, or the file alone for its handle"
        )
    service = _service_class(module)()
    if hasattr(service, "initialize"):
        service.initialize(context)
    if hasattr(service, "handle"):
        return cast(Entry, service.handle)
    return _pipeline(service)


def _service_class(module: ModuleType) -> type:
    """The module's most derived class with `handle` or `inference`."""
    candidates = [
        value
        for value in vars(module).values()
        if inspect.isclass(value)
        and value.__module__ == module.__name__
        and (hasattr(value, "handle") or hasattr(value, "inference"))
    ]
    leaves = [c for c in candidates if not any(o is not c and issubclass(o, c) for o in candidates)]
    if len(leaves) == 1:
        return leaves[0]
    file = Path(module.__file__ or "handler.py").name
    if not leaves:
        raise ModelLoadError(
            f"{file} defines no handle(data, context) function and no class with handle() or "
            "inference(); add one of them"
        )
    names = ", ".join(sorted(c.__name__ for c in leaves))
    raise ModelLoadError(
        f"{file} defines several handler classes ({names}); keep one, or add a module-level "
        "handle(data, context) that calls the right one"
    )


def _pipeline(service: Any) -> Entry:
    """TorchServe's BaseHandler.handle, for a class with only its steps."""

    def unchanged(value: Any) -> Any:
        return value

    preprocess = getattr(service, "preprocess", unchanged)
    postprocess = getattr(service, "postprocess", unchanged)

    def handle(data: list[dict[str, Any]], context: MmsContext) -> Any:
        return postprocess(service.inference(preprocess(data)))

    return handle


def _closed(data: list[dict[str, Any]], context: MmsContext) -> Any:
    raise HandlerError("the model was unloaded while a request was still using it")
