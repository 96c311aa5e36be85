"""TorchServe's registration and listing parameters, read without a server: what is taken, what
is refused and what each refusal says."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from helpers.counting_host import counting_host, request
from starlette.requests import Request

from modelhost.errors import BadRequestBody
from modelhost.http.routes import HttpSettings, SageMakerRoutes
from modelhost.http.torchserve import TorchServeManagement, unless_negative
from modelhost.protocols.registration import (
    BUILT_IN_HANDLERS,
    boolean,
    check_registration,
    handler_file,
    is_handler_name,
    registration_settings,
)
from modelhost.workers.handlers.select import RUNTIMES


def test_built_in_handler_names_are_the_workers_own() -> None:
    assert set(BUILT_IN_HANDLERS) == set(RUNTIMES)


@pytest.mark.parametrize("handler", ["sklearn", "torch", "handler.py", "custom.py:predict"])
def test_handler_names_the_manifest_takes(handler: str) -> None:
    assert is_handler_name(handler)


@pytest.mark.parametrize(
    ("given", "file"),
    [
        ("handler:handle", "handler.py:handle"),
        ("handler.py:handle", "handler.py:handle"),
        ("pkg.module:handle", "pkg.module:handle"),
        ("invalidHandler", "invalidHandler"),
    ],
)
def test_torchserve_module_and_method_name_the_archives_file(given: str, file: str) -> None:
    assert handler_file(given) == file


@pytest.mark.parametrize("handler", ["invalidHandler", "image_classifier", "handler.pyc"])
def test_handler_names_nothing_here_runs(handler: str) -> None:
    assert not is_handler_name(handler)


def test_python_runtimes_and_no_runtime_are_taken() -> None:
    for query in ({}, {"runtime": "python"}, {"runtime": "python3"}, {"batch_size": ""}):
        check_registration(query)


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ({"runtime": "python4"}, "unknown runtime 'python4'"),
        ({"handler": "image_classifier"}, "torch-model-archiver --handler image_classifier"),
        ({"handler": "vision"}, "unknown handler 'vision'"),
    ],
)
def test_registration_refusals_say_what_to_do(query: dict[str, str], words: str) -> None:
    with pytest.raises(BadRequestBody, match=words):
        check_registration(query)


def test_registration_settings_are_the_manifests_fields() -> None:
    query = {"batch_size": "4", "max_batch_delay": "100", "handler": "handler.py:handle"}
    assert registration_settings(query) == {
        "batch_size": 4,
        "max_batch_delay_ms": 100,
        "handler": "handler.py:handle",
    }
    assert registration_settings({"batch_size": ""}) == {}


def test_registration_sets_the_models_idle_unload() -> None:
    assert registration_settings({"idle_unload_s": "30"}) == {"idle_unload_s": 30}
    assert registration_settings({"idle_unload_s": "0"}) == {"idle_unload_s": 0}


def test_registration_timeouts_are_the_models_own_in_seconds() -> None:
    query = {"response_timeout": "300", "startup_timeout": "600"}
    assert registration_settings(query) == {"response_timeout_s": 300, "load_timeout_s": 600}


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ({"batch_size": "dd"}, "invalid batch_size 'dd': give a whole number, 1 to"),
        ({"batch_size": "0"}, "invalid batch_size '0': give a whole number, 1 to"),
        ({"max_batch_delay": "-1"}, "invalid max_batch_delay '-1': give a whole number, 0 to"),
        ({"response_timeout": "0"}, "invalid response_timeout '0': give a whole number, 1 to"),
        ({"startup_timeout": "soon"}, "invalid startup_timeout 'soon': give a whole number, 1"),
        ({"idle_unload_s": "-1"}, "invalid idle_unload_s '-1': give a whole number, 0 to"),
        # past it a worker's message cannot carry it: every request would be a 500
        ({"batch_size": str(10**20)}, f"invalid batch_size '{10**20}': give a whole number, 1 to"),
        ({"max_batch_delay": str(2**31)}, "invalid max_batch_delay '2147483648': give a whole"),
    ],
)
def test_registration_settings_out_of_range_are_refused(query: dict[str, str], words: str) -> None:
    with pytest.raises(BadRequestBody, match=words):
        registration_settings(query)


def test_booleans_are_true_or_false_in_any_case() -> None:
    assert boolean("TRUE", "synchronous", default=False) is True
    assert boolean("false", "synchronous", default=True) is False
    assert boolean(None, "synchronous", default=True) is True
    with pytest.raises(BadRequestBody, match="invalid synchronous 'nan': give true or false"):
        boolean("nan", "synchronous", default=True)


def test_a_negative_limit_is_no_limit_given() -> None:
    assert unless_negative("-1") is None
    assert unless_negative("5") == "5"
    assert unless_negative("-x") == "-x"  # not a number: page_size refuses it


def describe_as(api: str) -> tuple[int, Any]:
    """GET /models/reg from the management API answering as `api`, on a host without workers."""
    host, _ = counting_host(registered=["reg"])
    management = TorchServeManagement(SageMakerRoutes(host, HttpSettings(1 << 20, "")), api)
    scope = {**request("/models/reg").scope, "path_params": {"model": "reg"}}
    response = asyncio.run(management.describe(Request(scope)))
    return response.status_code, json.loads(bytes(response.body))


def test_describe_lists_versions() -> None:
    """TorchServe describes a model as a list of its versions."""
    status, body = describe_as("torchserve")
    assert status == 200
    assert isinstance(body, list) and body[0]["modelName"] == "reg"


def test_mms_describes_a_model_as_one_object() -> None:
    status, body = describe_as("mms")
    assert status == 200
    assert isinstance(body, dict) and body["modelName"] == "reg"


def test_an_api_nobody_speaks_is_refused() -> None:
    host, _ = counting_host()
    with pytest.raises(ValueError, match="torchserve"):
        TorchServeManagement(SageMakerRoutes(host, HttpSettings(1 << 20, "")), "kserve")
