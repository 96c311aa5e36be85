"""A front's table kept up to date by what changed in the main process's, not by the whole."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.memory import State
from modelhost.config import Config
from modelhost.fronts.messages import RouteChanges, Table, Unpacker, applied, changes, pack
from modelhost.http.front_routes import SPARE_PLACES, Routing
from modelhost.manifest import NO_MANIFEST
from modelhost.records.events import Event
from modelhost.workers.direct import direct_path

SOCKETS = ["/run/direct-1.sock", "/run/direct-2.sock", "/run/direct-3.sock"]
routes = st.dictionaries(
    st.sampled_from([f"m{n}" for n in range(12)]),
    st.lists(st.integers(0, 2), min_size=1, max_size=3, unique=True),
    max_size=12,
)
tables = st.builds(
    Table,
    routes,
    batch_sizes=st.dictionaries(st.sampled_from(["m0", "m1"]), st.integers(2, 8), max_size=2),
    instance=st.sampled_from(["vm", "vm2"]),
    sockets=st.sampled_from([SOCKETS[:1], SOCKETS[:2], SOCKETS, SOCKETS[1:]]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(tables, min_size=1, max_size=8))
def test_a_front_fed_the_changes_holds_each_newest_table(newest: list[Table]) -> None:
    """Whatever tables follow one another, the changes sent turn the front's into each."""
    held = Table({})
    for table in newest:
        message = Unpacker().feed(pack(changes(held, table)))[0]
        if isinstance(message, RouteChanges):
            held = applied(held, message)
        else:
            assert isinstance(message, Table)
            held = message
        assert held == table


@settings(max_examples=300, deadline=None)
@given(tables, tables, st.sets(st.sampled_from([f"m{n}" for n in range(12)])))
def test_the_changes_of_the_models_looked_at_are_the_changes(
    old: Table, new: Table, more: set[str]
) -> None:
    """Where the names that may differ are known, only they are compared: the same changes."""
    differ = {
        name for name in {*old.routes, *new.routes} if old.routes.get(name) != new.routes.get(name)
    }
    assert _sorted(changes(old, new, differ | more)) == _sorted(changes(old, new))


def _sorted(change: Table | RouteChanges) -> Table | RouteChanges:
    if isinstance(change, Table):
        return change
    return msgspec.structs.replace(change, gone=sorted(change.gone))


def test_one_model_loaded_among_many_is_sent_alone() -> None:
    before = Table({f"m{n}": [n % 2] for n in range(20_000)}, sockets=SOCKETS[:2])
    after = msgspec.structs.replace(before, routes={**before.routes, "new": [1]})
    change = changes(before, after)
    assert change == RouteChanges({"new": [1]}, [], SOCKETS[:2])
    gone = changes(after, before)
    assert gone == RouteChanges({}, ["new"], SOCKETS[:2])


def test_a_new_setting_or_renumbered_sockets_send_the_table_whole() -> None:
    table = Table({"m": [0]}, sockets=SOCKETS[:1])
    other = msgspec.structs.replace(table, instance="other")
    assert changes(table, other) == other
    renumbered = Table({"m": [0]}, sockets=SOCKETS[1:2])
    assert isinstance(changes(table, renumbered), Table)


def held_by(*pids: int, batch_size: int = 1) -> SimpleNamespace:
    """A model's dispatcher, its copies on the workers of `pids`."""
    worker = {pid: SimpleNamespace(pid=pid, alive=True, untrusted=False) for pid in pids}
    return SimpleNamespace(
        replicas={pid: SimpleNamespace(worker=worker[pid], draining=False) for pid in pids},
        queue=SimpleNamespace(max_batch_size=batch_size),
    )


class Host(SimpleNamespace):
    """The parts of a ModelHost a Routing reads, each model of `dispatchers` loaded, and the
    models it was asked about."""

    def __init__(self, dispatchers: dict[str, SimpleNamespace]) -> None:
        self.asked: list[str] = []
        self.listeners: list[Callable[[Event], None]] = []
        super().__init__(
            copies=SimpleNamespace(dispatchers=dispatchers),
            memory=SimpleNamespace(get=self.resident),
            resolve=lambda name: name,
            versioned=set(),
            manifests=SimpleNamespace(of=lambda name: NO_MANIFEST),
            devices=SimpleNamespace(capable=set()),
            events=SimpleNamespace(subscribe=self.listeners.append),
            pool=SimpleNamespace(threads=1),
            scheduling=SimpleNamespace(tenant_policies=None),
        )

    def resident(self, name: str) -> SimpleNamespace:
        self.asked.append(name)
        return SimpleNamespace(state=State.LOADED)

    def emit(self, kind: str, model: str | None = None) -> None:
        for listener in self.listeners:
            listener(Event(kind, model))


def routing_over(dispatchers: dict[str, SimpleNamespace], folder: Path) -> Routing:
    """A Routing over a stand-in host holding each model loaded."""
    return Routing(Host(dispatchers), None, Config(model_store=str(folder)), folder)  # type: ignore[arg-type]


def test_a_worker_keeps_its_place_while_others_come_and_go(tmp_path: Path) -> None:
    """Places were given in the order the walk met the workers: one gone renumbered the rest,
    and every route changed with it."""
    dispatchers = {"a": held_by(101), "b": held_by(102), "c": held_by(103)}
    routing = routing_over(dispatchers, tmp_path)
    before, _, sockets = routing.routes()
    del dispatchers["a"]  # its worker gone with it
    routing.host.emit("worker_exit")  # type: ignore[attr-defined]
    after, _, still = routing.routes()
    assert after == {"b": before["b"], "c": before["c"]} and still == sockets


def test_places_of_gone_workers_are_given_up_once_they_are_most(tmp_path: Path) -> None:
    dispatchers = {f"m{pid}": held_by(pid) for pid in range(SPARE_PLACES + 1)}
    routing = routing_over(dispatchers, tmp_path)
    routing.routes()
    for pid in range(1, SPARE_PLACES + 1):
        del dispatchers[f"m{pid}"]
    dispatchers["new"] = held_by(999)
    routing.host.emit("worker_exit")  # type: ignore[attr-defined]
    routes, _, sockets = routing.routes()
    assert routes == {"m0": [0], "new": [1]}
    assert sockets == [direct_path(tmp_path, 0), direct_path(tmp_path, 999)]


def test_a_table_after_one_load_looks_at_that_model_alone(tmp_path: Path) -> None:
    """Each table walked every loaded model: 130-190 ms of the main process's loop at 40,000."""
    dispatchers = {f"m{n}": held_by(101 + n % 2) for n in range(20_000)}
    routing = routing_over(dispatchers, tmp_path)
    host: Host = routing.host  # type: ignore[assignment]
    routing.table()
    host.asked.clear()
    dispatchers["new"] = held_by(102, batch_size=4)
    host.emit("load", "new")
    table = routing.table()
    assert host.asked == ["new"]
    assert (table.routes["new"], table.batch_sizes, len(table.routes)) == ([1], {"new": 4}, 20_001)


def test_an_event_that_moves_no_route_keeps_the_last_tables_routes(tmp_path: Path) -> None:
    """Each table copied the routes, and the main process compared them with the last: 3 ms at
    40,000 for an event (a download, a model unloaded elsewhere) that moved none."""
    dispatchers = {f"m{n}": held_by(101 + n % 2) for n in range(20_000)}
    routing = routing_over(dispatchers, tmp_path)
    host: Host = routing.host  # type: ignore[assignment]
    table = routing.table()
    host.emit("download", "not-loaded")
    again = routing.table()
    assert again.routes is table.routes and again.batch_sizes is table.batch_sizes
    routing.recheck()
    assert routing.table().routes is table.routes  # a walk that finds nothing moved too


def pids_of(table: Table) -> dict[str, set[str]]:
    """Each route's sockets, whatever their places."""
    return {
        name: {table.sockets[place] for place in places} for name, places in table.routes.items()
    }


changes_of_a_host = st.lists(
    st.tuples(
        st.sampled_from(["load", "unload", "die", "rebatch"]),
        st.sampled_from([f"m{n}" for n in range(6)]),
        st.integers(101, 140),
        st.sampled_from([1, 4]),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(changes_of_a_host)
def test_a_table_kept_by_events_is_the_table_walked_anew(
    steps: list[tuple[str, str, int, int]],
) -> None:
    """Whatever loads, unloads and worker deaths come, each with its event, the routes kept by
    looking at the models events name are those a walk of every model finds."""
    dispatchers: dict[str, SimpleNamespace] = {}
    with tempfile.TemporaryDirectory() as folder:
        routing = routing_over(dispatchers, Path(folder))
        host: Host = routing.host  # type: ignore[assignment]
        for kind, name, pid, batch_size in steps:
            if kind == "load":
                dispatchers[name] = held_by(
                    pid, *_pids(dispatchers.get(name)), batch_size=batch_size
                )
                host.emit("load", name)
            elif kind == "unload":
                dispatchers.pop(name, None)
                host.emit("unload", name)
            elif kind == "die":
                for dispatcher in dispatchers.values():
                    for replica in dispatcher.replicas.values():
                        replica.worker.alive &= replica.worker.pid != pid
                host.emit("worker_exit")
            else:  # a change no event names: the periodic walk finds it
                for dispatcher in dispatchers.values():
                    dispatcher.queue.max_batch_size = batch_size
                routing.recheck()
            kept, walked = routing.table(), routing_over(dispatchers, Path(folder)).table()
            assert pids_of(kept) == pids_of(walked)
            assert kept.batch_sizes == walked.batch_sizes


def _pids(dispatcher: SimpleNamespace | None) -> list[int]:
    return [] if dispatcher is None else list(dispatcher.replicas)
