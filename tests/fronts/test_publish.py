"""The main process's tables on their way to its fronts' stdin."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace

from modelhost.fronts.messages import (
    Message,
    Report,
    RouteChanges,
    Table,
    Unpacker,
    applied,
    pack,
)
from modelhost.fronts.processes import Fronts

READ_LATE = (  # says when it runs: a slow start under load is not a late reader
    "import sys, time; print(flush=True); time.sleep({s}); "
    "open(sys.argv[1], 'wb').write(sys.stdin.buffer.read())"
)
LOADED = {f"m{n}": [0] for n in range(20_000)}


class ChangingRouting:
    """A table of 20,000 models whose one model moves at each build while `dirty`, as under a
    churn of loads."""

    def __init__(self) -> None:
        self.builds = 0
        self.dirty = True
        self.looked_at = {"moving"}

    def recheck(self) -> None:
        """Nothing to walk: only the moving model changes."""

    def table(self) -> Table:
        self.builds += self.dirty
        return Table({**LOADED, "moving": [self.builds % 2]}, sockets=["/a.sock", "/b.sock"])


async def publish_to_front(tmp_path: Path, read_after_s: float) -> tuple[int, Table, bytes]:
    """Publish a churning table for 1 s to a front that reads after `read_after_s`, then a still
    one; what the main process held back at 1 s, the newest table, and all the front read."""
    received = tmp_path / "received"
    front = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        READ_LATE.format(s=read_after_s),
        str(received),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert front.stdin is not None and front.stdout is not None
    await front.stdout.readline()
    fronts = Fronts(2, "127.0.0.1", 0, tmp_path)
    fronts.slots = [SimpleNamespace(process=front)]  # type: ignore[list-item]
    routing = ChangingRouting()
    publishing = asyncio.ensure_future(fronts._publish(routing))  # type: ignore[arg-type]
    await asyncio.sleep(1.0)
    held = front.stdin.transport.get_write_buffer_size()
    routing.dirty = False
    await asyncio.sleep(read_after_s + 1.0)  # it reads what was held, then the newest
    publishing.cancel()
    front.stdin.close()
    await front.wait()
    return held, fronts.table, received.read_bytes()


def held_after(messages: list[Message]) -> Table:
    """The table a front holds once it has taken `messages`."""
    held = Table({})
    for message in messages:
        assert not isinstance(message, Report)
        held = applied(held, message) if isinstance(message, RouteChanges) else message
    return held


def test_a_front_that_reads_late_holds_one_table_back_and_gets_the_newest(tmp_path: Path) -> None:
    """A table was written to each front at every change whether or not the last had left: a
    front that stopped reading grew the main process's buffer by a table a publish."""
    held, newest, read = asyncio.run(publish_to_front(tmp_path, read_after_s=1.5))
    messages = Unpacker().feed(read)
    assert held <= len(read) and isinstance(messages[0], Table)
    assert held_after(messages) == newest


def test_a_front_is_sent_what_changed_not_the_whole_table(tmp_path: Path) -> None:
    """Each change of a table of 20,000 models was sent whole: 150 KB a front a publish, each
    decoded on the front's loop while its requests wait."""
    _, newest, read = asyncio.run(publish_to_front(tmp_path, read_after_s=0.0))
    first, *rest = Unpacker().feed(read)
    assert isinstance(first, Table) and len(rest) >= 5
    assert all(isinstance(message, RouteChanges) for message in rest)
    assert len(read) - len(pack(first)) < 200 * len(rest), "a change costs bytes, not a table"
    assert held_after([first, *rest]) == newest
