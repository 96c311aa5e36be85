"""The tenants file on a running server: a good change is taken, a bad one leaves the last good."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from modelhost.config.tenant_policies import TenantPolicies, TenantPolicy
from modelhost.config.tenants_reload import TenantsFileWatcher
from modelhost.errors import ConfigError
from modelhost.records.events import EventLog

GIB = 2**30


def write(path: Path, text: str) -> None:
    """Replace the file as an editor does, so its stamp changes whatever the clock's grain."""
    staged = path.with_suffix(".new")
    staged.write_text(text)
    os.replace(staged, path)


def watcher(tmp_path: Path, text: str) -> tuple[TenantsFileWatcher, EventLog, Path]:
    path, events = tmp_path / "tenants.toml", EventLog()
    write(path, text)
    watching = TenantsFileWatcher(str(path), events.emit)
    watching.open_within(GIB, GIB)
    return watching, events, path


def kinds(events: EventLog) -> list[str]:
    return [event.kind for event in events.recent]


def test_a_changed_file_replaces_the_policies(tmp_path: Path) -> None:
    watching, events, path = watcher(tmp_path, '[tenants."a"]\nrate = 5\n')
    get = watching.get
    assert get().of("a").rate == 5
    write(path, '[tenants."a"]\nrate = 1\n[tenants."b"]\nweight = 3\n')
    asyncio.run(watching.poll())
    assert get().of("a").rate == 1 and get().of("b") == TenantPolicy(weight=3)
    loaded = [e for e in events.recent if e.kind == "tenants_file_loaded"]
    assert [e.detail["tenants"] for e in loaded] == [1, 2]


def test_a_bad_change_keeps_the_last_good_policies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    watching, events, path = watcher(tmp_path, '[tenants."a"]\nrate = 5\n')
    good = watching.current
    write(path, '[tenants."a"]\nrate = 5\nwieght = 2\n')
    asyncio.run(watching.poll())
    assert watching.current is good
    rejected = events.recent[-1]
    assert rejected.kind == "tenants_file_rejected"
    assert "line 3: unknown key wieght" in rejected.detail["error"]
    assert "line 3: unknown key wieght" in caplog.text


def test_an_unchanged_file_is_not_read_again(tmp_path: Path) -> None:
    watching, events, _ = watcher(tmp_path, "[default]\nweight = 2\n")
    asyncio.run(watching.poll())
    assert kinds(events) == ["tenants_file_loaded"]


def test_a_removed_file_is_refused_once_and_taken_back(tmp_path: Path) -> None:
    watching, events, path = watcher(tmp_path, "[default]\nweight = 2\n")
    path.unlink()
    asyncio.run(watching.poll())
    asyncio.run(watching.poll())
    assert watching.current.default.weight == 2
    write(path, "[default]\nweight = 3\n")
    asyncio.run(watching.poll())
    assert watching.current.default.weight == 3
    assert kinds(events) == ["tenants_file_loaded", "tenants_file_rejected", "tenants_file_loaded"]


def test_a_bad_file_at_start_raises(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="line 1: not valid TOML"):
        watcher(tmp_path, "[default\n")


def test_without_a_file_the_policies_are_the_defaults(tmp_path: Path) -> None:
    watching = TenantsFileWatcher("", EventLog().emit)
    watching.open_within(GIB, GIB)
    assert watching.get() == TenantPolicies()

    async def run() -> None:
        async with watching.watching():
            pass

    asyncio.run(run())


def test_watching_takes_a_change_without_being_asked(tmp_path: Path) -> None:
    path, events = tmp_path / "tenants.toml", EventLog()
    write(path, "[default]\nweight = 2\n")
    watching = TenantsFileWatcher(str(path), events.emit, interval_s=0.01)
    watching.open_within(GIB, GIB)

    async def run() -> float:
        async with watching.watching():
            write(path, "[default]\nweight = 5\n")
            for _ in range(1000):
                if watching.current.default.weight != 2:
                    break
                await asyncio.sleep(0.01)
        return watching.current.default.weight

    assert asyncio.run(run()) == 5


def test_a_mounted_secret_s_swap_is_taken(tmp_path: Path) -> None:
    """Kubernetes updates a mounted file by pointing a `..data` link at a new folder: the path
    the server reads is a link whose target changes, not the file it names."""
    first, second = tmp_path / "v1", tmp_path / "v2"
    for folder, weight in ((first, 2), (second, 3)):
        folder.mkdir()
        (folder / "tenants.toml").write_text(f"[default]\nweight = {weight}\n")
    (tmp_path / "..data").symlink_to(first)
    (tmp_path / "tenants.toml").symlink_to(tmp_path / "..data" / "tenants.toml")
    watching = TenantsFileWatcher(str(tmp_path / "tenants.toml"), EventLog().emit)
    watching.open_within(GIB, GIB)
    (tmp_path / "..data.new").symlink_to(second)
    os.replace(tmp_path / "..data.new", tmp_path / "..data")
    asyncio.run(watching.poll())
    assert watching.current.default.weight == 3
