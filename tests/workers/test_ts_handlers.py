"""TorchServe handlers loaded as a worker loads them: the context they see, the answers they
give against TorchServe's own loader, what their metrics calls become, and the load errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelhost.cli.extras import extra_of
from modelhost.errors import ModelLoadError
from modelhost.records.handler_metrics import HandlerMetrics, HandlerSample
from modelhost.testing import torchserve
from modelhost.workers.handlers import load_handler
from modelhost.workers.handlers.base import Handler, InferRequest
from modelhost.workers.handlers.mms import MmsContext, read_manifest
from modelhost.workers.handlers.select import choose
from modelhost.workers.handlers.ts_context import decoded_body
from modelhost.workers.handlers.ts_defaults import missing_message
from modelhost.workers.handlers.ts_metrics import drain_samples

ROWS = [[5.1, 3.5, 1.4, 0.2], [6.0, 2.9, 4.5, 1.5], [7.7, 3.0, 6.1, 2.3]]


@pytest.fixture(scope="module")
def rows_mar(tmp_path_factory: pytest.TempPathFactory, torch_installed: None) -> Path:
    pytest.importorskip("ts", reason="pip install 'modelhost[torchserve-handlers]'")
    return torchserve.custom_handler_mar(tmp_path_factory.mktemp("mar") / "rows.mar", seed=7)


@pytest.fixture(scope="module")
def rows_handler(rows_mar: Path, tmp_path_factory: pytest.TempPathFactory) -> Handler:
    folder = torchserve.unpacked(rows_mar, tmp_path_factory.mktemp("rows"))
    return load_handler(folder, "rows.mar")


def answer(handler: Handler, row: list[float]) -> object:
    return json.loads(handler.infer(InferRequest(json.dumps(row).encode())).body)


def test_a_base_handler_subclass_answers_as_torchserve_does(
    rows_mar: Path, rows_handler: Handler
) -> None:
    """Eager model from model.py and a state_dict, index_to_name.json, model-config.yaml: the
    answers equal those of TorchServe's own loader and handler on the same archive."""
    expected = torchserve.torchserve_answers(rows_mar, ROWS)
    assert [answer(rows_handler, row) for row in ROWS] == expected
    assert {a["greeting"] for a in expected} == {torchserve.GREETING}  # type: ignore[index]


def test_handler_metrics_become_samples_of_the_model(rows_handler: Handler) -> None:
    drain_samples()
    answer(rows_handler, ROWS[0])
    table = HandlerMetrics()
    table.record(drain_samples())
    series = {(name, kind, dims): s.value for (_, name, _, kind, dims), s in table.series.items()}
    assert series[("RowsSeen", "counter", (("Kind", "rows"),))] == 1
    # BaseHandler.handle times itself; profile: true in model-config.yaml times inference
    assert ("HandlerTime", "gauge", ()) in series
    assert ("ts_handler_inference", "gauge", ()) in series
    assert {model for model, *_ in table.series} == {"rows.mar"}


def test_the_series_table_is_capped() -> None:
    """A handler that puts a request id in a dimension cannot grow the frontend unbounded."""
    table = HandlerMetrics(max_series=2)
    samples = (
        HandlerSample(
            model="m",
            name="Hits",
            unit="count",
            kind="counter",
            value=1,
            dimensions=(("id", str(i)),),
        )
        for i in range(5)
    )
    table.record(tuple(samples))
    assert len(table.series) == 2
    assert table.dropped == 3


def test_unknown_handler_lists_known_ones(rows_mar: Path, tmp_path: Path) -> None:
    """An unknown built-in handler name lists the known ones."""
    folder = torchserve.unpacked(rows_mar, tmp_path / "m")
    manifest_path = folder / "MAR-INF" / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["model"]["handler"] = "image_classifer"  # sic: a typo of image_classifier
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ModelLoadError) as failure:
        load_handler(folder, "typo.mar")
    message = str(failure.value)
    assert "image_classifer" in message
    assert "image_classifier, image_segmenter, object_detector, text_classifier" in message


def test_missing_ts_module_is_named(rows_mar: Path, tmp_path: Path) -> None:
    """A `ts` module TorchServe lacks is named with the way out."""
    folder = torchserve.unpacked(rows_mar, tmp_path / "m")
    source = (folder / "handler.py").read_text()
    (folder / "handler.py").write_text("import ts.torch_handler.no_such_handler\n" + source)
    with pytest.raises(ModelLoadError) as failure:
        load_handler(folder, "old.mar")
    message = str(failure.value)
    assert "ts.torch_handler.no_such_handler" in message
    assert "does not provide" in message and "torchserve" in message


def test_image_classifier_without_torchvision_says_what_to_install(
    tmp_path: Path, torch_installed: None
) -> None:
    pytest.importorskip("ts", reason="pip install 'modelhost[torchserve-handlers]'")
    if _imports("torchvision"):
        pytest.skip("torchvision is installed here: the e2e test serves image_classifier")
    mar = torchserve.image_classifier_mar(tmp_path / "image.mar")
    folder = torchserve.unpacked(mar, tmp_path / "image")
    with pytest.raises(ModelLoadError) as failure:
        load_handler(folder, "image.mar")
    assert "image_classifier" in str(failure.value)
    assert "pip install 'modelhost[torchserve-vision]'" in str(failure.value)


def _imports(module: str) -> bool:
    try:
        __import__(module)
    except Exception:  # noqa: BLE001  (a wheel for another build fails with RuntimeError)
        return False
    return True


@pytest.mark.parametrize(
    ("body", "content_type", "handed_over"),
    [
        (b"[1, 2]", "application/json; charset=utf-8", [1, 2]),
        (b"{not json", "application/json", b"{not json"),
        (b"caf\xc3\xa9", "text/plain", "café"),
        (b"\xff", "text/plain", b"\xff"),
        (b"\x89PNG", "image/png", b"\x89PNG"),
    ],
)
def test_bodies_are_handed_over_as_torchserve_decodes_them(
    body: bytes, content_type: str, handed_over: object
) -> None:
    assert decoded_body(body, content_type) == handed_over


def test_the_context_carries_what_torchserve_gives(rows_mar: Path, tmp_path: Path) -> None:
    folder = torchserve.unpacked(rows_mar, tmp_path / "m")
    context = MmsContext(folder, "rows.mar", read_manifest(folder))
    assert context.manifest["model"]["modelName"] == "rows"
    assert context.system_properties == {
        "model_dir": str(folder),
        "gpu_id": None,
        "batch_size": 1,
        "server_name": "MMS",  # as TorchServe says, and handlers may compare
        "server_version": context.system_properties["server_version"],
        "limit_max_image_pixels": True,
    }
    assert context.model_yaml_config["handler"] == {
        "greeting": torchserve.GREETING,
        "profile": True,
    }
    call = context.for_requests([InferRequest(b"[]"), InferRequest(b"[]")])
    assert call.system_properties["batch_size"] == 2
    assert call.get_request_id(1) is not None and call.get_request_id(0) != call.get_request_id(1)
    call.set_response_header(1, "content-type", "text/plain")
    assert call.get_response_content_type(1) == "text/plain"


FUNCTION_HANDLER = """
_initialised = []


def handle(data, context):
    if data is None:  # TorchServe's call at load
        _initialised.append(context.system_properties["model_dir"])
        return None
    return [{"initialised": len(_initialised)} for _ in data]
"""


def test_function_handler_initialised_at_load(rows_mar: Path, tmp_path: Path) -> None:
    """A function handler is initialised at load as TorchServe does.

    TorchServe calls handle(None, context) once when it loads a function-style handler."""
    folder = torchserve.unpacked(rows_mar, tmp_path / "m")
    (folder / "handler.py").write_text(FUNCTION_HANDLER)
    handler = load_handler(folder, "function.mar")
    assert answer(handler, ROWS[0]) == {"initialised": 1}


def test_a_server_without_torchserve_names_the_extra() -> None:
    """Where the torchserve package is absent, `import ts` fails with the extra to install."""
    error = ModuleNotFoundError("No module named 'ts'", name="ts")
    message = missing_message("handler.py", error)
    assert "pip install 'modelhost[torchserve-handlers]'" in message
    assert extra_of("ts.torch_handler.base_handler") == "torchserve-handlers"


def test_a_built_in_handlers_missing_module_names_its_extra() -> None:
    """captum (the text and vision handlers) comes with the handlers' extra, torchvision with
    the vision one, which pairs it with torch as the index that gave torch builds it."""
    for module, extra in (("captum", "torchserve-handlers"), ("torchvision", "torchserve-vision")):
        error = ModuleNotFoundError(f"No module named '{module}'", name=module)
        message = missing_message("TorchServe's image_classifier handler", error)
        assert f"pip install 'modelhost[{extra}]'" in message, message


SUBCLASS_HANDLER = """
import json
import ts.utils.util
from ts.torch_handler.text_classifier import TextClassifier
from .helpers import ts_like


class Handler(TextClassifier):
    pass
"""


def test_the_ts_modules_a_handler_file_imports_are_its_runtime(tmp_path: Path) -> None:
    """A handler subclassing a built-in gets its imports (captum, torchvision) before the load
    is measured, as the built-in itself does; read from the file, never run."""
    (tmp_path / "handler.py").write_text(SUBCLASS_HANDLER)
    modules = choose(tmp_path, "subclass").modules
    assert modules == ("ts.utils.util", "ts.torch_handler.text_classifier")
