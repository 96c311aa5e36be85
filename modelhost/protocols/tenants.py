"""Who a request's tenant is: one rule for every protocol, over HTTP and gRPC alike.

A rule reads the request's headers (gRPC's metadata, whose keys are lower-case as ASGI's are)
or the name of the model it invokes. With tenants off there is no rule, and callers skip it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from modelhost.config import Config
from modelhost.config.tenancy import (
    VALID_TENANT,
    TenantFrom,
    TokenPairs,
    is_tenant_id,
    name_segments,
    own_models_segments,
    parse_tenant_from,
    read_tenant_tokens,
)
from modelhost.config.watched_file import WatchedFile
from modelhost.errors import (
    AcrossTenants,
    Forbidden,
    InvalidTenant,
    OtherTenantsModel,
    Unauthorized,
)
from modelhost.names import echo

DEFAULT_TENANT = "default"  # a request the rule finds no tenant in
KNOWN_VALID = 4096  # tenant ids a header rule remembers valid
AUTHORIZATION = "authorization"
SEND_TOKEN = (
    "send the header 'Authorization: Bearer <token>' (over gRPC the metadata 'authorization') "
    "with a token of the tenant tokens file"
)

ACROSS_TENANTS = (
    "--tenant-models keeps each tenant to its own models, so what spans them all (listings, "
    "statistics, metrics, events, tenants) is the operator's: call from this machine, or send "
    "'Authorization: Bearer <token>' with the management token"
)

Headers = Mapping[str, Any]  # lower-case names: an ASGI request's, Starlette's or gRPC's
TokenTenants = dict[bytes, str]  # each token's SHA-256 digest and its tenant
Caller = TypeVar("Caller")  # an HTTP request or a gRPC call's context


class TenantRule(Protocol):
    def of(self, model: str, headers: Headers) -> str:
        """The tenant of a request for `model`; InvalidTenant or Unauthorized if none may be."""
        ...


def tenant_rule(
    config: Config, tokens: Callable[[], TokenTenants] | None = None
) -> TenantRule | None:
    """`request_rule` for `config`; `tokens`: the tokens file's, if not those read at start."""
    at_start = token_tenants(config.tenant_tokens)
    named = request_rule(config.tenant_from, tokens or (lambda: at_start))
    if named is None:
        return None
    return kept_to_own_models(named, own_models_segments(config.tenant_models, config.tenant_from))


def kept_to_own_models(rule: TenantRule, segments: int) -> TenantRule:
    """`rule`, its tenants kept to their own models where --tenant-models gives `segments`."""
    return OwnModels(rule, segments) if segments else rule


def request_rule(tenant_from: str, tokens: Callable[[], TokenTenants]) -> TenantRule | None:
    """The rule `tenant_from` names, `tokens` the tokens file's; None while tenants are off."""
    rule = parse_tenant_from(tenant_from)
    if rule is None:
        return None
    return FromToken(tokens) if rule.kind == "token" else _of_request(rule)


def _of_request(rule: TenantFrom) -> FromHeader | FromName:
    return FromHeader(rule.header) if rule.kind == "header" else FromName(rule.segments)


def model_tenant(config: Config) -> Callable[[str], str] | None:
    """Whose each model is, where its name says; None: its first loader's tenant's."""
    segments = name_segments(config.tenant_from, config.tenant_models)
    return FromName(segments).of_model if segments else None


def tenant_id(text: str, source: str) -> str:
    """`text` if it is a valid tenant id, else InvalidTenant saying what one is."""
    if not is_tenant_id(text):
        raise InvalidTenant(f"invalid tenant {echo(text)} from {source}: {VALID_TENANT}")
    return text


class FromHeader:
    """The tenant a header names; a request without it belongs to the default tenant."""

    def __init__(self, header: str) -> None:
        self.header = header
        self.source = f"the {header} header"  # a refusal's, written once
        self._valid: set[str] = set()  # at most KNOWN_VALID

    def of(self, model: str, headers: Headers) -> str:
        value = headers.get(self.header)
        if not value:
            return DEFAULT_TENANT
        if value in self._valid:
            return str(value)  # kept only as str
        if not isinstance(value, str):
            raise InvalidTenant(f"the {self.header} metadata is binary: {VALID_TENANT}")
        tenant = tenant_id(value, self.source)
        if len(self._valid) >= KNOWN_VALID:
            self._valid.clear()
        self._valid.add(tenant)
        return tenant


class FromName:
    """The model name's first `segments` folders: `name:2` gives tenants/t007/churn.joblib to
    tenants/t007. A name of no more segments is the default tenant's."""

    def __init__(self, segments: int) -> None:
        self.segments = segments

    def of(self, model: str, headers: Headers) -> str:
        parts = model.split("/", self.segments)
        if len(parts) <= self.segments:
            return DEFAULT_TENANT
        tenant = model[: -len(parts[-1]) - 1]
        if is_tenant_id(tenant):  # the refusal's words only for a refusal
            return tenant
        return tenant_id(tenant, f"the model name {echo(model)}")

    def of_model(self, model: str) -> str:
        """A model's tenant: one no request could name (a preload) is the default tenant's."""
        try:
            return self.of(model, {})
        except InvalidTenant:
            return DEFAULT_TENANT


def watched_tokens(config: Config, emit: Callable[..., Any]) -> WatchedFile[TokenTenants]:
    """The tenant tokens file, reread when it changes; empty unless tenants are by token."""
    watched: WatchedFile[TokenTenants] = WatchedFile(
        "tenant_tokens_file", config.tenant_tokens_file, emit, {}, _counted
    )
    watched.open(lambda path: token_tenants(read_tenant_tokens(path)))
    return watched


def token_tenants(tokens: TokenPairs) -> TokenTenants:
    """Each token's digest and its tenant."""
    return {_digest(token.strip()): tenant for token, tenant in tokens}


def _counted(tenants: TokenTenants) -> dict[str, int]:
    return {"tokens": len(tenants), "tenants": len(set(tenants.values()))}


class FromToken:
    """The tenant the tokens file gives the request's bearer token; an unknown token is 401.

    Tokens are held and looked up by digest, so a lookup's time says nothing of their text."""

    def __init__(self, tenants: Callable[[], TokenTenants]) -> None:
        self.tenants = tenants

    def of(self, model: str, headers: Headers) -> str:
        given = headers.get(AUTHORIZATION)
        scheme, _, token = given.partition(" ") if isinstance(given, str) else ("", "", "")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized(f"no tenant token: {SEND_TOKEN}")
        tenant = self.tenants().get(_digest(token.strip()))
        if tenant is None:
            raise Unauthorized(f"the bearer token is no tenant's: {SEND_TOKEN}")
        return tenant


class OwnModels:
    """`rule`'s tenant, kept to the models under its id and the shared ones (--tenant-models)."""

    def __init__(self, rule: TenantRule, segments: int) -> None:
        self.rule, self.segments = rule, segments

    def of(self, model: str, headers: Headers) -> str:
        tenant = self.rule.of(model, headers)
        if may_invoke(tenant, model, self.segments):
            return tenant
        raise OtherTenantsModel(
            f"tenant {tenant} may not invoke model {echo(model)}: --tenant-models "
            f"name:{self.segments} keeps each tenant to the models under its id ({tenant}/...) "
            f"and those of {self.segments} path segments or fewer, which every tenant shares"
        )


class KeptReads(Generic[Caller]):
    """Under --tenant-models, a caller who may not manage reads the models it may invoke, and
    nothing that spans every tenant's; any caller reads anything otherwise."""

    def __init__(
        self,
        rule: TenantRule | None,
        manages: Callable[[Caller], object],
        headers: Callable[[Caller], Headers],
    ) -> None:
        self.rule = rule if isinstance(rule, OwnModels) else None
        self.manages, self.headers = manages, headers  # manages: raises where it may not

    def model(self, caller: Caller, name: str) -> None:
        """401 or 403 where the caller may not read `name`, as invoking it would be."""
        if self.rule is not None and not self._manages(caller):
            self.rule.of(name, self.headers(caller))

    def may_read(self, caller: Caller, name: str) -> bool:
        try:
            self.model(caller, name)
        except (Forbidden, Unauthorized, InvalidTenant):
            return False
        return True

    def across(self, caller: Caller) -> None:
        """403 where the caller may not read what spans every tenant's models."""
        if self.rule is not None and not self._manages(caller):
            raise AcrossTenants(ACROSS_TENANTS)

    def tenant(self, caller: Caller, tenant: str) -> None:
        """`across`, but a tenant reads its own figures."""
        reader = self.reader(caller)
        if reader is not None and reader != tenant:
            raise AcrossTenants(ACROSS_TENANTS)

    def reader(self, caller: Caller) -> str | None:
        """The tenant a caller reads as; None: the operator, or tenants not kept apart."""
        if self.rule is None or self._manages(caller):
            return None
        return self.rule.rule.of("", self.headers(caller))

    def _manages(self, caller: Caller) -> bool:
        try:
            self.manages(caller)
        except (Forbidden, Unauthorized):
            return False
        return True


OPEN_READS: KeptReads[Any] = KeptReads(None, lambda caller: None, lambda caller: {})


def may_invoke(tenant: str, model: str, segments: int) -> bool:
    """Whether `model` is `tenant`'s under name:`segments`, or shared (no deeper)."""
    parts = model.split("/", segments)
    return len(parts) <= segments or model[: -len(parts[-1]) - 1] == tenant


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
