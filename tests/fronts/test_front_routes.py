"""When fronts may start: never where they could not keep what the main process keeps."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from modelhost.config import Config
from modelhost.http.front_routes import main_only


def test_a_plain_server_lets_fronts_start() -> None:
    assert main_only(Config(model_store="/tmp")) == ""


def test_token_authorization_lets_fronts_start() -> None:
    """A front checks the inference key itself (tests/e2e/test_front_tokens.py)."""
    assert main_only(Config(model_store="/tmp", token_auth=True)) == ""


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"untrusted_workers": 1}, "untrusted workers"),
        ({"refuse_pickle": True}, "untrusted workers"),
        ({"max_concurrency": 8}, "--max-concurrency"),
    ],
)
def test_what_a_front_cannot_keep_starts_none(change: dict[str, Any], reason: str) -> None:
    config = dataclasses.replace(Config(model_store="/tmp"), **change)
    assert reason in main_only(config)


@pytest.mark.parametrize("rule", ["header", "header:x-customer", "name:2", "token"])
def test_tenants_by_what_a_request_says_let_fronts_start(rule: str) -> None:
    """A front reads the header, the name or the token itself, with the tokens file's digests
    from the main process (tests/e2e/test_front_tenants.py)."""
    config = Config(model_store="/tmp", tenant_from=rule, tenant_tokens=(("t", "a"),))
    assert main_only(config) == ""


@pytest.mark.parametrize("off", ["off", "OFF", " "])
def test_tenants_switched_off_by_name_let_fronts_start(off: str) -> None:
    config = dataclasses.replace(Config(model_store="/tmp"), tenant_from=off)
    assert main_only(config) == ""
