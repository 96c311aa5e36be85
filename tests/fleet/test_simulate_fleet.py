"""`simulate --instances` against a brute-force replay: every request routed by a transcription of
nginx's hash, every instance a plain LRU of its byte budget."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import pytest
from click.testing import CliRunner
from fleet_tools import brute_force_server

from modelhost.cli.simulate import simulate
from modelhost.toolkit.simulate import synthetic
from modelhost.toolkit.simulate.fleet import routed, server_names
from modelhost.toolkit.simulate.ring import Ring
from modelhost.toolkit.simulate.trace import read_access_log

MiB = 2**20
BUDGET = 6 * MiB


def lru_hits(requests: list[tuple[str, int]], budget_bytes: int) -> int:
    """A plain LRU of byte size: a model larger than the budget is never held."""
    held: OrderedDict[str, int] = OrderedDict()
    hits = 0
    for model, size in requests:
        if model in held:
            hits += 1
            held.move_to_end(model)
            continue
        if size > budget_bytes:
            continue
        while sum(held.values()) + size > budget_bytes:
            held.popitem(last=False)
        held[model] = size
    return hits


def test_the_fleet_replay_equals_a_brute_force_one(tmp_path: Path) -> None:
    spec = synthetic.Synthetic(models=40, requests=3000, size_mib=(0.25, 2.0), seed=3)
    log = synthetic.write(tmp_path / "access.jsonl", spec)
    result = CliRunner().invoke(
        simulate,
        [str(log), "--instances", "1,2,3,5", "--budget-per-instance", "6MiB"]
        + ["--out", str(tmp_path / "out")],
    )
    assert result.exit_code == 0, result.output
    fleets = json.loads((tmp_path / "out/simulate-fleet.json").read_text())["fleets"]
    trace = read_access_log(log)
    for fleet in fleets:
        servers = server_names(fleet["instances"])
        owner = [brute_force_server(servers, m) for m in trace.models]
        expected_requests, expected_loads = [], []
        for server in servers:
            mine = [
                (m, trace.sizes[m]) for m, o in zip(trace.models, owner, strict=True) if o == server
            ]
            expected_requests.append(len(mine))
            expected_loads.append(len(mine) - lru_hits(mine, BUDGET))
        assert fleet["requests"] == expected_requests
        assert fleet["loads"] == expected_loads
        hits = len(trace.models) - sum(expected_loads)
        assert fleet["hit_ratio"] == hits / len(trace.models)


def test_spread_hot_model_moves_nothing_else(
    tmp_path: Path,
) -> None:
    """A spread hot model reaches several instances and nothing else moves."""
    log = synthetic.write(tmp_path / "a.jsonl", synthetic.Synthetic(models=30, requests=2000))
    trace = read_access_log(log)
    ring = Ring(server_names(8))
    plain, spread = routed(trace, ring), routed(trace, ring, {"model-0": 4})
    hot = {s for m, s in zip(trace.models, spread, strict=True) if m == "model-0"}
    assert len(hot) >= 2
    assert hot == {ring.server_for(f"model-0#{i}") for i in range(4)}
    others = [(a, b) for m, a, b in zip(trace.models, plain, spread, strict=True) if m != "model-0"]
    assert all(a == b for a, b in others)


def test_instances_without_a_budget_is_a_usage_error(tmp_path: Path) -> None:
    log = synthetic.write(tmp_path / "a.jsonl", synthetic.Synthetic(models=3, requests=10))
    result = CliRunner().invoke(simulate, [str(log), "--instances", "1,2"])
    assert result.exit_code == 2
    assert "--budget-per-instance" in result.output


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--spread", "model-0=5"], "K 2, 3 or 4"),
        (["--servers", "web:8080"], "{i}"),
        (["--instances", "0,2"], "counts like"),
    ],
)
def test_fleet_options_are_checked(tmp_path: Path, flags: list[str], message: str) -> None:
    log = synthetic.write(tmp_path / "a.jsonl", synthetic.Synthetic(models=3, requests=10))
    base = ["--instances", "1,2", "--budget-per-instance", "8MiB", "--out", str(tmp_path)]
    result = CliRunner().invoke(simulate, [str(log), *base, *flags])
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.parametrize(("price", "labelled"), [([], True), (["--instance-price", "0.4"], False)])
def test_an_example_instance_price_is_labelled(
    tmp_path: Path, price: list[str], labelled: bool
) -> None:
    """The $/M column priced instances at the default $0.115 an hour and said nothing of it,
    where tune and cost label the same default an example."""
    log = synthetic.write(tmp_path / "a.jsonl", synthetic.Synthetic(models=3, requests=10))
    base = ["--instances", "1,2", "--budget-per-instance", "8MiB", "--throughput-rps", "100"]
    result = CliRunner().invoke(simulate, [str(log), *base, *price, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert ("an example price" in result.output) is labelled
    summary = json.loads((tmp_path / "simulate-fleet.json").read_text())
    assert summary["example_price"] is labelled


def test_servers_may_be_given_as_whole_server_lines(tmp_path: Path) -> None:
    """modelhost-servers.conf says simulate --servers takes its list: pasted with its
    parameters, the ring hashed "8080 max_fails=1 ..." as the port and placed every model
    where nginx does not. nginx hashes the address alone."""
    log = synthetic.write(tmp_path / "a.jsonl", synthetic.Synthetic(models=40, requests=500))

    def requests_per_instance(servers: str) -> list[list[int]]:
        out = tmp_path / str(abs(hash(servers)))
        base = ["--instances", "2,3", "--budget-per-instance", "8MiB", "--servers", servers]
        result = CliRunner().invoke(simulate, [str(log), *base, "--out", str(out)])
        assert result.exit_code == 0, result.output
        fleets = json.loads((out / "simulate-fleet.json").read_text())["fleets"]
        return [fleet["requests"] for fleet in fleets]

    plain = requests_per_instance("modelhost-{i}:8080")
    assert requests_per_instance("modelhost-{i}:8080 max_fails=1 fail_timeout=10s;") == plain


def test_a_server_lines_weight_is_its_points() -> None:
    assert Ring(["a:80 weight=2 max_fails=1"]).hashes == Ring(["a:80"], [2]).hashes


@pytest.mark.parametrize(
    "flags",
    [
        ["--spread", "model-0=2"],
        ["--budget-per-instance", "8MiB"],
        ["--throughput-rps", "400"],
        ["--servers", "web-{i}:80"],
    ],
)
def test_fleet_flags_without_instances_are_refused(tmp_path: Path, flags: list[str]) -> None:
    """scale-out.md says to measure a spread first with `simulate --spread MODEL=K`: without
    --instances it replayed one instance and the spread did nothing, silently."""
    log = synthetic.write(tmp_path / "a.jsonl", synthetic.Synthetic(models=3, requests=10))
    result = CliRunner().invoke(simulate, [str(log), *flags, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert flags[0] in result.output and "--instances" in result.output
