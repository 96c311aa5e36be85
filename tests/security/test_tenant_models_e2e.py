"""`--tenant-models name:N`: a tenant named by its token or header invokes its own models and the
shared ones, and another tenant's is 403 on every protocol, before anything is loaded."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton
from helpers.fronts import hit_with_the_main_process_stopped, raw_request
from helpers.serving import Servers
from tritonclient.utils import InferenceServerException

from modelhost import testing

pytestmark = pytest.mark.e2e

T7_MODEL, T12_MODEL, SHARED = "tenants/t7/iris.pkl", "tenants/t12/iris.pkl", "shared/iris.pkl"
TOKENS = {"tok-t7-8c1e": "tenants/t7", "tok-t12-4b0d": "tenants/t12"}
ROWS = testing.iris_rows(1)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tenant-models-store")
    for name in (T7_MODEL, T12_MODEL, SHARED):
        testing.iris_logreg(root / name)
    return root


@pytest.fixture(scope="module")
def by_token(
    store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> tuple[testing.RunningServer, int]:
    tokens = tmp_path_factory.mktemp("tokens") / "tokens.toml"
    tokens.write_text("[tokens]\n" + "".join(f'"{t}" = "{n}"\n' for t, n in TOKENS.items()))
    grpc_port = testing.free_port()
    settings = {"tenant_from": "token", "tenant_tokens_file": tokens, "grpc_port": grpc_port}
    return serve(store, workers=1, tenant_models="name:2", **settings), grpc_port


def invoke(
    server: testing.RunningServer, model: str, token: str = "", **headers: str
) -> httpx.Response:
    """`model` invoked with `token`, or else `headers` (their names' _ as -)."""
    sent = {"Authorization": f"Bearer {token}"} if token else {}
    sent |= {name.replace("_", "-"): value for name, value in headers.items()}
    return httpx.post(f"{server.url}/models/{model}/invoke", json=ROWS, headers=sent, timeout=60)


def test_a_tenant_invokes_its_own_models_and_the_shared_ones(
    by_token: tuple[testing.RunningServer, int],
) -> None:
    server, _ = by_token
    assert invoke(server, T7_MODEL, "tok-t7-8c1e").status_code == 200
    assert invoke(server, SHARED, "tok-t7-8c1e").status_code == 200
    assert invoke(server, SHARED, "tok-t12-4b0d").status_code == 200


def test_another_tenant_s_model_is_403_and_never_loaded(
    by_token: tuple[testing.RunningServer, int],
) -> None:
    server, _ = by_token
    answer = invoke(server, T12_MODEL, "tok-t7-8c1e")
    assert answer.status_code == 403, answer.text
    error = answer.json()
    assert error["type"] == "OtherTenantsModel"
    assert "tenants/t7" in error["message"] and "--tenant-models" in error["message"]
    assert not [event for event in server.events("load") if event["model"] == T12_MODEL]
    sagemaker = httpx.post(
        f"{server.url}/invocations",
        json=ROWS,
        headers={"Authorization": "Bearer tok-t7-8c1e", "X-Amzn-SageMaker-Target-Model": T12_MODEL},
        timeout=60,
    )
    assert sagemaker.status_code == 403, sagemaker.text


def test_another_tenant_s_model_is_permission_denied_over_grpc(
    by_token: tuple[testing.RunningServer, int],
) -> None:
    server, grpc_port = by_token
    client = triton.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    tensor = triton.InferInput("input-0", [1, 4], "FP64")
    tensor.set_data_from_numpy(np.asarray(ROWS, dtype=np.float64))
    headers = {"authorization": "Bearer tok-t12-4b0d"}
    try:
        own = client.infer(T12_MODEL, [tensor], headers=headers)
        assert own.as_numpy("predict").tolist() == [0]
        with pytest.raises(InferenceServerException) as refused:
            client.infer(T7_MODEL, [tensor], headers=headers)
    finally:
        client.close()
    assert refused.value.status() == str(grpc.StatusCode.PERMISSION_DENIED)


def test_a_front_answers_its_tenant_s_own_models_and_relays_the_others(
    store: Path, serve: Servers
) -> None:
    settings = {"tenant_from": "header", "tenant_models": "name:2", "memory_budget": "2GiB"}
    server = serve(store, workers=1, fronts=2, load_models=f"{T7_MODEL},{T12_MODEL}", **settings)
    body, tenant = json.dumps(ROWS).encode(), "x-modelhost-tenant: tenants/t7"
    own, others = (
        raw_request(f"/models/{model}/invoke", body, "content-type: application/json", tenant)
        for model in (T7_MODEL, T12_MODEL)
    )
    assert b" 200 " in hit_with_the_main_process_stopped(server, own).split(b"\r\n")[0]
    assert hit_with_the_main_process_stopped(server, others, tries=1) == b""
    refused = invoke(server, T12_MODEL, x_modelhost_tenant="tenants/t7")
    assert refused.status_code == 403, refused.text


def test_an_untrusted_tenant_by_token_has_its_models_sandboxed(
    store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Under --tenant-models a model's name says whose it is, so its trust follows it."""
    folder = tmp_path_factory.mktemp("untrusted")
    (folder / "tokens.toml").write_text(
        '[tokens]\n"tok-t7" = "tenants/t7"\n"tok-t12" = "tenants/t12"\n'
    )
    (folder / "tenants.toml").write_text('[tenants."tenants/t12"]\ntrust = "untrusted"\n')
    server = serve(
        store,
        workers=2,
        untrusted_workers=1,
        tenant_from="token",
        tenant_tokens_file=folder / "tokens.toml",
        tenant_models="name:2",
        tenants_file=folder / "tenants.toml",
    )
    assert invoke(server, T7_MODEL, "tok-t7").status_code == 200
    refused = invoke(server, T12_MODEL, "tok-t12")
    assert refused.status_code == 500, refused.text
    assert refused.json()["type"] == "UnsafeArtifact"
    assert 'tenant tenants/t12 has trust = "untrusted"' in refused.json()["message"]
