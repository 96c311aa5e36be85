"""What the server says at start about the pool it is asked for."""

from __future__ import annotations

from pathlib import Path

from modelhost.config import load_config
from modelhost.launch import pool_notices
from modelhost.resources import usable_cores


def test_per_model_workers_above_the_pool_are_reported(tmp_path: Path) -> None:
    flags = {"workers": 2, "workers_per_model": 4, "max_workers_per_model": 3}
    notices = pool_notices(load_config(flags, {}, tmp_path), 2)
    assert notices == [
        "workers_per_model 4 is above the 2 workers: a model runs on at most 2; lower it or "
        "raise --workers",
        "max_workers_per_model 3 is above the 2 workers: a model runs on at most 2; lower it "
        "or raise --workers",
    ]


def test_per_model_workers_within_the_pool_say_nothing(tmp_path: Path) -> None:
    flags = {"workers": 4, "workers_per_model": 4, "max_workers_per_model": 0}
    assert pool_notices(load_config(flags, {}, tmp_path), 4) == []


def test_threads_above_the_cores_are_reported(tmp_path: Path) -> None:
    cores = usable_cores()
    config = load_config({"workers": 1, "threads_per_worker": 1_000_000}, {}, tmp_path)
    assert pool_notices(config, 1) == [
        f"threads_per_worker 1000000 is above the {cores} usable cores: each worker runs up to "
        f"1000000 batches at once, its runtimes on {cores} threads"
    ]
    within = load_config({"workers": 1, "threads_per_worker": cores}, {}, tmp_path)
    assert pool_notices(within, 1) == []
