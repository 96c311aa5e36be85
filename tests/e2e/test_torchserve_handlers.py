"""TorchServe `.mar` files served unchanged by a real server with real workers: a BaseHandler
subclass and the built-in vision handlers answer as TorchServe's own code does in-process,
handler metrics reach /metrics, and archives that cannot load say what to do."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing
from modelhost.testing import torchserve

pytestmark = pytest.mark.e2e

ROWS = [[5.1, 3.5, 1.4, 0.2], [6.0, 2.9, 4.5, 1.5], [7.7, 3.0, 6.1, 2.3]]
JSON = {"content-type": "application/json"}
STREAM_HANDLER = """from ts.handler_utils.utils import send_intermediate_predict_response


def handle(data, context):
    if type(data) is list:  # None when TorchServe initializes a module handler
        for _ in range(3):
            send_intermediate_predict_response(["hello"], context.request_ids, "ok", 200, context)
        return ["hello world"]
"""


def imports(module: str) -> bool:
    try:
        __import__(module)
    except Exception:  # noqa: BLE001  (a CUDA torchvision beside a CPU torch raises RuntimeError)
        return False
    return True


@pytest.fixture(scope="module")
def ts_store(tmp_path_factory: pytest.TempPathFactory, torch_installed: None) -> Path:
    pytest.importorskip("ts", reason="pip install 'modelhost[torchserve-handlers]'")
    root = tmp_path_factory.mktemp("ts-handlers")
    torchserve.custom_handler_mar(root / "rows.mar", seed=3)
    torchserve.image_classifier_mar(root / "image.mar", seed=4)
    torchserve.image_segmenter_mar(root / "segments.mar", seed=6)
    torchserve.object_detector_mar(root / "objects.mar", seed=7)
    torchserve.text_classifier_mar(root / "text.mar", seed=8)
    torchserve.png(root / ".inputs/picture.png", seed=5)
    _rewritten(torchserve.custom_handler_mar(root / ".src/old.mar"), root / "old.mar", _old_import)
    _rewritten(torchserve.custom_handler_mar(root / ".src/typo.mar"), root / "typo.mar", _typo)
    (root / ".src/stream").mkdir()
    (root / ".src/stream/handler.py").write_text(STREAM_HANDLER)
    testing.mar_of(root / ".src/stream", root / "echo_stream.mar")
    return root


@pytest.fixture(scope="module")
def ts_server(ts_store: Path, serve: Servers) -> testing.RunningServer:
    return serve(ts_store, workers=1, memory_budget="4GiB")


@pytest.fixture
def http(ts_server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=ts_server.url, timeout=120) as client:
        yield client


def test_a_base_handler_mar_answers_as_torchserve_does(http: httpx.Client, ts_store: Path) -> None:
    expected = torchserve.torchserve_answers(ts_store / "rows.mar", ROWS)
    answers = []
    for row in ROWS:
        response = http.post("/predictions/rows.mar", content=json.dumps(row), headers=JSON)
        assert response.status_code == 200, response.text
        answers.append(response.json())
    assert answers == expected


def test_the_first_archive_is_not_charged_torch(
    http: httpx.Client, ts_server: testing.RunningServer
) -> None:
    """torch's import (about 110 MB) stays when the model goes: the worker's, not the model's."""
    assert http.post("/predictions/rows.mar", content=json.dumps(ROWS[0]), headers=JSON).is_success
    (first, *_) = ts_server.events("load")
    assert first["bytes"] < 32 * 2**20, first


def test_a_built_in_handlers_imports_are_not_its_archives(
    http: httpx.Client, ts_server: testing.RunningServer, ts_store: Path
) -> None:
    """text_classifier imports captum (about 25 MB) that stays when the model goes; vision's
    handlers import torchvision and captum as theirs. Each load is charged about its archive."""
    assert http.post("/predictions/rows.mar", content=json.dumps(ROWS[0]), headers=JSON).is_success
    text = {"content-type": "text/plain"}
    response = http.post("/predictions/text.mar", content="the fox did not see a bee", headers=text)
    assert response.status_code == 200, response.text
    loads = {load["model"]: load["bytes"] for load in ts_server.events("load")}
    archive = (ts_store / "text.mar").stat().st_size
    assert loads["text.mar"] < archive + 8 * 2**20, (archive, loads)


def test_handler_metrics_show_in_metrics(http: httpx.Client) -> None:
    """RowsSeen is the handler's own counter; HandlerTime is BaseHandler.handle's."""
    for row in ROWS:
        assert http.post("/predictions/rows.mar", content=json.dumps(row), headers=JSON).is_success
    text = http.get("/metrics").text
    counted = re.search(r"^modelhost_handler_rowsseen_count_total\{(.*)\} (\S+)$", text, re.M)
    assert counted is not None, text
    assert sorted(counted.group(1).split(",")) == ['kind="rows"', 'model="rows.mar"']
    assert float(counted.group(2)) >= len(ROWS)
    assert 'modelhost_handler_handlertime_ms{model="rows.mar"}' in text


def test_text_classifier_mar_answers_as_torchserve_does(http: httpx.Client, ts_store: Path) -> None:
    """TorchServe's text_classifier: its cleanup, contractions and bigrams, then the model."""
    text = "The fox <b>didn't</b> see the owl!"
    expected = torchserve.torchserve_answers(ts_store / "text.mar", [text.encode()])
    response = http.post(
        "/predictions/text.mar", content=text, headers={"content-type": "text/plain"}
    )
    assert response.status_code == 200, response.text
    assert response.json() == expected[0]
    assert sorted(expected[0]) == ["negative", "positive"]


@pytest.fixture(scope="module")
def vision_server(ts_store: Path, serve: Servers, vision_python: str) -> testing.RunningServer:
    """Served from the venv where torchvision imports."""
    command = [vision_python, "-m", "modelhost", "serve"]
    return serve(ts_store, command=command, workers=1, memory_budget="4GiB")


@pytest.mark.parametrize("archive", ["image.mar", "segments.mar", "objects.mar"])
def test_vision_mar_answers_as_torchserve_does(
    ts_store: Path, vision_server: testing.RunningServer, vision_python: str, archive: str
) -> None:
    """The built-in handler the archive names, against TorchServe's own code in the same venv."""
    picture = (ts_store / ".inputs/picture.png").read_bytes()
    expected = torchserve.torchserve_answers(ts_store / archive, [picture], vision_python)
    with httpx.Client(base_url=vision_server.url, timeout=120) as client:
        response = client.post(
            f"/predictions/{archive}", content=picture, headers={"content-type": "image/png"}
        )
    assert response.status_code == 200, response.text
    assert response.json() == expected[0]
    assert expected[0], "an empty answer would not show the handler at work"


def test_image_classifier_without_torchvision_says_what_to_install(http: httpx.Client) -> None:
    if imports("torchvision"):
        pytest.skip("torchvision is installed: the test above serves image_classifier")
    response = http.post("/predictions/image.mar", content=b"\x89PNG", headers=JSON)
    assert response.status_code == 500
    message = response.json()["message"]
    assert "image_classifier" in message
    assert "pip install 'modelhost[torchserve-vision]'" in message, message


def test_missing_ts_module_is_a_load_error(http: httpx.Client) -> None:
    """A `ts` module TorchServe lacks is a load error that says why."""
    response = http.post("/predictions/old.mar", content=json.dumps(ROWS[0]), headers=JSON)
    assert response.status_code == 500
    message = response.json()["message"]
    assert "ts.torch_handler.legacy" in message and "does not provide" in message


def test_an_unknown_built_in_handler_gets_the_known_ones(http: httpx.Client) -> None:
    response = http.post("/predictions/typo.mar", content=json.dumps(ROWS[0]), headers=JSON)
    assert response.status_code == 500
    message = response.json()["message"]
    assert "image_classifer" in message
    assert "image_classifier, image_segmenter, object_detector, text_classifier" in message


def test_echo_stream_inference_says_streaming_is_not_served(http: httpx.Client) -> None:
    """TorchServe's streaming example: a handler calling `send_intermediate_predict_response`
    is answered a 500 that names the call and what to do, not an AttributeError."""
    response = http.post("/predictions/echo_stream.mar", content=b"foo")
    assert response.status_code == 500, response.text
    message = response.json()["message"]
    assert "send_intermediate_predict_response" in message, message
    assert "migrating-torchserve.md" in message, message


def _rewritten(archive: Path, target: Path, change: dict[str, object]) -> None:
    """`archive` copied to `target` with some of its files replaced."""
    import zipfile

    with zipfile.ZipFile(archive) as source, zipfile.ZipFile(target, "w") as copy:
        for item in source.infolist():
            data = source.read(item)
            if item.filename in change:
                rewrite = change[item.filename]
                data = rewrite(data) if callable(rewrite) else data
            copy.writestr(item, data)


def _with_legacy_import(source: bytes) -> bytes:
    return b"from ts.torch_handler.legacy import LegacyHandler  # noqa\n" + source


def _with_typo(manifest: bytes) -> bytes:
    parsed = json.loads(manifest)
    parsed["model"]["handler"] = "image_classifer"  # sic
    return json.dumps(parsed).encode()


_old_import: dict[str, object] = {"handler.py": _with_legacy_import}
_typo: dict[str, object] = {"MAR-INF/MANIFEST.json": _with_typo}
