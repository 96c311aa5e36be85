"""The tenant tokens file on a running server: a token handed out works and a revoked one is 401
on every protocol without a restart; a file with a mistake keeps the last good tokens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from helpers.reloads import reloaded, write
from helpers.serving import Servers
from tritonclient.grpc import service_pb2, service_pb2_grpc

from modelhost import testing

pytestmark = pytest.mark.e2e

MODEL = "iris.pkl"
ROWS = testing.iris_rows(1)
RELOADS = ("tenant_tokens_file_loaded", "tenant_tokens_file_rejected")
ACME_OLD, ACME_NEW, UMBRELLA = "tok-acme-old-5f1c", "tok-acme-new-77d0", "tok-umbrella-09ab"


def tokens(pairs: dict[str, str]) -> str:
    return "[tokens]\n" + "".join(f'"{token}" = "{tenant}"\n' for token, tenant in pairs.items())


class Served:
    def __init__(self, server: testing.RunningServer, tokens_file: Path, grpc_port: int) -> None:
        self.server, self.tokens_file = server, tokens_file
        self.http = httpx.Client(base_url=server.url, timeout=30)
        self.grpc = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")

    def reload(self, text: str) -> dict[str, Any]:
        return reloaded(self.server, self.tokens_file, text, RELOADS)

    def invoke(self, token: str) -> httpx.Response:
        headers = {"authorization": f"Bearer {token}"}
        return self.http.post(f"/models/{MODEL}/invoke", json=ROWS, headers=headers)

    def infer_grpc(self, token: str) -> grpc.StatusCode:
        request = service_pb2.ModelInferRequest(model_name=MODEL)
        tensor = request.inputs.add(name="input-0", datatype="FP64", shape=[1, 4])
        tensor.contents.fp64_contents.extend(ROWS[0])
        stub = service_pb2_grpc.GRPCInferenceServiceStub(self.grpc)
        try:
            stub.ModelInfer(request, metadata=(("authorization", f"Bearer {token}"),))
        except grpc.RpcError as error:
            return error.code()  # type: ignore[no-any-return]
        return grpc.StatusCode.OK


@pytest.fixture(scope="module")
def served(
    store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tokens_file = tmp_path_factory.mktemp("tokens") / "tokens.toml"
    write(tokens_file, tokens({ACME_OLD: "acme"}))
    grpc_port = testing.free_port()
    server = serve(
        store,
        workers=1,
        tenant_from="token",
        tenant_tokens_file=tokens_file,
        grpc_port=grpc_port,
    )
    result = Served(server, tokens_file, grpc_port)
    yield result
    result.http.close()
    result.grpc.close()


def test_a_new_token_works_and_a_removed_one_is_refused_without_a_restart(served: Served) -> None:
    assert served.invoke(ACME_OLD).status_code == 200
    assert served.invoke(ACME_NEW).status_code == 401
    loaded = served.reload(tokens({ACME_NEW: "acme", UMBRELLA: "umbrella"}))
    assert loaded["kind"] == "tenant_tokens_file_loaded"
    assert (loaded["detail"]["tokens"], loaded["detail"]["tenants"]) == (2, 2)
    assert [served.invoke(t).status_code for t in (ACME_NEW, UMBRELLA, ACME_OLD)] == [200, 200, 401]
    assert [served.infer_grpc(t) for t in (ACME_NEW, ACME_OLD)] == [
        grpc.StatusCode.OK,
        grpc.StatusCode.UNAUTHENTICATED,
    ]


def test_a_bad_edit_keeps_the_last_good_tokens_and_shows_none(served: Served) -> None:
    """A tenant id with a space on line 3 is refused with an event naming the token's place; the
    last good tokens still answer, the new file's do not, and no token's text is shown."""
    served.reload(tokens({ACME_NEW: "acme"}))
    rejected = served.reload(tokens({ACME_NEW: "acme", UMBRELLA: "the umbrella"}))
    assert rejected["kind"] == "tenant_tokens_file_rejected"
    assert "invalid tenant 'the umbrella' from token 2" in rejected["detail"]["error"]
    assert "the tenant tokens file is refused, the last good one stays" in served.server.log_text()
    assert [served.invoke(t).status_code for t in (ACME_NEW, UMBRELLA)] == [200, 401]
    shown = str(served.server.events()) + served.server.log_text()
    assert ACME_NEW not in shown and UMBRELLA not in shown
