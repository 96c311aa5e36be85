"""bench --endpoint-name against a local InvokeEndpoint stand-in on loopback that recomputes each
request's AWS Signature Version 4 from the secret it shares with the test: signed requests with
the right secret are answered, a wrong secret is refused (403), as SageMaker would."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from click.testing import CliRunner
from helpers.loopback import http_server

from modelhost.cli.main import main

pytestmark = pytest.mark.e2e

KEY_ID, SECRET, REGION = "AKIDTESTKEY", "test-secret-key", "eu-west-3"
AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<day>\d{8})/(?P<region>[^/]+)/sagemaker/"
    r"aws4_request, SignedHeaders=(?P<signed>[^,]+), Signature=(?P<signature>[0-9a-f]{64})"
)


def signature_is_valid(method: str, url: str, headers: dict[str, str], body: bytes) -> bool:
    """SigV4 recomputed over the headers the client says it signed, at the time it gives."""
    found = AUTHORIZATION.fullmatch(headers.get("authorization", ""))
    if not found or found["key"] != KEY_ID or found["region"] != REGION:
        return False
    signed = found["signed"].split(";")
    request = AWSRequest(
        method=method, url=url, data=body, headers={h: headers[h] for h in signed if h != "host"}
    )
    request.context["timestamp"] = headers["x-amz-date"]
    auth = SigV4Auth(Credentials(KEY_ID, SECRET), "sagemaker", REGION)
    if sorted(auth.headers_to_sign(request)) != sorted(signed):
        return False
    canonical = auth.canonical_request(request)
    return bool(
        auth.signature(auth.string_to_sign(request, canonical), request) == found["signature"]
    )


class InvokeEndpoint(BaseHTTPRequestHandler):
    targets: list[str] = []  # the TargetModel of each request

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        headers = {k.lower(): v for k, v in self.headers.items()}
        url = f"http://{headers['host']}{self.path}"
        good = self.path == "/endpoints/my-endpoint/invocations" and signature_is_valid(
            "POST", url, headers, body
        )
        model = headers.get("x-amzn-sagemaker-target-model", "")
        self.targets.append(model)
        reply = json.dumps({"model": model} if good else {"message": "signature mismatch"})
        self.send_response(200 if good else 403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply.encode())

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def stand_in() -> Iterator[str]:
    with http_server(InvokeEndpoint) as url:
        yield url


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The standard chain finds only these keys (no ~/.aws, no instance metadata)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def bench(stand_in: str, out: Path, *models: str) -> dict:
    result = CliRunner().invoke(
        main,
        ["bench", "--endpoint-name", "my-endpoint", "--region", REGION,
         "--endpoint-url", stand_in, *(models or ("--models", "a.tar.gz,b.tar.gz")),
         "--concurrency", "2", "--requests", "30", "--warmup", "0", "--processes", "2",
         "--quiet", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary: dict = json.loads((out / "summary.json").read_text())
    return summary


def test_signed_invocations_pass_the_signature_check(stand_in: str, tmp_path: Path) -> None:
    summary = bench(stand_in, tmp_path)
    assert summary["requests"]["by_status"] == {"200": 30}
    assert summary["target"] == f"{stand_in}/endpoints/my-endpoint/invocations"


def test_a_wrong_secret_is_refused(
    stand_in: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    summary = bench(stand_in, tmp_path)
    assert summary["requests"]["by_status"] == {"403": 30}


def test_no_credentials_is_a_usage_error(
    stand_in: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = CliRunner().invoke(
        main, ["bench", "--endpoint-name", "e", "--region", REGION, "--concurrency", "1",
               "--endpoint-url", stand_in, "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2 and "no AWS credentials" in result.output


def test_unknown_profile_is_a_usage_error(
    stand_in: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS_PROFILE naming no profile is a message, not botocore's traceback."""
    monkeypatch.setenv("AWS_PROFILE", "prod")
    result = CliRunner().invoke(
        main, ["bench", "--endpoint-name", "e", "--region", REGION, "--concurrency", "1",
               "--endpoint-url", stand_in, "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "(prod) could not be found" in result.output


def test_target_model_names_the_model(stand_in: str, tmp_path: Path) -> None:
    """TargetModel names the model of a multi-model endpoint."""
    InvokeEndpoint.targets.clear()
    summary = bench(stand_in, tmp_path, "--target-model", "tenant-7/churn.tar.gz")
    assert summary["requests"]["by_status"] == {"200": 30}
    assert set(InvokeEndpoint.targets) == {"tenant-7/churn.tar.gz"}
