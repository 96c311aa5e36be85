"""The main process's tables on their way to its fronts' stdin."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace

from modelhost.fronts.messages import Table, Unpacker
from modelhost.fronts.processes import Fronts

READ_LATE = (
    "import sys, time; time.sleep({s}); open(sys.argv[1], 'wb').write(sys.stdin.buffer.read())"
)


class ChangingRouting:
    """A table of 20,000 models that differs at each build while `dirty`, as under a churn
    of loads."""

    def __init__(self) -> None:
        self.builds = 0
        self.dirty = True

    def table(self) -> Table:
        self.builds += self.dirty
        return Table({f"m{n}": [0] for n in range(20_000)}, instance=str(self.builds))


def test_a_front_that_reads_late_holds_one_table_back_and_gets_the_newest(tmp_path: Path) -> None:
    """A table was written to each front at every change whether or not the last had left: a
    front that stopped reading grew the main process's buffer by a table a publish."""
    received = tmp_path / "received"

    async def run() -> tuple[int, int, bytes]:
        front = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            READ_LATE.format(s=1.5),
            str(received),
            stdin=asyncio.subprocess.PIPE,
        )
        assert front.stdin is not None
        fronts = Fronts(2, "127.0.0.1", 0, tmp_path)
        fronts.slots = [SimpleNamespace(process=front)]  # type: ignore[list-item]
        routing = ChangingRouting()
        publishing = asyncio.ensure_future(fronts._publish(routing))  # type: ignore[arg-type]
        await asyncio.sleep(1.0)  # the front reads nothing yet
        held = front.stdin.transport.get_write_buffer_size()
        routing.dirty = False
        await asyncio.sleep(2.5)  # it reads what was held, then the newest
        publishing.cancel()
        front.stdin.close()
        await front.wait()
        return held, len(fronts.table), fronts.table

    held, one_table, newest = asyncio.run(run())
    assert held <= one_table
    tables = Unpacker().feed(received.read_bytes())
    assert tables[-1] == Unpacker().feed(newest)[0]
