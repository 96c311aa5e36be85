"""MMS's management API collection (test/postman/management_api_test_collection.json of
awslabs/multi-model-server), mirrored: one test per request, named after it, with the statuses it
accepts, against a real server.

The collection is a sequence: a request sees what the ones before it registered. Each test first
sends the requests before it that were not sent yet, so a test run alone sees the same server.
The collection's archives are on S3; `.mar` files of our own under the same names stand in, given
by their names in the model store. Requests left out, and why: docs/conformance/mms-management.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest
from helpers.replay import Replay
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

ARCHIVES = ("squeezenet_v1.1", "resnet-18")


class Step(NamedTuple):
    """One request of the collection: its name, method and path, and the statuses it accepts."""

    name: str
    method: str
    path: str
    accepted: tuple[int, ...]


STEPS = [
    Step(
        "Register Model", "POST", "models?url=squeezenet_v1.1.mar&model_name=squeezenet1_1", (200,)
    ),
    Step("Get Valid Model", "GET", "models/squeezenet1_1", (200,)),
    Step("List Models", "GET", "models", (200,)),
    Step(
        "Scale Min Workers - Asynchronous",
        "PUT",
        "models/squeezenet1_1?min_worker=3",
        (200, 201, 202),
    ),
    Step(
        "Scale Min Workers - Synchronous",
        "PUT",
        "models/squeezenet1_1?min_worker=4&synchronous=true",
        (200, 201, 202),
    ),
    Step(
        "Scale Min Workers with GPU",
        "PUT",
        "models/squeezenet1_1?min_worker=6&number_gpu=1",
        (200, 201, 202),
    ),
    Step("UnRegister Model", "DELETE", "models/squeezenet1_1", (200, 201, 202)),
    Step(
        "Register Model with Additional Params",
        "POST",
        "models?url=squeezenet_v1.1.mar&model_name=squeezenet1_1&initial_workers=1&synchronous=true",
        (200,),
    ),
    Step(
        "Register Model Synchronous",
        "POST",
        "models?url=resnet-18.mar&model_name=resnet18&synchronous=true",
        (200,),
    ),
    Step("UnRegister Model", "DELETE", "models/resnet18", (200,)),
    Step(
        "Register Resnet Model",
        "POST",
        "models?url=resnet-18.mar&model_name=resnet18&synchronous=false",
        (200,),
    ),
    Step("List with Limit", "GET", "models?limit=1", (200,)),
    Step("List with Pagination", "GET", "models?limit=1&next_page_token=1", (200,)),
    Step("Update GPU Count", "PUT", "models/resnet18?number_gpu=10", (200, 201, 202)),
    Step(
        "Scale up Workers -  Synchronous",
        "PUT",
        "models/resnet18?min_worker=5&max_worker=5&synchronous=true",
        (200, 201, 202),
    ),
    Step(
        "Scale up Workers - Asynchronous",
        "PUT",
        "models/resnet18?min_worker=6&max_worker=6&synchronous=false",
        (200, 201, 202),
    ),
    Step("Update Timeout to -1", "PUT", "models/resnet18?timeout=-1", (200, 201, 202)),
    Step("Update Timeout to 0", "PUT", "models/resnet18?timeout=0", (200, 201, 202)),
    Step(
        "Register Model - Invalid URL",
        "POST",
        "models?url=invalid-resnet-18.mar&model_name=invalid-resnet18",
        (404,),  # MMS's `Model not found in model store` for a name; 400 for its S3 URL
    ),
    Step("Get Model - Invalid Model", "GET", "models/invalid_squeezenet1_1", (404,)),
    Step("List Models - Invalid Next Page Token", "GET", "models?next_page_token=12", (200,)),
    Step(
        "Update Worker with Invalid Worker Count",
        "PUT",
        "models/resnet18?min_worker=10&max_worker=9",
        (400,),
    ),
    Step("UnRegister Invalid Model Name", "DELETE", "models/invalid_squeezenet1_1", (404,)),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mms-management-store")
    source = testing.mms_handler_folder(root / ".src/iris")
    for name in ARCHIVES:
        testing.mar_of(source, root / f"{name}.mar")
    return root


@pytest.fixture(scope="module")
def replay(store: Path, serve: Servers) -> Iterator[Replay]:
    """A server started as MMS is: its config.properties named by MMS_CONFIG_FILE."""
    port = testing.free_port()
    properties = store / ".src" / "mms.properties"
    properties.write_text(f"management_address=http://127.0.0.1:{port}\n")
    environ = {**os.environ, "MMS_CONFIG_FILE": str(properties)}
    serve(store, env=environ, workers=1, memory_budget="4GiB")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as management:
        yield Replay(management, STEPS)


@pytest.mark.parametrize(
    "index", range(len(STEPS)), ids=[f"{i:02d} {step.name}" for i, step in enumerate(STEPS)]
)
def test_management_request(replay: Replay, index: int) -> None:
    step = STEPS[index]
    response = replay.answer(index)
    assert response.status_code in step.accepted, f"{step.method} {step.path}: {response.text}"


def test_get_valid_model_answers_one_object_as_mms_does(replay: Replay) -> None:
    """MMS's describe is the model itself; TorchServe's, a list of one (`--management-api`)."""
    management = replay.client
    params = {"url": f"{ARCHIVES[0]}.mar", "model_name": "described"}
    assert management.post("/models", params=params).status_code == 200
    described = management.get("/models/described").json()
    assert isinstance(described, dict) and described["modelName"] == "described"
