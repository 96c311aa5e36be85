"""Requests for names that do not exist must not grow the frontend's memory without bound."""

from __future__ import annotations

from modelhost.records.events import EventLog


def test_unknown_name_failures_stay_bounded() -> None:
    """Failures for distinct unknown names keep a bounded per-model store."""
    log = EventLog(clock=lambda: 1.0, max_models=100)
    log.emit("load", "tenants/real.joblib")
    for i in range(10_000):
        log.emit("failure", f"nonexistent/{i}.joblib", reason="ModelNotFound")
        if i % 50 == 0:
            log.emit("load", "tenants/real.joblib")  # a model in use keeps its history
    assert log.models_with_events() <= 100
    assert [e.kind for e in log.for_model("nonexistent/9999.joblib")] == ["failure"]
    assert log.for_model("tenants/real.joblib")[-1].kind == "load"
    assert log.for_model("nonexistent/0.joblib") == []
