"""The host's models as the Open Inference Protocol sees them, for REST and gRPC alike."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from modelhost.errors import BadRequestBody, ModelAlreadyLoaded, ModelNotFound
from modelhost.host import ModelHost, State
from modelhost.host.listing import LOADED
from modelhost.host.sources import comes_from
from modelhost.names import OIP_VERSION as MODEL_VERSION
from modelhost.protocols.repository import PAGE_NAMES, index_pages
from modelhost.protocols.triton_config import model_config
from modelhost.urls import redact_url

Counters = Callable[[str], dict[str, Any]]  # a model's request counters, by name
DURATIONS = (
    *("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"),
    *("cache_hit", "cache_miss"),
)


class OipModels:
    """Answers about the host's models in the protocol's terms."""

    def __init__(self, host: ModelHost) -> None:
        self.host = host

    def held(self, name: str, version: str) -> str:
        """The name the host holds `version` of `name` under ("": the default)."""
        if self.host.versions_of(name) is not None:
            return self.host.name_of(name, version) if version else self.host.resolve(name)
        if version not in ("", MODEL_VERSION):
            raise ModelNotFound(
                f"model {name} has one version, {MODEL_VERSION}; leave the version out or ask "
                "for it"
            )
        return name

    async def exists(self, name: str) -> bool:
        return await self.host.exists(name)

    async def load(self, name: str, url: str | None) -> None:
        """Load the default version from the store, or from `url`; a loaded model stays."""
        held = self.host.resolve(name)
        if self.state(held) is State.LOADED:
            if url is not None and not comes_from(self.host, held, url):
                raise ModelAlreadyLoaded(
                    f"model {name} is loaded from {redact_url(self.host.source_of(held))}; unload "
                    f"it first (POST /v2/repository/models/{name}/unload, or gRPC's "
                    f"RepositoryModelUnload) to load it from {redact_url(url)}"
                )
            return
        if url is None:
            await self.host.load(self.host.resolve(name))
        else:
            await self.host.register_and_load(name, url)

    async def unload(self, name: str) -> None:
        """Unload the default version after its in-flight requests finish."""
        held = self.host.resolve(name)
        if self.state(held) is State.LOADED:
            await self.host.unload(held)

    def state(self, name: str) -> State | None:
        return self.host.state_of(name)

    def metadata(self, name: str, held: str) -> dict[str, Any]:
        """Its inputs and outputs as its last load told."""
        versions = self.host.versions_of(name)
        signature = self.host.signature_of(held)
        return {
            "name": name,
            "versions": list(versions.names) if versions else [MODEL_VERSION],
            "platform": "modelhost",
            "inputs": [spec.described() for spec in signature.inputs],
            "outputs": [spec.described() for spec in signature.outputs],
        }

    def config(self, name: str, held: str) -> dict[str, Any]:
        """Triton's model configuration."""
        schedule = self.host.schedule_of(held)
        delay_ms = schedule.max_batch_delay_ms if schedule.batch_size > 1 else None
        told = self.metadata(name, held)
        max_rows = self.host.manifests.max_rows
        return model_config(name, told["inputs"], told["outputs"], max_rows, delay_ms)

    def statistics(self, name: str, counters: Counters) -> dict[str, Any]:
        """Triton's statistics of a model."""
        counts = counters(name)
        succeeded, failed = counts["requests"] - counts["errors"], counts["errors"]
        last_used = self.host.model_statistics(name).last_used
        model, version = self.version_held(name)
        return {
            "name": model,
            "version": version,
            "last_inference": round(last_used * 1000) if last_used else 0,
            "inference_count": succeeded,
            "execution_count": succeeded,  # one a request
            "inference_stats": _durations(succeeded, failed, counts["totalMs"]),
            "batch_stats": [],
            "memory_usage": [],
        }

    def every_statistics(self, counters: Counters) -> list[dict[str, Any]]:
        """The statistics of every loaded model."""
        stats, after = [], ""
        while names := self.host.model_names().page(after, PAGE_NAMES, (LOADED,)):
            stats += [self.statistics(name, counters) for name in names]
            after = names[-1]
        return stats

    def version_held(self, name: str) -> tuple[str, str]:
        return self.host.owner_of(name) or (name, MODEL_VERSION)

    def index(self, ready_only: bool) -> AsyncIterator[list[dict[str, str]]]:
        """Triton's repository index, a page of entries at a time."""
        return index_pages(self.host, ready_only)


def _durations(succeeded: int, failed: int, total_ms: dict[str, float]) -> dict[str, Any]:
    """Triton's count and ns of each part; perf_analyzer needs the compute counts equal."""
    ns = {name: round(ms * 1e6) for name, ms in total_ms.items()}
    durations = {part: {"count": 0, "ns": 0} for part in DURATIONS}
    durations["success"] = {"count": succeeded, "ns": ns["succeeded"]}
    durations["fail"] = {"count": failed, "ns": ns["failed"]}
    durations["queue"] = {"count": succeeded, "ns": ns["queue"]}
    durations["compute_infer"] = {"count": succeeded, "ns": ns["infer"]}
    for part in ("compute_input", "compute_output"):  # timed within compute_infer
        durations[part]["count"] = succeeded
    return durations


def check_load_parameters(names: Iterable[str]) -> None:
    """Refuse Triton's uploaded files and configuration, which modelhost would not apply."""
    names = list(names)
    for name in names:
        if name.startswith("file:"):
            raise BadRequestBody(
                f"parameter {name}: modelhost takes no uploaded model files; put the artifact "
                "in the model store, or name its URL in parameters.url"
            )
    if "config" in names:
        raise BadRequestBody(
            "parameter config: modelhost applies no Triton model configuration (a model's is "
            "built from its metadata); leave it out, and declare inputs and outputs in the "
            "model's modelhost.toml"
        )


def missing(name: str) -> str:
    return (
        f"model {name} is neither loaded nor registered nor in the model store; check the "
        "name (POST /v2/repository/index lists the models known)"
    )
