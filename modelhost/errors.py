"""The exception tree. `modelhost.http.errors` maps it to HTTP statuses.

ModelhostError
├── ConfigError                  refused at start
├── RequestError                 the caller can fix it
│   ├── BadRequestBody
│   │   ├── InvalidArchive       a manifest that cannot be read
│   │   ├── DownloadFailed       a registration's URL gave no archive
│   │   ├── NestedTooDeep
│   │   ├── UnsupportedMediaType a Content-Type no codec reads
│   │   └── NotAcceptable        an Accept no codec writes
│   ├── PayloadTooLarge
│   ├── ResponseTooLarge
│   ├── HeaderTooLarge
│   ├── ParameterTooLarge
│   ├── InvalidModelName         escapes the store
│   ├── InvalidTenant            a tenant id of the wrong shape
│   ├── ModelNotFound
│   │   └── ModelVersionNotFound a version its model lacks
│   ├── ModelNotLoaded
│   ├── ModelAlreadyLoaded
│   ├── TenantNotFound           or tenants are off
│   ├── NotServed                a peer's call modelhost lacks
│   ├── Unauthorized             no management token
│   └── Forbidden                not loopback, or a URL outside the store
│       ├── ModelApiDisabled     registration off (TorchServe's enable_model_api)
│       ├── OtherTenantsModel    outside the tenant's own models (--tenant-models)
│       ├── AcrossTenants        spans every tenant's models (--tenant-models)
│       └── DefaultVersionKept   the default version while others exist
├── CapacityError
│   ├── InsufficientMemory
│   │   └── InsufficientDeviceMemory   names the device
│   └── InsufficientDisk
├── ModelError                   the model or its code failed
│   ├── ModelLoadError
│   │   └── UnsafeArtifact       escapes its folder or is too large
│   ├── HandlerError
│   └── PoisonRequest            killed its worker twice
├── Overloaded                   retry after a pause
│   ├── QueueFull
│   │   └── TenantQueueFull      one tenant's queue, not the server's
│   ├── ConcurrencyLimit
│   └── RateLimited              a tenant past its rate: retry_after_s says when
│       └── TenantHeldBack       its models keep killing workers
├── DeadlineExceeded
├── Unavailable                  retry is safe
│   ├── WorkerDied
│   ├── TooManyStreams
│   ├── ShuttingDown
│   └── DiskIndexLocked          another process holds the cache's index
└── StoreError
    ├── StoreUnavailable         may work again
    └── StoreTimeout
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ModelhostError(Exception):
    """Base of every error modelhost raises on purpose."""

    retry_after_s = 1  # the pause a client is told to take, where its status invites a retry
    type_name = ""  # the error body's type; empty: the class's name
    # the failed request's own load (a host.Result, no body), which its answer tells
    loaded: Any = None

    def telling(self, loaded: Any) -> ModelhostError:
        """A copy telling `loaded`: a batch's requests share one error."""
        own = type(self).__new__(type(self), *self.args)
        own.__dict__.update(self.__dict__, loaded=loaded)
        return own


class ConfigError(ModelhostError):
    pass


class RequestError(ModelhostError):
    pass


class BadRequestBody(RequestError):
    pass


class InvalidArchive(BadRequestBody):
    pass


class DownloadFailed(BadRequestBody):
    pass


class NestedTooDeep(BadRequestBody):
    def __init__(self, message: str = "") -> None:
        super().__init__(message or "the body's JSON nests too deep to read: send a flatter one")


class UnsupportedMediaType(BadRequestBody):
    pass


class NotAcceptable(BadRequestBody):
    pass


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


class InvalidTenant(RequestError):
    pass


class ModelNotFound(RequestError):
    pass


class ModelVersionNotFound(ModelNotFound):
    pass


class ModelNotLoaded(RequestError):
    pass


class ModelAlreadyLoaded(RequestError):
    pass


class TenantNotFound(RequestError):
    pass


class NotServed(RequestError):
    pass


class Unauthorized(RequestError):
    pass


class Forbidden(RequestError):
    pass


class OtherTenantsModel(Forbidden):
    pass


class AcrossTenants(Forbidden):
    pass


class ModelApiDisabled(Forbidden):
    type_name = "MethodNotAllowedException"  # TorchServe's, as its clients read it


class DefaultVersionKept(Forbidden):
    pass


class CapacityError(ModelhostError):
    pass


class InsufficientMemory(CapacityError):
    pass


class InsufficientDeviceMemory(InsufficientMemory):
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
    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status  # the error code the handler named; 0: none, a 500


class PoisonRequest(ModelError):
    pass


class Overloaded(ModelhostError):
    pass


class QueueFull(Overloaded):
    pass


class TenantQueueFull(QueueFull):
    pass


class ConcurrencyLimit(Overloaded):
    pass


class RateLimited(Overloaded):
    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TenantHeldBack(RateLimited):
    pass


class DeadlineExceeded(ModelhostError):
    # set where the request's batch runs on: what its request holds is freed when it ends
    hold: Callable[[Callable[[], None]], None] | None = None

    @classmethod
    def past_response_timeout(
        cls, model: str, where: str, timeout_s: float, own: bool = False
    ) -> DeadlineExceeded:
        """A request of `model` still `where` past its timeout: the model's own, or the server's."""
        timeout = (
            f"{timeout_s:g} s (its response_timeout_s); the request was still {where}; raise "
            "the model's response_timeout_s"
            if own
            else f"{timeout_s:g} s (default_response_timeout); the request was still {where}; "
            "raise --default-response-timeout-s"
        )
        return cls(
            f"model {model} gave no answer within {timeout}, or add workers if requests wait in "
            "the queue"
        )


class Unavailable(ModelhostError):
    pass


class WorkerDied(Unavailable):
    running: bool = False  # it failed a running request, not a load


class TooManyStreams(Unavailable):
    pass


class ShuttingDown(Unavailable):
    pass


class DiskIndexLocked(Unavailable):
    pass


class StoreError(ModelhostError):
    pass


class StoreUnavailable(StoreError):
    pass


class StoreTimeout(StoreError):
    pass
