"""Where a model comes from, as the protocols ask it."""

from __future__ import annotations

from modelhost.host.model_host import ModelHost


def comes_from(host: ModelHost, name: str, url: str) -> bool:
    """Whether `name`'s source is `url`, which `allowed_urls` must admit."""
    return host.disk.stores.admit(url) == host.source_of(name)
