"""What goes into the host and comes out of it.

Made per request, so slotted rather than frozen: a frozen dataclass's init sets each field
through a call. Nothing changes them once made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelhost.workers.messages import Custom


@dataclass(slots=True)
class Invocation:
    """One request for a model, as the HTTP layer hands it over."""

    body: bytes
    content_type: str
    accept: str
    params: dict[str, str] = field(default_factory=dict)
    tenant: str = ""  # "": tenants are off
    headers: dict[str, str] | None = None  # a TorchServe prediction's, for its handler
    request_id: str = ""  # a TorchServe prediction's x-request-id


@dataclass(slots=True)
class Result:
    """The model's answer, with its tier and timings for Server-Timing."""

    body: bytes
    content_type: str
    cache: str  # hit | disk | remote
    timings_ms: dict[str, float]
    tier: str = "host"  # the tier that answered: device | host | disk | store
    model_bytes: int | None = None  # the footprint of a load it waited for
    custom: Custom | None = None  # the status and headers its handler set


@dataclass(slots=True)
class Answer:
    """A worker's answer to one request of a batch."""

    body: bytes
    content_type: str
    infer_ms: float  # the whole batch's
    custom: Custom | None = None


@dataclass(frozen=True)  # a hit's is one shared instance
class LoadOutcome:
    """Where a model came from for a request, and what loading it cost."""

    tier: str  # hit | disk | remote
    load_ms: float  # making room included
    download_ms: float = 0.0


STORE_TIERS = {"disk": "disk", "remote": "store"}  # a load's tier, as X-Modelhost-Tier names it


def tier_of(outcome: LoadOutcome, found: str) -> str:
    """The tier that answered: where a load fetched the model, else where it was `found`."""
    return STORE_TIERS.get(outcome.tier, found)
