"""Which model, and which tenant, kills its workers: each death's blame shared among what it
ran (decisions.md, "A model whose batches keep killing their workers is held back")."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping

from modelhost.cache.memory import Resident
from modelhost.errors import ModelLoadError, ModelNotLoaded, TenantHeldBack
from modelhost.host.failed_loads import FailedLoads, Version
from modelhost.records.events import EventLog
from modelhost.workers.running import BATCH, LOAD, Record

WINDOW_S = 60.0
HELD_AT = 2.0  # a model: two deaths alone
TENANT_HELD_AT = 4.0  # a tenant: two models' worth


class Culprits:
    """The deaths of the last `window_s`, each's one blame shared among its suspects."""

    def __init__(
        self,
        held_at: float = HELD_AT,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.held_at, self.window_s, self.clock = held_at, window_s, clock
        self._deaths: deque[tuple[float, dict[str, float]]] = deque()  # when, share by suspect

    def died(self, shares: Mapping[str, float], holdable: Collection[str]) -> list[str]:
        """A death's shares: those of `holdable` now to hold back."""
        now = self.clock()
        while self._deaths and now - self._deaths[0][0] >= self.window_s:
            self._deaths.popleft()
        if not shares:
            return []
        self._deaths.append((now, dict(shares)))
        held = sorted(key for key in holdable if self.blame(key) >= self.held_at - 1e-9)
        for _, death in self._deaths:  # they run no more; the others' shares stay
            for key in held:
                death.pop(key, None)
        return held

    def blame(self, key: str) -> float:
        """`key`'s share of the deaths."""
        return sum(death.get(key, 0.0) for _, death in self._deaths)


def shares_of(
    batches: Collection[str], loading: str = "", served: Mapping[str, int] | None = None
) -> dict[str, float]:
    """A death's one blame, shared among the models it ran and loaded, each's by its kill
    rate's estimate: 1 / (n + 2) after n requests `served` since its load."""
    served = served or {}
    weights = {suspect: 1 / (served.get(suspect, 0) + 2) for suspect in {*batches, loading} - {""}}
    total = sum(weights.values())
    return {suspect: weight / total for suspect, weight in weights.items()}


def tenants_shares(shares: Mapping[str, float], owners: Mapping[str, str]) -> dict[str, float]:
    """The models' shares summed by their tenants; none while tenants are off."""
    by_tenant: dict[str, float] = {}
    for model, share in shares.items():
        if tenant := owners.get(model, ""):
            by_tenant[tenant] = by_tenant.get(tenant, 0.0) + share
    return by_tenant


class HeldBack:
    """Refuses the culprits, models as failed loads and tenants' loads for a window, then
    unloads their copies."""

    def __init__(
        self,
        failed_loads: FailedLoads,
        events: EventLog,
        version_of: Callable[[str], Version],
        unload: Callable[[str, str], Awaitable[object]],
        models: Iterable[Resident],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failed_loads, self.events = failed_loads, events
        self.version_of, self.unload, self.models = version_of, unload, models
        self.culprits = Culprits(clock=clock)
        self.tenants = Culprits(TENANT_HELD_AT, clock=clock)
        self._tenants_until: dict[str, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def died(self, ran: Record, worker_id: int) -> None:
        """Worker `worker_id` died having run `ran`; called before its models are lost."""
        aboard = [m for m in self.models if worker_id in m.workers or m.name == ran.loading]
        owners = {model.name: model.tenant for model in aboard}
        batches, loading = ran.batches.intersection(owners), ran.loading
        if ran.aboard:
            batches = frozenset(owners)
        if ran.crashed is not None:  # a thread named (fatal signal, os._exit): its work alone
            kind, model = ran.crashed
            batches = batches & {model} if kind == BATCH else frozenset()
            loading = model if kind == LOAD and model == loading else ""
        served = {model.name: max(model.hits - model.in_flight, 0) for model in aboard}
        shares = shares_of(batches, loading, served)
        for name in self.culprits.died(shares, batches):
            message = self.failed_loads.hold_back(name, self.culprits.window_s)
            self.events.emit("failure", name, reason="held_back", detail={"error": message})
            self._then(self._unload(name, "held_back", ModelLoadError(message)))
        by_tenant = tenants_shares(shares, owners)
        for tenant in self.tenants.died(by_tenant, by_tenant):
            self._hold_tenant(tenant)

    def check(self, tenant: str) -> None:
        """Refuse a load of a held-back tenant's model."""
        if tenant in self._tenants_until and (left_s := self.held_s().get(tenant)):
            raise TenantHeldBack(self._tenant_why(tenant, left_s), left_s)

    async def refuse(self, name: str, tenant: str, version: Version) -> None:
        """Raise why `name` may not load: a failure, its hold or its tenant's."""
        await self.failed_loads.check(name, version)
        self.check(tenant)

    async def recheck(self, name: str, tenant: str, version: Version) -> None:
        """A hold begun while `name` loaded: unload it, and raise why."""
        try:
            await self.refuse(name, tenant, version)
        except (ModelLoadError, TenantHeldBack) as error:
            reason = "tenant_held_back" if isinstance(error, TenantHeldBack) else "held_back"
            with contextlib.suppress(ModelNotLoaded):
                await self.unload(name, reason)
            raise

    def held_s(self) -> dict[str, int]:
        """The seconds left of each tenant's hold, rounded up."""
        now = self.tenants.clock()
        for tenant, until in list(self._tenants_until.items()):
            if until <= now:
                del self._tenants_until[tenant]
        return {tenant: math.ceil(until - now) for tenant, until in self._tenants_until.items()}

    def _hold_tenant(self, tenant: str) -> None:
        window_s = self.tenants.window_s
        self._tenants_until[tenant] = self.tenants.clock() + window_s
        detail = {"tenant": tenant, "error": self._tenant_why(tenant, window_s)}
        self.events.emit("failure", reason="tenant_held_back", detail=detail)
        for model in self.models:
            if model.tenant == tenant:
                self._then(self._unload(model.name, "tenant_held_back"))

    def _tenant_why(self, tenant: str, left_s: float) -> str:
        return (
            f"tenant {tenant} is held back for {math.ceil(left_s)} s more: workers kept dying, "
            f"or keeping memory, as they ran its models ({TENANT_HELD_AT:g} deaths' worth within "
            f"{self.tenants.window_s:g} s), each a worker to restart and the models it held to "
            "load again; its models are unloaded and none is loaded until then: check their "
            "handlers, ones that exit, crash in native code, hang or keep what they are sent"
        )

    def _then(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _unload(self, name: str, reason: str, error: ModelLoadError | None = None) -> None:
        with contextlib.suppress(ModelNotLoaded):
            await self.unload(name, reason)
        if error is not None:
            await self.failed_loads.remember(name, self.version_of(name), error)
