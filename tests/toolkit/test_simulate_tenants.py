"""simulate per tenant: known hit ratios on hand-made traces, the server's replay without quotas,
and the tenants file's memory shares held at every step (Hypothesis)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.policy import policy_named
from modelhost.cli.main import main
from modelhost.config.tenancy import parse_tenant_from
from modelhost.config.tenant_policies import TenantPolicies, TenantPolicy
from modelhost.toolkit.simulate.replay import replay
from modelhost.toolkit.simulate.tenants import TenantCache, replay_tenants, tenants_of
from modelhost.toolkit.simulate.trace import make_trace, read_access_log

NAME_2 = parse_tenant_from("name:2")
HEADER = parse_tenant_from("header")


def cycle(*models: str, times: int = 10) -> list[str]:
    return list(models) * times


def test_tenants_come_from_the_names_leading_segments() -> None:
    models = ["tenants/a/x.joblib", "tenants/b/y.joblib", "z.joblib"]
    trace = make_trace(models, dict.fromkeys(models, 1))
    assert tenants_of(trace, NAME_2) == ["tenants/a", "tenants/b", "default"]


def test_tenants_come_from_the_logs_tenant_field(tmp_path: Path) -> None:
    lines = [
        {"model": "m", "cache": "hit", "tenant": "t1", "model_bytes": 1},
        {"model": "m", "cache": "hit", "model_bytes": 1},  # refused before its tenant was known
    ]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    trace = read_access_log(tmp_path / "a.jsonl")
    assert tenants_of(trace, HEADER) == ["t1", "default"]


def test_a_log_without_tenants_asks_for_the_name_rule() -> None:
    trace = make_trace(["m", "m"], {"m": 1})
    with pytest.raises(ValueError, match="name:N"):
        tenants_of(trace, HEADER)


def test_without_quotas_a_third_model_thrashes_everyone() -> None:
    """Three models cycled through room for two: LRU never hits, whoever owns them."""
    trace = make_trace(cycle("a/1", "b/1", "a/2"), {"a/1": 1, "b/1": 1, "a/2": 1})
    figures = replay_tenants(trace, tenants_of(trace, parse_tenant_from("name:1")), 2, "lru")
    assert figures.tenants["a"].hit_ratio == 0.0 and figures.tenants["b"].hit_ratio == 0.0
    assert figures.tenants["a"].loads == 20 and figures.tenants["b"].evictions_suffered == 9


@pytest.mark.parametrize(
    "policies",
    [
        TenantPolicies(named={"b": TenantPolicy(memory_min_bytes=1)}),
        TenantPolicies(named={"a": TenantPolicy(memory_max_bytes=1)}),
    ],
    ids=["b's minimum", "a's maximum"],
)
def test_a_quota_keeps_the_quiet_tenants_model(policies: TenantPolicies) -> None:
    """b's guaranteed byte, or a capped at one, leaves a to thrash alone: b hits 9 of 10."""
    trace = make_trace(cycle("a/1", "b/1", "a/2"), {"a/1": 1, "b/1": 1, "a/2": 1})
    tenants = tenants_of(trace, parse_tenant_from("name:1"))
    figures = replay_tenants(trace, tenants, 2, "lru", policies)
    assert figures.tenants["b"].hit_ratio == 0.9
    assert figures.tenants["b"].evictions_suffered == 0
    assert figures.tenants["a"].hit_ratio == 0.0
    assert figures.total.requests == 30 and figures.total.hits == 9


def test_a_model_past_the_tenants_maximum_is_refused() -> None:
    trace = make_trace(["a/big", "a/big", "b/1"], {"a/big": 4, "b/1": 1})
    policies = TenantPolicies(default=TenantPolicy(memory_max_bytes=2))
    figures = replay_tenants(trace, ["a", "a", "b"], 8, "lru", policies)
    assert figures.tenants["a"].refused == 2 and figures.tenants["a"].hits == 0
    assert figures.tenants["b"].loads == 1


def test_own_models_below_the_minimum_make_room_for_their_tenant() -> None:
    """a's minimum guards it against b, not against a's own next model."""
    trace = make_trace(["a/1", "a/2", "a/1"], {"a/1": 2, "a/2": 2})
    policies = TenantPolicies(named={"a": TenantPolicy(memory_min_bytes=2)})
    figures = replay_tenants(trace, ["a", "a", "a"], 2, "lru", policies)
    assert figures.tenants["a"].loads == 3 and figures.tenants["a"].refused == 0


@st.composite
def tenant_traces(draw: st.DrawFn) -> tuple[list[str], list[str], dict[str, int], int]:
    tenants = ["a", "b", "c"][: draw(st.integers(1, 3))]
    names = [f"{t}/{i}" for t in tenants for i in range(draw(st.integers(1, 4)))]
    models = draw(st.lists(st.sampled_from(names), min_size=1, max_size=60))
    sizes = {name: draw(st.integers(1, 12)) for name in names}
    budget = draw(st.integers(max(sizes.values()), sum(sizes.values()) + 1))
    return models, [m.split("/")[0] for m in models], sizes, budget


@settings(max_examples=150, deadline=None)
@given(tenant_traces(), st.sampled_from(["lru", "cost-aware"]))
def test_without_quotas_the_totals_are_the_servers_replay(
    case: tuple[list[str], list[str], dict[str, int], int], policy: str
) -> None:
    models, tenants, sizes, budget = case
    trace = make_trace(models, sizes)
    figures = replay_tenants(trace, tenants, budget, policy)
    assert figures.total.hits == replay(trace, budget, policy_named(policy))
    assert figures.total.hits == sum(t.hits for t in figures.tenants.values())


@settings(max_examples=200, deadline=None)
@given(
    tenant_traces(),
    st.sampled_from(["lru", "cost-aware"]),
    st.dictionaries(st.sampled_from("abc"), st.integers(0, 12)),
    st.dictionaries(st.sampled_from("abc"), st.integers(1, 24)),
)
def test_quotas_hold_at_every_step(
    case: tuple[list[str], list[str], dict[str, int], int],
    policy: str,
    minimums: dict[str, int],
    maximums: dict[str, int],
) -> None:
    """No tenant holds past its maximum, none is taken below its minimum by another's load,
    and the budget is never exceeded."""
    models, tenants, sizes, budget = case
    named = {
        t: TenantPolicy(memory_min_bytes=minimums.get(t, 0), memory_max_bytes=maximums.get(t, 0))
        for t in "abc"
    }
    cache = TenantCache(budget, policy_named(policy), TenantPolicies(named=named))
    for now, (model, tenant) in enumerate(zip(models, tenants, strict=True)):
        before = dict(cache.held_bytes)
        cache.serve(model, tenant, sizes[model], 1.0, float(now))
        assert sum(cache.held_bytes.values()) <= budget
        for other, held in cache.held_bytes.items():
            quota = named[other]
            assert not quota.memory_max_bytes or held <= quota.memory_max_bytes
            if other != tenant:
                assert held >= min(before.get(other, 0), quota.memory_min_bytes)


def test_simulate_reports_each_tenant(tmp_path: Path) -> None:
    """`simulate --tenant-from name:1` prints and writes each tenant beside the total."""
    log = tmp_path / "access.jsonl"
    lines = [{"model": m, "cache": "hit", "model_bytes": 1} for m in cycle("a/1", "b/1", "a/2")]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out"
    args = ["simulate", str(log), "--budgets", "2,3", "--policy", "lru", "--admission", "none"]
    result = CliRunner().invoke(main, [*args, "--tenant-from", "name:1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "tenants at 2 B, lru" in result.output
    report = json.loads((out / "tenants.json").read_text())
    at_three = report["runs"][1]
    assert at_three["budget_bytes"] == 3 and at_three["policy"] == "lru"
    assert at_three["tenants"]["a"]["hit_ratio"] == 0.9  # both of a's models fit beside b's
    assert at_three["total"]["requests"] == 30


def test_a_tenants_file_needs_a_tenant_rule(tmp_path: Path) -> None:
    log = tmp_path / "access.jsonl"
    log.write_text(json.dumps({"model": "m", "cache": "hit", "model_bytes": 1}) + "\n")
    (tmp_path / "tenants.toml").write_text("[default]\n")
    args = ["simulate", str(log), "--tenants-file", str(tmp_path / "tenants.toml")]
    result = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code != 0 and "--tenant-from" in result.output


def test_a_tenants_file_too_big_for_a_budget_names_that_budget(tmp_path: Path) -> None:
    """A memory_max of 3 B replayed at 2 B and 4 B: the refusal names the replayed budget it
    does not fit and simulate's --budgets, not the server's --memory-budget."""
    log = tmp_path / "access.jsonl"
    log.write_text(json.dumps({"model": "a/m", "cache": "hit", "model_bytes": 1}) + "\n")
    (tmp_path / "tenants.toml").write_text("[default]\nmemory_max = 3\n")
    args = ["simulate", str(log), "--budgets", "2,4", "--tenant-from", "name:1"]
    args += ["--tenants-file", str(tmp_path / "tenants.toml"), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0
    assert "--memory-budget" not in result.output, result.output
    assert "above the memory budget (2 B); lower it, or raise --budgets" in result.output
