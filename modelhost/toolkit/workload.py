"""Whose each of bench's requests is: tenants named in a header, or by the models' folders."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from modelhost.config.tenancy import parse_tenant_from
from modelhost.errors import ConfigError, InvalidTenant
from modelhost.protocols.tenants import FromName


@dataclass(frozen=True)
class Workload:
    """The (model, tenant) pairs requests are drawn from, in popularity order."""

    models: tuple[str, ...]  # a model may appear once per tenant that uses it
    tenants: tuple[str, ...] = ()  # each pair's tenant; empty: no tenants
    header: str = ""  # the header that names the tenant; empty: the model's name does


def workload(models: Sequence[str], tenant_from: str, tenants: int) -> Workload:
    """The pairs `--tenant-from` and `--tenants` ask for, or why they cannot be sent."""
    try:
        rule = parse_tenant_from(tenant_from)
    except ConfigError as error:
        raise ValueError(str(error)) from None
    if rule is None:
        if tenants:
            raise ValueError(
                f"--tenants {tenants} deals the models to tenants a header names: give "
                "--tenant-from header too"
            )
        return Workload(tuple(models))
    if rule.kind == "token":
        raise ValueError("bench sends no bearer tokens: give --tenant-from header or name:N")
    if not models:
        raise ValueError("tenants need --models: each tenant's requests go to its models")
    if rule.kind == "name":
        if tenants:
            raise ValueError(
                f"under --tenant-from {tenant_from} each model's folders name its tenant: "
                "leave out --tenants"
            )
        return Workload(tuple(models), tuple(_leading(rule.segments, m) for m in models))
    if tenants < 1:
        raise ValueError(
            f"--tenant-from {tenant_from} needs --tenants N: the models are dealt to N tenants, "
            "t000 and on, as cards are"
        )
    return dealt(models, tenants, rule.header)


def dealt(models: Sequence[str], tenants: int, header: str) -> Workload:
    """Model k to tenant k mod N; with fewer models than tenants, tenants share them."""
    pairs = range(max(len(models), tenants))
    width = max(3, len(str(tenants - 1)))
    return Workload(
        tuple(models[k % len(models)] for k in pairs),
        tuple(f"t{k % tenants:0{width}d}" for k in pairs),
        header,
    )


def _leading(segments: int, model: str) -> str:
    try:
        return FromName(segments).of(model, {})
    except InvalidTenant as error:
        raise ValueError(str(error)) from None
