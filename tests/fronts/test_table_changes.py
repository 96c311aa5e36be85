"""A front's table kept up to date by what changed in the main process's, not by the whole."""

from __future__ import annotations

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


def held_by(*pids: int) -> SimpleNamespace:
    """A model's dispatcher, its copies on the workers of `pids`."""
    worker = {pid: SimpleNamespace(pid=pid, alive=True, untrusted=False) for pid in pids}
    return SimpleNamespace(
        replicas={pid: SimpleNamespace(worker=worker[pid], draining=False) for pid in pids}
    )


def routing_over(dispatchers: dict[str, SimpleNamespace], folder: Path) -> Routing:
    """A Routing over a stand-in host holding each model loaded."""
    host = SimpleNamespace(
        copies=SimpleNamespace(dispatchers=dispatchers),
        memory=SimpleNamespace(get=lambda name: SimpleNamespace(state=State.LOADED)),
        resolve=lambda name: name,
        versioned=set(),
        manifests=SimpleNamespace(of=lambda name: NO_MANIFEST),
        devices=SimpleNamespace(capable=set()),
        events=SimpleNamespace(subscribe=lambda listener: None),
    )
    return Routing(host, None, Config(model_store=str(folder)), folder)  # type: ignore[arg-type]


def test_a_worker_keeps_its_place_while_others_come_and_go(tmp_path: Path) -> None:
    """Places were given in the order the walk met the workers: one gone renumbered the rest,
    and every route changed with it."""
    dispatchers = {"a": held_by(101), "b": held_by(102), "c": held_by(103)}
    routing = routing_over(dispatchers, tmp_path)
    before, sockets = routing.routes()
    del dispatchers["a"]  # its worker gone with it
    after, still = routing.routes()
    assert after == {"b": before["b"], "c": before["c"]} and still == sockets


def test_places_of_gone_workers_are_given_up_once_they_are_most(tmp_path: Path) -> None:
    dispatchers = {f"m{pid}": held_by(pid) for pid in range(SPARE_PLACES + 1)}
    routing = routing_over(dispatchers, tmp_path)
    routing.routes()
    for pid in range(1, SPARE_PLACES + 1):
        del dispatchers[f"m{pid}"]
    dispatchers["new"] = held_by(999)
    routes, sockets = routing.routes()
    assert routes == {"m0": [0], "new": [1]}
    assert sockets == [direct_path(tmp_path, 0), direct_path(tmp_path, 999)]
