"""The access log writes one JSON line per exchange, off the event loop, all of it by stop()."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from helpers.logs import logged

from modelhost.observe.access_log import AccessLog
from modelhost.observe.exchange import Exchange


def invocation(i: int) -> Exchange:
    return Exchange(
        time=1700000000.0 + i,
        method="POST",
        route="/models/{model:path}/invoke",
        status=200,
        duration_s=0.0125,
        bytes_in=17,
        bytes_out=20,
        invocation=True,
        model=f"t/{i}.joblib",
        cache="disk" if i == 0 else "hit",
        timings_ms={"queue": 0.1, "load": 10.0 if i == 0 else 0.0, "infer": 0.6},
    )


def test_every_exchange_is_one_json_line_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    log = AccessLog(str(path))
    log.start()
    for i in range(200):
        log.write(invocation(i))
    log.stop()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 200
    assert lines[0] == {
        "time": 1700000000.0,
        "model": "t/0.joblib",
        "method": "POST",
        "route": "/models/{model:path}/invoke",
        "status": 200,
        "cache": "disk",
        "latency_ms": 12.5,
        "queue_ms": 0.1,
        "load_ms": 10.0,
        "infer_ms": 0.6,
        "bytes_in": 17,
        "bytes_out": 20,
    }
    assert lines[199]["model"] == "t/199.joblib"


def test_dash_writes_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    log = AccessLog("-")
    log.start()
    log.write(invocation(1))
    log.stop()
    assert json.loads(capsys.readouterr().out)["cache"] == "hit"


def test_lines_reach_the_file_while_the_log_runs(tmp_path: Path) -> None:
    """Written in batches by the log's thread, not only at stop()."""
    path = tmp_path / "access.log"
    log = AccessLog(str(path))
    log.start()
    try:
        for i in range(3):
            log.write(invocation(i))
        assert [line["model"] for line in logged(path, 3)] == [
            "t/0.joblib",
            "t/1.joblib",
            "t/2.joblib",
        ]
    finally:
        log.stop()


def test_a_log_rotated_away_is_reopened_at_its_path(tmp_path: Path) -> None:
    """logrotate renames the file (no copytruncate): the next lines go to a new file there."""
    path, rotated = tmp_path / "access.log", tmp_path / "access.log.1"
    log = AccessLog(str(path))
    log.start()
    try:
        log.write(invocation(0))
        logged(path, 1)
        path.rename(rotated)
        log.write(invocation(1))
        logged(path, 1)
    finally:
        log.stop()
    assert [json.loads(line)["model"] for line in rotated.read_text().splitlines()] == [
        "t/0.joblib"
    ]
    assert [json.loads(line)["model"] for line in path.read_text().splitlines()] == ["t/1.joblib"]


def test_the_tenant_is_on_the_line_only_when_tenants_are_on(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    log = AccessLog(str(path))
    log.start()
    log.write(invocation(0))
    log.write(dataclasses.replace(invocation(1), tenant="acme"))
    log.stop()
    off, on = (json.loads(line) for line in path.read_text().splitlines())
    assert "tenant" not in off
    assert on["tenant"] == "acme" and list(on)[:3] == ["time", "model", "tenant"]


def test_the_answering_tier_is_on_the_line_where_a_model_answered(tmp_path: Path) -> None:
    """X-Modelhost-Tier's value beside `cache`; left out where nothing answered."""
    path = tmp_path / "access.log"
    log = AccessLog(str(path))
    log.start()
    log.write(dataclasses.replace(invocation(0), tier="device"))
    log.write(dataclasses.replace(invocation(1), status=404, cache=None))
    log.stop()
    answered, missing = (json.loads(line) for line in path.read_text().splitlines())
    assert answered["tier"] == "device" and list(answered).index("tier") == 6
    assert "tier" not in missing
