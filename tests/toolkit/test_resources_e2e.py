"""The server's CPU and PSS read two ways from one real server: /proc (its process tree) and its
own /metrics; both see the load a bench put on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.toolkit import MODELS

from modelhost import testing
from modelhost.cli.main import main
from modelhost.toolkit.resources import UsageProbe, metrics_reader, probe_for, proc_reader

pytestmark = pytest.mark.e2e


def test_proc_and_metrics_agree_on_the_servers_usage(
    server: testing.RunningServer, tmp_path: Path
) -> None:
    args = ["bench", server.url, "--models", ",".join(MODELS), "--concurrency", "2",
            "--duration", "1", "--warmup", "0", "--processes", "1", "--quiet",
            "--out", str(tmp_path)]  # fmt: skip
    by_proc = UsageProbe(proc_reader(server.pid), "proc")
    by_metrics = UsageProbe(metrics_reader(server.url), "metrics")
    with by_proc, by_metrics:
        assert CliRunner().invoke(main, args).exit_code == 0
    proc, metrics = by_proc.usage, by_metrics.usage
    assert proc.cpu_s > 0 and metrics.cpu_s > 0
    assert 0.5 < proc.peak_pss_bytes / metrics.peak_pss_bytes < 2
    assert probe_for(server.url, server.pid).source == "proc"
    assert probe_for(server.url, None).source == "metrics"
