"""Model versions, as TorchServe and the Open Inference Protocol name them: `.mar` archives of
one model with different `modelVersion`s, registered under one name, each its own model in
memory, the default answering when no version is named."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing

MANIFEST = "MAR-INF/MANIFEST.json"
HANDLER = '''"""Answers each request with the number of its archive's version."""

ANSWER = {answer}


def handle(data, context):
    if data is None:
        return None
    return [ANSWER for _ in data]
'''
VERSIONS = {"1.0": 1, "2.0": 2}  # modelVersion → what that version's handler answers


def versioned_mar(folder: Path, archive: Path, version: str, answer: int = 0) -> Path:
    """A `.mar` whose manifest says `version`, with a handler answering `answer`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "handler.py").write_text(HANDLER.format(answer=answer))
    testing.mar_of(folder, archive)
    with zipfile.ZipFile(archive) as old:
        members = {info.filename: old.read(info) for info in old.infolist()}
    manifest = json.loads(members[MANIFEST])
    manifest["model"]["modelVersion"] = version
    members[MANIFEST] = json.dumps(manifest).encode()
    with zipfile.ZipFile(archive, "w") as new:
        for name, data in members.items():
            new.writestr(name, data)
    return archive


def corrupt_mar(archive: Path) -> None:
    """Cut the archive's manifest short, as a truncated copy leaves it."""
    with zipfile.ZipFile(archive) as old:
        members = {info.filename: old.read(info) for info in old.infolist()}
    members[MANIFEST] = members[MANIFEST][:20]
    with zipfile.ZipFile(archive, "w") as new:
        for name, data in members.items():
            new.writestr(name, data)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("versions-store")
    for version, answer in VERSIONS.items():
        versioned_mar(root / f".src/{version}", root / f"churn-{version}.mar", version, answer)
    versioned_mar(root / ".src/slashed", root / "slashed.mar", "2/0")
    corrupt_mar(versioned_mar(root / ".src/corrupt", root / "corrupt.mar", "3.0"))
    testing.iris_logreg(root / "iris.pkl")
    return root


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers) -> tuple[testing.RunningServer, int]:
    port = testing.free_port()
    return serve(store, workers=1, memory_budget="4GiB", management_port=port), port


@pytest.fixture
def inference(server: tuple[testing.RunningServer, int]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server[0].url, timeout=60) as http:
        yield http


@pytest.fixture
def management(server: tuple[testing.RunningServer, int]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{server[1]}", timeout=60) as http:
        yield http


def register(management: httpx.Client, name: str, version: str) -> httpx.Response:
    params = {"url": f"churn-{version}.mar", "model_name": name}
    return management.post("/models", params=params)


def register_both(management: httpx.Client, name: str) -> None:
    for version in VERSIONS:
        response = register(management, name, version)
        assert response.status_code == 200, response.text


def answer(inference: httpx.Client, path: str) -> int:
    response = inference.post(path, json={"rows": [[1.0]]})
    assert response.status_code == 200, f"{path}: {response.text}"
    value: int = response.json()
    return value


def test_a_second_version_registers(management: httpx.Client) -> None:
    """The second archive of a model registers beside the first, as TorchServe's does."""
    assert register(management, "second", "1.0").status_code == 200
    response = register(management, "second", "2.0")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "status": 'Model "second" Version: 2.0 registered with 0 initial workers. '
        "It loads on its first request."
    }


def test_registering_a_version_again_is_409(management: httpx.Client) -> None:
    register_both(management, "twice")
    again = register(management, "twice", "2.0")
    assert again.status_code == 409, again.text
    assert "Model version 2.0 is already registered for model twice" in again.text


def test_predictions_name_a_version(management: httpx.Client, inference: httpx.Client) -> None:
    """`/predictions/m` answers with the first version registered, `/predictions/m/v` with v."""
    register_both(management, "routed")
    assert answer(inference, "/predictions/routed") == 1
    assert answer(inference, "/predictions/routed/2.0") == 2
    assert answer(inference, "/predictions/routed/1.0") == 1


def test_versions_are_resident_and_unloaded_apart(
    management: httpx.Client, inference: httpx.Client
) -> None:
    """Each version is its own model in memory: unloading one leaves the other loaded."""
    register_both(management, "apart")
    answer(inference, "/predictions/apart/1.0")
    answer(inference, "/predictions/apart/2.0")
    loaded = inference.get("/models", params={"state": "loaded"}).json()["models"]
    assert {"apart", "apart/2.0"} <= {model["modelName"] for model in loaded}
    assert inference.delete("/models/apart/2.0").status_code == 200
    loaded = inference.get("/models", params={"state": "loaded"}).json()["models"]
    names = {model["modelName"] for model in loaded}
    assert "apart" in names and "apart/2.0" not in names


def test_describe_all_lists_every_version(management: httpx.Client) -> None:
    register_both(management, "described")
    every = management.get("/models/described/all")
    assert every.status_code == 200, every.text
    assert sorted(d["modelVersion"] for d in every.json()) == ["1.0", "2.0"]
    assert {d["modelName"] for d in every.json()} == {"described"}
    one = management.get("/models/described/2.0").json()
    assert [(d["modelName"], d["modelVersion"]) for d in one] == [("described", "2.0")]


def test_describe_without_version_gives_the_default(management: httpx.Client) -> None:
    register_both(management, "plain")
    described = management.get("/models/plain").json()
    assert [d["modelVersion"] for d in described] == ["1.0"]


def test_describe_of_a_version_not_registered_is_404(management: httpx.Client) -> None:
    register_both(management, "lacking")
    response = management.get("/models/lacking/3.0")
    assert response.status_code == 404
    assert "3.0" in response.json()["message"]


def test_set_default_changes_what_the_model_answers(
    management: httpx.Client, inference: httpx.Client
) -> None:
    register_both(management, "moved")
    response = management.put("/models/moved/2.0/set-default")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "status": 'Default version successfully updated for model "moved" to "2.0"'
    }
    assert answer(inference, "/predictions/moved") == 2
    assert answer(inference, "/predictions/moved/1.0") == 1
    assert [d["modelVersion"] for d in management.get("/models/moved").json()] == ["2.0"]


def test_set_default_to_a_version_not_registered_is_404(management: httpx.Client) -> None:
    register_both(management, "stays")
    response = management.put("/models/stays/3.0/set-default")
    assert response.status_code == 404, response.text
    assert [d["modelVersion"] for d in management.get("/models/stays").json()] == ["1.0"]


def test_the_default_version_is_not_unregistered_while_others_exist(
    management: httpx.Client,
) -> None:
    """TorchServe answers 403: set another version as the default first."""
    register_both(management, "kept")
    for path in ("/models/kept", "/models/kept/1.0"):
        refused = management.delete(path)
        assert refused.status_code == 403, f"{path}: {refused.text}"
        assert "set-default" in refused.json()["message"]
    assert len(management.get("/models/kept/all").json()) == 2


def test_unregistering_a_version_leaves_the_others(
    management: httpx.Client, inference: httpx.Client
) -> None:
    register_both(management, "pruned")
    response = management.delete("/models/pruned/2.0")
    assert response.status_code == 200, response.text
    assert [d["modelVersion"] for d in management.get("/models/pruned/all").json()] == ["1.0"]
    assert answer(inference, "/predictions/pruned") == 1
    assert inference.post("/predictions/pruned/2.0", json=[1.0]).status_code == 404


def test_the_last_version_unregisters(management: httpx.Client) -> None:
    register_both(management, "gone")
    assert management.delete("/models/gone/2.0").status_code == 200
    assert management.delete("/models/gone").status_code == 200
    assert management.get("/models/gone").status_code == 404
    assert register(management, "gone", "2.0").status_code == 200


def test_the_list_names_a_model_once(management: httpx.Client) -> None:
    register_both(management, "listed")
    management.put("/models/listed/2.0/set-default")
    names, token = [], ""
    while True:
        page = management.get("/models", params={"limit": 2, "next_page_token": token}).json()
        names += [entry["modelName"] for entry in page["models"]]
        token = page.get("nextPageToken", "")
        if not token:
            break
    assert names.count("listed") == 1
    assert not [name for name in names if name.startswith("listed/")]


def test_oip_metadata_lists_the_versions(management: httpx.Client, inference: httpx.Client) -> None:
    register_both(management, "meta")
    metadata = inference.get("/v2/models/meta")
    assert metadata.status_code == 200, metadata.text
    assert metadata.json()["versions"] == ["1.0", "2.0"]
    assert inference.get("/v2/models/meta/versions/2.0").json()["name"] == "meta"
    assert inference.get("/v2/models/meta/versions/3.0").status_code == 404


def test_oip_infer_names_a_version(management: httpx.Client, inference: httpx.Client) -> None:
    register_both(management, "tensors")
    body = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP64", "data": [1.0]}]}
    for path, version, value in (
        ("/v2/models/tensors/versions/2.0/infer", "2.0", 2),
        ("/v2/models/tensors/versions/1.0/infer", "1.0", 1),
        ("/v2/models/tensors/infer", "1.0", 1),
    ):
        response = inference.post(path, json=body)
        assert response.status_code == 200, f"{path}: {response.text}"
        assert response.json()["model_version"] == version
        assert response.json()["outputs"][0]["data"] == [value]
    ready = inference.get("/v2/models/tensors/versions/2.0/ready")
    assert ready.status_code == 200, ready.text


def test_a_store_model_keeps_its_one_version(inference: httpx.Client) -> None:
    """A model of the store that was never registered answers as version 1.0 and 1."""
    assert inference.post("/predictions/iris.pkl/1.0", json=[[1.0, 2.0, 3.0, 4.0]]).is_success
    assert inference.get("/v2/models/iris.pkl").json()["versions"] == ["1"]


def test_scale_names_a_version(management: httpx.Client, inference: httpx.Client) -> None:
    register_both(management, "scaled")
    response = management.put("/models/scaled/2.0", params={"min_worker": 1, "synchronous": "true"})
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "Workers scaled to 1 for model: scaled, version: 2.0"}
    loaded = inference.get("/models", params={"state": "loaded"}).json()["models"]
    names = {model["modelName"] for model in loaded}
    assert "scaled/2.0" in names and "scaled" not in names


def test_version_unfit_for_a_path_is_400(management: httpx.Client) -> None:
    """A version that cannot be in a path is 400.

    An archive whose modelVersion holds '/' could never be named by `/models/{m}/{v}`."""
    response = management.post("/models", params={"url": "slashed.mar", "model_name": "slashed"})
    assert response.status_code == 400, response.text
    assert "modelVersion" in response.json()["message"]
    assert management.get("/models/slashed").status_code == 404


def test_a_corrupt_manifest_is_400_and_registers_nothing(management: httpx.Client) -> None:
    """An archive whose MANIFEST.json is not JSON is refused with what to rebuild, as a first
    version or a later one, not registered as version 1.0; the server carries on."""
    assert register(management, "mended", "1.0").status_code == 200
    for model in ("corrupt", "mended"):  # a first version, a later one
        response = management.post("/models", params={"url": "corrupt.mar", "model_name": model})
        assert response.status_code == 400, response.text
        assert "MANIFEST.json is not valid JSON" in response.json()["message"]
        assert "rebuild" in response.json()["message"]
    assert management.get("/models/corrupt").status_code == 404
    described = management.get("/models/mended/all").json()
    assert [version["modelVersion"] for version in described] == ["1.0"]


def test_oip_index_names_each_version(management: httpx.Client, inference: httpx.Client) -> None:
    register_both(management, "indexed")
    entries = inference.post("/v2/repository/index", json={}).json()
    versions = sorted(entry["version"] for entry in entries if entry["name"] == "indexed")
    assert versions == ["1.0", "2.0"]


def test_scale_takes_torchserve_model_version_param(
    management: httpx.Client, inference: httpx.Client
) -> None:
    """TorchServe's scale reads `model_version` when the path names no version."""
    register_both(management, "param")
    params = {"min_worker": 1, "synchronous": "true", "model_version": "2.0"}
    response = management.put("/models/param", params=params)
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "Workers scaled to 1 for model: param, version: 2.0"}
    loaded = inference.get("/models", params={"state": "loaded"}).json()["models"]
    names = {model["modelName"] for model in loaded}
    assert "param/2.0" in names and "param" not in names
