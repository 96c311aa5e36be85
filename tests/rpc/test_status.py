"""The table from core exceptions to gRPC codes, and who may call the management methods."""

from __future__ import annotations

import grpc
import pytest

from modelhost import errors
from modelhost.protocols.status import STATUS_BY_ERROR
from modelhost.rpc.access import peer_address
from modelhost.rpc.status import CODE_BY_ERROR, code_of, trailers_of


def test_every_error_http_maps_has_a_grpc_code() -> None:
    assert set(STATUS_BY_ERROR) <= set(CODE_BY_ERROR)


@pytest.mark.parametrize(
    "error,code",
    [
        (errors.ModelNotFound("m"), grpc.StatusCode.NOT_FOUND),
        (errors.QueueFull("q"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (errors.InsufficientMemory("b"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (errors.NestedTooDeep(), grpc.StatusCode.INVALID_ARGUMENT),
        (errors.StoreUnavailable("s"), grpc.StatusCode.UNAVAILABLE),
        (errors.WorkerDied("w"), grpc.StatusCode.UNAVAILABLE),
        (errors.ConfigError("c"), grpc.StatusCode.INTERNAL),
    ],
)
def test_the_most_specific_class_decides(error: errors.ModelhostError, code: object) -> None:
    assert code_of(error) == code


def test_a_full_queue_says_when_to_retry() -> None:
    assert trailers_of(errors.QueueFull("q")) == (("retry-after", "1"),)
    assert trailers_of(errors.ModelNotFound("m")) == ()


def test_a_tenant_past_its_rate_is_told_the_seconds_until_its_next_token() -> None:
    assert trailers_of(errors.RateLimited("r", retry_after_s=7)) == (("retry-after", "7"),)


@pytest.mark.parametrize(
    "peer,address",
    [
        ("ipv4:127.0.0.1:5000", "127.0.0.1"),
        ("ipv6:%5B::1%5D:5000", "::1"),
        ("ipv6:[::1]:5000", "::1"),
        ("unix:/tmp/socket", ""),
    ],
)
def test_the_callers_address_is_read_from_grpcs_peer(peer: str, address: str) -> None:
    assert peer_address(peer) == address
