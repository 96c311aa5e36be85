"""Which worker a model may use: untrusted tenants one to a sandboxed worker, and which worker
is emptied when a tenant finds them all held by others."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from modelhost.host.sandboxes import Sandboxes
from modelhost.workers.handle import WorkerHandle


@dataclass
class Held:
    """A model's record as the sandboxes read it: the workers holding it, and its last use."""

    workers: list[int]
    last_used: float


@dataclass
class Models:
    residents: list[Held] = field(default_factory=list)

    def __iter__(self) -> Any:
        return iter(self.residents)


def worker(worker_id: int, untrusted: bool = True, tenant: str | None = None) -> WorkerHandle:
    handle = WorkerHandle(worker_id, 1000 + worker_id, cast(Any, None), 0.0)
    handle.untrusted, handle.tenant = untrusted, tenant
    return handle


def sandboxes(models: Models | None = None) -> Sandboxes:
    def why_untrusted(name: str) -> str:
        return "" if name.startswith("trusted/") else "untrusted"

    def tenant_of(name: str) -> str:
        return name.split("/")[0]

    return Sandboxes(cast(Any, models or Models()), why_untrusted, tenant_of)


def test_a_sandboxed_worker_hosts_one_tenant_from_its_first_load() -> None:
    rules, fresh = sandboxes(), worker(1)
    assert rules.allows(fresh, "a/m") and rules.allows(fresh, "b/m")
    rules.take(fresh, "a/m")
    assert rules.allows(fresh, "a/other") and not rules.allows(fresh, "b/m")


def test_trusted_and_untrusted_never_share() -> None:
    rules = sandboxes()
    assert not rules.allows(worker(1), "trusted/m")
    assert not rules.allows(worker(2, untrusted=False), "a/m")
    assert rules.allows(worker(3, untrusted=False), "trusted/m")


def test_a_retiring_worker_takes_no_model() -> None:
    retiring = worker(1, tenant="a")
    retiring.retiring = True
    assert not sandboxes().allows(retiring, "a/m")


def test_the_least_recently_used_worker_of_others_is_freed() -> None:
    models = Models([Held([1], last_used=50.0), Held([2], last_used=10.0), Held([2], 20.0)])
    rules, held = sandboxes(models), [worker(1, tenant="a"), worker(2, tenant="b")]
    chosen = rules.to_free("c/m", held, busy=set())
    assert chosen is held[1]  # b's models were used last at 20, a's at 50
    assert rules.to_free("c/m", held, busy={2}) is held[0]  # b's worker is loading


def test_nothing_is_freed_while_a_worker_is_free_or_coming() -> None:
    rules = sandboxes()
    assert rules.to_free("a/m", [worker(1, tenant="a"), worker(2, tenant="b")], set()) is None
    assert rules.to_free("c/m", [worker(1), worker(2, tenant="b")], set()) is None
    assert rules.to_free("c/m", [worker(1, tenant="a")], set()) is None  # a replacement comes
    assert rules.to_free("trusted/m", [worker(1, tenant="a")], set()) is None
