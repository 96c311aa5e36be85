"""The routing table the main process publishes to its fronts, and their hits folded in as its
own (docs/decisions.md, "Fronts")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from modelhost.cache.memory import State
from modelhost.config import Config
from modelhost.config.tenancy import own_models_segments, tenants_on
from modelhost.config.tenant_policies import TenantPolicies, TenantPolicy
from modelhost.fronts.messages import Report, Sample, Table, Tenancy
from modelhost.host import ModelHost
from modelhost.http.client_pace import pace_of
from modelhost.http.instance import instance_name
from modelhost.observe.exchange import Exchange
from modelhost.observe.hits import Hits
from modelhost.observe.observer import Observer
from modelhost.protocols.keys import INFERENCE, TokenKeys
from modelhost.protocols.tenants import TokenTenants
from modelhost.records.events import Event
from modelhost.workers.direct import direct_path

Routes = dict[str, list[int]]
SPARE_PLACES = 32  # places past which those of gone workers are given up


def main_only(config: Config) -> str:
    """What needs the main process for every request, so no front starts; "": fronts may."""
    reasons = {
        "untrusted workers": bool(config.untrusted_workers or config.refuse_pickle),
        "--max-concurrency": bool(config.max_concurrency),
    }
    return ", ".join(reason for reason, on in reasons.items() if on)


class Routing:
    """The table from the host's own state, and the fronts' hits folded into it."""

    def __init__(
        self,
        host: ModelHost,
        observer: Observer | None,
        config: Config,
        run_dir: Path,
        keys: TokenKeys | None = None,
        tokens: Callable[[], TokenTenants] = dict,
    ) -> None:
        self.host, self.observer = host, observer
        self.tokens = tokens
        self.keys = keys  # token authorization's: a front's hit must hold the inference key
        if keys is not None:
            keys.on_renew = self.touch
        self.instance = instance_name(config.instance_id)
        self.limits = (config.max_request_bytes, config.max_response_bytes)
        self.timeout_s = config.default_response_timeout_s
        self.pace = pace_of(config)
        self.default_accept = config.default_accept
        self.tenant_from = config.tenant_from if tenants_on(config.tenant_from) else ""
        self.model_segments = own_models_segments(config.tenant_models, config.tenant_from)
        self.run_dir = run_dir  # where the workers' direct sockets are
        self.dirty = True  # an event since the last table
        self.in_flight: dict[int, int] = {}  # front → its direct requests in flight
        # a worker's pid → its socket's place
        self.places: dict[int, int] = {}
        # the last table's routes and batch sizes above 1; replaced, never changed in place
        self.held: tuple[Routes, dict[str, int]] = ({}, {})
        self.stale: set[str] | None = None  # models to look at anew; None: all
        self.looked_at: set[str] | None = None  # for the last table (None: all)
        host.events.subscribe(self.changed)

    def touch(self) -> None:
        self.dirty = True

    def changed(self, event: Event) -> None:
        """Its model is looked at anew; every model, where it names none."""
        if event.model is None:
            self.stale = None
        elif self.stale is not None:
            self.stale.add(event.model)
        self.dirty = True

    def recheck(self) -> None:
        """Walk every model next."""
        self.stale = None

    def table(self) -> Table:
        """The table to publish: what the host holds now, and the fronts' settings."""
        self.dirty = False
        routes, batch_sizes, sockets = self.routes()
        key, until = ("", 0.0) if self.keys is None else self.keys.of(INFERENCE)
        return Table(
            routes,
            batch_sizes,
            self.instance,
            *self.limits,
            response_timeout_s=self.timeout_s,
            pace=self.pace,
            inference_key=key,
            inference_key_until=until,
            tenants=self.tenancy(),
            slots=self.host.pool.threads,
            default_accept=self.default_accept,
            sockets=sockets,
        )

    def tenancy(self) -> Tenancy | None:
        """The rule and the tenants file now; None: tenants are off."""
        if not self.tenant_from:
            return None
        read = self.host.scheduling.tenant_policies
        policies = read() if read is not None else TenantPolicies()
        assert isinstance(policies, TenantPolicies)
        return tenancy(self.tenant_from, policies, self.model_segments, self.tokens())

    def routes(self) -> tuple[Routes, dict[str, int], list[str]]:
        """The routes a front may take, the batch sizes above 1, and the sockets."""
        stale, self.stale = self.stale, set()
        self.looked_at = stale
        if stale is None:
            self._walk()
        else:
            self._look_at(stale)
        return *self.held, [direct_path(self.run_dir, pid) for pid in self.places]

    def _walk(self) -> None:
        """Every model's route anew."""
        routes: Routes = {}
        sizes: dict[str, int] = {}
        for name in self.host.copies.dispatchers:
            _put(routes, sizes, name, *self._route(name))
        if len(self.places) > SPARE_PLACES:
            routes = self._renumbered(routes)
        if (routes, sizes) != self.held:
            self.held = routes, sizes

    def _look_at(self, names: set[str]) -> None:
        """`names`' routes anew; copies where one moved."""
        routes, sizes = self.held
        moved = [
            (name, route)
            for name in names
            if (route := self._route(name)) != (routes.get(name, []), sizes.get(name, 1))
        ]
        if moved:
            routes, sizes = dict(routes), dict(sizes)
            for name, route in moved:
                _put(routes, sizes, name, *route)
            self.held = routes, sizes

    def _route(self, name: str) -> tuple[list[int], int]:
        """The places a front may send `name` to, and its batch size."""
        host, places = self.host, self.places
        dispatcher, resident = host.copies.dispatchers.get(name), host.memory.get(name)
        if dispatcher is None or resident is None or resident.state is not State.LOADED:
            return [], 1
        if host.resolve(name) != name or name in host.versioned:
            return [], 1  # a registered version's name, or a model with versions
        if host.manifests.of(name).response_timeout_s:
            return [], 1  # a deadline of its own
        if name in host.devices.capable:
            return [], 1  # a hit may wait for its device
        serving = [
            places.setdefault(replica.worker.pid, len(places))
            for replica in dispatcher.replicas.values()
            if replica.worker.alive and not replica.draining and not replica.worker.untrusted
        ]
        return serving, dispatcher.queue.max_batch_size if serving else 1

    def _renumbered(self, routes: Routes) -> Routes:
        """The routes over live workers' places, once gone ones hold most."""
        used = {place for serving in routes.values() for place in serving}
        if 2 * len(used) >= len(self.places):
            return routes
        pids = [pid for pid, place in self.places.items() if place in used]
        moved = {self.places[pid]: place for place, pid in enumerate(pids)}
        self.places = {pid: place for place, pid in enumerate(pids)}
        return {name: [moved[place] for place in serving] for name, serving in routes.items()}

    def fold(self, report: Report, front: int) -> None:
        """Count front number `front`'s answers as the main process counts its own."""
        if self.observer is not None:
            change = report.in_flight - self.in_flight.get(front, 0)
            self.observer.metrics.in_flight.add(change)
        self.in_flight[front] = report.in_flight
        dispatchers = self.host.copies.dispatchers
        for name in {*report.busy_s, *report.pressed}:
            dispatcher = dispatchers.get(name)
            if dispatcher is not None:
                pressed = name in report.pressed
                dispatcher.worked_elsewhere(report.busy_s.get(name, 0.0), pressed)
        names = [sample.model for sample in report.samples if sample.status == 200]
        if names:
            self._hit(names)
        if self.observer is not None:
            record(self.observer, report.samples)

    def _hit(self, names: list[str]) -> None:
        """What hits in the invoke path do: recency, frequency, revalidation, sizing."""
        loaded = self.host.memory.served_elsewhere(names)  # the rest are gone since
        for name in loaded:
            self.host.invoke_path.on_hit(name)
        if uses := [(name, loaded[name].footprint) for name in names if name in loaded]:
            self.host.sizing.hits(uses)


def _put(routes: Routes, sizes: dict[str, int], name: str, serving: list[int], size: int) -> None:
    """Write `name`'s route and batch size, or take them out."""
    if serving:
        routes[name] = serving
    else:
        routes.pop(name, None)
    if size > 1:
        sizes[name] = size
    else:
        sizes.pop(name, None)


def tenancy(
    tenant_from: str, policies: TenantPolicies, model_segments: int, tokens: TokenTenants
) -> Tenancy:
    """The rule, and the tenants with a rate or a cap, whose requests a front relays."""
    named, default = policies.named, policies.default
    return Tenancy(
        tenant_from,
        held=sorted(tenant for tenant, policy in named.items() if _limited(policy)),
        hold_others=_limited(default),
        weights={tenant: policy.weight for tenant, policy in named.items()},
        default_weight=default.weight,
        model_segments=model_segments,
        tokens=tokens,
    )


def _limited(policy: TenantPolicy) -> bool:
    return bool(policy.rate or policy.max_concurrency)


def record(observer: Observer, samples: list[Sample]) -> None:
    """Count the samples as the main process its own exchanges, runs of untenanted hits
    together."""
    start = 0
    for end, sample in enumerate(samples):
        if sample.status != 200 or sample.error is not None or sample.tenant is not None:
            _record_hits(observer, samples[start:end])
            observer.record(exchange_of(sample))
            start = end + 1
    _record_hits(observer, samples[start:])


def _record_hits(observer: Observer, hits: list[Sample]) -> None:
    if not hits:
        return
    if not observer.record_hits(hits_of(hits)):
        for sample in hits:
            observer.record(exchange_of(sample))
    elif observer.access_log is not None:
        for sample in hits:
            observer.access_log.write(exchange_of(sample))


def hits_of(samples: list[Sample]) -> Hits:
    return Hits(
        routes=[sample.route for sample in samples],
        models=[sample.model for sample in samples],
        times=[sample.time for sample in samples],
        durations_s=[sample.duration_s for sample in samples],
        infer_ms=[sample.infer_ms for sample in samples],
        bytes_in=[sample.bytes_in for sample in samples],
        bytes_out=[sample.bytes_out for sample in samples],
    )


def exchange_of(sample: Sample) -> Exchange:
    """The exchange the main process would have recorded for a hit answered by a front."""
    hit = sample.status == 200
    return Exchange(
        time=sample.time,
        method="POST",
        route=sample.route,
        status=sample.status,
        duration_s=sample.duration_s,
        bytes_in=sample.bytes_in,
        bytes_out=sample.bytes_out,
        invocation=True,
        model=sample.model,
        cache="hit" if hit else None,
        tier="host" if hit else None,
        timings_ms=(
            {"queue": 0.0, "download": 0.0, "load": 0.0, "infer": sample.infer_ms} if hit else {}
        ),
        error=sample.error,
        tenant=sample.tenant,
    )
