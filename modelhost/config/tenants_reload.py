"""The tenants file while the server runs: read at start, and again whenever it changes."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from modelhost.config.tenant_policies import TenantPolicies
from modelhost.config.tenants_file import read_tenants_file
from modelhost.config.watched_file import POLL_INTERVAL_S, WatchedFile


class TenantsFileWatcher(WatchedFile[TenantPolicies]):
    """The tenants file's last good policies (`tenants_file_loaded`, `tenants_file_rejected`)."""

    def __init__(
        self, path: str, emit: Callable[..., Any], interval_s: float = POLL_INTERVAL_S
    ) -> None:
        super().__init__(
            "tenants_file", path, emit, TenantPolicies(), _described, interval_s=interval_s
        )

    def open_within(
        self, memory_budget_bytes: int, disk_budget_bytes: int, untrust_refused: str = ""
    ) -> None:
        """Read the file at start, its percentages of these budgets; a mistake raises.
        `untrust_refused`: why no tenant may be untrusted on this server ("": one may)."""
        read = functools.partial(
            read_tenants_file,
            memory_budget_bytes=memory_budget_bytes,
            disk_budget_bytes=disk_budget_bytes,
            untrust_refused=untrust_refused,
        )
        self.open(read)


def _described(policies: TenantPolicies) -> dict[str, Any]:
    return {"tenants": len(policies.named)}
