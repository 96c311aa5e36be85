"""Hostile inputs against a real server: refused at the HTTP layer, and the server, its worker
and its caches are as they were."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

ROW = json.dumps(testing.iris_rows(1)[0])
JSON = {"content-type": "application/json"}


def files_in(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file())


def test_registering_the_name_dotdot_is_refused_and_the_cache_keeps_its_artifacts(
    client: httpx.Client, store: Path, cache_dir: Path
) -> None:
    archive = "/models/archives/m.tar.gz/invoke"  # an archive: unpacked into the disk tier
    assert client.post(archive, content=f"[{ROW}]", headers=JSON).status_code == 200
    cached = files_in(cache_dir)
    assert cached
    for name in ("..", ".", "../..", "/"):
        spec = {"model_name": name, "url": f"{store}/archives/m.tar.gz"}
        response = client.post("/models", json=spec)
        assert response.status_code == 400, response.text
        assert "a valid name is a relative path" in response.json()["message"]
        assert client.delete(f"/models/{name}").status_code in (400, 404, 405)
    assert files_in(cache_dir) == cached
    again = client.post(archive, content=f"[{ROW}]", headers=JSON)
    assert again.status_code == 200 and again.headers["x-modelhost-cache"] == "hit"
