"""TorchServe's `s3_sse_kms` registration parameter, read without a server."""

from __future__ import annotations

import pytest

from modelhost.errors import BadRequestBody
from modelhost.protocols.registration import TORCHSERVE_HANDLERS, check_signed_download


@pytest.mark.parametrize(
    "url", ["s3://models/squeezenet1_1.mar", "squeezenet1_1.mar", "file:///store/a.mar"]
)
def test_s3_sse_kms_is_taken_where_no_https_download_is_signed(url: str) -> None:
    check_signed_download({"url": url, "s3_sse_kms": "true"})


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ({"url": "HTTPS://bucket.s3.amazonaws.com/a.mar", "s3_sse_kms": "true"}, "s3://"),
        ({"url": "a.mar", "s3_sse_kms": "yes"}, "true or false"),
    ],
)
def test_s3_sse_kms_refusals_say_what_to_give(query: dict[str, str], words: str) -> None:
    with pytest.raises(BadRequestBody, match=words):
        check_signed_download(query)


def test_torchserve_handler_names_are_the_workers_own() -> None:
    from modelhost.workers.handlers.ts_defaults import DEFAULT_HANDLERS

    assert TORCHSERVE_HANDLERS == DEFAULT_HANDLERS
