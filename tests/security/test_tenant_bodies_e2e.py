"""A tenant's flood of large bodies at its slow model does not take another tenant's memory.

The bodies wait in the frontend for the model's one worker. Held without bound, sixty of
6 MiB grew the frontend past its allowance into the models' memory: the quiet tenant's models,
guaranteed by `memory_min`, were evicted and answered 507 on their reload.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest
from helpers.loopback import wait_for

from modelhost import testing
from modelhost.testing.handlers import slow_handler_folder

pytestmark = pytest.mark.e2e

FLOOD = 60
BODY = b'{"x": "' + b"a" * (6 * 2**20 - 2048) + b'"}'  # under --max-request-size
QUIET = ("quiet/f0.joblib", "quiet/f1.joblib")
JSON = {"content-type": "application/json"}


def flood(url: str, statuses: Counter[int]) -> list[threading.Thread]:
    def send() -> None:
        answer = httpx.post(f"{url}/models/noisy/slow/invoke", content=BODY, timeout=120)
        statuses[answer.status_code] += 1

    threads = [threading.Thread(target=send) for _ in range(FLOOD)]
    for thread in threads:
        thread.start()
    return threads


def test_a_tenants_flood_of_large_bodies_leaves_the_others_models_loaded(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    slow_handler_folder(store / "noisy/slow", sleep_s_param=False, fixed_sleep_s=0.2)
    for seed, name in enumerate(QUIET):
        testing.random_forest(store / name, target_bytes=20 << 20, seed=seed)
    (tmp_path / "tenants.toml").write_text('[tenants."quiet"]\nmemory_min = "150MiB"\n')
    args = testing.serve_args(
        store,
        tmp_path / "cache",
        workers=1,
        memory_budget="500MiB",
        tenant_from="name:1",
        tenants_file=str(tmp_path / "tenants.toml"),
    )
    rows = json.dumps(testing.digits_rows(1))
    with testing.RunningServer(args, tmp_path) as server:
        for name in QUIET:
            answer = httpx.post(f"{server.url}/models/{name}/invoke", content=rows, headers=JSON)
            assert answer.status_code == 200, answer.text
        statuses: Counter[int] = Counter()
        threads = flood(server.url, statuses)
        wait_for(lambda: sum(statuses.values()) >= FLOOD // 2, "half the flood answered", 60)
        for name in QUIET:  # while the rest wait
            hit = httpx.post(f"{server.url}/models/{name}/invoke", content=rows, headers=JSON)
            assert (hit.status_code, hit.headers.get("x-modelhost-cache")) == (200, "hit"), hit.text
        for thread in threads:
            thread.join(120)
        evicted = [e["model"] for e in server.events("evict") if e["model"] in QUIET]
        assert not evicted, (evicted, statuses)
        assert statuses[429] and statuses[200], statuses
        assert "Traceback" not in server.log_text()
