"""Fast copies with real workers: a model's second load reads the plain pickle its first load
wrote, answers as the artifact does, and an artifact replaced in place is never answered by the
copy of its old version."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import joblib
import pytest
from sklearn.datasets import load_iris
from sklearn.tree import DecisionTreeClassifier

from modelhost import testing

pytestmark = pytest.mark.e2e

ROWS = load_iris().data[::25].tolist()  # rows of all three classes


def predictions(path: Path) -> list[int]:
    return [int(label) for label in joblib.load(path).predict(ROWS)]


def reload(server: testing.RunningServer, name: str) -> list[int]:
    """Unload `name` if loaded, then invoke it (a load); its predictions."""
    httpx.delete(f"{server.url}/models/{name}")
    response = httpx.post(f"{server.url}/models/{name}/invoke", json=ROWS)
    assert response.status_code == 200, response.text
    return [int(label) for label in response.json()["predictions"]]


def fast_copy_words(log: str, name: str) -> list[str | None]:
    """What each load event of `name` says of its fast copy, in order."""
    events = [json.loads(line) for line in log.splitlines() if line.startswith('{"kind":"load"')]
    return [(e.get("detail") or {}).get("fast_copy") for e in events if e["model"] == name]


def test_reload_reads_the_copy(
    tmp_path: Path,
) -> None:
    """A reload reads the copy and a replaced artifact is never answered by it."""
    store, cache_dir = tmp_path / "store", tmp_path / "cache"
    artifact = testing.iris_logreg(store / "m.joblib")
    first = predictions(artifact)
    with testing.RunningServer(testing.serve_args(store, cache_dir, workers=1), tmp_path) as server:
        for _ in range(3):  # the second load writes the copy, the third reads it
            assert reload(server, "m.joblib") == first
        data = load_iris()
        testing.dump(DecisionTreeClassifier(max_depth=1).fit(data.data, data.target), artifact)
        replaced = predictions(artifact)
        assert replaced != first  # a stump cannot tell three classes apart
        assert reload(server, "m.joblib") == replaced
        assert reload(server, "m.joblib") == replaced
        copies = list((cache_dir / "fast-copies").iterdir())
        log = server.log_text()
    assert fast_copy_words(log, "m.joblib") == [None, "written", "read", "written", "read"]
    assert len(copies) == 1  # the old version's copy was deleted
