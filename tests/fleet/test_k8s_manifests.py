"""The Kubernetes base validates offline against a current Kubernetes's schemas, and its numbers
agree with each other: budgets with limits, the grace period with the drain, probes with /ping."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from modelhost.cache.memory import MemoryBudget, MemoryTier
from modelhost.cache.policy import LRUPolicy
from modelhost.config import Config
from modelhost.host.sizing import Sizing
from modelhost.observe.metrics import Metrics
from modelhost.observe.sizing_series import sizing_families
from modelhost.records.events import EventLog
from modelhost.testing import StepClock
from modelhost.units import parse_size

kubernetes_validate = pytest.importorskip("kubernetes_validate")

BASE = Path(__file__).parents[2] / "deploy" / "k8s" / "base"
KUBERNETES = "1.37.0"
CUSTOM = {("monitoring.coreos.com/v1", "ServiceMonitor")}  # CRDs: no schema in Kubernetes's own


def resources() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    listed = kustomization["resources"]
    assert sorted(listed) == sorted(
        p.name for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml"
    )
    return [doc for name in listed for doc in yaml.safe_load_all((BASE / name).read_text())]


def by_kind(kind: str, name: str = "modelhost") -> dict[str, Any]:
    (found,) = [r for r in resources() if r["kind"] == kind and r["metadata"]["name"] == name]
    return found


def builtin() -> list[dict[str, Any]]:
    """The resources Kubernetes itself defines; the ServiceMonitor is checked field by field
    below (the operator's CRD, for which Kubernetes publishes no schema)."""
    return [r for r in resources() if (r["apiVersion"], r["kind"]) not in CUSTOM]


@pytest.mark.parametrize("resource", builtin(), ids=lambda r: r["kind"])
def test_each_resource_validates_strictly(resource: dict[str, Any]) -> None:
    kubernetes_validate.validate(resource, KUBERNETES, strict=True)


def container() -> dict[str, Any]:
    (only,) = by_kind("Deployment")["spec"]["template"]["spec"]["containers"]
    return only


def flag(name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in container()["args"] if a.startswith(f"--{name}=")]
    return value


def quantity(text: str) -> int:
    number, unit = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)?", text).groups()  # type: ignore[union-attr]
    return int(number) * {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}[unit]


def test_every_flag_is_a_setting() -> None:
    names = {f"--{n.replace('_', '-')}" for n in Config.__dataclass_fields__}
    assert {a.split("=")[0] for a in container()["args"][1:]} <= names


def test_memory_budget_is_share_of_limit() -> None:
    """Memory budget is a share of the limit the request equals."""
    resources_ = container()["resources"]
    assert resources_["requests"] == resources_["limits"]  # Guaranteed: evicted last
    assert flag("memory-budget").endswith("%")  # of the cgroup limit, which modelhost reads


def test_disk_budget_fits_the_cache_volume() -> None:
    (volume,) = by_kind("Deployment")["spec"]["template"]["spec"]["volumes"]
    mount = container()["volumeMounts"][0]
    assert mount["name"] == volume["name"] and flag("cache-dir") == mount["mountPath"]
    assert parse_size(flag("disk-budget")) < quantity(volume["emptyDir"]["sizeLimit"])


def test_grace_period_covers_sleep_and_drain() -> None:
    """The grace period covers the preStop sleep and the drain."""
    spec = by_kind("Deployment")["spec"]["template"]["spec"]
    sleep_s = container()["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert spec["terminationGracePeriodSeconds"] > sleep_s + float(flag("drain-timeout-s"))


def test_probes_ping_and_ingress_hashes_model() -> None:
    """Probes ask /ping and the ingress hashes on the model."""
    for probe in ("readinessProbe", "livenessProbe"):
        assert container()[probe]["httpGet"]["path"] == "/ping"
    annotations = by_kind("Ingress")["metadata"]["annotations"]
    key = annotations["nginx.ingress.kubernetes.io/upstream-hash-by"]
    assert "$http_x_amzn_sagemaker_target_model" in key and "$uri" in key


def test_grpc_reaches_the_pods_port_hashed_on_the_model() -> None:
    """The gRPC ingress speaks gRPC to the Service's grpc port, which is the container's
    --grpc-port, and hashes on the metadata ModelMesh's clients name the model in."""
    ingress = by_kind("Ingress", "modelhost-grpc")
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/backend-protocol"] == "GRPC"
    key = annotations["nginx.ingress.kubernetes.io/upstream-hash-by"]
    assert "$http_mm_vmodel_id" in key and "$http_mm_model_id" in key
    (rule,) = ingress["spec"]["rules"]
    assert rule["http"]["paths"][0]["backend"]["service"]["port"]["name"] == "grpc"
    (port,) = [p for p in by_kind("Service")["spec"]["ports"] if p["name"] == "grpc"]
    (container_port,) = [p for p in container()["ports"] if p["name"] == port["targetPort"]]
    assert f"--grpc-port={container_port['containerPort']}" in container()["args"]


def window_s(probe: dict[str, Any]) -> int:
    """How long a probe lets /ping fail before it acts (Kubernetes's defaults where unset)."""
    period, threshold = probe.get("periodSeconds", 10), probe.get("failureThreshold", 3)
    return int(probe.get("initialDelaySeconds", 0) + period * threshold)


def test_starting_pod_gets_longer() -> None:
    """A starting pod is given longer than a running one.

    The startupProbe holds the liveness probe off while a large warm cache is read, and asks
    as often as the readiness probe, so a quick start is not kept out of service."""
    startup, liveness = container()["startupProbe"], container()["livenessProbe"]
    assert startup["httpGet"] == liveness["httpGet"] == {"path": "/ping", "port": "http"}
    assert window_s(startup) > window_s(liveness)
    assert startup["periodSeconds"] <= container()["readinessProbe"]["periodSeconds"]
    assert "initialDelaySeconds" not in liveness  # the startupProbe already waits for the start


def test_the_monitor_and_the_autoscaler_point_at_modelhost() -> None:
    service = by_kind("Service")
    monitor = by_kind("ServiceMonitor")["spec"]
    assert monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    hpa = by_kind("HorizontalPodAutoscaler")["spec"]
    assert hpa["scaleTargetRef"]["name"] == by_kind("Deployment")["metadata"]["name"]


def served_series() -> set[tuple[str, frozenset[tuple[str, str]]]]:
    """Every (name, labels) a pod's /metrics serves: the frontend's metrics and, from a host with
    a curve, the sizing families."""
    registry = CollectorRegistry()
    Metrics(registry)
    clock = StepClock()
    sizing = Sizing(MemoryTier(MemoryBudget(2**30, 2**28), LRUPolicy(), clock), EventLog(), clock)
    for i in range(1000):  # 7 first uses in 1000: 95% of hits is in reach
        sizing.used(f"m{i % 7}", 2**20, hit=i >= 7)
    families = [*registry.collect(), *sizing_families(sizing.statistics())]
    return {(s.name, frozenset(s.labels.items())) for f in families for s in f.samples}


def test_the_autoscaler_scales_on_series_every_pod_serves() -> None:
    served = served_series()
    for metric in by_kind("HorizontalPodAutoscaler")["spec"]["metrics"]:
        wanted = metric["pods"]["metric"]
        labels = wanted.get("selector", {}).get("matchLabels", {})
        assert any(name == wanted["name"] and set(labels.items()) <= got for name, got in served), (
            wanted
        )


def test_instances_needed_is_absent_until_known() -> None:
    """Not 0 while unknown: 0 would ask the HPA to scale down, and a missing metric stops it."""
    clock = StepClock()
    sizing = Sizing(MemoryTier(MemoryBudget(2**30, 2**28), LRUPolicy(), clock), EventLog(), clock)
    for i in range(20):  # every request a name's first: no budget reaches 95% of hits
        assert not instances_needed(sizing)
        sizing.used(f"m{i}", 2**20, hit=False)
    assert not instances_needed(sizing)
    for i in range(1000):
        sizing.used(f"m{i % 7}", 2**20, hit=True)
    assert instances_needed(sizing)


def instances_needed(sizing: Sizing) -> list[float]:
    families = sizing_families(sizing.statistics())
    needed = next(f for f in families if f.name == "modelhost_instances_needed")
    return [sample.value for sample in needed.samples]


def test_adapter_has_a_rule_per_metric() -> None:
    """The adapter has a rule for each metric the autoscaler reads."""
    values = yaml.safe_load((BASE.parent / "prometheus-adapter" / "values.yaml").read_text())
    queried = {rule["seriesQuery"].partition("{")[0] for rule in values["rules"]["custom"]}
    read = {
        m["pods"]["metric"]["name"] for m in by_kind("HorizontalPodAutoscaler")["spec"]["metrics"]
    }
    assert read <= queried
    served = {name for name, _ in served_series()}
    assert queried <= served


def test_strict_validation_would_catch_a_misspelt_field() -> None:
    broken = by_kind("Deployment")
    broken["spec"]["template"]["spec"]["terminationGracePeriod"] = 35
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)
