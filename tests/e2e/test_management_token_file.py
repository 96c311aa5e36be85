"""The management token from a file on a running server: a rotated token is the one management
calls from elsewhere need, over REST and gRPC, with no restart; a file with a mistake keeps the
last good token, and neither its events nor its log show a token."""

from __future__ import annotations

from pathlib import Path

import grpc
import httpx
import pytest
from helpers.reloads import reloaded, write
from helpers.serving import Servers
from tritonclient.grpc import service_pb2, service_pb2_grpc

from modelhost import testing

pytestmark = pytest.mark.e2e

OLD, NEW = "mgmt-old-3b9e51", "mgmt-new-c41a07"
RELOADS = ("management_token_file_loaded", "management_token_file_rejected")
ELSEWHERE = "models.example.com"  # a loopback caller naming another machine: from elsewhere


def unload_over_rest(server: testing.RunningServer, token: str) -> int:
    """DELETE of a model not loaded: 404 once let in."""
    headers = {"host": ELSEWHERE, "authorization": f"Bearer {token}"}
    return httpx.delete(f"{server.url}/models/not-loaded.pkl", headers=headers).status_code


def unload_over_grpc(port: int, token: str) -> grpc.StatusCode:
    options = [("grpc.default_authority", ELSEWHERE)]
    with grpc.insecure_channel(f"127.0.0.1:{port}", options) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.RepositoryModelUnloadRequest(model_name="iris.pkl")
        try:
            stub.RepositoryModelUnload(request, metadata=(("authorization", f"Bearer {token}"),))
        except grpc.RpcError as error:
            return error.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_a_rotated_management_token_takes_effect_without_a_restart(
    store: Path, serve: Servers, tmp_path: Path
) -> None:
    token_file = tmp_path / "management-token"
    write(token_file, f"{OLD}\n")
    grpc_port = testing.free_port()
    server = serve(store, workers=1, management_token_file=token_file, grpc_port=grpc_port)
    assert unload_over_rest(server, OLD) == 404
    assert unload_over_grpc(grpc_port, OLD) == grpc.StatusCode.OK
    assert unload_over_rest(server, NEW) == 401
    loaded = reloaded(server, token_file, f"{NEW}\n", RELOADS)
    assert loaded["kind"] == "management_token_file_loaded"
    assert (unload_over_rest(server, NEW), unload_over_rest(server, OLD)) == (404, 401)
    assert unload_over_grpc(grpc_port, NEW) == grpc.StatusCode.OK
    assert unload_over_grpc(grpc_port, OLD) == grpc.StatusCode.UNAUTHENTICATED
    rejected = reloaded(server, token_file, "two words\n", RELOADS)
    assert rejected["kind"] == "management_token_file_rejected"
    assert unload_over_rest(server, NEW) == 404  # the last good one stays
    log = server.log_text()
    assert OLD not in log and NEW not in log and "Traceback" not in log
