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


# The collection in its order, a request a line: method | TorchServe's status, and ours where
# modelhost answers otherwise on purpose | path | the request's name in the collection.
COLLECTION = """
POST   | 200           | models?url=squeezenet1_1.mar&model_name=squeezenet1_1 | Register Model
POST   | 200           | models?url=mnist.mar&model_name=mnist | Register Model Mnist
POST   | 200           | models?url=densenet161.mar&model_name=densenet161 | Register Model Densenet161
POST   | 500, ours 403 | models?url=https://torchserve.pytorch.org/mar_files/densenet161.mar&model_name=densenet161 | Model Re-Registration Densenet161
DELETE | 200           | models/densenet161 | UnRegister Model Densenet161
POST   | 400           | models | Register Model missing url
DELETE | 200           | models/mnist | UnRegister Existing Mnist Model
POST   | 200, ours 400 | models?url=mnist.mar&model_name=mnist&handler=invalidHandler | Register Mnist Model with Invalid Handler
DELETE | 200, ours 404 | models/mnist | UnRegister Model mnist
POST   | 200, ours 400 | models?url=mnist.mar&model_name=mnist&handler=invalidHandler | Register Mnist Model with Invalid Handler
PUT    | 500, ours 404 | models/mnist?min_worker=1&synchronous=true | Scale Invalid Mnist Handler Model with Min Workers - Synchronous
DELETE | 200, ours 404 | models/mnist | UnRegister Model mnist
GET    | 200           | models/squeezenet1_1/all | Get Model - All Versions
GET    | 200           | models/squeezenet1_1/1.0 | Get Model with Version
GET    | 200           | models/squeezenet1_1 | Get Valid Model
DELETE | 200           | models/squeezenet1_1 | UnRegister Model
POST   | 400           | models?url=squeezenet1_1.mar&model_name=squeezenet1_1&runtime=python4 | Register Model invalid Runtime
GET    | 200           | models?limit=&next_page_token= | List Models
POST   | 200           | models?url=squeezenet1_1.mar&model_name=squeezenet1_1 | Register Model
PUT    | 202           | models/squeezenet1_1?min_worker=1 | Scale Min Workers - Asynchronous
PUT    | 200           | models/squeezenet1_1?min_worker=1&synchronous=true | Scale Min Workers - Synchronous
PUT    | 200           | models/squeezenet1_1/1.0?min_worker=1&synchronous=true | Scale Min Workers for a Version
PUT    | 404           | models/squeezenet1_1/0.0?min_worker=1&synchronous=true | Scale Min Workers for a Valid model but Invalid Version
PUT    | 202           | models/squeezenet1_1?min_worker=1&number_gpu=1 | Scale Min Workers with GPU
PUT    | 200           | models/squeezenet1_1/1.0/set-default | Set Default Model Version
PUT    | 404           | models/squeezenet1_1/0.0/set-default | Set Default Valid Model Invalid Version
PUT    | 404           | models/squeezenet0_1/1.0/set-default | Set Default Invalid Model valid Version
DELETE | 200           | models/squeezenet1_1 | UnRegister Model
POST   | 200, ours 400 | models?url=squeezenet1_1.mar&model_name=squeezenet1_1&handler=serve/ts/torch_handler/image_classifier.py:handle | Register Model with Additional Params
DELETE | 200, ours 404 | models/squeezenet1_1 | UnRegister Model
POST   | 500, ours 400 | models?url=squeezenet1_1.mar&model_name=squeezenet1_1&batch_size=3&initial_workers=3&startup_timeout=0 | Register Model with Additional Params and startup_timeout as 0
POST   | 200, ours 400 | models?url=squeezenet1_1.mar&model_name=squeezenet1_1&startup_timeout=0 | Register Model with startup_timeout as 0
DELETE | 200, ours 404 | models/squeezenet1_1 | UnRegister Model
POST   | 200           | models?url=resnet-152-batch.mar&model_name=resnet152&batch_size=2 | Register Model with Batch Size
DELETE | 200           | models/resnet152 | UnRegister Model Resnet152
POST   | 200, ours 400 | models?url=resnet-152-batch.mar&model_name=resnet152&batch_size=dd&initial_workers=1 | Register Model with Non integer Batch Size
DELETE | 200, ours 404 | models/resnet152 | UnRegister Model Resnet152
POST   | 200, ours 400 | models?url=resnet-152-batch.mar&model_name=resnet152&batch_size=2&initial_workers=1&max_batch_delay=junk | Register Model with integer Batch Size but non integer max batch delay parameter
DELETE | 200, ours 404 | models/resnet152 | UnRegister Model Resnet152
POST   | 200, ours 400 | models?url=squeezenet1_1.mar&model_name=squeezenet1_1&initial_workers=-1 | Register Squeezenet Model Negative initial workers
DELETE | 200, ours 404 | models/squeezenet1_1 | UnRegister Model
POST   | 200           | models?url=resnet-18.mar&model_name=resnet-18&synchronous=true | Register Resnet Model Synchronous
DELETE | 200           | models/resnet-18 | UnRegister Model Resnet-18
POST   | 200, ours 400 | models?url=resnet-18.mar&model_name=resnet-18&synchronous=-1 | Register Model non boolean Synchronous value
DELETE | 200, ours 404 | models/resnet-18 | UnRegister Model Resnet-18
POST   | 200           | models?url=resnet-18.mar&model_name=resnet-18&synchronous=false | Register Resnet Model Asynchronous
GET    | 200           | models?limit=1 | List with Limit
GET    | 200           | models?limit=-1 | List with "Negative" Limit Value
GET    | 200           | models?limit=1&next_page_token=1 | List with Pagination
GET    | 200           | models?limit=1&next_page_token=-1 | List with "Negative" Pagination
PUT    | 202           | models/resnet-18?number_gpu=10 | Update GPU Count
PUT    | 202           | models/resnet-18?number_gpu=-1 | Update with "Negative" GPU Count
PUT    | 200           | models/resnet-18?min_worker=1&max_worker=1&synchronous=true | Scale up Workers -  Synchronous
PUT    | 202           | models/resnet-18?min_worker=1&max_worker=1&synchronous=false | Scale up Workers - Asynchronous
PUT    | 202           | models/resnet-18?timeout=-1 | Update Timeout to -1
PUT    | 202           | models/resnet-18?timeout=0 | Update Timeout to 0
POST   | 404           | models?url=&model_name=resnet-18 | Register Model - Empty URL , Valid Model Name
POST   | 400, ours 403 | models?url=https://torchserve.pytorch.org/mar_files/invalid-resnet-18.mar&model_name=invalid-resnet18 | Register Model - Invalid URL
GET    | 404           | models/invalid_squeezenet1_1 | List Model - Invalid Model
GET    | 404           | models/squeezenet1_1/0.0 | List Model - Valid model name, Invalid Model version
GET    | 200           | models?next_page_token=12 | List Models - Invalid Next Page Token(Outside registered models range)
PUT    | 202           | models/resnet-18?min_worker=1&synchronous=Nan | Scale Workers - Valid "min_worker" value, Invalid "synchronous"
PUT    | 202, ours 400 | models/resnet-18?min_worker=nan&synchronous=nan | Scale Workers - Invalid parameter values for both "synchronous" & "min_worker" params
PUT    | 202           | models/resnet-18 | Scale down workers by Calling Update Workers API with no parameters
PUT    | 404           | models/resnet181?min_worker=1 | Update Worker for an invalid/non-existent model
PUT    | 400           | models/resnet-18?min_worker=2&max_worker=1 | Update Worker with Invalid Worker Count
PUT    | 202           | models/resnet-18?min_worker=1 | Update Worker with Positive Worker Count
PUT    | 202           | models/resnet-18?min_worker=0 | Update Worker with "Zero" Worker Count
PUT    | 500, ours 400 | models/resnet-18?min_worker=-1 | Scale worker by calling Update Worker API with negative min worker Count
PUT    | 400           | models/resnet-18?max_worker=-1 | Scale worker by calling Update Worker API with negative max worker Count
PUT    | 404           | models/invalid_squeezenet1_1/1.0/set-default | Update Version - Invalid Model
DELETE | 200           | models/resnet-18 | UnRegister Model Resnet-18
DELETE | 404           | models/squeezenet1_1/0.0 | UnRegister Valid Model name, but Invalid Model version
POST   | 200           | models?url=squeezenet1_1.mar&model_name=squeezenet1_1 | Register Model
DELETE | 200           | models/squeezenet1_1/?synchronous=true | UnRegister Model with synchronous value as true
POST   | 200           | models?url=squeezenet1_1.mar&model_name=squeezenet1_1 | Register Model
DELETE | 200           | models/squeezenet1_1/?synchronous=nan | UnRegister Model with synchronous value as non boolean
POST   | 200           | models?url=squeezenet1_1.mar&model_name=squeezenet1_1 | Register Model
DELETE | 200           | models/squeezenet1_1/?timeout=true | UnRegister Model with synchronous value as non boolean
POST   | 200           | models?url=squeezenet1_1.mar&model_name=squeezenet1_1 | Register Model
DELETE | 200           | models/squeezenet1_1/?timeout=true&synchronous=-1 | UnRegister Model with non boolean synchronous value & non integer timeout value
DELETE | 404           | models/invalid_squeezenet1_1 | UnRegister Invalid Model Name
"""  # noqa: E501  (the collection's paths and names, whole)


def steps_of(table: str) -> list[Step]:
    steps = []
    for line in table.strip().splitlines():
        method, statuses, path, name = (cell.strip() for cell in line.split(" | "))
        status, _, ours = statuses.partition(", ours ")
        steps.append(Step(name, method, path, int(status), int(ours) if ours else None))
    return steps


STEPS = steps_of(COLLECTION)


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
