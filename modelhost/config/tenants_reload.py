"""The tenants file while the server runs: read at start, and again whenever it changes."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from modelhost.config.tenant_policies import TenantPolicies
from modelhost.config.tenants_file import read_tenants_file
from modelhost.errors import ConfigError

logger = logging.getLogger("modelhost")

POLL_INTERVAL_S = 1.0
Stamp = tuple[int, int, int]  # modified (ns), size, inode: a replaced file changes one


def stamp(path: Path) -> Stamp | None:
    """What tells one version of the file from the next; None while it cannot be seen."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size, info.st_ino


class TenantsFileWatcher:
    """Holds `current`, the last good policies; a changed file that reads well replaces them.

    The stamp is polled on the loop and the file read on a thread. A file with a mistake keeps
    the last good policies and says why in a `tenants_file_rejected` event and a warning.
    """

    def __init__(
        self, path: str, emit: Callable[..., Any], interval_s: float = POLL_INTERVAL_S
    ) -> None:
        self.path = Path(path) if path else None  # None: no tenants file
        self.emit, self.interval_s = emit, interval_s  # emit: EventLog.emit
        self.current = TenantPolicies()
        self._read: Callable[[Path], TenantPolicies] | None = None
        self._stamp: Stamp | None = None

    def policies(self) -> TenantPolicies:
        return self.current

    def open(
        self, memory_budget_bytes: int, disk_budget_bytes: int, untrust_refused: str = ""
    ) -> None:
        """Read the file at start, its percentages of these budgets; a mistake raises.
        `untrust_refused`: why no tenant may be untrusted on this server ("": one may)."""
        if self.path is None:
            return
        self._read = functools.partial(
            read_tenants_file,
            memory_budget_bytes=memory_budget_bytes,
            disk_budget_bytes=disk_budget_bytes,
            untrust_refused=untrust_refused,
        )
        self._stamp = stamp(self.path)
        self._loaded(self._read(self.path))

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Poll the file while the server runs."""
        if self._read is None:
            yield
            return
        task = asyncio.create_task(self._watch())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def poll(self) -> None:
        """Reread the file if it changed since the last reading."""
        assert self.path is not None and self._read is not None
        now = stamp(self.path)
        if now == self._stamp:
            return
        self._stamp = now
        try:
            policies = await asyncio.to_thread(self._read, self.path)
        except ConfigError as error:
            logger.warning("the tenants file is refused, the last good one stays: %s", error)
            self.emit("tenants_file_rejected", detail={"error": str(error)})
            return
        self._loaded(policies)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.poll()
            except Exception:  # a bug here must not end the watching
                logger.exception("reading the tenants file %s failed", self.path)

    def _loaded(self, policies: TenantPolicies) -> None:
        self.current = policies
        detail = {"path": str(self.path), "tenants": len(policies.named)}
        self.emit("tenants_file_loaded", detail=detail)
