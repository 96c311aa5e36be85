"""What the server says at start about the pool it is asked for."""

from __future__ import annotations

from pathlib import Path

from modelhost.config import load_config
from modelhost.launch import copies_notices


def test_per_model_workers_above_the_pool_are_reported(tmp_path: Path) -> None:
    flags = {"workers": 2, "workers_per_model": 4, "max_workers_per_model": 3}
    notices = copies_notices(load_config(flags, {}, tmp_path), 2)
    assert notices == [
        "workers_per_model 4 is above the 2 workers: a model runs on at most 2; lower it or "
        "raise --workers",
        "max_workers_per_model 3 is above the 2 workers: a model runs on at most 2; lower it "
        "or raise --workers",
    ]


def test_per_model_workers_within_the_pool_say_nothing(tmp_path: Path) -> None:
    flags = {"workers": 4, "workers_per_model": 4, "max_workers_per_model": 0}
    assert copies_notices(load_config(flags, {}, tmp_path), 4) == []
