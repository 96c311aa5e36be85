"""S3 (moto in server mode) and HTTP stores: download on first use, a disk cache that never holds a
half-written artifact, and a clear status for every way a network store fails."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.serving import Servers
from helpers.stores import MotoServer, StaticHttpServer, TcpProxy

from modelhost import testing
from modelhost.observe.exchange import parse_server_timing

pytestmark = pytest.mark.e2e

BUCKET = "models"
PREFIX = "mme"
ROW = testing.iris_rows(1)[0]
DIGITS_ROW = testing.digits_rows(1)[0]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("artifacts")
    testing.iris_logreg(root / "iris.joblib")
    testing.tar_gz_of(testing.mms_handler_folder(root / ".src/tar"), root / "model.tar.gz")
    testing.zip_of(testing.sagemaker_folder(root / ".src/zip"), root / "model.zip")
    testing.random_forest(root / "forest.joblib", 4 * 2**20)
    return root


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        server.client().create_bucket(Bucket=BUCKET)
        yield server


@pytest.fixture(scope="module")
def proxy(moto: MotoServer) -> Iterator[TcpProxy]:
    with TcpProxy(moto.port) as running:
        yield running


def healed(proxy: TcpProxy) -> Iterator[TcpProxy]:
    proxy.heal()
    yield proxy
    proxy.heal()


@pytest.fixture
def healthy_proxy(proxy: TcpProxy) -> Iterator[TcpProxy]:
    yield from healed(proxy)


def upload(moto: MotoServer, source: Path, key: str) -> int:
    moto.client().upload_file(str(source), BUCKET, f"{PREFIX}/{key}")
    return source.stat().st_size


@pytest.fixture(scope="module")
def http_store(artifacts: Path) -> Iterator[StaticHttpServer]:
    with StaticHttpServer(artifacts) as server:
        yield server


@pytest.fixture(scope="module")
def server(
    moto: MotoServer, proxy: TcpProxy, http_store: StaticHttpServer, serve: Servers
) -> testing.RunningServer:
    return serve(
        f"s3://{BUCKET}/{PREFIX}",
        env=env_for(moto, proxy.url),
        workers=1,
        disk_budget="12MiB",
        store_timeout_s=1,
        store_attempts=2,
        allowed_urls=f"s3://{BUCKET}/{PREFIX}/*,{http_store.url}/*",
    )


def env_for(moto: MotoServer, endpoint: str) -> dict[str, str]:
    return {**os.environ, **moto.client_env(endpoint)}


def invoke(url: str, model: str) -> httpx.Response:
    row = DIGITS_ROW if "forest" in model or model.startswith("f") else ROW
    return httpx.post(f"{url}/models/{model}/invoke", json=[row], timeout=30)


def timings(response: httpx.Response) -> dict[str, float]:
    return parse_server_timing(response.headers["server-timing"])


def events(url: str, model: str, kind: str) -> list[dict[str, Any]]:
    described = httpx.get(f"{url}/models/{model}").json()
    return [event for event in described["events"] if event["kind"] == kind]


def logged(server: testing.RunningServer, model: str, kind: str) -> list[dict[str, Any]]:
    """Events of one kind for one model, from the server's log (whatever the model's state)."""
    records = (json.loads(line) for line in server.log_text().splitlines() if '"kind"' in line)
    return [r for r in records if r.get("model") == model and r["kind"] == kind]


def cache_of(server: testing.RunningServer) -> Path:
    return Path(server.argv[server.argv.index("--cache-dir") + 1])


def entries(cache_dir: Path) -> list[str]:
    return sorted(p.name for p in (cache_dir / "models").iterdir())


def test_first_invocation_downloads_and_the_next_is_a_hit(
    server: testing.RunningServer, moto: MotoServer, artifacts: Path, healthy_proxy: TcpProxy
) -> None:
    size = upload(moto, artifacts / "iris.joblib", "tenants/a.joblib")
    first = invoke(server.url, "tenants/a.joblib")
    second = invoke(server.url, "tenants/a.joblib")
    assert first.status_code == 200, first.text
    assert first.headers["x-modelhost-cache"] == "remote" and timings(first)["download"] > 0
    assert second.headers["x-modelhost-cache"] == "hit" and timings(second)["download"] == 0
    assert second.json() == first.json()
    [download] = events(server.url, "tenants/a.joblib", "download")
    assert download["bytes"] == size and download["detail"]["bytes_per_s"] > 0
    assert download["detail"]["url"] == f"s3://{BUCKET}/{PREFIX}/tenants/a.joblib"


@pytest.mark.parametrize("archive", ["model.tar.gz", "model.zip"])
def test_archives_from_s3_are_unpacked_and_served(
    server: testing.RunningServer,
    moto: MotoServer,
    artifacts: Path,
    healthy_proxy: TcpProxy,
    archive: str,
) -> None:
    upload(moto, artifacts / archive, f"archives/{archive}")
    response = invoke(server.url, f"archives/{archive}")
    assert response.status_code == 200, response.text
    assert response.headers["x-modelhost-cache"] == "remote"
    assert len(events(server.url, f"archives/{archive}", "unpack")) == 1


def test_concurrent_first_requests_share_one_download(
    server: testing.RunningServer, moto: MotoServer, artifacts: Path, healthy_proxy: TcpProxy
) -> None:
    upload(moto, artifacts / "forest.joblib", "crowd/forest.joblib")
    with ThreadPoolExecutor(16) as pool:
        responses = list(pool.map(lambda _: invoke(server.url, "crowd/forest.joblib"), range(16)))
    assert [r.status_code for r in responses] == [200] * 16
    assert len(events(server.url, "crowd/forest.joblib", "download")) == 1


def test_missing_object_is_404(
    server: testing.RunningServer, moto: MotoServer, artifacts: Path, healthy_proxy: TcpProxy
) -> None:
    """A missing object is 404 and a deleted one is served from the cache."""
    missing = invoke(server.url, "tenants/never-uploaded.joblib")
    assert missing.status_code == 404 and missing.json()["type"] == "ModelNotFound"
    upload(moto, artifacts / "iris.joblib", "tenants/deleted.joblib")
    assert invoke(server.url, "tenants/deleted.joblib").status_code == 200
    moto.client().delete_object(Bucket=BUCKET, Key=f"{PREFIX}/tenants/deleted.joblib")
    assert httpx.delete(f"{server.url}/models/tenants/deleted.joblib").status_code == 200
    again = invoke(server.url, "tenants/deleted.joblib")
    assert again.status_code == 200 and again.headers["x-modelhost-cache"] == "disk"


def test_store_dying_mid_download_leaves_nothing(
    server: testing.RunningServer,
    moto: MotoServer,
    artifacts: Path,
    healthy_proxy: TcpProxy,
    tmp_path: Path,
) -> None:
    """A store that dies mid-download leaves nothing and a retry succeeds."""
    upload(moto, artifacts / "forest.joblib", "cut/forest.joblib")
    healthy_proxy.cut_after(2**20)
    failed = invoke(server.url, "cut/forest.joblib")
    assert failed.status_code == 502, failed.text
    assert failed.json()["type"] == "StoreUnavailable"
    assert "gave up after 2 tries" in failed.json()["message"]
    assert not [name for name in entries(cache_of(server)) if name.startswith((".tmp-", "cut"))]
    healthy_proxy.heal()
    response = invoke(server.url, "cut/forest.joblib")
    assert response.status_code == 200 and response.headers["x-modelhost-cache"] == "remote"


def test_store_down_is_502(
    server: testing.RunningServer, moto: MotoServer, artifacts: Path, healthy_proxy: TcpProxy
) -> None:
    """A store that is down is 502 and other models carry on."""
    upload(moto, artifacts / "iris.joblib", "tenants/warm.joblib")
    upload(moto, artifacts / "iris.joblib", "tenants/cold.joblib")
    assert invoke(server.url, "tenants/warm.joblib").status_code == 200
    healthy_proxy.refuse()
    cold = invoke(server.url, "tenants/cold.joblib")
    assert cold.status_code == 502 and "cannot reach the store" in cold.json()["message"]
    assert "check that the store is up" in cold.json()["message"]
    assert invoke(server.url, "tenants/warm.joblib").status_code == 200


def test_a_stalled_store_is_504_within_the_store_timeout(
    server: testing.RunningServer, moto: MotoServer, artifacts: Path, healthy_proxy: TcpProxy
) -> None:
    upload(moto, artifacts / "iris.joblib", "tenants/stalled.joblib")
    healthy_proxy.stall()
    response = invoke(server.url, "tenants/stalled.joblib")
    assert response.status_code == 504, response.text
    assert response.json()["type"] == "StoreTimeout"
    assert "raise --store-timeout-s" in response.json()["message"]


def test_each_try_of_a_refusing_store_is_one_connection(
    server: testing.RunningServer, moto: MotoServer, artifacts: Path, healthy_proxy: TcpProxy
) -> None:
    """--store-attempts counts the tries: botocore must not try each of them again itself."""
    upload(moto, artifacts / "iris.joblib", "tenants/refused.joblib")
    healthy_proxy.refuse()
    before = healthy_proxy.accepted
    response = invoke(server.url, "tenants/refused.joblib")
    assert response.status_code == 502, response.text
    assert "gave up after 2 tries" in response.json()["message"]
    assert healthy_proxy.accepted - before == 2  # store_attempts


def test_artifact_over_disk_budget_is_507(
    server: testing.RunningServer, moto: MotoServer, tmp_path: Path, healthy_proxy: TcpProxy
) -> None:
    """An artifact larger than the disk budget is 507 before downloading."""
    big = tmp_path / "big.joblib"
    big.write_bytes(b"\0" * 13 * 2**20)
    upload(moto, big, "big.joblib")
    response = invoke(server.url, "big.joblib")
    assert response.status_code == 507
    assert "13.0 MiB" in response.json()["message"] and "12.0 MiB" in response.json()["message"]
    assert "big.joblib" not in entries(cache_of(server))


def test_post_models_loads_only_from_allowed_urls(
    server: testing.RunningServer,
    moto: MotoServer,
    artifacts: Path,
    http_store: StaticHttpServer,
    healthy_proxy: TcpProxy,
) -> None:
    upload(moto, artifacts / "iris.joblib", "tenants/b.joblib")

    def load(name: str, url: str) -> httpx.Response:
        return httpx.post(f"{server.url}/models", json={"model_name": name, "url": url})

    refused = load("other", "s3://another-bucket/m.joblib")
    assert refused.status_code == 403
    assert f"s3://{BUCKET}/{PREFIX}/*" in refused.json()["message"]
    assert load("escape", f"s3://{BUCKET}/{PREFIX}/../secret.joblib").status_code == 400
    assert load("local", "/etc/passwd").status_code == 403
    assert load("by-url", f"s3://{BUCKET}/{PREFIX}/tenants/b.joblib").status_code == 200
    assert load("from-http", f"{http_store.url}/iris.joblib").status_code == 200
    for name in ("by-url", "from-http"):
        response = httpx.post(f"{server.url}/models/{name}/invoke", json=[ROW])
        assert response.status_code == 200 and response.headers["x-modelhost-cache"] == "hit"


def test_wrong_credentials_are_502_with_the_stores_words(artifacts: Path, tmp_path: Path) -> None:
    with MotoServer(enforce_auth=True) as strict:
        args = testing.serve_args(f"s3://{BUCKET}/{PREFIX}", tmp_path / "cache", workers=1)
        with testing.RunningServer(args, tmp_path, env=env_for(strict, strict.url)) as server:
            response = invoke(server.url, "tenants/a.joblib")
    assert response.status_code == 502, response.text
    message = response.json()["message"]
    assert "the store refused" in message and "check the AWS credentials" in message


@pytest.fixture(scope="module")
def http_proxy(http_store: StaticHttpServer) -> Iterator[TcpProxy]:
    with TcpProxy(http_store.port) as running:
        yield running


@pytest.fixture
def healthy_http_proxy(http_proxy: TcpProxy) -> Iterator[TcpProxy]:
    yield from healed(http_proxy)


@pytest.fixture(scope="module")
def http_server(http_proxy: TcpProxy, serve: Servers) -> testing.RunningServer:
    """One server on the HTTP store, through a proxy that a test may stall or turn down."""
    return serve(http_proxy.url + "/", workers=1, store_timeout_s=1)


def test_a_silent_or_refusing_http_store_says_what_to_check(
    http_server: testing.RunningServer, healthy_http_proxy: TcpProxy
) -> None:
    """504 naming the setting that timed out, and 502 saying to check the store."""
    healthy_http_proxy.stall()
    silent = invoke(http_server.url, "forest.joblib")
    healthy_http_proxy.refuse()
    refused = invoke(http_server.url, "forest.joblib")
    assert silent.status_code == 504 and "raise --store-timeout-s" in silent.json()["message"]
    assert refused.status_code == 502 and "check that the store is up" in refused.json()["message"]


def test_http_store_downloads_then_hits(
    http_server: testing.RunningServer, healthy_http_proxy: TcpProxy
) -> None:
    """HTTP store downloads then hits and a missing file is 404."""
    first = invoke(http_server.url, "iris.joblib")
    second = invoke(http_server.url, "iris.joblib")
    archive = invoke(http_server.url, "model.tar.gz")
    missing = invoke(http_server.url, "nothing-here.joblib")
    assert first.status_code == 200 and first.headers["x-modelhost-cache"] == "remote"
    assert second.headers["x-modelhost-cache"] == "hit"
    assert archive.status_code == 200 and archive.headers["x-modelhost-cache"] == "remote"
    assert missing.status_code == 404


class CacheSampler:
    """Measures the cache folder every few milliseconds, temporary folders included."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir, self.peak_bytes = cache_dir, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CacheSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.peak_bytes = max(self.peak_bytes, cache_bytes(self.cache_dir))


def cache_bytes(cache_dir: Path) -> int:
    total = 0
    for folder, _, files in os.walk(cache_dir / "models"):  # errors (a folder deleted) skipped
        for name in files:
            with contextlib.suppress(FileNotFoundError):  # deleted while we walked
                total += os.stat(os.path.join(folder, name)).st_size
    return total


def test_cycling_artifacts_keeps_the_disk_budget(moto: MotoServer, tmp_path: Path) -> None:
    """Cycling more artifacts than fit keeps the disk budget and restart keeps the tier."""
    sizes = [
        upload(
            moto, testing.random_forest(tmp_path / f"f{i}.joblib", 2**20, seed=i), f"f{i}.joblib"
        )
        for i in range(5)
    ]
    budget = int(max(sizes) * 2.5)
    cache = tmp_path / "cache"
    args = testing.serve_args(f"s3://{BUCKET}/{PREFIX}", cache, workers=1, disk_budget=budget)
    env = env_for(moto, moto.url)
    with CacheSampler(cache) as sampler, testing.RunningServer(args, tmp_path, env=env) as server:
        for index in range(5):
            response = invoke(server.url, f"f{index}.joblib")
            assert response.status_code == 200, response.text
            assert httpx.delete(f"{server.url}/models/f{index}.joblib").status_code == 200
        log = server.log_text()
    assert 0 < sampler.peak_bytes <= budget
    deletions = [json.loads(line) for line in log.splitlines() if '"kind":"delete"' in line]
    assert {d["reason"] for d in deletions} == {"disk_budget"} and len(deletions) >= 2

    with testing.RunningServer(args, tmp_path, env=env_for(moto, moto.url)) as server:
        response = invoke(server.url, "f4.joblib")
        log = server.log_text()
    assert response.status_code == 200 and response.headers["x-modelhost-cache"] == "disk"
    assert '"kind":"download"' not in log


def test_revalidation_fetches_replaced_object(
    moto: MotoServer, artifacts: Path, tmp_path: Path
) -> None:
    """A replaced object is fetched again when revalidation is on."""
    import joblib
    from sklearn.datasets import load_iris
    from sklearn.dummy import DummyClassifier

    upload(moto, artifacts / "iris.joblib", "versions/m.joblib")
    args = testing.serve_args(
        f"s3://{BUCKET}/{PREFIX}", tmp_path / "cache", workers=1, revalidate_interval_s=0.2
    )
    with testing.RunningServer(args, tmp_path, env=env_for(moto, moto.url)) as server:
        assert invoke(server.url, "versions/m.joblib").status_code == 200
        constant = DummyClassifier(strategy="constant", constant=2).fit(*load_iris(return_X_y=True))
        joblib.dump(constant, tmp_path / "v2.joblib")
        upload(moto, tmp_path / "v2.joblib", "versions/m.joblib")
        for _ in range(200):  # each hit past the interval checks the ETag in the background
            if logged(server, "versions/m.joblib", "unload"):
                break
            invoke(server.url, "versions/m.joblib")
        fresh = invoke(server.url, "versions/m.joblib")
        [unload] = logged(server, "versions/m.joblib", "unload")
        downloads = logged(server, "versions/m.joblib", "download")
    assert unload["reason"] == "stale" and len(downloads) == 2
    assert fresh.status_code == 200 and fresh.json() == {"predictions": [2]}


def test_load_models_all_preloads_the_prefix(
    moto: MotoServer, artifacts: Path, tmp_path: Path
) -> None:
    """`--load-models all` preloads every artifact under the S3 prefix."""
    client = moto.client()
    for key in ("all/a.joblib", "all/team/b.joblib"):
        client.upload_file(str(artifacts / "iris.joblib"), BUCKET, key)
    client.put_object(Bucket=BUCKET, Key="all/README.md", Body=b"not a model")
    args = testing.serve_args(f"s3://{BUCKET}/all", tmp_path / "cache", load_models="ALL")
    with testing.RunningServer(args, tmp_path, env=env_for(moto, moto.url)) as server:
        listed = httpx.get(f"{server.url}/models").json()["models"]
    assert sorted(m["modelName"] for m in listed) == ["a.joblib", "team/b.joblib"]
