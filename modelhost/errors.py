"""The exception tree. No HTTP status codes here: `modelhost.http.errors` maps these to statuses.

ModelhostError
├── ConfigError                  bad configuration, refused at start
├── RequestError                 the caller can fix it
│   ├── BadRequestBody           the body cannot be decoded for this model
│   │   └── NestedTooDeep        JSON nested deeper than a parser recurses
│   ├── PayloadTooLarge          body over max_request_size
│   ├── ResponseTooLarge         a model's answer over max_response_size (ask for fewer rows)
│   ├── HeaderTooLarge           a header longer than the server passes on to the core
│   ├── ParameterTooLarge        a query parameter (or URL field) longer than the server passes on
│   ├── InvalidModelName         a name that escapes the store (``..``, absolute, NUL)
│   ├── ModelNotFound            no such model in the store
│   ├── ModelNotLoaded           the contract asks for 404 when the model is not in memory
│   ├── ModelAlreadyLoaded       load of a model already loaded
│   ├── Unauthorized             management call without the configured token
│   └── Forbidden                management call from outside loopback, or a URL outside the store
├── CapacityError                no room within a budget
│   ├── InsufficientMemory
│   └── InsufficientDisk
├── ModelError                   the model or its code failed
│   ├── ModelLoadError           the artifact could not be loaded (corrupt, missing runtime)
│   │   └── UnsafeArtifact       an archive that escapes its folder, links out, or is too large
│   ├── HandlerError             the handler raised while serving a request
│   └── PoisonRequest            its worker died running it, and again when it was retried alone
├── Overloaded                   too much at once: retry after a pause
│   ├── QueueFull                the model's queue holds job_queue_size requests
│   └── ConcurrencyLimit         the server holds max_concurrency requests
├── DeadlineExceeded             no answer within default_response_timeout
├── Unavailable                  retry is safe
│   ├── WorkerDied               the worker process died while it held the request
│   ├── TooManyStreams           max_event_streams GET /events streams are open
│   └── ShuttingDown
└── StoreError                   the model store failed (refused access, no such bucket)
    ├── StoreUnavailable         it may work again: connection refused or reset, 5xx, throttled
    └── StoreTimeout             it stopped sending for longer than store_timeout_s
"""

from __future__ import annotations


class ModelhostError(Exception):
    """Base of every error modelhost raises on purpose."""


class ConfigError(ModelhostError):
    pass


class RequestError(ModelhostError):
    pass


class BadRequestBody(RequestError):
    pass


class NestedTooDeep(BadRequestBody):
    def __init__(self, message: str = "") -> None:
        super().__init__(message or "the body's JSON nests too deep to read: send a flatter one")


class PayloadTooLarge(RequestError):
    pass


class ResponseTooLarge(RequestError):
    pass


class HeaderTooLarge(RequestError):
    pass


class ParameterTooLarge(RequestError):
    pass


class InvalidModelName(RequestError):
    pass


class ModelNotFound(RequestError):
    pass


class ModelNotLoaded(RequestError):
    pass


class ModelAlreadyLoaded(RequestError):
    pass


class Unauthorized(RequestError):
    pass


class Forbidden(RequestError):
    pass


class CapacityError(ModelhostError):
    pass


class InsufficientMemory(CapacityError):
    pass


class InsufficientDisk(CapacityError):
    pass


class ModelError(ModelhostError):
    pass


class ModelLoadError(ModelError):
    pass


class UnsafeArtifact(ModelLoadError):
    pass


class HandlerError(ModelError):
    pass


class PoisonRequest(ModelError):
    pass


class Overloaded(ModelhostError):
    pass


class QueueFull(Overloaded):
    pass


class ConcurrencyLimit(Overloaded):
    pass


class DeadlineExceeded(ModelhostError):
    pass


class Unavailable(ModelhostError):
    pass


class WorkerDied(Unavailable):
    running: bool = False  # set where it failed a request the worker was running (not a load)


class TooManyStreams(Unavailable):
    pass


class ShuttingDown(Unavailable):
    pass


class StoreError(ModelhostError):
    pass


class StoreUnavailable(StoreError):
    pass


class StoreTimeout(StoreError):
    pass
