"""simulate --sizes: sizes as the server spells them, and a file it cannot use named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelhost.cli.main import main


def simulate(tmp_path: Path, sizes: str) -> tuple[int, str]:
    log = tmp_path / "access.jsonl"
    lines = [{"time": t, "model": "t/a.joblib", "cache": "hit"} for t in range(4)]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (tmp_path / "sizes.json").write_text(sizes)
    args = ["simulate", str(log), "--sizes", str(tmp_path / "sizes.json"), "--no-optimum"]
    result = CliRunner().invoke(main, [*args, "--budgets", "1GiB", "--out", str(tmp_path)])
    return result.exit_code, result.output


def test_sizes_may_be_written_as_the_server_takes_them(tmp_path: Path) -> None:
    """--memory-budget takes 64MiB: a sizes file may say it too."""
    code, output = simulate(tmp_path, '{"t/a.joblib": "64MiB"}')
    assert code == 0, output
    assert json.loads((tmp_path / "simulate.json").read_text())["distinct_bytes"] == 64 * 2**20


@pytest.mark.parametrize(
    ("sizes", "said"),
    [
        ('["t/a.joblib"]', "a JSON object"),
        ('{"t/a.joblib": "big"}', "t/a.joblib"),
        ('{"t/a.joblib": 1', "not valid JSON"),
    ],
)
def test_a_sizes_file_it_cannot_use_is_named_with_the_form(
    tmp_path: Path, sizes: str, said: str
) -> None:
    code, output = simulate(tmp_path, sizes)
    assert code == 2, output
    assert "sizes.json" in output and said in output and "Traceback" not in output


def test_the_budget_is_said_to_be_room_for_models(tmp_path: Path) -> None:
    """simulate said "lru: 64.0 MiB for a 90% hit ratio"; a user who passed that as
    --memory-budget got a server refusing a budget below its own baseline. The server's GET
    /sizing counts the same curve with its fixed bytes on top."""
    code, output = simulate(tmp_path, '{"t/a.joblib": "64MiB"}')
    assert code == 0, output
    assert "room for models" in output and "fixedBytes" in output


def test_a_gzipped_log_is_read_as_the_plain_one(tmp_path: Path) -> None:
    """A rotated access log is often gzipped; simulate said only "'utf-8' codec can't decode
    byte 0x8b in position 1"."""
    import gzip

    lines = [{"time": t, "model": f"t/{t % 3}.joblib", "cache": "hit"} for t in range(30)]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (tmp_path / "access.jsonl").write_text(text)
    (tmp_path / "access.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    summaries = []
    for name in ("access.jsonl", "access.jsonl.gz"):
        args = ["simulate", str(tmp_path / name), "--default-size", "1MiB", "--no-optimum"]
        out = tmp_path / f"out-{name}"
        result = CliRunner().invoke(main, [*args, "--budgets", "1MiB,2MiB", "--out", str(out)])
        assert result.exit_code == 0, result.output
        summaries.append(json.loads((out / "simulate.json").read_text()))
    assert summaries[0] == summaries[1]


@pytest.mark.parametrize("tail", ['{"time": 9, "model": "t/', '{"time": 9, "model": "t/\xe9'])
def test_the_line_a_live_log_is_still_writing_is_left_out(tmp_path: Path, tail: str) -> None:
    """A reader can see the server's last write half done, even cut inside a character."""
    from modelhost.toolkit.simulate.trace import read_access_log

    lines = [{"time": t, "model": "t/a.joblib", "cache": "hit"} for t in range(3)]
    whole = "".join(json.dumps(line) + "\n" for line in lines)
    log = tmp_path / "access.jsonl"
    log.write_bytes(whole.encode() + tail.encode()[:-1])
    assert read_access_log(log, default_size=1).models == ["t/a.joblib"] * 3
    log.write_text(whole + json.dumps(lines[0]))  # a last line written whole, newline or not
    assert read_access_log(log, default_size=1).models == ["t/a.joblib"] * 4
    log.write_text(whole + tail + "\n" + whole)
    with pytest.raises(ValueError, match=r":4: not a JSON line"):
        read_access_log(log, default_size=1)
