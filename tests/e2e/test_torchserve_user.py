"""A TorchServe user's calls, end to end, on a server started with TorchServe's
config.properties: models `load_models` names are served under TorchServe's names, and a call
TorchServe documents that modelhost does not serve says what to do instead. Each test is named
after the request of TorchServe's docs it mirrors."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import grpc
import httpx
import pytest
from helpers.described import CUSTOMIZED, described_mar
from helpers.serving import Servers

from modelhost import testing
from modelhost.rpc.messages import TS_INFERENCE_SERVICE, TS_MANAGEMENT_SERVICE, message
from modelhost.rpc.stubs import Stub

pytestmark = pytest.mark.e2e

ROW = {"instances": testing.iris_rows(1)}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An archive as `torch-model-archiver --model-name densenet161` writes it."""
    root = tmp_path_factory.mktemp("ts-start-store")
    source = testing.mms_handler_folder(tmp_path_factory.mktemp("ts-start-source") / "src")
    testing.mar_of(source, root / "densenet161.mar")
    testing.mar_of(source, root / "noop.mar")
    testing.mar_of(source, root / "noop_v2.mar", version="2.0")
    (source / "model-config.yaml").write_text("minWorkers: 2\nmaxWorkers: 2\n")
    testing.mar_of(source, root / "squeezenet1_1.mar")
    (source / "model-config.yaml").write_text("batchSize: 4\nmaxBatchDelay: 77\n")
    testing.mar_of(source, root / "resnet-18.mar")
    described_mar(tmp_path_factory.mktemp("ts-described"), root / "noop_customized.mar")
    return root


class Started:
    """A server started with TorchServe's config.properties naming `load_models`; with
    `grpc_apart`, its gRPC pairs on addresses apart from the HTTP ones, as TorchServe binds them."""

    def __init__(
        self, serve: Servers, work: Path, store: Path, load_models: str, grpc_apart: bool = False
    ) -> None:
        self.management, self.metrics = testing.free_port(), testing.free_port()
        self.grpc_management, self.grpc_inference = testing.free_port(), testing.free_port()
        apart = (
            f"grpc_inference_address=127.0.0.2\ngrpc_inference_port={self.grpc_inference}\n"
            "grpc_management_address=127.0.0.3\n"
        )
        properties = work / "config.properties"
        properties.write_text(
            f"management_address=http://127.0.0.1:{self.management}\n"
            f"grpc_management_port={self.grpc_management}\n"
            f"metrics_address=http://127.0.0.1:{self.metrics}\n"
            "metrics_mode=prometheus\n"
            "enable_model_api=true\n"
            f"model_store={store}\n"
            f"load_models={load_models}\n"
            "job_queue_size=10\n"
            "disable_token_authorization=true\n" + (apart if grpc_apart else "")
        )
        args = ["--cache-dir", str(work / "cache"), "--workers", "2", "--memory-budget", "2GiB"]
        environ = {**os.environ, "TS_CONFIG_FILE": str(properties)}
        self.server = testing.RunningServer(args, work, env=environ)
        serve.enter_context(self.server)

    def predict(self, name: str) -> httpx.Response:
        return httpx.post(f"{self.server.url}/predictions/{name}", json=ROW, timeout=60)

    def post(self, path: str) -> httpx.Response:
        return httpx.post(f"{self.server.url}{path}", json=ROW, timeout=60)

    def describe(self, name: str, **params: str) -> httpx.Response:
        url = f"http://127.0.0.1:{self.management}/models/{name}"
        return httpx.get(url, params=params, timeout=60)


@pytest.fixture(scope="module")
def named(serve: Servers, store: Path, tmp_path_factory: pytest.TempPathFactory) -> Started:
    work = tmp_path_factory.mktemp("ts-start-named")
    return Started(serve, work, store, "densenet161.mar")


@pytest.fixture(scope="module")
def every(serve: Servers, store: Path, tmp_path_factory: pytest.TempPathFactory) -> Started:
    return Started(serve, tmp_path_factory.mktemp("ts-start-all"), store, "all", grpc_apart=True)


def test_predictions_densenet161_after_models_densenet161_mar(named: Started) -> None:
    """`torchserve --models densenet161.mar`, then `curl /predictions/densenet161 -T …`: the
    quick start's model is named after its archive, without `.mar`, and loaded at start."""
    answer = named.predict("densenet161")
    assert answer.status_code == 200, answer.text
    assert answer.json()["handler"] == "custom handler"
    described = named.describe("densenet161")
    assert described.status_code == 200, described.text
    assert described.json()[0]["loadedAtStartup"] is True


def test_predictions_after_load_models_all(every: Started) -> None:
    """`load_models=all` (TorchServe reads any case) serves every archive of the store by its
    name without `.mar`."""
    answer = every.predict("densenet161")
    assert answer.status_code == 200, answer.text
    described = every.describe("densenet161")
    assert described.status_code == 200, described.text
    assert described.json()[0]["loadedAtStartup"] is True


def test_describe_model_noop(named: Started) -> None:
    """`curl /models/noop`: a list of one description with every field TorchServe's example
    shows, `jobQueueStatus` included (job_queue_size=10, nothing waiting)."""
    (described,) = named.describe("densenet161").json()
    fields = {"modelName", "modelVersion", "modelUrl", "runtime", "minWorkers", "maxWorkers"}
    fields |= {"batchSize", "maxBatchDelay", "workers", "jobQueueStatus"}
    assert fields <= set(described), described
    assert described["jobQueueStatus"] == {"remainingCapacity": 10, "pendingRequests": 0}


@pytest.mark.parametrize("path", ["noop_customized", "noop_customized/1.0"])
def test_describe_noop_customized_with_customized_true(every: Started, path: str) -> None:
    """`curl /models/noop-customized/1.0?customized=true`: the description carries
    `customizedMetadata`, the handler's answer to a request with the `describe` header."""
    answer = every.describe(path, customized="true")
    assert answer.status_code == 200, answer.text
    (described,) = answer.json()
    assert described["customizedMetadata"] == CUSTOMIZED, described
    assert "customizedMetadata" not in every.describe(path).json()[0]


def test_register_squeezenet_starts_the_min_workers_of_its_model_config(named: Started) -> None:
    """`curl -X POST "localhost:8081/models?url=squeezenet1_1.mar"` for an archive whose
    model-config.yaml says minWorkers: 2, maxWorkers: 2: TorchServe starts those workers."""
    url = f"http://127.0.0.1:{named.management}/models"
    registered = httpx.post(url, params={"url": "squeezenet1_1.mar"}, timeout=60)
    assert registered.status_code == 200, registered.text
    said = 'Model "squeezenet1_1" Version: 1.0 registered with 2 initial workers'
    assert registered.json() == {"status": said}
    (described,) = named.describe("squeezenet1_1").json()
    assert (described["minWorkers"], described["maxWorkers"]) == (2, 2), described
    assert [w["status"] for w in described["workers"]] == ["READY", "READY"], described


def test_describe_after_register_shows_the_batching_of_its_model_config(named: Started) -> None:
    """`POST /models?url=resnet-18.mar`, then `GET /models/resnet-18` before any request: the
    batchSize and maxBatchDelay of its model-config.yaml, as TorchServe describes them."""
    url = f"http://127.0.0.1:{named.management}/models"
    registered = httpx.post(url, params={"url": "resnet-18.mar"}, timeout=60)
    assert registered.status_code == 200, registered.text
    (described,) = named.describe("resnet-18").json()
    assert described["workers"] == []
    assert (described["batchSize"], described["maxBatchDelay"]) == (4, 77), described


def test_register_with_handler_as_module_name_and_method_name(named: Started) -> None:
    """`POST /models?url=noop.mar&handler=handler:handle`: TorchServe's handler parameter is
    `module_name:method_name`, the archive's handler.py and its handle function here."""
    url = f"http://127.0.0.1:{named.management}/models"
    params = {"url": "noop.mar", "model_name": "noop_handle", "handler": "handler:handle"}
    registered = httpx.post(url, params=params, timeout=60)
    assert registered.status_code == 200, registered.text
    assert named.predict("noop_handle").json()["handler"] == "custom handler"


def test_get_metrics_labels_the_version_a_request_names(named: Started) -> None:
    """`curl /predictions/noop`, `/predictions/noop/2.0` and `/predictions/noop/1.0`, then
    `curl :8082/metrics`: TorchServe counts each under `model_name="noop"`, with
    `model_version` the version named, or "default". A version not registered is 404 naming
    the versions there are."""
    management = f"http://127.0.0.1:{named.management}/models"
    for url in ("noop.mar", "noop_v2.mar"):
        registered = httpx.post(management, params={"url": url, "model_name": "noop"}, timeout=60)
        assert registered.status_code == 200, registered.text
    for path in ("noop", "noop/2.0", "noop/1.0"):
        assert named.predict(path).status_code == 200
    unknown = named.predict("noop/9.9")
    assert unknown.status_code == 404, unknown.text
    assert "version '9.9'" in unknown.json()["message"], unknown.text  # not "not in the store"
    text = httpx.get(f"http://127.0.0.1:{named.metrics}/metrics", timeout=60).text
    counted = re.findall(
        r'ts_inference_requests_total\{model_name="(noop(?:/[^"]*)?)",'
        r'model_version="([^"]*)",[^}]*\} (\S+)',
        text,
    )
    assert sorted(counted) == [
        ("noop", "1.0", "1.0"),
        ("noop", "2.0", "1.0"),
        ("noop", "default", "1.0"),
    ], text


@pytest.mark.parametrize(("path", "words"), [("/wfpredict/densenet_wf", "workflows")])
def test_torchserve_calls_not_served_say_what_to_do(named: Started, path: str, words: str) -> None:
    """A workflow's `/wfpredict/{workflow}`: modelhost serves none, and the 404 says so and
    names what to call instead."""
    answer = named.post(path)
    assert answer.status_code == 404, answer.text
    message = answer.json()["message"]
    assert words in message and "/predictions/" in message, message
    assert "migrating-torchserve.md" in message, message


def test_register_workflow_says_what_to_do(named: Started) -> None:
    """`POST /workflows?url=dog_breed_wf.war` on the management port: not served, and the
    404 names what to do."""
    url = f"http://127.0.0.1:{named.management}/workflows"
    answer = httpx.post(url, params={"url": "dog_breed_wf.war"}, timeout=60)
    assert answer.status_code == 404, answer.text
    message = answer.json()["message"]
    assert "workflows" in message and "migrating-torchserve.md" in message, message


def test_scale_noop_with_min_worker_0(named: Started) -> None:
    """`curl -X PUT "localhost:8081/models/noop?min_worker=0&synchronous=true"`: TorchServe
    stops the model's workers and answers "Workers scaled to 0"; describe then shows
    minWorkers 0 and no worker. Where TorchServe answers the next prediction 503, modelhost
    loads the model again on it."""
    url = f"http://127.0.0.1:{named.management}/models"
    params = {"url": "noop.mar", "model_name": "noop_scaled", "initial_workers": "1"}
    registered = httpx.post(url, params=params, timeout=60)
    assert registered.status_code == 200, registered.text
    params = {"min_worker": "0", "synchronous": "true"}
    scaled = httpx.put(f"{url}/noop_scaled", params=params, timeout=60)
    assert scaled.status_code == 200, scaled.text
    assert scaled.json() == {"status": "Workers scaled to 0 for model: noop_scaled"}
    (described,) = named.describe("noop_scaled").json()
    assert (described["minWorkers"], described["workers"]) == (0, []), described
    assert named.predict("noop_scaled").status_code == 200
    (described,) = named.describe("noop_scaled").json()
    assert [w["status"] for w in described["workers"]] == ["READY"], described


def test_grpc_ping_and_list_models_on_the_grpc_addresses(every: Started) -> None:
    """TorchServe's gRPC client (docs/grpc_api.md) calls `Ping` on grpc_inference_address and
    grpc_inference_port, and `ListModels` on the management pair: addresses apart from the
    HTTP ones, as TorchServe binds them."""
    with grpc.insecure_channel(f"127.0.0.2:{every.grpc_inference}") as channel:
        empty = message("google.protobuf.Empty")()
        ping = Stub(channel, TS_INFERENCE_SERVICE).Ping(empty, timeout=30)
    assert json.loads(ping.health) == {"status": "Healthy"}
    with grpc.insecure_channel(f"127.0.0.3:{every.grpc_management}") as channel:
        listing = message("org.pytorch.serve.grpc.management.ListModelsRequest")()
        listed = Stub(channel, TS_MANAGEMENT_SERVICE).ListModels(listing, timeout=30)
    assert "models" in json.loads(listed.msg), listed.msg


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        ("/models/densenet161", {"GET", "HEAD", "PUT", "DELETE"}),
        ("/models", {"GET", "HEAD", "POST"}),
    ],
)
def test_patch_models_names_every_method_the_path_takes(
    named: Started, path: str, methods: set[str]
) -> None:
    """`curl -X PATCH localhost:8081/models/densenet161`: TorchServe answers 405
    MethodNotAllowedException. The answer named only the first route's methods ("this path
    takes HEAD, GET"), though PUT scales and DELETE unregisters there."""
    answer = httpx.patch(f"http://127.0.0.1:{named.management}{path}", timeout=60)
    assert answer.status_code == 405, answer.text
    assert answer.json()["type"] == "MethodNotAllowedException"
    allowed = {method.strip() for method in answer.headers["Allow"].split(",")}
    assert allowed == methods, answer.headers
    assert all(method in answer.json()["message"] for method in methods), answer.text


def test_scale_noop_down_with_max_worker(named: Started) -> None:
    """`curl -X PUT "localhost:8081/models/noop?min_worker=1&max_worker=1&synchronous=true"` on
    a model with two workers: TorchServe stops one and answers "Workers scaled to 1". The
    answer said 2, and describe showed maxWorkers 1 beside two workers."""
    url = f"http://127.0.0.1:{named.management}/models"
    params = {"url": "noop.mar", "model_name": "noop_down", "initial_workers": "2"}
    registered = httpx.post(url, params=params, timeout=60)
    assert registered.status_code == 200, registered.text
    params = {"min_worker": "1", "max_worker": "1", "synchronous": "true"}
    scaled = httpx.put(f"{url}/noop_down", params=params, timeout=60)
    assert scaled.json() == {"status": "Workers scaled to 1 for model: noop_down"}, scaled.text
    (described,) = named.describe("noop_down").json()
    assert (described["maxWorkers"], len(described["workers"])) == (1, 1), described
    assert named.predict("noop_down").status_code == 200


def test_register_with_a_json_body(named: Started) -> None:
    """`curl -X POST localhost:8081/models -H "Content-Type: application/json" -d
    '{"url": "noop.mar", "model_name": "noop_json", "initial_workers": 1}'`: TorchServe reads
    a JSON body's fields as the query's. It was 400 "Parameter url is required."."""
    url = f"http://127.0.0.1:{named.management}/models"
    body = {"url": "noop.mar", "model_name": "noop_json", "initial_workers": 1}
    registered = httpx.post(url, json={**body, "synchronous": True}, timeout=60)
    assert registered.status_code == 200, registered.text
    said = 'Model "noop_json" Version: 1.0 registered with 1 initial workers'
    assert registered.json() == {"status": said}
    as_json = {"Content-Type": "application/json"}
    bad = httpx.post(url, content=b'["noop.mar"]', headers=as_json)
    assert bad.status_code == 400 and "JSON object" in bad.json()["message"], bad.text
    query = {"url": "noop.mar", "model_name": "noop_query"}  # no body: the query stands
    assert httpx.post(url, params=query, headers=as_json, timeout=60).status_code == 200


def test_invocations_without_model_name_after_models_densenet161_mar(
    named: Started, every: Started
) -> None:
    """`torchserve --models densenet161.mar`, then `curl -X POST localhost:8080/invocations -T
    …` with no model_name: TorchServe invokes its one startup model (as SageMaker's PyTorch
    containers call it); it was 400 here. With several startup models both answer 400."""
    answer = named.post("/invocations")
    assert answer.status_code == 200, answer.text
    assert answer.json()["handler"] == "custom handler"
    several = every.post("/invocations")
    assert several.status_code == 400 and "model_name" in several.json()["message"], several.text


def test_scale_noop_down_with_min_worker_alone(named: Started) -> None:
    """`curl -X PUT "localhost:8081/models/noop?min_worker=1&synchronous=true"` on a model with
    two workers: TorchServe's max_worker defaults to min_worker, so it stops one and answers
    "Workers scaled to 1". The model stayed on two, and the answer said 2."""
    url = f"http://127.0.0.1:{named.management}/models"
    params = {"url": "noop.mar", "model_name": "noop_min", "initial_workers": "2"}
    registered = httpx.post(url, params=params, timeout=60)
    assert registered.status_code == 200, registered.text
    scaled = httpx.put(f"{url}/noop_min", params={"min_worker": "1", "synchronous": "true"})
    assert scaled.json() == {"status": "Workers scaled to 1 for model: noop_min"}, scaled.text
    (described,) = named.describe("noop_min").json()
    assert (described["maxWorkers"], len(described["workers"])) == (1, 1), described


def test_register_with_s3_sse_kms_over_https_names_the_s3_url(named: Started) -> None:
    """`POST /models?url=https://…/squeezenet1_1.mar&s3_sse_kms=true` (TorchServe's encrypted
    model serving): TorchServe signs that download with AWS credentials, modelhost does not, so
    the 400 asks for the s3:// URL its S3 store signs. It was the allowed-urls 403, then S3's
    refusal of an unsigned download. A local archive needs no signing, as in TorchServe."""
    url = f"http://127.0.0.1:{named.management}/models"
    https = "https://torchserve.pytorch.org/sse-test/squeezenet1_1.mar"
    refused = httpx.post(url, params={"url": https, "s3_sse_kms": "true"}, timeout=60)
    assert refused.status_code == 400, refused.text
    assert "s3://" in refused.json()["message"], refused.text
    params = {"url": "noop.mar", "model_name": "noop_kms", "s3_sse_kms": "true"}
    assert httpx.post(url, params=params, timeout=60).status_code == 200


def test_grpc_register_with_s3_sse_kms_over_https_names_the_s3_url(named: Started) -> None:
    """gRPC's RegisterModel with `s3_sse_kms: true` and an https URL: refused as over REST
    (INVALID_ARGUMENT naming s3://). The field was dropped, and the URL refused as outside
    --allowed-urls."""
    request = message("org.pytorch.serve.grpc.management.RegisterModelRequest")(
        url="https://torchserve.pytorch.org/sse-test/squeezenet1_1.mar", s3_sse_kms=True
    )
    address = f"127.0.0.1:{named.grpc_management}"
    with grpc.insecure_channel(address) as channel, pytest.raises(grpc.RpcError) as refused:
        Stub(channel, TS_MANAGEMENT_SERVICE).RegisterModel(request, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value
    assert "s3://" in str(refused.value.details()), refused.value


def test_list_models_with_limit_0_or_a_token_past_the_end(named: Started) -> None:
    """`curl "localhost:8081/models?limit=0"`: TorchServe answers no models and a nextPageToken
    equal to the token given, which a client following it requests forever; modelhost answers
    400 with the range. A token past the end is an empty last page, as in TorchServe."""
    url = f"http://127.0.0.1:{named.management}/models"
    zero = httpx.get(url, params={"limit": "0"}, timeout=60)
    assert zero.status_code == 400 and "from 1 to 1000" in zero.json()["message"], zero.text
    past = httpx.get(url, params={"next_page_token": "1000000"}, timeout=60)
    assert past.status_code == 200 and past.json() == {"models": []}, past.text


def test_register_with_a_torchserve_built_in_handler_says_where_to_name_it(
    named: Started,
) -> None:
    """`POST /models?url=noop.mar&handler=image_classifier`: TorchServe runs its built-in
    handler over the archive's own. modelhost runs those only as an archive's handler, so the
    400 says to name it with torch-model-archiver --handler; it listed modelhost's handlers."""
    url = f"http://127.0.0.1:{named.management}/models"
    params = {"url": "noop.mar", "model_name": "noop_vision", "handler": "image_classifier"}
    refused = httpx.post(url, params=params, timeout=60)
    assert refused.status_code == 400, refused.text
    assert "torch-model-archiver --handler image_classifier" in refused.json()["message"]
