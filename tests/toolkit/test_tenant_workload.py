"""bench's multi-tenant workload: the two-class skew's defaults give Aegaeon's shares, models are
dealt to the tenants, and each tenant's figures are its own rows'."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from modelhost.toolkit.loadgen import Row
from modelhost.toolkit.stats import tenant_summary
from modelhost.toolkit.traffic import Popularity
from modelhost.toolkit.workload import Workload, workload


def test_two_class_defaults_give_aegaeons_shares() -> None:
    """Aegaeon (SOSP'25): 94% of the models receive 1.35% of the requests."""
    models = [f"m{i:03d}" for i in range(200)]
    popularity = Popularity.two_class(models)
    rng = random.Random(7)
    counts = Counter(models[popularity.pick_index(rng)] for _ in range(200_000))
    cold = sorted(models, key=lambda m: counts[m])[: round(0.94 * len(models))]
    cold_share = sum(counts[m] for m in cold) / 200_000
    assert 0.010 <= cold_share <= 0.017
    assert sum(popularity.share(i) for i in range(12, 200)) == pytest.approx(0.0135)


def test_two_class_keeps_one_model_in_each_class() -> None:
    popularity = Popularity.two_class(["a", "b", "c"])
    assert popularity.share(0) == pytest.approx(0.9865)
    assert popularity.share(1) + popularity.share(2) == pytest.approx(0.0135)
    assert Popularity.two_class(["a"]).share(0) == 1.0


def test_pick_index_draws_as_pick_does() -> None:
    popularity = Popularity.zipf(["a", "b", "c", "d"])
    first, second = random.Random(3), random.Random(3)
    assert [popularity.pick(first) for _ in range(50)] == [
        popularity.models[popularity.pick_index(second)] for _ in range(50)
    ]


def test_the_header_rule_deals_the_models_to_numbered_tenants() -> None:
    dealt = workload(["a", "b", "c", "d", "e"], "header", 2)
    assert dealt == Workload(
        ("a", "b", "c", "d", "e"), ("t000", "t001", "t000", "t001", "t000"), "x-modelhost-tenant"
    )


def test_more_tenants_than_models_share_them() -> None:
    dealt = workload(["a", "b"], "header:X-Customer", 3)
    assert dealt.models == ("a", "b", "a") and dealt.tenants == ("t000", "t001", "t002")
    assert dealt.header == "x-customer"


def test_the_name_rule_takes_the_tenant_from_the_models_folders() -> None:
    dealt = workload(["tenants/a/x.joblib", "tenants/b/y.joblib", "z.joblib"], "name:2", 0)
    assert dealt.tenants == ("tenants/a", "tenants/b", "default") and dealt.header == ""


@pytest.mark.parametrize(
    ("rule", "tenants", "message"),
    [
        ("token", 0, "header or name:N"),
        ("name:1", 3, "--tenants"),
        ("header", 0, "--tenants N"),
        ("", 3, "--tenant-from"),
    ],
)
def test_a_workload_that_cannot_be_sent_says_why(rule: str, tenants: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        workload(["a/b"], rule, tenants)


def row(tenant: str, status: int, latency_ms: float, warmup: bool = False) -> Row:
    error = "" if status == 200 else f"HTTP {status}"
    times = {"intended_s": 0.0, "sent_s": 0.0, "done_s": 1.0, "latency_ms": latency_ms}
    parts = {"queue_ms": 0.0, "download_ms": 0.0, "load_ms": 0.0, "infer_ms": 0.0}
    return Row(
        0,
        "m",
        **times,
        status=status,
        error=error,
        cache="hit",
        bytes_out=0,
        **parts,
        warmup=warmup,
        tenant=tenant,
    )


def test_each_tenants_figures_are_its_own_rows() -> None:
    rows = [
        *(row("t1", 200, ms) for ms in range(1, 101)),
        row("t1", 429, 0.5),
        row("t2", 200, 7.0),
        row("t2", 503, 1.0),
        row("t2", 503, 1.0),
        row("t2", 200, 1000.0, warmup=True),
    ]
    figures = tenant_summary(rows, duration_s=2.0)
    assert figures["t1"]["requests"] == 101 and figures["t1"]["throughput_rps"] == 50.0
    assert figures["t1"]["latency_ms"]["p50"] == pytest.approx(50.5)
    assert figures["t1"]["refused"] == {"429": 1}
    assert figures["t2"]["requests"] == 3 and figures["t2"]["latency_ms"]["p99"] == 7.0
    assert figures["t2"]["refused"] == {"503": 2}
