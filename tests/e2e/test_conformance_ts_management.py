"""TorchServe's management API collection (test/postman/management_api_test_collection.json, run
over management_data.json), mirrored: one test per request, named after it, with its expected
status, against a real server.

The collection is a sequence: a request sees what the ones before it registered. Each test first
sends the requests before it that were not sent yet, so a test run alone sees the same server.
The collection's archives are `.mar` files of our own under TorchServe's names. Where modelhost
answers otherwise on purpose, the step says so (`ours`), and
docs/conformance/torchserve-management.md says why a migrating user will not miss it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest
from helpers.replay import Replay
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

ARCHIVES = ("squeezenet1_1", "mnist", "densenet161", "resnet-152-batch", "resnet-18")


class Step(NamedTuple):
    """One request of the collection: its name, method and path, and the status expected."""

    name: str
    method: str
    path: str
    status: int  # what the collection expects of TorchServe
    ours: int | None = None  # what modelhost answers instead, on purpose

    @property
    def expected(self) -> int:
        return self.status if self.ours is None else self.ours


STEPS = [
    Step("Register Model", "POST", "models?url=squeezenet1_1.mar&model_name=squeezenet1_1", 200),
    Step("Register Model Mnist", "POST", "models?url=mnist.mar&model_name=mnist", 200),
    Step(
        "Register Model Densenet161",
        "POST",
        "models?url=densenet161.mar&model_name=densenet161",
        200,
    ),
    Step(
        "Model Re-Registration Densenet161",
        "POST",
        "models?url=https://torchserve.pytorch.org/mar_files/densenet161.mar&model_name=densenet161",
        500,
        ours=403,
    ),
    Step("UnRegister Model Densenet161", "DELETE", "models/densenet161", 200),
    Step("Register Model missing url", "POST", "models", 400),
    Step("UnRegister Existing Mnist Model", "DELETE", "models/mnist", 200),
    Step(
        "Register Mnist Model with Invalid Handler",
        "POST",
        "models?url=mnist.mar&model_name=mnist&handler=invalidHandler",
        200,
        ours=400,
    ),
    Step("UnRegister Model mnist", "DELETE", "models/mnist", 200, ours=404),
    Step(
        "Register Mnist Model with Invalid Handler",
        "POST",
        "models?url=mnist.mar&model_name=mnist&handler=invalidHandler",
        200,
        ours=400,
    ),
    Step(
        "Scale Invalid Mnist Handler Model with Min Workers - Synchronous",
        "PUT",
        "models/mnist?min_worker=1&synchronous=true",
        500,
        ours=404,
    ),
    Step("UnRegister Model mnist", "DELETE", "models/mnist", 200, ours=404),
    Step("Get Model - All Versions", "GET", "models/squeezenet1_1/all", 200),
    Step("Get Model with Version", "GET", "models/squeezenet1_1/1.0", 200),
    Step("Get Valid Model", "GET", "models/squeezenet1_1", 200),
    Step("UnRegister Model", "DELETE", "models/squeezenet1_1", 200),
    Step(
        "Register Model invalid Runtime",
        "POST",
        "models?url=squeezenet1_1.mar&model_name=squeezenet1_1&runtime=python4",
        400,
    ),
    Step("List Models", "GET", "models?limit=&next_page_token=", 200),
    Step("Register Model", "POST", "models?url=squeezenet1_1.mar&model_name=squeezenet1_1", 200),
    Step("Scale Min Workers - Asynchronous", "PUT", "models/squeezenet1_1?min_worker=1", 202),
    Step(
        "Scale Min Workers - Synchronous",
        "PUT",
        "models/squeezenet1_1?min_worker=1&synchronous=true",
        200,
    ),
    Step(
        "Scale Min Workers for a Version",
        "PUT",
        "models/squeezenet1_1/1.0?min_worker=1&synchronous=true",
        200,
    ),
    Step(
        "Scale Min Workers for a Valid model but Invalid Version",
        "PUT",
        "models/squeezenet1_1/0.0?min_worker=1&synchronous=true",
        404,
    ),
    Step(
        "Scale Min Workers with GPU", "PUT", "models/squeezenet1_1?min_worker=1&number_gpu=1", 202
    ),
    Step("Set Default Model Version", "PUT", "models/squeezenet1_1/1.0/set-default", 200),
    Step(
        "Set Default Valid Model Invalid Version",
        "PUT",
        "models/squeezenet1_1/0.0/set-default",
        404,
    ),
    Step(
        "Set Default Invalid Model valid Version",
        "PUT",
        "models/squeezenet0_1/1.0/set-default",
        404,
    ),
    Step("UnRegister Model", "DELETE", "models/squeezenet1_1", 200),
    Step(
        "Register Model with Additional Params",
        "POST",
        "models?url=squeezenet1_1.mar&model_name=squeezenet1_1&handler=serve/ts/torch_handler/image_classifier.py:handle",
        200,
        ours=400,
    ),
    Step("UnRegister Model", "DELETE", "models/squeezenet1_1", 200, ours=404),
    Step(
        "Register Model with Additional Params and startup_timeout as 0",
        "POST",
        "models?url=squeezenet1_1.mar&model_name=squeezenet1_1&batch_size=3&initial_workers=3&startup_timeout=0",
        500,
        ours=400,
    ),
    Step(
        "Register Model with startup_timeout as 0",
        "POST",
        "models?url=squeezenet1_1.mar&model_name=squeezenet1_1&startup_timeout=0",
        200,
        ours=400,
    ),
    Step("UnRegister Model", "DELETE", "models/squeezenet1_1", 200, ours=404),
    Step(
        "Register Model with Batch Size",
        "POST",
        "models?url=resnet-152-batch.mar&model_name=resnet152&batch_size=2",
        200,
    ),
    Step("UnRegister Model Resnet152", "DELETE", "models/resnet152", 200),
    Step(
        "Register Model with Non integer Batch Size",
        "POST",
        "models?url=resnet-152-batch.mar&model_name=resnet152&batch_size=dd&initial_workers=1",
        200,
        ours=400,
    ),
    Step("UnRegister Model Resnet152", "DELETE", "models/resnet152", 200, ours=404),
    Step(
        "Register Model with integer Batch Size but non integer max batch delay parameter",
        "POST",
        "models?url=resnet-152-batch.mar&model_name=resnet152&batch_size=2&initial_workers=1&max_batch_delay=junk",
        200,
        ours=400,
    ),
    Step("UnRegister Model Resnet152", "DELETE", "models/resnet152", 200, ours=404),
    Step(
        "Register Squeezenet Model Negative initial workers",
        "POST",
        "models?url=squeezenet1_1.mar&model_name=squeezenet1_1&initial_workers=-1",
        200,
        ours=400,
    ),
    Step("UnRegister Model", "DELETE", "models/squeezenet1_1", 200, ours=404),
    Step(
        "Register Resnet Model Synchronous",
        "POST",
        "models?url=resnet-18.mar&model_name=resnet-18&synchronous=true",
        200,
    ),
    Step("UnRegister Model Resnet-18", "DELETE", "models/resnet-18", 200),
    Step(
        "Register Model non boolean Synchronous value",
        "POST",
        "models?url=resnet-18.mar&model_name=resnet-18&synchronous=-1",
        200,
        ours=400,
    ),
    Step("UnRegister Model Resnet-18", "DELETE", "models/resnet-18", 200, ours=404),
    Step(
        "Register Resnet Model Asynchronous",
        "POST",
        "models?url=resnet-18.mar&model_name=resnet-18&synchronous=false",
        200,
    ),
    Step("List with Limit", "GET", "models?limit=1", 200),
    Step('List with "Negative" Limit Value', "GET", "models?limit=-1", 200),
    Step("List with Pagination", "GET", "models?limit=1&next_page_token=1", 200),
    Step('List with "Negative" Pagination', "GET", "models?limit=1&next_page_token=-1", 200),
    Step("Update GPU Count", "PUT", "models/resnet-18?number_gpu=10", 202),
    Step('Update with "Negative" GPU Count', "PUT", "models/resnet-18?number_gpu=-1", 202),
    Step(
        "Scale up Workers -  Synchronous",
        "PUT",
        "models/resnet-18?min_worker=1&max_worker=1&synchronous=true",
        200,
    ),
    Step(
        "Scale up Workers - Asynchronous",
        "PUT",
        "models/resnet-18?min_worker=1&max_worker=1&synchronous=false",
        202,
    ),
    Step("Update Timeout to -1", "PUT", "models/resnet-18?timeout=-1", 202),
    Step("Update Timeout to 0", "PUT", "models/resnet-18?timeout=0", 202),
    Step(
        "Register Model - Empty URL , Valid Model Name",
        "POST",
        "models?url=&model_name=resnet-18",
        404,
        ours=400,
    ),
    Step(
        "Register Model - Invalid URL",
        "POST",
        "models?url=https://torchserve.pytorch.org/mar_files/invalid-resnet-18.mar&model_name=invalid-resnet18",
        400,
        ours=403,
    ),
    Step("List Model - Invalid Model", "GET", "models/invalid_squeezenet1_1", 404),
    Step(
        "List Model - Valid model name, Invalid Model version",
        "GET",
        "models/squeezenet1_1/0.0",
        404,
    ),
    Step(
        "List Models - Invalid Next Page Token(Outside registered models range)",
        "GET",
        "models?next_page_token=12",
        200,
    ),
    Step(
        'Scale Workers - Valid "min_worker" value, Invalid "synchronous"',
        "PUT",
        "models/resnet-18?min_worker=1&synchronous=Nan",
        202,
    ),
    Step(
        'Scale Workers - Invalid parameter values for both "synchronous" & "min_worker" params',
        "PUT",
        "models/resnet-18?min_worker=nan&synchronous=nan",
        202,
        ours=400,
    ),
    Step(
        "Scale down workers by Calling Update Workers API with no parameters",
        "PUT",
        "models/resnet-18",
        202,
    ),
    Step(
        "Update Worker for an invalid/non-existent model",
        "PUT",
        "models/resnet181?min_worker=1",
        404,
    ),
    Step(
        "Update Worker with Invalid Worker Count",
        "PUT",
        "models/resnet-18?min_worker=2&max_worker=1",
        400,
    ),
    Step("Update Worker with Positive Worker Count", "PUT", "models/resnet-18?min_worker=1", 202),
    Step('Update Worker with "Zero" Worker Count', "PUT", "models/resnet-18?min_worker=0", 202),
    Step(
        "Scale worker by calling Update Worker API with negative min worker Count",
        "PUT",
        "models/resnet-18?min_worker=-1",
        500,
        ours=400,
    ),
    Step(
        "Scale worker by calling Update Worker API with negative max worker Count",
        "PUT",
        "models/resnet-18?max_worker=-1",
        400,
    ),
    Step(
        "Update Version - Invalid Model", "PUT", "models/invalid_squeezenet1_1/1.0/set-default", 404
    ),
    Step("UnRegister Model Resnet-18", "DELETE", "models/resnet-18", 200),
    Step(
        "UnRegister Valid Model name, but Invalid Model version",
        "DELETE",
        "models/squeezenet1_1/0.0",
        404,
    ),
    Step("Register Model", "POST", "models?url=squeezenet1_1.mar&model_name=squeezenet1_1", 200),
    Step(
        "UnRegister Model with synchronous value as true",
        "DELETE",
        "models/squeezenet1_1/?synchronous=true",
        200,
    ),
    Step("Register Model", "POST", "models?url=squeezenet1_1.mar&model_name=squeezenet1_1", 200),
    Step(
        "UnRegister Model with synchronous value as non boolean",
        "DELETE",
        "models/squeezenet1_1/?synchronous=nan",
        200,
    ),
    Step("Register Model", "POST", "models?url=squeezenet1_1.mar&model_name=squeezenet1_1", 200),
    Step(
        "UnRegister Model with synchronous value as non boolean",
        "DELETE",
        "models/squeezenet1_1/?timeout=true",
        200,
    ),
    Step("Register Model", "POST", "models?url=squeezenet1_1.mar&model_name=squeezenet1_1", 200),
    Step(
        "UnRegister Model with non boolean synchronous value & non integer timeout value",
        "DELETE",
        "models/squeezenet1_1/?timeout=true&synchronous=-1",
        200,
    ),
    Step("UnRegister Invalid Model Name", "DELETE", "models/invalid_squeezenet1_1", 404),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ts-management-store")
    source = testing.mms_handler_folder(root / ".src/iris")
    for name in ARCHIVES:
        testing.mar_of(source, root / f"{name}.mar")
    return root


@pytest.fixture(scope="module")
def replay(store: Path, serve: Servers) -> Iterator[Replay]:
    port = testing.free_port()
    serve(store, workers=1, memory_budget="4GiB", management_port=port)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as management:
        yield Replay(management, STEPS)


@pytest.mark.parametrize(
    "index", range(len(STEPS)), ids=[f"{i:02d} {step.name}" for i, step in enumerate(STEPS)]
)
def test_management_request(replay: Replay, index: int) -> None:
    step = STEPS[index]
    response = replay.answer(index)
    assert response.status_code == step.expected, f"{step.method} {step.path}: {response.text}"
