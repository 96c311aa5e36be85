"""The ketama ring against a brute-force reading of nginx's source, and what losing an instance
moves over many fleets."""

from __future__ import annotations

import random
import statistics

from fleet_tools import brute_force_server
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.toolkit.simulate.ring import Ring, split_server


@settings(deadline=None)  # a busy CI machine took 326 ms over one example
@given(
    ports=st.lists(st.integers(1024, 65535), min_size=1, max_size=6, unique=True),
    keys=st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=20),
    lost=st.integers(0, 5),
)
def test_the_ring_picks_what_the_transcription_picks(
    ports: list[int], keys: list[str], lost: int
) -> None:
    servers = [f"10.0.0.{p % 250}:{p}" for p in ports]
    down = {servers[lost]} if lost < len(servers) - 1 else set()
    ring = Ring(servers)
    for key in keys:
        assert ring.server_for(key, down) == brute_force_server(servers, key, down)


def test_split_server_follows_nginx() -> None:
    assert split_server("10.0.0.5:8080") == (b"10.0.0.5", b"8080")
    assert split_server("[::1]:80") == (b"[::1]", b"80")
    assert split_server("modelhost-0") == (b"modelhost-0", b"")
    assert split_server("unix:/run/m.sock") == (b"/run/m.sock", b"")


def test_losing_one_of_three_moves_a_third() -> None:
    """Losing one of three moves a third of the models on average.

    Over 300 fleets of three loopback instances (random ports, as the e2e test has) and 3000
    models, the share of models that change instance when one instance is lost."""
    pick = random.Random(7)
    models = [f"tenants/t{i:04d}.joblib" for i in range(3000)]
    moved = []
    for _ in range(300):
        servers = [f"127.0.0.1:{pick.randrange(1024, 65536)}" for _ in range(3)]
        ring, lost = Ring(servers), {pick.choice(servers)}
        moved.append(
            statistics.mean(ring.server_for(m) != ring.server_for(m, lost) for m in models)
        )
    assert abs(statistics.mean(moved) - 1 / 3) < 0.01
    assert statistics.quantiles(moved, n=20)[-1] <= 1 / 3 + 0.05  # 95th percentile
