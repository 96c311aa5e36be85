"""TorchServe's request shapes: /predictions on the main port, and the management API (register,
describe, list, unregister) on --management-port, with TorchServe's status codes and shapes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing

ROW = testing.iris_rows(1)[0]


@pytest.fixture(scope="module")
def management_port() -> int:
    return testing.free_port()


@pytest.fixture(scope="module")
def ts_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What these tests register: iris models, an MMS handler, and a model whose modelhost.toml
    sets its batching."""
    root = tmp_path_factory.mktemp("ts-store")
    testing.iris_logreg(root / "iris.pkl")
    for tenant in (3, 4, 5):
        testing.iris_logreg(root / f"tenants/t{tenant:03d}.joblib")
    testing.mms_handler_folder(root / "custom/mms")
    batching = testing.mms_handler_folder(root / "batching")
    (batching / "modelhost.toml").write_text("batch_size = 4\nmax_batch_delay_ms = 7\n")
    return root


@pytest.fixture(scope="module")
def ts_server(ts_store: Path, management_port: int, serve: Servers) -> testing.RunningServer:
    return serve(ts_store, workers=1, memory_budget="4GiB", management_port=management_port)


@pytest.fixture
def inference(ts_server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=ts_server.url, timeout=30) as http:
        yield http


@pytest.fixture
def management(ts_server: testing.RunningServer, management_port: int) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{management_port}", timeout=30) as http:
        yield http


def register_one_worker(
    management: httpx.Client, url: str, name: str, synchronous: str
) -> httpx.Response:
    params = {"url": url, "model_name": name, "initial_workers": 1, "synchronous": synchronous}
    return management.post("/models", params=params)


def test_predictions_take_torchserve_bodies(inference: httpx.Client) -> None:
    raw = inference.post("/predictions/iris.pkl", content=str(ROW).encode())  # curl -T file
    assert raw.status_code == 200, raw.text
    assert raw.json() == {"predictions": [0]}
    custom = inference.post("/predictions/custom/mms", json={"instances": [ROW]})
    assert custom.json() == {"predictions": [0], "handler": "custom handler"}
    missing = inference.post("/predictions/no/such.joblib", json=ROW)
    assert missing.status_code == 404
    assert set(missing.json()) == {"code", "type", "message"}


def test_register_describe_unregister(management: httpx.Client) -> None:
    registered = register_one_worker(management, "tenants/t003.joblib", "reg", "true")
    assert registered.status_code == 200, registered.text
    assert registered.json() == {
        "status": 'Model "reg" Version: 1.0 registered with 1 initial workers'
    }
    again = management.post("/models", params={"url": "tenants/t003.joblib", "model_name": "reg"})
    assert again.status_code == 409
    assert set(again.json()) == {"code", "type", "message"}
    (described,) = management.get("/models/reg").json()
    assert described["modelName"] == "reg"
    assert described["modelVersion"] == "1.0"
    assert described["workers"][0]["status"] == "READY"
    assert management.delete("/models/reg").json() == {"status": 'Model "reg" unregistered'}
    assert management.get("/models/reg").status_code == 404
    assert management.delete("/models/reg").status_code == 404


def test_initial_workers_loads_that_many_copies_and_says_how_many(
    ts_store: Path, serve: Servers
) -> None:
    """TorchServe starts `initial_workers` workers for the model; here --workers caps the
    copies, and the answer names those made."""
    port = testing.free_port()
    serve(ts_store, workers=2, memory_budget="4GiB", management_port=port)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as management:
        for name, asked, given in (("both", 2, 2), ("capped", 3, 2)):
            params = {"url": "iris.pkl", "model_name": name, "initial_workers": asked}
            registered = management.post("/models", params=params)
            said = f'Model "{name}" Version: 1.0 registered with {given} initial workers'
            assert registered.json() == {"status": said}
            (described,) = management.get(f"/models/{name}").json()
            assert (len(described["workers"]), described["minWorkers"]) == (given, given)


def test_register_without_workers_loads_on_first_request(
    management: httpx.Client, inference: httpx.Client
) -> None:
    registered = management.post("/models", params={"url": "tenants/t004.joblib"})
    assert registered.status_code == 200
    assert registered.json()["status"].startswith('Model "t004" Version: 1.0 registered with 0')
    assert management.get("/models/t004").json()[0]["workers"] == []
    assert inference.post("/predictions/t004", json=ROW).json() == {"predictions": [0]}
    assert management.get("/models/t004").json()[0]["workers"]
    management.delete("/models/t004")


def test_asynchronous_registration_answers_202(management: httpx.Client) -> None:
    registered = register_one_worker(management, "tenants/t005.joblib", "later", "false")
    assert registered.status_code == 202
    assert registered.json() == {"status": "Processing worker updates..."}
    for _ in range(200):  # until the background load is done; no timing asserted
        if management.get("/models/later").json()[0]["workers"]:
            break
        time.sleep(0.05)
    assert management.get("/models/later").json()[0]["workers"][0]["status"] == "READY"
    management.delete("/models/later")


def test_list_is_paginated_with_cursors_and_still_reads_offsets(management: httpx.Client) -> None:
    """nextPageToken is a cursor that round-trips; a whole number, TorchServe's own offset,
    starts the page at that position."""
    for index in range(3):
        management.post("/models", params={"url": "iris.pkl", "model_name": f"page-{index}"})
    names, token, pages = [], None, 0
    while True:
        params = {"limit": 2} | ({"next_page_token": token} if token else {})
        page = management.get("/models", params=params).json()
        assert len(page["models"]) <= 2 and set(page["models"][0]) == {"modelName", "modelUrl"}
        names += [model["modelName"] for model in page["models"]]
        pages += 1
        token = page.get("nextPageToken")
        if token is None:
            break
        assert not token.isdigit()
    assert names == sorted(set(names))
    assert {"page-0", "page-1", "page-2"} <= set(names)
    assert pages == (len(names) + 1) // 2
    by_offset = management.get("/models", params={"limit": 2, "next_page_token": "1"}).json()
    assert [model["modelName"] for model in by_offset["models"]] == names[1:3]
    past = management.get("/models", params={"next_page_token": str(len(names))}).json()
    assert past == {"models": []}
    assert management.get("/models", params={"next_page_token": "nonsense!"}).status_code == 400
    for index in range(3):
        management.delete(f"/models/page-{index}")


def test_bad_registrations_say_why(management: httpx.Client) -> None:
    missing = management.post("/models")
    assert missing.status_code == 400
    assert missing.json()["message"] == "Parameter url is required."
    outside = management.post("/models", params={"url": "file:///etc/passwd", "model_name": "x"})
    assert outside.status_code == 403


def test_unregister_with_a_trailing_slash_forgets_the_model(management: httpx.Client) -> None:
    """`DELETE /models/m/?synchronous=true`, as TorchServe's own suite sends it."""
    management.post("/models", params={"url": "iris.pkl", "model_name": "slash"})
    gone = management.delete("/models/slash/", params={"synchronous": "true"})
    assert gone.status_code == 200, gone.text
    assert gone.json() == {"status": 'Model "slash" unregistered'}
    assert management.get("/models/slash").status_code == 404


def test_list_reads_negative_limit_and_token_as_torchserve_does(management: httpx.Client) -> None:
    """TorchServe reads a negative limit as its default and a negative token as the start."""
    management.post("/models", params={"url": "iris.pkl", "model_name": "negative"})
    first = management.get("/models", params={"limit": "1"}).json()
    unlimited = management.get("/models", params={"limit": "-1"})
    assert unlimited.status_code == 200, unlimited.text
    assert "negative" in [model["modelName"] for model in unlimited.json()["models"]]
    from_start = management.get("/models", params={"limit": "1", "next_page_token": "-1"})
    assert from_start.status_code == 200, from_start.text
    assert from_start.json()["models"] == first["models"]
    management.delete("/models/negative")


def test_all_versions_lists_the_one_version(management: httpx.Client) -> None:
    management.post("/models", params={"url": "iris.pkl", "model_name": "versions"})
    versions = management.get("/models/versions/all")
    assert versions.status_code == 200, versions.text
    (only,) = versions.json()
    assert (only["modelName"], only["modelVersion"]) == ("versions", "1.0")
    assert management.get("/models/nothing-here/all").status_code == 404
    management.delete("/models/versions")


def test_set_default_answers_for_the_version_that_exists(management: httpx.Client) -> None:
    management.post("/models", params={"url": "iris.pkl", "model_name": "default"})
    chosen = management.put("/models/default/1.0/set-default")
    assert chosen.status_code == 200, chosen.text
    assert chosen.json() == {
        "status": 'Default version successfully updated for model "default" to "1.0"'
    }
    other = management.put("/models/default/0.0/set-default")
    assert other.status_code == 404
    assert "0.0" in other.json()["message"] and "1.0" in other.json()["message"]
    assert management.put("/models/nothing-here/1.0/set-default").status_code == 404
    management.delete("/models/default")


def test_a_version_other_than_the_one_is_not_found(management: httpx.Client) -> None:
    management.post("/models", params={"url": "iris.pkl", "model_name": "one"})
    for call in (management.get, management.delete):
        missing = call("/models/one/0.0")
        assert missing.status_code == 404
        assert "version '0.0'" in missing.json()["message"]
    assert management.get("/models/one").status_code == 200
    management.delete("/models/one")


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("runtime", "python4"),
        ("runtime", "LSP"),
        ("synchronous", "-1"),
        ("initial_workers", "-1"),
        ("handler", "invalidHandler"),
        ("batch_size", "dd"),
        ("batch_size", "0"),
        ("max_batch_delay", "junk"),
        ("response_timeout", "0"),
        ("startup_timeout", "-5"),
    ],
)
def test_registration_refuses_values_out_of_range(
    management: httpx.Client, param: str, value: str
) -> None:
    params = {"url": "iris.pkl", "model_name": "refused", param: value}
    refused = management.post("/models", params=params)
    assert refused.status_code == 400, refused.text
    assert f"{param} '{value}'" in refused.json()["message"]
    assert management.get("/models/refused").status_code == 404


def test_registration_takes_the_python_runtimes(management: httpx.Client) -> None:
    for runtime in ("python", "python3"):
        params = {"url": "iris.pkl", "model_name": "py", "runtime": runtime}
        assert management.post("/models", params=params).status_code == 200
        assert management.get("/models/py").json()[0]["runtime"] == "python"
        management.delete("/models/py")


def test_describe_shows_the_batching_in_effect(management: httpx.Client) -> None:
    """batchSize and maxBatchDelay are the model's queue's, here from its modelhost.toml."""
    registered = register_one_worker(management, "batching", "batching", "true")
    assert registered.status_code == 200, registered.text
    (described,) = management.get("/models/batching").json()
    assert (described["batchSize"], described["maxBatchDelay"]) == (4, 7)
    management.delete("/models/batching")


def test_unfetchable_archive_is_refused(
    management: httpx.Client,
) -> None:
    """Registration of an archive that cannot be fetched is refused.

    TorchServe fetches the archive when it registers it, even for 0 workers: a URL that
    names nothing is a 404 then (`Model not found at: …`), not a failure at the model's first
    request."""
    refused = management.post("/models", params={"url": "no-such.mar", "model_name": "absent"})
    assert refused.status_code == 404, refused.text
    assert "no-such.mar" in refused.json()["message"]
    assert management.get("/models/absent").status_code == 404


def test_registration_sets_the_models_batching(
    management: httpx.Client, inference: httpx.Client
) -> None:
    """batch_size and max_batch_delay (milliseconds) are the model's, over its archive's."""
    params = {"url": "custom/mms", "model_name": "batched", "batch_size": 3}
    registered = management.post("/models", params={**params, "max_batch_delay": 9})
    assert registered.status_code == 200, registered.text
    (before_load,) = management.get("/models/batched").json()
    assert (before_load["batchSize"], before_load["maxBatchDelay"]) == (3, 9)
    assert inference.post("/predictions/batched", json={"instances": [ROW]}).status_code == 200
    (loaded,) = management.get("/models/batched").json()
    assert (loaded["batchSize"], loaded["maxBatchDelay"]) == (3, 9)
    management.delete("/models/batched")


def test_registration_sets_the_models_handler(
    management: httpx.Client, inference: httpx.Client
) -> None:
    """The folder's handler.py tags its answers; the built-in handler named instead does not."""
    params = {"url": "batching", "model_name": "built-in", "handler": "sklearn"}
    assert management.post("/models", params=params).status_code == 200
    answered = inference.post("/predictions/built-in", json=[ROW])
    assert answered.json() == {"predictions": [0]}, answered.text
    management.delete("/models/built-in")


def test_registration_refuses_a_handler_file_the_archive_lacks(management: httpx.Client) -> None:
    params = {"url": "custom/mms", "model_name": "lacking", "handler": "other.py:handle"}
    refused = management.post("/models", params=params)
    assert refused.status_code == 400, refused.text
    assert "other.py" in refused.json()["message"]
    assert management.get("/models/lacking").status_code == 404


def test_a_model_whose_initial_workers_fail_is_not_registered(
    ts_store: Path, management: httpx.Client
) -> None:
    """As in TorchServe, a synchronous registration whose initial workers cannot load the model
    unregisters it: registering the name again, from a sound archive, is not a 409."""
    testing.corrupt_artifact(ts_store / "broken/corrupt.joblib")
    failed = register_one_worker(management, "broken/corrupt.joblib", "broken", "true")
    assert failed.status_code == 500, failed.text
    assert management.get("/models/broken").status_code == 404
    again = register_one_worker(management, "iris.pkl", "broken", "true")
    assert again.status_code == 200, again.text
    management.delete("/models/broken")
