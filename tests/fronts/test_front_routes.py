"""When the fronts may answer hits: never where they could not keep what the main process keeps."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from modelhost.config import Config
from modelhost.http.front_routes import why_relayed


def test_a_plain_server_lets_hits_go_direct() -> None:
    assert why_relayed(Config(model_store="/tmp")) == ""


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"tenant_from": "header"}, "tenants"),
        ({"untrusted_workers": 1}, "untrusted workers"),
        ({"refuse_pickle": True}, "untrusted workers"),
        ({"max_concurrency": 8}, "--max-concurrency"),
        ({"token_auth": True}, "token authorization"),
    ],
)
def test_what_a_front_cannot_keep_relays_every_request(change: dict[str, Any], reason: str) -> None:
    config = dataclasses.replace(Config(model_store="/tmp"), **change)
    assert reason in why_relayed(config)


@pytest.mark.parametrize("off", ["off", "OFF", " "])
def test_tenants_switched_off_by_name_let_hits_go_direct(off: str) -> None:
    config = dataclasses.replace(Config(model_store="/tmp"), tenant_from=off)
    assert why_relayed(config) == ""
