"""The memory and disk budgets in bytes on this machine, refused where it cannot hold them."""

from __future__ import annotations

from pathlib import Path

from modelhost.config.settings import Config
from modelhost.errors import ConfigError
from modelhost.resources import disk_size_bytes, free_disk_bytes, usable_memory_bytes
from modelhost.units import format_bytes


def memory_budget_bytes(config: Config) -> int:
    """Past usable memory, the kernel would kill a worker or swap before the cache evicts."""
    usable_bytes = usable_memory_bytes()
    budget_bytes = config.memory_budget_bytes.of(usable_bytes)
    if budget_bytes > usable_bytes:
        whole = "usable memory (RAM or cgroup limit)"
        raise _larger("--memory-budget", config.memory_budget, whole, usable_bytes)
    return budget_bytes


def disk_budget_bytes(config: Config, cache_dir: Path) -> int:
    """Past the volume's size, downloads would fail with the disk full before the cache evicts."""
    budget_bytes = config.disk_budget_bytes.of(free_disk_bytes(cache_dir))
    volume_bytes = disk_size_bytes(cache_dir)
    if budget_bytes > volume_bytes:
        raise _larger("--disk-budget", config.disk_budget, "cache_dir's volume", volume_bytes)
    return budget_bytes


def _larger(flag: str, value: str, whole: str, whole_bytes: int) -> ConfigError:
    return ConfigError(
        f"{flag} {value} is more than this machine's {whole}, {format_bytes(whole_bytes)}: set "
        f"{flag} at most {whole_bytes} (bytes), or a share such as 80%"
    )
