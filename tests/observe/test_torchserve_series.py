"""TorchServe's series written from exchanges, without a server: names, labels, units, caps."""

from __future__ import annotations

from modelhost.observe.exchange import Exchange
from modelhost.observe.torchserve_series import TorchServeSeries


def invocation(model: str, status: int = 200, error: str | None = None) -> Exchange:
    return Exchange(
        0.0, "POST", "/predictions/{model}", status, 0.002, 10, 10, True, model,
        timings_ms={"queue": 0.5}, error=error,
    )  # fmt: skip


def test_counters_carry_torchserve_names_labels_and_units() -> None:
    series = TorchServeSeries("box")
    series.record(invocation("m"))
    series.record(invocation("m", 500))
    series.record(invocation("absent", 404, "ModelNotFound"))
    text = series.render().decode()
    assert 'Requests2XX{Level="Host",Hostname="box"} 1.0' in text
    assert 'Requests5XX{Level="Host",Hostname="box"} 1.0' in text
    labels = 'model_name="m",model_version="default",hostname="box"'
    assert f"ts_inference_requests_total{{{labels}}} 2.0" in text
    assert f"ts_inference_latency_microseconds{{{labels}}} 2000.0" in text  # the answered one
    assert f"ts_queue_latency_microseconds{{{labels}}} 500.0" in text
    assert "absent" not in text


def test_names_filter_and_odd_model_names_stay_valid_text() -> None:
    series = TorchServeSeries("box")
    series.record(invocation('a"b\\c'))
    text = series.render(["ts_inference_requests_total"]).decode()
    assert text.count("# TYPE") == 1
    assert 'model_name="a\\"b\\\\c"' in text


def test_models_beyond_the_cap_drop_the_least_recent() -> None:
    series = TorchServeSeries("box", max_models=2)
    for model in ("a", "b", "c"):
        series.record(invocation(model))
    text = series.render(["ts_inference_requests_total"]).decode()
    assert 'model_name="a"' not in text and 'model_name="c"' in text


def test_a_request_naming_a_version_is_labelled_with_it() -> None:
    """`/predictions/m/2.0` counts under model_name="m", model_version="2.0", as TorchServe; a
    path naming no registered version keeps the whole path and "default"."""
    series = TorchServeSeries("box", lambda path: ("m", "2.0") if path == "m/2.0" else None)
    for model in ("m/2.0", "m", "store/x.joblib"):
        series.record(invocation(model))
    text = series.render(["ts_inference_requests_total"]).decode()
    for labels in ('"m",model_version="2.0"', '"m",model_version="default"'):
        assert f"model_name={labels}" in text
    assert 'model_name="store/x.joblib",model_version="default"' in text
