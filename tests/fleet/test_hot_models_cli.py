"""`modelhost fleet hot-models` refuses what it cannot use at start, and says so without a
traceback when its reload cannot run."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from modelhost import testing
from modelhost.cli.main import main


def hot_models(*args: str) -> Result:
    """One round at once, against an instance nobody answers on."""
    closed = f"http://127.0.0.1:{testing.free_port()}"
    argv = ["fleet", "hot-models", "--rounds", "1", "--interval", "0", *args]
    argv += [] if "--instance" in args else ["--instance", closed]
    return CliRunner().invoke(main, argv)


def test_an_instance_without_its_scheme_is_refused_at_start(tmp_path: Path) -> None:
    result = hot_models(
        "--map", str(tmp_path / "hot.map"), "--reload", "", "--instance", "127.0.0.1:8080"
    )
    assert result.exit_code == 2, result.output
    assert "http://127.0.0.1:8080" in result.output
    assert not (tmp_path / "hot.map").exists()


def test_a_map_in_a_missing_folder_is_refused_at_start(tmp_path: Path) -> None:
    result = hot_models("--map", str(tmp_path / "nowhere" / "hot.map"), "--reload", "")
    assert result.exit_code == 2, result.output
    assert str(tmp_path / "nowhere") in result.output


def test_a_reload_that_cannot_run_is_a_failed_reload(tmp_path: Path) -> None:
    result = hot_models("--map", str(tmp_path / "hot.map"), "--reload", "no-such-nginx -s reload")
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # not a traceback
    assert "error: 'no-such-nginx -s reload' failed" in result.output


def test_a_negative_interval_is_refused_at_start(tmp_path: Path) -> None:
    """--interval -5 polled once, then ended in "ValueError: sleep length must be
    non-negative"."""
    result = hot_models("--map", str(tmp_path / "hot.map"), "--reload", "", "--interval", "-5")
    assert result.exit_code == 2, result.output
    assert "--interval" in result.output
