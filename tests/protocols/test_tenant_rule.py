"""The tenant rule without sockets: each `tenant_from` form, the ids it accepts, the tokens file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from modelhost.config import Config, load_config
from modelhost.errors import (
    AcrossTenants,
    ConfigError,
    Forbidden,
    InvalidTenant,
    OtherTenantsModel,
    Unauthorized,
)
from modelhost.protocols.params import MAX_TENANT_CHARS
from modelhost.protocols.tenants import (
    DEFAULT_TENANT,
    KNOWN_VALID,
    KeptReads,
    TenantRule,
    tenant_rule,
    watched_tokens,
)
from modelhost.records.events import EventLog

MODEL = "tenants/t007/churn.joblib"


def rule_of(tenant_from: str, tmp_path: Path, tokens: str = "") -> TenantRule:
    flags: dict[str, object] = {"tenant_from": tenant_from}
    if tokens:
        (tmp_path / "tokens.toml").write_text(tokens)
        flags["tenant_tokens_file"] = "tokens.toml"
    rule = tenant_rule(load_config(flags, {}, tmp_path))
    assert rule is not None
    return rule


def test_off_is_no_rule() -> None:
    assert tenant_rule(Config()) is None
    assert tenant_rule(Config(tenant_from="off")) is None


def test_header_names_the_tenant_and_its_absence_the_default(tmp_path: Path) -> None:
    rule = rule_of("header", tmp_path)
    assert rule.of(MODEL, {"x-modelhost-tenant": "acme"}) == "acme"
    assert rule.of(MODEL, {}) == DEFAULT_TENANT
    assert rule.of(MODEL, {"x-modelhost-tenant": ""}) == DEFAULT_TENANT


def test_header_ids_remembered_valid_refuse_the_invalid_as_before(tmp_path: Path) -> None:
    """Ids found valid are remembered, KNOWN_VALID at most: an invalid one is still refused,
    and an id forgotten is checked again."""
    rule = rule_of("header", tmp_path)
    for index in range(KNOWN_VALID + 1):
        assert rule.of(MODEL, {"x-modelhost-tenant": f"t{index}"}) == f"t{index}"
    assert rule.of(MODEL, {"x-modelhost-tenant": "t0"}) == "t0"
    for invalid in ("no spaces", "x" * (MAX_TENANT_CHARS + 1), b"t0"):
        with pytest.raises(InvalidTenant):
            rule.of(MODEL, {"x-modelhost-tenant": invalid})


def test_another_header_is_read_in_lower_case(tmp_path: Path) -> None:
    rule = rule_of("header:X-Customer", tmp_path)
    assert rule.of(MODEL, {"x-customer": "t-9"}) == "t-9"
    assert rule.of(MODEL, {"x-modelhost-tenant": "acme"}) == DEFAULT_TENANT


@pytest.mark.parametrize(
    ("segments", "model", "tenant"),
    [
        (2, "tenants/t007/churn.joblib", "tenants/t007"),
        (2, "tenants/t007/deep/churn.joblib", "tenants/t007"),
        (1, "tenants/t007/churn.joblib", "tenants"),
        (2, "tenants/churn.joblib", DEFAULT_TENANT),  # no folder of two segments
        (1, "churn.joblib", DEFAULT_TENANT),
    ],
)
def test_name_takes_the_leading_segments(
    segments: int, model: str, tenant: str, tmp_path: Path
) -> None:
    assert rule_of(f"name:{segments}", tmp_path).of(model, {}) == tenant


@pytest.mark.parametrize(
    "bad", ["has space", "é", "a" * (MAX_TENANT_CHARS + 1), "semi;colon", "new\nline"]
)
def test_a_bad_tenant_id_is_refused(bad: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidTenant, match="a tenant id is 1 to 128 characters"):
        rule_of("header", tmp_path).of(MODEL, {"x-modelhost-tenant": bad})


def test_the_longest_id_and_every_allowed_character_pass(tmp_path: Path) -> None:
    rule = rule_of("header", tmp_path)
    longest = "a" * MAX_TENANT_CHARS
    assert rule.of(MODEL, {"x-modelhost-tenant": longest}) == longest
    assert rule.of(MODEL, {"x-modelhost-tenant": "A-z_0.9:@/x"}) == "A-z_0.9:@/x"


def test_a_model_name_that_is_no_tenant_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidTenant, match="from the model name"):
        rule_of("name:1", tmp_path).of("my tenant/churn.joblib", {})


def test_binary_metadata_is_no_tenant(tmp_path: Path) -> None:
    with pytest.raises(InvalidTenant):
        rule_of("header", tmp_path).of(MODEL, {"x-modelhost-tenant": b"acme"})


TOKENS = '[tokens]\n"tok-acme-1" = "acme"\n"tok-acme-2" = "acme"\n"tok-umbrella" = "umbrella"\n'


def test_a_known_token_names_its_tenant(tmp_path: Path) -> None:
    rule = rule_of("token", tmp_path, TOKENS)
    assert rule.of(MODEL, {"authorization": "Bearer tok-acme-2"}) == "acme"
    assert rule.of(MODEL, {"authorization": "bearer tok-umbrella"}) == "umbrella"


def test_the_watched_tokens_follow_the_file_and_keep_the_last_good(tmp_path: Path) -> None:
    """A change is the rule's at the next poll; a removed file or a bad one keeps what was."""
    path, events = tmp_path / "tokens.toml", EventLog()
    path.write_text('[tokens]\n"old" = "acme"\n')
    config = load_config({"tenant_from": "token", "tenant_tokens_file": str(path)}, {}, tmp_path)
    watched = watched_tokens(config, events.emit)
    rule = tenant_rule(config, watched.get)
    assert rule is not None and rule.of(MODEL, bearer("old")) == "acme"
    staged = tmp_path / "tokens.new"
    staged.write_text('[tokens]\n"new" = "acme"\n"other" = "umbrella"\n')
    staged.replace(path)
    asyncio.run(watched.poll())
    assert rule.of(MODEL, bearer("new")) == "acme" and rule.of(MODEL, bearer("other")) == "umbrella"
    with pytest.raises(Unauthorized):
        rule.of(MODEL, bearer("old"))
    path.unlink()
    asyncio.run(watched.poll())
    assert rule.of(MODEL, bearer("new")) == "acme"
    assert [event.kind for event in events.recent] == [
        "tenant_tokens_file_loaded",
        "tenant_tokens_file_loaded",
        "tenant_tokens_file_rejected",
    ]
    assert events.recent[1].detail == {"path": str(path), "tokens": 2, "tenants": 2}


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    "given", [{}, {"authorization": "Bearer nope"}, {"authorization": "Basic tok-acme-1"}]
)
def test_an_unknown_or_missing_token_is_unauthorized(given: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(Unauthorized, match="Authorization: Bearer <token>") as refusal:
        rule_of("token", tmp_path, TOKENS).of(MODEL, given)
    assert "tok-" not in str(refusal.value) and "nope" not in str(refusal.value)


@pytest.mark.parametrize(
    ("tenant_from", "fix"),
    [
        ("headers", "--tenant-from name:2"),
        ("name:0", "name:N (N a whole number from 1 to 128)"),
        (f"name:{10**20}", "name:N (N a whole number from 1 to 128)"),  # 500 to every request
        ("name:129", "name:N (N a whole number from 1 to 128)"),  # no name has that many
        ("name:two", "name:N"),
        ("token:x", "header:NAME"),
        ("header:Bad Name", "header:X-Customer"),
        ("header:Authorization", "--tenant-from token"),
        ("token", "--tenant-tokens-file"),
    ],
)
def test_a_bad_tenant_from_is_refused_at_start(tenant_from: str, fix: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tenant_from") as refusal:
        load_config({"tenant_from": tenant_from}, {}, tmp_path)
    assert fix in str(refusal.value)


def test_the_variable_sets_it_too(tmp_path: Path) -> None:
    config = load_config({}, {"MODELHOST_TENANT_FROM": "name:2"}, tmp_path)
    assert config.tenant_from == "name:2"


def test_a_tokens_file_without_token_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tokens.toml").write_text(TOKENS)
    with pytest.raises(ConfigError, match="--tenant-from token"):
        load_config({"tenant_tokens_file": "tokens.toml"}, {}, tmp_path)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[tokens]\n"a" = b\n', "line 2"),
        ('[other]\n"a" = "b"\n', "one [tokens] table"),
        ("[tokens]\n", "one [tokens] table"),
        ('[tokens]\n"a" = 7\n', "token 1 of [tokens]"),
        ('[tokens]\n"a" = "b"\n"c" = "d e"\n', "token 2 of"),  # before anything starts
        ("[tokens]\nsecret-1 = t007\n", '"<token>" = "<tenant>"'),  # what a line is
    ],
)
def test_a_bad_tokens_file_is_refused_at_start(text: str, words: str, tmp_path: Path) -> None:
    (tmp_path / "tokens.toml").write_text(text)
    flags = {"tenant_from": "token", "tenant_tokens_file": "tokens.toml"}
    with pytest.raises(ConfigError, match="tokens.toml") as refusal:
        load_config(flags, {}, tmp_path)
    assert words in str(refusal.value)


def test_a_token_of_a_bad_tenant_id_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="fix the tenant tokens file") as refusal:
        rule_of("token", tmp_path, '[tokens]\n"secret-1" = "a b"\n')
    assert "secret-1" not in str(refusal.value)


def test_the_tokens_stay_out_of_the_configs_repr(tmp_path: Path) -> None:
    (tmp_path / "tokens.toml").write_text(TOKENS)
    flags = {"tenant_from": "token", "tenant_tokens_file": "tokens.toml"}
    assert "tok-acme" not in repr(load_config(flags, {}, tmp_path))


@pytest.mark.parametrize(
    ("tenant", "model", "may"),
    [
        ("tenants/t007", "tenants/t007/churn.joblib", True),
        ("tenants/t007", "tenants/t007/deep/churn.joblib", True),
        ("tenants/t007", "tenants/t012/churn.joblib", False),
        ("tenants/t00", "tenants/t007/churn.joblib", False),  # a prefix of the id is not it
        ("tenants/t007", "tenants/churn.joblib", True),  # shared: two segments
        ("tenants/t007", "churn.joblib", True),
        (DEFAULT_TENANT, "tenants/t007/churn.joblib", False),
    ],
)
def test_tenant_models_keeps_a_tenant_to_its_own_and_the_shared(
    tenant: str, model: str, may: bool, tmp_path: Path
) -> None:
    flags = {"tenant_from": "header", "tenant_models": "name:2"}
    rule = tenant_rule(load_config(flags, {}, tmp_path))
    assert rule is not None
    headers = {} if tenant == DEFAULT_TENANT else {"x-modelhost-tenant": tenant}
    if may:
        assert rule.of(model, headers) == tenant
    else:
        with pytest.raises(OtherTenantsModel, match=f"tenant {tenant} may not invoke"):
            rule.of(model, headers)


@pytest.mark.parametrize(
    ("tenant_from", "tenant_models", "words"),
    [
        ("header", "name:0", "is not name:N"),
        ("header", "header", "is not name:N"),
        ("token", "name:x", "is not name:N"),
        ("", "name:2", "set --tenant-from header or token"),
        ("name:2", "name:2", "each model is its own tenant's already"),
    ],
)
def test_tenant_models_is_refused_where_it_means_nothing(
    tenant_from: str, tenant_models: str, words: str, tmp_path: Path
) -> None:
    flags: dict[str, object] = {"tenant_from": tenant_from, "tenant_models": tenant_models}
    if tenant_from == "token":
        (tmp_path / "tokens.toml").write_text('[tokens]\n"tok" = "t7"\n')
        flags["tenant_tokens_file"] = "tokens.toml"
    with pytest.raises(ConfigError, match=words):
        load_config(flags, {}, tmp_path)


def manager(caller: dict[str, str]) -> None:
    """A fake management check: the caller manages when it says so."""
    if caller.get("manages") != "yes":
        raise Forbidden("not the operator")


@pytest.mark.parametrize("tenant_models", ["", "name:2"])
def test_reads_are_kept_only_where_tenants_are_kept_to_their_models(
    tenant_models: str, tmp_path: Path
) -> None:
    flags = {"tenant_from": "header", "tenant_models": tenant_models}
    reads = KeptReads(tenant_rule(load_config(flags, {}, tmp_path)), manager, lambda c: c)
    tenant = {"x-modelhost-tenant": "tenants/t012"}
    if not tenant_models:
        reads.model(tenant, MODEL)
        reads.across(tenant)
        return
    assert not reads.may_read(tenant, MODEL) and reads.may_read(tenant, "shared/m.joblib")
    with pytest.raises(OtherTenantsModel):
        reads.model(tenant, MODEL)
    with pytest.raises(AcrossTenants, match="management token"):
        reads.across(tenant)
    reads.tenant(tenant, "tenants/t012")  # its own figures
    with pytest.raises(AcrossTenants):
        reads.tenant(tenant, "tenants/t007")
    operator = tenant | {"manages": "yes"}
    reads.model(operator, MODEL)
    reads.across(operator)


def test_config_check_reads_a_tokens_file_and_shows_no_token(tmp_path: Path) -> None:
    """`modelhost config check tokens.toml` checks it as the server reads it, and says how many
    tokens and tenants it holds, never a token."""
    from click.testing import CliRunner

    from modelhost.cli.main import main

    path = tmp_path / "tokens.toml"
    path.write_text(TOKENS)
    result = CliRunner().invoke(main, ["config", "check", str(path)], env={})
    assert result.exit_code == 0, result.output
    assert "tokens: 3, tenants: 2" in result.output and "tok-" not in result.output
    path.write_text('[tokens]\n"tok-secret" = "the umbrella"\n')
    result = CliRunner().invoke(main, ["config", "check", str(path)], env={})
    assert result.exit_code == 1 and "invalid tenant 'the umbrella' from token 1" in result.output
    assert "tok-secret" not in result.output
